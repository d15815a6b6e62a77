/* skiff.protocol._speedups: the optional compiled part of the client and route protocols' hot paths.
   Loaded through protocol/accel.py, which also honours SKIFF_PURE_PYTHON.

   scan_pubs() is the parser's PUB/HPUB fast path (protocol/parser.py Parser._parse) run over every consecutive
   complete message of one read in a single call, instead of one regex match, a tuple of groups, two int() and a
   slice per message in the interpreter.  It recognises exactly the lines the pure path's _PUB_FAST/_HPUB_FAST
   patterns take, with the same limit checks, and stops at the first byte where the pure fast path would fall
   through: anything else, every error included, is left to the general Python path, so the answers (and the
   -ERR texts) are those of protocol/parser.py by construction.  tests/protocol/test_parser.py and the
   differential tests run both implementations over the same inputs.

   The pure path stays the reference and is always there: an interpreter without this module (no compiler at
   install time) or SKIFF_PURE_PYTHON=1 uses it.  Plain CPython C API, no dependency.

   msg_parts() is protocol/encoder.py msg_parts (the MSG/HMSG head and tail of every delivery, Server.route) without
   the interpreter's call and formatting: 12% of a 1 pub + 1 sub profile once the scanner took the parser's share.

   unmask() is protocol/websocket.py _unmask (a client frame's payload XORed with its mask key).

   scan_rmsgs() is protocol/route.py RouteParser's fast path, the route side's scan_pubs: every consecutive complete
   RMSG/LMSG/HMSG of one read (every form: reply, queue lists, headers) handed to the link in one call, where the
   pure parser spent 1.2 us a message in the interpreter; anything else, every error included, is left to the
   general Python path.  tests/protocol/test_route_parser.py runs both over the same random streams.

   read_run() is storage/filestore/block.py read_run_py, a consumer's read of stored messages (FileStreamStore
   ._read_run): every whole MSG record of a run of slots checked (magic, kind, length, sequence, CRC-32) and handed
   out as StoredMsg tuples, where the interpreter spent ~1.3 us a record; it stops where the Python twin stops, and
   the store reads what is left the slow way.  tests/storage/test_read_run.py compares the two on random blocks.

   append_msg() is storage/filestore/block.py append_msg_py, the writing side: a stored message's MSG record
   appended to its block's pending bytes in one resize and one CRC pass.  tests/storage/test_append_msg.py
   compares the two. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static PyObject *str_closed;  /* "closed": the sink stops the parser by setting it (a client closed mid-read) */
static PyObject *str_msgs;
static PyObject *str_bytes;
static PyObject *empty_str;
static PyObject *empty_tuple;

/* The last subject decoded, kept: a publisher mostly repeats one subject, and the same str object (its hash
   already computed) then serves the sublist's result cache lookup without a decode, an allocation and a hash.
   One such cache per kind of field (a PUB's subject, an RMSG's account and subject), so that a server reading
   clients and routes at once does not make them evict each other. */
#define SUBJ_CACHE 128
typedef struct {
    char bytes[SUBJ_CACHE];
    Py_ssize_t len;
    PyObject *str;
} strcache;
static strcache pub_subj = {{0}, -1, NULL}, rmsg_acc = {{0}, -1, NULL}, rmsg_subj = {{0}, -1, NULL};

static PyObject *
cached_str(strcache *c, const char *p, Py_ssize_t len)
{
    if (len == c->len && memcmp(p, c->bytes, (size_t)len) == 0) {
        Py_INCREF(c->str);
        return c->str;
    }
    PyObject *s = PyUnicode_DecodeUTF8(p, len, "surrogateescape");
    if (s != NULL && len <= SUBJ_CACHE) {
        Py_XSETREF(c->str, Py_NewRef(s));
        memcpy(c->bytes, p, (size_t)len);
        c->len = len;
    }
    return s;
}

/* A field of the fast path: a run of bytes that are none of space, tab, CR, LF ([^ \t\r\n]+ in the patterns). */
static inline Py_ssize_t
field_end(const unsigned char *b, Py_ssize_t i, Py_ssize_t n)
{
    while (i < n) {
        unsigned char c = b[i];
        if (c == ' ' || c == '\t' || c == '\r' || c == '\n')
            break;
        i++;
    }
    return i;
}

/* [0-9]{1,18}: the value, or -1 (18 digits always fit in a long long; nats-server parseSize takes no more). */
static inline long long
size_of(const unsigned char *b, Py_ssize_t s, Py_ssize_t e)
{
    long long v = 0;
    if (e - s < 1 || e - s > 18)
        return -1;
    for (; s < e; s++) {
        unsigned char c = b[s];
        if (c < '0' || c > '9')
            return -1;
        v = v * 10 + (c - '0');
    }
    return v;
}

static inline int
crlf_at(const unsigned char *b, Py_ssize_t i, Py_ssize_t n)
{
    return i + 1 < n && b[i] == '\r' && b[i + 1] == '\n';
}

/* One fast-path line at b[p]: "PUB <subject> [reply] <size>\r\n" or "HPUB <subject> [reply] <hdr> <size>\r\n",
   one space after the op word, one or more between fields (nats-py writes "PUB <subject>  <size>" when it has no
   reply), fields as field_end() reads them.  Fills the field bounds and returns the payload's start, or -1
   when the line is not of that form (or not complete in the buffer). */
