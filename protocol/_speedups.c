/* skiff.protocol._speedups: the optional compiled part of the client protocol's hot path.
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

   unmask() is protocol/websocket.py _unmask (a client frame's payload XORed with its mask key). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static PyObject *str_closed;  /* "closed": the sink stops the parser by setting it (a client closed mid-read) */
static PyObject *str_msgs;
static PyObject *str_bytes;
static PyObject *empty_str;

/* The last subject decoded, kept: a publisher mostly repeats one subject, and the same str object (its hash
   already computed) then serves the sublist's result cache lookup without a decode, an allocation and a hash. */
#define SUBJ_CACHE 128
static char last_subj[SUBJ_CACHE];
static Py_ssize_t last_len = -1;
static PyObject *last_str;

static PyObject *
subject_str(const char *p, Py_ssize_t len)
{
    if (len == last_len && memcmp(p, last_subj, (size_t)len) == 0) {
        Py_INCREF(last_str);
        return last_str;
    }
    PyObject *s = PyUnicode_DecodeUTF8(p, len, "surrogateescape");
    if (s != NULL && len <= SUBJ_CACHE) {
        Py_XSETREF(last_str, Py_NewRef(s));
        memcpy(last_subj, p, (size_t)len);
        last_len = len;
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
   single spaces, fields as field_end() reads them.  Fills the field bounds and returns the payload's start, or -1
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
        /* another field must follow after exactly one space; with a reply there are want + 1 fields */
        if (e >= n || b[e] != ' ' || nf == want + 1)
            return -1;
        i = e + 1;
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

PyDoc_STRVAR(scan_pubs_doc,
"scan_pubs(parser, buf, pos, max_payload, max_control_line, on_pub, sink) -> int\n\n"
"Hand every consecutive complete PUB/HPUB of bytes ``buf`` from ``pos`` on that the pure fast path takes to\n"
"``on_pub(subject, reply, hdr_len, data)``; stop at the first other input or once ``sink.closed`` is set.\n"
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
        if (start - pos - (hpub ? 7 : 6) > mcl)
            break;
        Py_ssize_t stop = start + (Py_ssize_t)m.size;
        if (stop + 2 > n || b[stop] != '\r' || b[stop + 1] != '\n')
            break;
        PyObject *call[4];
        call[0] = subject_str((const char *)b + m.subj_s, m.subj_e - m.subj_s);
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

static PyMethodDef methods[] = {
    {"scan_pubs", (PyCFunction)(void (*)(void))scan_pubs, METH_FASTCALL, scan_pubs_doc},
    {"msg_parts", (PyCFunction)(void (*)(void))msg_parts, METH_FASTCALL, msg_parts_doc},
    {"unmask", (PyCFunction)(void (*)(void))unmask, METH_FASTCALL, unmask_doc},
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
    heads[0] = PyDict_New();
    heads[1] = PyDict_New();
    if (!str_closed || !str_msgs || !str_bytes || !empty_str || !heads[0] || !heads[1])
        return NULL;
    return PyModule_Create(&module);
}