typedef struct {
    Py_ssize_t subj_s, subj_e, rep_s, rep_e;
    long long hdr, size;
} publine;

static Py_ssize_t
match_line(const unsigned char *b, Py_ssize_t p, Py_ssize_t n, int hpub, publine *m)
{
    Py_ssize_t f[4][2];  /* up to four fields after the op word */
    Py_ssize_t i = p + (hpub ? 5 : 4);
    int nf = 0, want = hpub ? 3 : 2;  /* fields without a reply */
    for (;;) {
        Py_ssize_t e = field_end(b, i, n);
        if (e == i)
            return -1;
        f[nf][0] = i;
        f[nf][1] = e;
        nf++;
        if (crlf_at(b, e, n)) {
            i = e + 2;
            break;
        }
        /* another field must follow after one or more spaces; with a reply there are want + 1 fields */
        if (e >= n || b[e] != ' ' || nf == want + 1)
            return -1;
        i = e + 1;
        while (i < n && b[i] == ' ')
            i++;
    }
    if (nf < want)
        return -1;
    m->subj_s = f[0][0];
    m->subj_e = f[0][1];
    if (nf == want + 1) {
        m->rep_s = f[1][0];
        m->rep_e = f[1][1];
    } else {
        m->rep_s = m->rep_e = 0;
    }
    m->size = size_of(b, f[nf - 1][0], f[nf - 1][1]);
    if (m->size < 0)
        return -1;
    if (hpub) {
        m->hdr = size_of(b, f[nf - 2][0], f[nf - 2][1]);
        if (m->hdr < 0)
            return -1;
    } else {
        m->hdr = 0;
    }
    return i;
}

static long long
as_limit(PyObject *o)
{
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow > 0)
        return LLONG_MAX;
    if (overflow < 0)
        return -1;
    return v;  /* -1 with an exception set on a non-int: the caller checks PyErr_Occurred */
}

/* Add the counts of this call to parser.msgs / parser.bytes (also when on_pub raised: the pure path counts a
   message before handing it over, in a finally). */
static int
add_counts(PyObject *parser, Py_ssize_t msgs, long long nbytes)
{
    PyObject *exc = NULL, *val = NULL, *tb = NULL;
    int rc = 0;
    if (msgs == 0)
        return 0;
    PyErr_Fetch(&exc, &val, &tb);
    PyObject *names[2] = {str_msgs, str_bytes};
    long long add[2] = {msgs, nbytes};
    for (int k = 0; k < 2 && rc == 0; k++) {
        PyObject *cur = PyObject_GetAttr(parser, names[k]);
        PyObject *inc = cur ? PyLong_FromLongLong(add[k]) : NULL;
        PyObject *sum = inc ? PyNumber_Add(cur, inc) : NULL;
        if (sum == NULL || PyObject_SetAttr(parser, names[k], sum) < 0)
            rc = -1;
        Py_XDECREF(cur);
        Py_XDECREF(inc);
        Py_XDECREF(sum);
    }
    if (exc != NULL || val != NULL || tb != NULL) {
        if (rc < 0)
            PyErr_Clear();  /* the callback's exception is the one to report */
        PyErr_Restore(exc, val, tb);
        return -1;
    }
    return rc;
}

/* Whether a header block holds "Nats-Trace-Dest:" (parser.py TRACE_NEEDLE; core/msgtrace.py). */
static int
asks_trace(const unsigned char *h, Py_ssize_t len)
{
    static const char needle[] = "Nats-Trace-Dest:";
    const Py_ssize_t k = sizeof(needle) - 1;
    for (Py_ssize_t i = 0; i + k <= len; i++) {
        const unsigned char *p = memchr(h + i, 'N', (size_t)(len - k - i + 1));
        if (p == NULL)
            return 0;
        i = p - h;
        if (memcmp(p, needle, (size_t)k) == 0)
            return 1;
    }
    return 0;
}

PyDoc_STRVAR(scan_pubs_doc,
"scan_pubs(parser, buf, pos, max_payload, max_control_line, on_pub, sink) -> int\n\n"
"Hand every consecutive complete PUB/HPUB of bytes ``buf`` from ``pos`` on that the pure fast path takes to\n"
"``on_pub(subject, reply, hdr_len, data)``; stop at the first other input, at an HPUB whose header block asks for a\n"
"trace (``Nats-Trace-Dest:``, left to the pure path) or once ``sink.closed`` is set.\n"
"Adds the messages and payload bytes to ``parser.msgs`` / ``parser.bytes`` and returns the new position.");

static PyObject *
scan_pubs(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "scan_pubs() takes 7 arguments");
        return NULL;
    }
    PyObject *parser = args[0], *buf = args[1], *on_pub = args[5], *sink = args[6];
    if (!PyBytes_CheckExact(buf)) {
        PyErr_SetString(PyExc_TypeError, "scan_pubs() needs bytes");
        return NULL;
    }
    Py_ssize_t pos = PyLong_AsSsize_t(args[2]);
    long long maxp = as_limit(args[3]);
    long long mcl = as_limit(args[4]);
    if (PyErr_Occurred())
        return NULL;
    const unsigned char *b = (const unsigned char *)PyBytes_AS_STRING(buf);
    Py_ssize_t n = PyBytes_GET_SIZE(buf);
    Py_ssize_t msgs = 0;
    long long nbytes = 0;
    int first = 1;
    if (pos < 0)
        pos = 0;

    /* the buffer stays alive and unchanged while callbacks run: bytes are immutable and we hold args[1] */
    while (pos < n) {
        if (!first) {
            /* the pure loop checks sink.closed before every operation; the caller did for the first one */
            PyObject *closed = PyObject_GetAttr(sink, str_closed);
            if (closed == NULL)
                goto error;
            int stop = PyObject_IsTrue(closed);
            Py_DECREF(closed);
            if (stop < 0)
                goto error;
            if (stop)
                break;
        }
        first = 0;
        int hpub;
        if (n - pos >= 4 && memcmp(b + pos, "PUB ", 4) == 0)
            hpub = 0;
        else if (n - pos >= 5 && memcmp(b + pos, "HPUB ", 5) == 0)
            hpub = 1;
        else
            break;
        publine m;
        Py_ssize_t start = match_line(b, pos, n, hpub, &m);
        if (start < 0)
            break;
        /* the pure fast path's conditions, in its terms (parser.py _parse) */
        if (m.hdr > m.size || m.size > maxp)
            break;
        if (start - 2 - m.subj_s > mcl)  /* the argument: from the subject to the CR */
            break;
        Py_ssize_t stop = start + (Py_ssize_t)m.size;
        if (stop + 2 > n || b[stop] != '\r' || b[stop + 1] != '\n')
            break;
        /* a message asking for a trace goes to sink.on_traced_pub: the pure path hands it there (parser.py) */
        if (hpub && asks_trace(b + start, (Py_ssize_t)m.hdr))
            break;
        PyObject *call[4];
        call[0] = cached_str(&pub_subj, (const char *)b + m.subj_s, m.subj_e - m.subj_s);
        if (call[0] == NULL)
            goto error;
        if (m.rep_e > m.rep_s) {
            call[1] = PyUnicode_DecodeUTF8((const char *)b + m.rep_s, m.rep_e - m.rep_s, "surrogateescape");
        } else {
            call[1] = empty_str;
            Py_INCREF(call[1]);
        }
        call[2] = call[1] ? PyLong_FromLongLong(m.hdr) : NULL;
        call[3] = call[2] ? PyBytes_FromStringAndSize((const char *)b + start, stop - start) : NULL;
        if (call[3] == NULL) {
            Py_DECREF(call[0]);
            Py_XDECREF(call[1]);
            Py_XDECREF(call[2]);
            goto error;
        }
        msgs++;
        nbytes += m.size;
        pos = stop + 2;
        PyObject *r = PyObject_Vectorcall(on_pub, call, 4, NULL);
        for (int k = 0; k < 4; k++)
            Py_DECREF(call[k]);
        if (r == NULL)
            goto error;
        Py_DECREF(r);
    }
    if (add_counts(parser, msgs, nbytes) < 0)
        return NULL;
    return PyLong_FromSsize_t(pos);

error:
    add_counts(parser, msgs, nbytes);
    return NULL;
}

/* ------------------------------------------------------------------------------------------------ routes */

/* What bytes.split() splits on (Py_ISSPACE): the general path splits a route line's arguments that way. */
static inline int
is_ws(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\x0b' || c == '\x0c';
}

/* An RMSG/HMSG with that many arguments or more is left to the general path (it takes any number of queues). */
#define RMSG_MAX_FIELDS 32

/* A byte field is exactly "+" or "|" */
static inline int
is_mark(const unsigned char *b, Py_ssize_t s, Py_ssize_t e, unsigned char c)
{
    return e - s == 1 && b[s] == c;
}

PyDoc_STRVAR(scan_rmsgs_doc,
"scan_rmsgs(stop, buf, pos, word, account, max_payload, on_rmsg) -> int\n\n"
"protocol/route.py RouteParser's fast path: hand every consecutive complete ``<word>|HMSG`` message of bytes\n"
"``buf`` from ``pos`` on to ``on_rmsg(account, subject, reply, queues, hdr_len, data)``, as the general path\n"
"(which takes any message whose header block asks for a trace: ``Nats-Trace-Dest:``)\n"
"would; stop at the first other input (every error included) or once a callback has set the bytearray ``stop``\n"
"(RouteParser._stop: dead or paused).  ``word`` is b\"RMSG\" (b\"LMSG\" on a leaf connection); ``account``\n"
"None when lines carry the account name, else the account of every line.  Returns the new position.");

static PyObject *
scan_rmsgs(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "scan_rmsgs() takes 7 arguments");
        return NULL;
    }
    PyObject *stopflag = args[0], *buf = args[1], *word = args[3], *account = args[4], *on_rmsg = args[6];
    if (!PyByteArray_CheckExact(stopflag) || PyByteArray_GET_SIZE(stopflag) < 1 || !PyBytes_CheckExact(buf) ||
        !PyBytes_Check(word) || (account != Py_None && !PyUnicode_Check(account))) {
        PyErr_SetString(PyExc_TypeError,
                        "scan_rmsgs() needs a bytearray stop flag, bytes, a bytes word and a str account or None");
        return NULL;
    }
    Py_ssize_t pos = PyLong_AsSsize_t(args[2]);
    long long maxp = as_limit(args[5]);
    if (PyErr_Occurred())
        return NULL;
    const unsigned char *b = (const unsigned char *)PyBytes_AS_STRING(buf);
    const char *w = PyBytes_AS_STRING(word);
    Py_ssize_t n = PyBytes_GET_SIZE(buf), wl = PyBytes_GET_SIZE(word);
    int a = account == Py_None;  /* the account is the line's first argument */
    if (pos < 0)
        pos = 0;

    /* the buffer stays alive and unchanged while callbacks run: bytes are immutable and we hold args[1] */
    while (pos < n) {
        int hmsg;
        Py_ssize_t q;
        if (n - pos > wl && memcmp(b + pos, w, (size_t)wl) == 0 && b[pos + wl] == ' ') {
            hmsg = 0;
            q = pos + wl + 1;
        } else if (n - pos > 5 && memcmp(b + pos, "HMSG ", 5) == 0) {
            hmsg = 1;
            q = pos + 5;
        } else {
            break;
        }
        /* the line: up to the first LF, which a CR must precede (the pure path's condition) */
        const unsigned char *lf = memchr(b + q, '\n', (size_t)(n - q));
        if (lf == NULL)
            break;
        Py_ssize_t nl = lf - b;
        if (b[nl - 1] != '\r')
            break;
        /* its arguments as bytes.split() gives them (the CR before the LF is whitespace too) */
        Py_ssize_t f[RMSG_MAX_FIELDS][2];
        int nf = 0, too_many = 0;
        Py_ssize_t i = q;
        while (i < nl) {
            while (i < nl && is_ws(b[i]))
                i++;
            if (i >= nl)
                break;
            if (nf == RMSG_MAX_FIELDS) {
                too_many = 1;
                break;
            }
            f[nf][0] = i;
            while (i < nl && !is_ws(b[i]))
                i++;
            f[nf][1] = i;
            nf++;
        }
        if (too_many)
            break;
        /* RouteParser._msg_args: <acc> <subject> [reply | + reply q.. | | q..] [hdr] <size> */
        int nsizes = hmsg ? 2 : 1;
        if (nf + (1 - a) < 2 + nsizes)
            break;
        long long size = size_of(b, f[nf - 1][0], f[nf - 1][1]);
        long long hdr = hmsg ? size_of(b, f[nf - 2][0], f[nf - 2][1]) : 0;
        if (size < 0 || hdr < 0 || hdr > size || size > maxp)
            break;
        int s = a;  /* the subject's field */
        int m0 = s + 1, m = nf - nsizes - m0;  /* the fields between the subject and the sizes */
        int rep = -1, q0 = 0;  /* the reply's field, the first queue's (0: none) */
        if (m == 1) {
            rep = m0;
        } else if (m > 1) {
            if (is_mark(b, f[m0][0], f[m0][1], '+') && m >= 3) {
                rep = m0 + 1;
                q0 = m0 + 2;
            } else if (is_mark(b, f[m0][0], f[m0][1], '|')) {
                q0 = m0 + 1;
            } else {
                break;  /* a bad reply indicator: the general path closes the route */
            }
        }
        Py_ssize_t start = nl + 1, stop = start + (Py_ssize_t)size;
        if (stop + 2 > n || b[stop] != '\r' || b[stop + 1] != '\n')
            break;  /* not all here yet, or not followed by CRLF: the general path waits or fails */
        if (hdr > 0 && hdr <= size && asks_trace(b + start, (Py_ssize_t)hdr))
            break;  /* a traced message: the general path hands it to sink.on_traced_rmsg (protocol/route.py) */
        PyObject *call[6] = {NULL, NULL, NULL, NULL, NULL, NULL};
        if (a)
            call[0] = cached_str(&rmsg_acc, (const char *)b + f[0][0], f[0][1] - f[0][0]);
        else
            call[0] = Py_NewRef(account);
        if (call[0] == NULL)
            goto error;
        call[1] = cached_str(&rmsg_subj, (const char *)b + f[s][0], f[s][1] - f[s][0]);
        if (call[1] == NULL)
            goto fail;
        if (rep >= 0)
            call[2] = PyUnicode_DecodeUTF8((const char *)b + f[rep][0], f[rep][1] - f[rep][0], "surrogateescape");
        else
            call[2] = Py_NewRef(empty_str);
        if (call[2] == NULL)
            goto fail;
        if (q0) {
            int nq = nf - nsizes - q0;
            call[3] = PyTuple_New(nq);
            if (call[3] == NULL)
                goto fail;
            for (int k = 0; k < nq; k++) {
                PyObject *qs = PyUnicode_DecodeUTF8((const char *)b + f[q0 + k][0], f[q0 + k][1] - f[q0 + k][0],
                                                    "surrogateescape");
                if (qs == NULL)
                    goto fail;
                PyTuple_SET_ITEM(call[3], k, qs);
            }
        } else {
            call[3] = Py_NewRef(empty_tuple);
        }
        call[4] = PyLong_FromLongLong(hdr);
        if (call[4] == NULL)
            goto fail;
        call[5] = PyBytes_FromStringAndSize((const char *)b + start, stop - start);
        if (call[5] == NULL)
            goto fail;
        pos = stop + 2;
        PyObject *r = PyObject_Vectorcall(on_rmsg, call, 6, NULL);
        for (int k = 0; k < 6; k++)
            Py_DECREF(call[k]);
        if (r == NULL)
            return NULL;
        Py_DECREF(r);
        /* the pure loop checks the parser's dead and paused before every operation: one byte (a bytearray's
           buffer may move when it is resized, so it is read through the object every time) */
        if (PyByteArray_GET_SIZE(stopflag) < 1 || PyByteArray_AS_STRING(stopflag)[0])
            break;
        continue;
    fail:
        for (int k = 0; k < 6; k++)
            Py_XDECREF(call[k]);
        goto error;
    }
    return PyLong_FromSsize_t(pos);

error:
    return NULL;
}

/* MSG/HMSG heads by subject, one dict per kind, bounded as protocol/encoder.py bounds its own (8,192 each) */
static PyObject *heads[2];
#define MAX_HEADS 8192

/* str -> UTF-8 with surrogateescape, as protocol/encoder.py enc(): the bytes a client sent come back unchanged */
static PyObject *
encode(PyObject *s)
{
    if (!PyUnicode_Check(s)) {
        PyErr_SetString(PyExc_TypeError, "msg_parts() needs str subjects");
        return NULL;
    }
    return PyUnicode_AsEncodedString(s, "utf-8", "surrogateescape");
}

/* The last no-reply tail built, and its header size and size: handed out again while they repeat. */
static PyObject *last_tail;
static long long last_tail_hdr = -1, last_tail_size = -1;

/* `` <hdr> <size>\r\n`` (without hdr: `` <size>\r\n``) into buf, its length: what snprintf(" %lld %lld\r\n")
   writes, for the non-negative values sizes are, without the format interpreter (snprintf was 600 of the 8,500
   instructions of a 1 pub + 1 sub delivery); a negative value goes to snprintf. */
static int
fmt_nums(char *buf, size_t cap, int with_hdr, long long hdr, long long size)
{
    if (size < 0 || (with_hdr && hdr < 0))
        return with_hdr ? snprintf(buf, cap, " %lld %lld\r\n", hdr, size) : snprintf(buf, cap, " %lld\r\n", size);
    char tmp[48];
    int n = 0;
    tmp[n++] = '\n';
    tmp[n++] = '\r';
    do {
        tmp[n++] = (char)('0' + size % 10);
        size /= 10;
    } while (size);
    tmp[n++] = ' ';
    if (with_hdr) {
        do {
            tmp[n++] = (char)('0' + hdr % 10);
            hdr /= 10;
        } while (hdr);
        tmp[n++] = ' ';
    }
    for (int i = 0; i < n; i++)
        buf[i] = tmp[n - 1 - i];
    return n;
}

PyDoc_STRVAR(msg_parts_doc,
"msg_parts(subject, reply, hdr_len, size) -> (head, tail)\n\n"
"protocol/encoder.py msg_parts: ``MSG <subject> `` (``HMSG`` with headers) and `` [reply] [hdr_len] <size>\\r\\n``.");

static PyObject *
msg_parts(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "msg_parts() takes 4 arguments");
        return NULL;
    }
    PyObject *subject = args[0], *reply = args[1];
    long long hdr = PyLong_AsLongLong(args[2]);
    long long size = PyLong_AsLongLong(args[3]);
    if (PyErr_Occurred())
        return NULL;
    if (!PyUnicode_Check(reply)) {
        PyErr_SetString(PyExc_TypeError, "msg_parts() needs a str reply");
        return NULL;
    }
    PyObject *cache = heads[hdr != 0];
    PyObject *head = PyDict_GetItemWithError(cache, subject);  /* borrowed */
    if (head != NULL) {
        Py_INCREF(head);
    } else {
        if (PyErr_Occurred())
            return NULL;
        PyObject *subj = encode(subject);
        if (subj == NULL)
            return NULL;
        const char *word = hdr ? "HMSG " : "MSG ";
        Py_ssize_t wl = (Py_ssize_t)strlen(word), sl = PyBytes_GET_SIZE(subj);
        head = PyBytes_FromStringAndSize(NULL, wl + sl + 1);
        if (head == NULL) {
            Py_DECREF(subj);
            return NULL;
        }
        char *h = PyBytes_AS_STRING(head);
        memcpy(h, word, wl);
        memcpy(h + wl, PyBytes_AS_STRING(subj), sl);
        h[wl + sl] = ' ';
        Py_DECREF(subj);
        if (PyDict_GET_SIZE(cache) >= MAX_HEADS)
            PyDict_Clear(cache);
        if (PyDict_SetItem(cache, subject, head) < 0) {
            Py_DECREF(head);
            return NULL;
        }
    }
    PyObject *tail;
    int no_reply = PyUnicode_GET_LENGTH(reply) == 0;
    if (no_reply && hdr == last_tail_hdr && size == last_tail_size && last_tail != NULL) {
        /* The same tail as the previous message's (a publisher mostly repeats its size): shared, not rebuilt. */
        PyObject *r = PyTuple_Pack(2, head, last_tail);
        Py_DECREF(head);
        return r;
    }
    char nums[64];
    int nl = fmt_nums(nums, sizeof nums, hdr != 0, hdr, size);
    if (no_reply) {
        tail = PyBytes_FromStringAndSize(nums, nl);
        if (tail != NULL) {
            Py_XSETREF(last_tail, Py_NewRef(tail));
            last_tail_hdr = hdr;
            last_tail_size = size;
        }
    } else {
        PyObject *rep = encode(reply);
        if (rep == NULL) {
            Py_DECREF(head);
            return NULL;
        }
        Py_ssize_t rl = PyBytes_GET_SIZE(rep);
        tail = PyBytes_FromStringAndSize(NULL, 1 + rl + nl);
        if (tail != NULL) {
            char *t = PyBytes_AS_STRING(tail);
            t[0] = ' ';
            memcpy(t + 1, PyBytes_AS_STRING(rep), rl);
            memcpy(t + 1 + rl, nums, nl);
        }
        Py_DECREF(rep);
    }
    if (tail == NULL) {
        Py_DECREF(head);
        return NULL;
    }
    PyObject *r = PyTuple_Pack(2, head, tail);
    Py_DECREF(head);
    Py_DECREF(tail);
    return r;
}

PyDoc_STRVAR(unmask_doc,
"unmask(data, key, pos) -> bytes\n\n"
"protocol/websocket.py _unmask: ``data`` XORed with the 4-byte WebSocket mask ``key``, starting at mask offset\n"
"``pos`` (RFC 6455 5.3).");

/* The pure path does it with two big-int conversions and a big-int XOR (three passes and three allocations of
   the frame's size): 3% of a WebSocket pub/sub profile.  Here it is one pass, eight bytes at a time. */
static PyObject *
unmask(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 3 || !PyBytes_Check(args[0]) || !PyBytes_Check(args[1]) || PyBytes_GET_SIZE(args[1]) != 4) {
        PyErr_SetString(PyExc_TypeError, "unmask() takes (bytes, 4-byte key, int)");
        return NULL;
    }
    Py_ssize_t pos = PyLong_AsSsize_t(args[2]);
    if (pos == -1 && PyErr_Occurred())
        return NULL;
    Py_ssize_t n = PyBytes_GET_SIZE(args[0]);
    if (n == 0)
        return Py_NewRef(args[0]);
    const unsigned char *key = (const unsigned char *)PyBytes_AS_STRING(args[1]);
    unsigned char k[8];
    for (int i = 0; i < 8; i++)
        k[i] = key[(pos + i) & 3];
    PyObject *out = PyBytes_FromStringAndSize(NULL, n);
    if (out == NULL)
        return NULL;
    const unsigned char *src = (const unsigned char *)PyBytes_AS_STRING(args[0]);
    unsigned char *dst = (unsigned char *)PyBytes_AS_STRING(out);
    uint64_t k8;
    memcpy(&k8, k, 8);
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, src + i, 8);
        w ^= k8;
        memcpy(dst + i, &w, 8);
    }
    for (; i < n; i++)
        dst[i] = src[i] ^ k[i & 7];
    return out;
}


/* ---------------------------------------------------------------------------------------------------- read_run */

/* CRC-32 as zlib.crc32 (IEEE 802.3, reflected polynomial 0xEDB88320), slice-by-8: the block records' checksum
   (storage/filestore/block.py).  Written here rather than linked from zlib so that building the accelerator needs
   Python.h only. */
static uint32_t crc_table[8][256];

static void
crc_init(void)
{
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++)
        for (int t = 1; t < 8; t++)
            crc_table[t][n] = crc_table[0][crc_table[t - 1][n] & 0xFF] ^ (crc_table[t - 1][n] >> 8);
}

static inline uint32_t
le32(const unsigned char *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static inline uint64_t
le64(const unsigned char *p)
{
    return (uint64_t)le32(p) | ((uint64_t)le32(p + 4) << 32);
}

static uint32_t
crc32_of(const unsigned char *p, size_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    while (n >= 8) {
        uint32_t a = le32(p) ^ c, b = le32(p + 4);
        c = crc_table[7][a & 0xFF] ^ crc_table[6][(a >> 8) & 0xFF] ^ crc_table[5][(a >> 16) & 0xFF] ^
            crc_table[4][a >> 24] ^ crc_table[3][b & 0xFF] ^ crc_table[2][(b >> 8) & 0xFF] ^
            crc_table[1][(b >> 16) & 0xFF] ^ crc_table[0][b >> 24];
        p += 8;
        n -= 8;
    }
    while (n--)
        c = crc_table[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

/* The record layout of storage/filestore/block.py (little-endian): magic 2, kind 1, flags 1, rlen 4, seq 8, ts 8,
   ttl 4, slen 2, hlen 4 (HEAD_SIZE 34), subject, headers, payload, crc 4 (OVERHEAD 38). */
#define REC_HEAD 34
#define REC_OVERHEAD 38
#define REC_KIND_MSG 1

PyDoc_STRVAR(read_run_doc,
"read_run(out, buf, base, flushed, offsets, codes, i, j, seq, subject_of, cls) -> (i, seq, end)\n\n"
"storage/filestore/block.py read_run_py: the MSG records of slots i .. j-1 that lie whole in buf, appended to out.");

static PyObject *
read_run(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 11) {
        PyErr_SetString(PyExc_TypeError, "read_run() takes 11 arguments");
        return NULL;
    }
    PyObject *out = args[0], *bufobj = args[1], *subject_of = args[9], *cls = args[10];
    if (!PyList_Check(out) || !PyBytes_Check(bufobj) || !PyType_Check(cls) ||
            !PyType_IsSubtype((PyTypeObject *)cls, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "read_run() needs a list, bytes and a tuple type");
        return NULL;
    }
    long long base = PyLong_AsLongLong(args[2]), flushed = PyLong_AsLongLong(args[3]);
    Py_ssize_t i = PyLong_AsSsize_t(args[6]), j = PyLong_AsSsize_t(args[7]);
    unsigned long long seq = PyLong_AsUnsignedLongLong(args[8]);
    if (PyErr_Occurred())
        return NULL;
    Py_buffer offs, codes;
    if (PyObject_GetBuffer(args[4], &offs, PyBUF_FORMAT) < 0)
        return NULL;
    if (offs.itemsize != 4 || offs.format == NULL || strcmp(offs.format, "I") != 0) {
        PyBuffer_Release(&offs);
        PyErr_SetString(PyExc_TypeError, "read_run() needs offsets as array('I')");
        return NULL;
    }
    if (PyObject_GetBuffer(args[5], &codes, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&offs);
        return NULL;
    }
    const unsigned char *buf = (const unsigned char *)PyBytes_AS_STRING(bufobj);
    long long nbuf = (long long)PyBytes_GET_SIZE(bufobj);
    const uint32_t *off_at = (const uint32_t *)offs.buf;
    Py_ssize_t noffs = offs.len / 4, ncodes = codes.len / 4;
    const unsigned char *code_at = (const unsigned char *)codes.buf;
    PyTypeObject *type = (PyTypeObject *)cls;
    long long end = -1;
    uint32_t last = 0;
    int have_last = 0;
    PyObject *subject = NULL;
    int failed = 0;
    while (i < j && i >= 0 && i < noffs && i < ncodes) {
        long long off = (long long)off_at[i];
        long long pos = off - base;
        if (off >= flushed || pos < 0 || pos + REC_OVERHEAD > nbuf)
            break;
        const unsigned char *r = buf + pos;
        uint32_t rlen = le32(r + 4);
        uint64_t rseq = le64(r + 8);
        uint32_t slen = (uint32_t)r[28] | ((uint32_t)r[29] << 8);
        uint32_t hlen = le32(r + 30);
        if (rseq != seq || r[0] != 0xA5 || r[1] != 0x5A || r[2] != REC_KIND_MSG || pos + (long long)rlen > nbuf ||
                (uint64_t)REC_OVERHEAD + slen + hlen > rlen ||
                crc32_of(r, rlen - 4) != le32(r + rlen - 4))
            break;
        uint32_t icode = le32(code_at + 4 * i);
        if (!have_last || icode != last) {
            PyObject *s = PyObject_CallFunction(subject_of, "k", (unsigned long)icode);
            if (s == NULL) {
                failed = 1;
                break;
            }
            Py_XSETREF(subject, s);
            last = icode;
            have_last = 1;
        }
        const char *h = (const char *)r + REC_HEAD + slen;
        long long dlen = (long long)rlen - REC_OVERHEAD - slen - hlen;
        PyObject *ts = PyLong_FromLongLong((long long)le64(r + 16));
        PyObject *sq = PyLong_FromUnsignedLongLong(seq);
        PyObject *hdr = PyBytes_FromStringAndSize(hlen ? h : NULL, hlen);
        PyObject *data = PyBytes_FromStringAndSize(h + hlen, (Py_ssize_t)dlen);
        PyObject *m = type->tp_alloc(type, 5);
        if (ts == NULL || sq == NULL || hdr == NULL || data == NULL || m == NULL) {
            Py_XDECREF(ts);
            Py_XDECREF(sq);
            Py_XDECREF(hdr);
            Py_XDECREF(data);
            Py_XDECREF(m);
            failed = 1;
            break;
        }
        PyTuple_SET_ITEM(m, 0, Py_NewRef(subject));
        PyTuple_SET_ITEM(m, 1, sq);
        PyTuple_SET_ITEM(m, 2, ts);
        PyTuple_SET_ITEM(m, 3, hdr);
        PyTuple_SET_ITEM(m, 4, data);
        int rc = PyList_Append(out, m);
        Py_DECREF(m);
        if (rc < 0) {
            failed = 1;
            break;
        }
        end = off + (long long)rlen;
        i++;
        seq++;
    }
    Py_XDECREF(subject);
    PyBuffer_Release(&offs);
    PyBuffer_Release(&codes);
    if (failed)
        return NULL;
    return Py_BuildValue("(nKL)", i, seq, end);
}


/* -------------------------------------------------------------------------------------------------- append_msg */

static inline void
put_le(unsigned char *p, uint64_t v, int n)
{
    for (int k = 0; k < n; k++, v >>= 8)
        p[k] = (unsigned char)(v & 0xFF);
}

/* What struct.pack raises for a field out of its range, so both twins fail the same way. */
static void
struct_error(const char *what)
{
    PyObject *mod = PyImport_ImportModule("struct");
    PyObject *err = mod != NULL ? PyObject_GetAttrString(mod, "error") : NULL;
    Py_XDECREF(mod);
    if (err != NULL) {
        PyErr_Format(err, "append_msg: %s out of range", what);
        Py_DECREF(err);
    }
}

PyDoc_STRVAR(append_msg_doc,
"append_msg(buf, seq, ts, ttl, subj, hdr, data) -> int\n\n"
"storage/filestore/block.py append_msg_py: a MSG record appended to the bytearray buf; returns its length.");

/* One resize of the block's pending bytes and one pass of CRC-32 over the record, where the interpreter packed the
   head, joined it with the subject and headers, appended twice and ran crc32 twice: 1.5 us of every stored
   message (a fast batch message's server cost was ~12 us). */
static PyObject *
append_msg(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 7 || !PyByteArray_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "append_msg() takes (bytearray, seq, ts, ttl, subj, hdr, data)");
        return NULL;
    }
    PyObject *buf = args[0];
    int overflow = 0, o1 = 0, o2 = 0;  /* PyLong_As*AndOverflow reset their flag: one each */
    unsigned long long seq = PyLong_AsUnsignedLongLong(args[1]);
    if (seq == (unsigned long long)-1 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError))
            return NULL;
        PyErr_Clear();
        overflow = 1;
    }
    long long ts = PyLong_AsLongLongAndOverflow(args[2], &o1);
    if (ts == -1 && PyErr_Occurred())
        return NULL;
    long long ttl = PyLong_AsLongLongAndOverflow(args[3], &o2);
    if (ttl == -1 && PyErr_Occurred())
        return NULL;
    if (overflow || o1 || o2 || ttl < INT32_MIN || ttl > INT32_MAX) {
        struct_error("seq, ts or ttl");
        return NULL;
    }
    Py_buffer subj, hdr, data;
    if (PyObject_GetBuffer(args[4], &subj, PyBUF_SIMPLE) < 0)
        return NULL;
    if (PyObject_GetBuffer(args[5], &hdr, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&subj);
        return NULL;
    }
    if (PyObject_GetBuffer(args[6], &data, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&subj);
        PyBuffer_Release(&hdr);
        return NULL;
    }
    PyObject *result = NULL;
    unsigned long long rlen = (unsigned long long)REC_OVERHEAD + (unsigned long long)subj.len +
                              (unsigned long long)hdr.len + (unsigned long long)data.len;
    if (subj.len > 0xFFFF || (unsigned long long)hdr.len > 0xFFFFFFFFull || rlen > 0xFFFFFFFFull) {
        struct_error("a length");
        goto done;
    }
    Py_ssize_t old = PyByteArray_GET_SIZE(buf);
    if (PyByteArray_Resize(buf, old + (Py_ssize_t)rlen) < 0)
        goto done;
    unsigned char *r = (unsigned char *)PyByteArray_AS_STRING(buf) + old;
    r[0] = 0xA5;
    r[1] = 0x5A;
    r[2] = REC_KIND_MSG;
    r[3] = 0;
    put_le(r + 4, rlen, 4);
    put_le(r + 8, seq, 8);
    put_le(r + 16, (uint64_t)ts, 8);
    put_le(r + 24, (uint64_t)(uint32_t)(int32_t)ttl, 4);
    put_le(r + 28, (uint64_t)subj.len, 2);
    put_le(r + 30, (uint64_t)hdr.len, 4);
    unsigned char *p = r + REC_HEAD;
    memcpy(p, subj.buf, (size_t)subj.len);
    p += subj.len;
    if (hdr.len)
        memcpy(p, hdr.buf, (size_t)hdr.len);
    p += hdr.len;
    if (data.len)
        memcpy(p, data.buf, (size_t)data.len);
    put_le(r + rlen - 4, crc32_of(r, (size_t)rlen - 4), 4);
    result = PyLong_FromUnsignedLongLong(rlen);
done:
    PyBuffer_Release(&subj);
    PyBuffer_Release(&hdr);
    PyBuffer_Release(&data);
    return result;
}

static PyMethodDef methods[] = {
    {"scan_pubs", (PyCFunction)(void (*)(void))scan_pubs, METH_FASTCALL, scan_pubs_doc},
    {"scan_rmsgs", (PyCFunction)(void (*)(void))scan_rmsgs, METH_FASTCALL, scan_rmsgs_doc},
    {"msg_parts", (PyCFunction)(void (*)(void))msg_parts, METH_FASTCALL, msg_parts_doc},
    {"unmask", (PyCFunction)(void (*)(void))unmask, METH_FASTCALL, unmask_doc},
    {"read_run", (PyCFunction)(void (*)(void))read_run, METH_FASTCALL, read_run_doc},
    {"append_msg", (PyCFunction)(void (*)(void))append_msg, METH_FASTCALL, append_msg_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_speedups",
    "The optional compiled part of the client protocol's hot path (see protocol/_speedups.c).", -1, methods,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    str_closed = PyUnicode_InternFromString("closed");
    str_msgs = PyUnicode_InternFromString("msgs");
    str_bytes = PyUnicode_InternFromString("bytes");
    empty_str = PyUnicode_FromStringAndSize(NULL, 0);
    empty_tuple = PyTuple_New(0);
    crc_init();
    heads[0] = PyDict_New();
    heads[1] = PyDict_New();
    if (!str_closed || !str_msgs || !str_bytes || !empty_str || !empty_tuple || !heads[0] || !heads[1])
        return NULL;
    return PyModule_Create(&module);
}
