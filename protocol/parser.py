"""The client protocol parser: bytes from a client -> operations.  Pure: no I/O, no clock.

Theory of operation
-------------------
``Parser.parse(data, sink)`` takes whatever the socket delivered and hands every operation completed by it to the
sink, in order: ``sink.on_pub(subject, reply, hdr_len, data)`` for PUB/HPUB (the hot path: no operation object is
built) and ``sink.on_op(op)`` for everything else; it stops as soon as ``sink.closed`` is set.  An HPUB whose header
block holds ``Nats-Trace-Dest:`` (a message that asks for a trace, ADR-41) goes to ``sink.on_traced_pub`` instead when
the sink has one, so that the hot path never looks for the header (server/core/msgtrace.py).  ``feed(data)``
returns the same operations as a list (``Pub`` tuples included), for tests and simple callers.  The parser counts
the messages and payload bytes it has parsed (``msgs``, ``bytes``), so the connection keeps no per-message counters.
Input may be split at any byte; the parser keeps what it cannot finish yet.  Two states:

* control line: the bytes up to ``\\n``.  The op name (case-insensitive) decides the form.  ``PUB``/``HPUB`` are
  followed by a payload, which moves the parser to
* payload: exactly ``size`` bytes then ``\\r\\n``.  While a payload is incomplete its bytes are collected in one
  ``bytearray`` so that a large message arriving in many reads is not copied over and over.

Errors follow nats-server's byte-at-a-time state machine (server/parser.go), which answers as soon as it sees a
bad byte, even before a line is complete:

* a byte that cannot continue any op name, or a payload not followed by ``\\r\\n``: ``-ERR 'Unknown Protocol
  Operation'`` and close;
* a well-formed op whose arguments are wrong (count, sizes, header size > total): close with no ``-ERR``;
* an argument longer than ``max_control_line`` (checked on the argument only, also for a line still incomplete):
  ``-ERR 'maximum control line exceeded'`` and close;
* a declared size over ``max_payload``: ``-ERR 'Maximum Payload Violation'`` and close.

Arguments are framed and split as nats-server frames and splits them when the line arrives in one read
(parser.go ``*_ARG`` states, client.go ``processPub``/``splitArg``):

* the argument starts at the first byte after the op word and its spaces/tabs, whatever that byte is - even
  ``\r`` or ``\n`` (``SUB \nfoo 1\n`` is a SUB: the line runs on to the next ``\n``);
* it ends at the next ``\n``; if a ``\r`` occurs after its first byte, the byte before the ``\n`` is dropped
  (nats-server's ``drop``: normally the ``\r`` of ``\r\n``, but ``SUB foo 1\rx\n`` is ``SUB foo 1``);
* PUB and HPUB split the argument on space and tab only (a subject may hold ``\r``, ``\x0b``, ``\x0c``);
  SUB and UNSUB split on space, tab, ``\r`` and ``\n`` (``SUB foo\r1`` is ``SUB foo 1``).  ``split_args`` holds
  both rules and every path (the PUB/HPUB fast path included) splits through it or agrees with it.

nats-server itself treats the odd ``\r`` differently when a line is split across reads (its ``argBuf`` skips
later ``\r`` bytes); Skiff gives the one-read answer for every split, which is what a client sees from nats-server
in practice.

Such an error is returned as a final ``ProtocolError`` operation; the parser then ignores all further input.
``PING``, ``PONG`` and ``+OK`` accept anything up to the newline (nats-server ignores those bytes), so a client can
never make the parser buffer them.  Whether headers were negotiated, auth, pedantic subject checks and the like are
the connection's business: the parser only reports what was sent.
"""
from __future__ import annotations

import re

from skiff.protocol.accel import speedups
from skiff.protocol.record import NamedTuple  # typing's, without its annotation checks (start-up)

# The compiled fast path (protocol/_speedups.c) when it was built and not turned off (SKIFF_PURE_PYTHON=1), else
# None and the regex fast path below.  Both take exactly the same inputs.
scan_pubs = speedups.scan_pubs if speedups is not None else None
ACCELERATED = scan_pubs is not None

MAX_CONTROL_LINE = 4096
MAX_PAYLOAD = 1024 * 1024

ERR_UNKNOWN_OP = "Unknown Protocol Operation"
ERR_MAX_CONTROL_LINE = "maximum control line exceeded"
ERR_MAX_PAYLOAD = "Maximum Payload Violation"


class Pub(NamedTuple):
    """PUB or HPUB.  ``data`` is header block + payload; ``hdr_len`` is 0 when there are no headers."""

    subject: str
    reply: str
    hdr_len: int
    data: bytes


class Sub(NamedTuple):
    subject: str
    queue: str
    sid: str


class Unsub(NamedTuple):
    sid: str
    max_msgs: int  # 0 = now


class Connect(NamedTuple):
    raw: bytes  # the JSON text; the connection decodes and validates it


class Info(NamedTuple):
    raw: bytes


class Ping(NamedTuple):
    pass


class Pong(NamedTuple):
    pass


class Ok(NamedTuple):
    pass


class Err(NamedTuple):
    """A client sending -ERR: nats-server logs it and closes the connection."""

    text: bytes


class ProtocolError(NamedTuple):
    """The last operation of a broken stream.  ``err`` is the -ERR text to send, or "" to close silently."""

    err: str
    detail: str


PING = Ping()
PONG = Pong()
OK = Ok()

# Op words a client may send, and what follows the word: "ws" = at least one space/tab then arguments,
# "line" = anything up to the newline (ignored).
_OPS = {
    b"PUB": "ws",
    b"HPUB": "ws",
    b"SUB": "ws",
    b"UNSUB": "ws",
    b"CONNECT": "ws",
    b"INFO": "ws",
    b"-ERR": "ws",
    b"PING": "line",
    b"PONG": "line",
    b"+OK": "line",
}
# Every proper prefix of an op word: input that stops there may still become valid.
_PREFIXES = {w[:i] for w in _OPS for i in range(1, len(w))}
_PUB_SEPS = b" \t"  # processPub / processHeaderPub
_SUB_SEPS = b" \t\r\n"  # splitArg (SUB, UNSUB)
_TO_SPACE = bytes.maketrans(b"\t\r\n", b"   ")
# The fast path's lines (see Parser._parse): fields hold no space, tab, CR or LF, sizes are 1-18 ASCII digits; one
# space after the op word, one or more between fields (nats-py writes "PUB <subject>  <size>" when it has no reply).
_PUB_FAST = re.compile(rb"PUB ([^ \t\r\n]+) +(?:([^ \t\r\n]+) +)?([0-9]{1,18})\r\n")
_HPUB_FAST = re.compile(rb"HPUB ([^ \t\r\n]+) +(?:([^ \t\r\n]+) +)?([0-9]{1,18}) +([0-9]{1,18})\r\n")


TRACE_NEEDLE = b"Nats-Trace-Dest:"  # what asks for a message trace (server/core/msgtrace.py reads the rest)


def _traced(sink):
    """Where a message that asks for a trace goes: ``sink.on_traced_pub``, or ``on_pub`` for a sink without it."""
    return getattr(sink, "on_traced_pub", None) or sink.on_pub


def _hand(sink, subject: str, reply: str, hdr_len: int, data: bytes) -> None:
    """A PUB/HPUB of the general paths to the sink (the fast ones test the header in-line, or in C)."""
    if hdr_len and data.find(TRACE_NEEDLE, 0, hdr_len) >= 0:
        _traced(sink)(subject, reply, hdr_len, data)
    else:
        sink.on_pub(subject, reply, hdr_len, data)


def split_args(arg: bytes, crlf: bool = False) -> list[bytes]:
    """nats-server's argument split: on space and tab (PUB, HPUB), also on CR and LF with ``crlf`` (SUB, UNSUB:
    client.go splitArg).  Empty fields vanish; no other byte separates (``bytes.split()`` would also split on
    \\x0b, \\x0c and \\x1c-\\x1f)."""
    if crlf:
        arg = arg.translate(_TO_SPACE)
    elif b"\t" in arg:
        arg = arg.replace(b"\t", b" ")
    return [a for a in arg.split(b" ") if a]


def _parse_size(b: bytes) -> int:
    """nats-server parseSize: ASCII digits only, -1 on anything else or on overflow."""
    if not b or len(b) > 18 or not b.isdigit():
        return -1
    return int(b)


class _Collector:
    """The sink behind ``feed()``: operations as a list."""

    __slots__ = ("ops", "closed")

    def __init__(self) -> None:
        self.ops: list = []
        self.closed = False

    def on_pub(self, subject: str, reply: str, hdr_len: int, data: bytes) -> None:
        self.ops.append(Pub(subject, reply, hdr_len, data))

    def on_op(self, op) -> None:
        self.ops.append(op)


class Parser:
    """Incremental parser for one client connection."""

    __slots__ = ("max_control_line", "max_payload", "msgs", "bytes", "_buf", "_pending", "_skip", "_dead", "_scan")

    def __init__(self, max_control_line: int = MAX_CONTROL_LINE, max_payload: int = MAX_PAYLOAD,
                 accelerated: bool | None = None) -> None:
        """``accelerated``: None takes the compiled fast path when it is there (``ACCELERATED``); True insists on
        it (an ImportError without it), False runs the pure path (tests run both over the same inputs)."""
        if accelerated and scan_pubs is None:
            raise ImportError("skiff.protocol._speedups is not available (not built, or SKIFF_PURE_PYTHON is set)")
        self._scan = scan_pubs if accelerated is not False else None
        self.max_control_line = max_control_line
        self.max_payload = max_payload
        self.msgs = 0  # PUB/HPUB parsed
        self.bytes = 0  # their header + payload bytes
        self._buf = b""  # unparsed input (an incomplete control line), or bytearray while a payload is pending
        self._pending: tuple | None = None  # (subject, reply, hdr_len, size) of a PUB waiting for its payload
        self._skip: object | None = None  # PING/PONG/+OK seen; discard input up to the newline then emit this
        self._dead = False

    def feed(self, data: bytes) -> list:
        sink = _Collector()
        self.parse(data, sink)
        return sink.ops

    def parse(self, data: bytes, sink) -> None:
        if self._dead:
            return
        if self._pending is not None:
            data = self._feed_payload(data, sink)
            if data is None or sink.closed:
                return
        if self._skip is not None:
            nl = data.find(b"\n")
            if nl < 0:
                return
            sink.on_op(self._skip)
            self._skip = None
            if sink.closed:
                return
            data = data[nl + 1 :]
        buf = self._buf + data if self._buf else data
        self._buf = b""
        self._parse(buf, sink)

    def _fail(self, sink, err: str, detail: str) -> None:
        self._dead = True
        self._buf = b""
        self._pending = None
        sink.on_op(ProtocolError(err, detail))

    def _feed_payload(self, data: bytes, sink):
        """Collect payload bytes for the pending PUB; return the input left after it, or None if still short."""
        subject, reply, hdr_len, size = self._pending
        buf = self._buf
        need = size + 2 - len(buf)
        if len(data) < need:
            buf += data
            if len(buf) > size and buf[size] != 13:  # nats-server MSG_END_R fails on the byte, not at CRLF time
                self._fail(sink, ERR_UNKNOWN_OP, "payload not followed by CRLF")
            return None
        buf += data[:need]
        self._buf = b""
        self._pending = None
        if buf[size:] != b"\r\n":
            self._fail(sink, ERR_UNKNOWN_OP, "payload not followed by CRLF")
            return None
        self.msgs += 1
        self.bytes += size
        _hand(sink, subject, reply, hdr_len, bytes(buf[:size]))
        return data[need:]

    def _parse(self, buf: bytes, sink) -> None:
        pos = 0
        n = len(buf)
        mcl = self.max_control_line
        maxp = self.max_payload
        find = buf.find
        on_pub = sink.on_pub
        on_op = sink.on_op
        pub_match = _PUB_FAST.match
        hpub_match = _HPUB_FAST.match
        scan = self._scan if type(buf) is bytes else None  # the compiled scanner reads bytes only
        msgs = nbytes = 0
        try:
            while pos < n:
                if sink.closed:
                    return
                if scan is not None:
                    # The fast path below, compiled (protocol/_speedups.c): every consecutive message it takes, in
                    # one call; it stops where the regex path would fall through, and counts what it handed over.
                    pos = scan(self, buf, pos, maxp, mcl, on_pub, sink)
                    if pos >= n:
                        return
                    if sink.closed:
                        return
                # Fast path for "PUB <subject> [reply] <size>\r\n" and "HPUB <subject> [reply] <hdr> <size>\r\n"
                # with the whole payload in the buffer: one regex match (in C) gives the fields, no helper calls,
                # straight to the sink.  The patterns take only lines that split_args() splits the same way: CRLF at
                # the end (the CR is nats-server's dropped byte), spaces only between fields (one after the op
                # word), no tab, CR or LF in a field, sizes of at most 18 digits (_parse_size).  The argument whose
                # length max_control_line bounds runs from the subject to the CR, as the general path measures it.  Anything else, and every error (sizes over max_payload or
                # max_control_line, a header size over the total, a payload not followed by CRLF), falls through
                # to the general path below, which answers as nats-server does.
                m = pub_match(buf, pos) if scan is None else None
                if m is not None:
                    subj, rep, sz = m.groups()
                    size = int(sz)
                    start = m.end()
                    stop = start + size
                    if size <= maxp and stop + 2 <= n and buf[stop] == 13 and buf[stop + 1] == 10 and (
                            start - 2 - m.start(1) <= mcl):
                        msgs += 1
                        nbytes += size
                        pos = stop + 2
                        on_pub(subj.decode("utf-8", "surrogateescape"),
                               rep.decode("utf-8", "surrogateescape") if rep else "", 0, buf[start:stop])
                        continue
                elif buf[pos] == 72 and scan is None:  # H
                    m = hpub_match(buf, pos)
                    if m is not None:
                        subj, rep, hs, sz = m.groups()
                        hdr = int(hs)
                        size = int(sz)
                        start = m.end()
                        stop = start + size
                        if hdr <= size <= maxp and stop + 2 <= n and buf[stop] == 13 and buf[stop + 1] == 10 and (
                                start - 2 - m.start(1) <= mcl):
                            msgs += 1
                            nbytes += size
                            pos = stop + 2
                            (on_pub if not hdr or buf.find(TRACE_NEEDLE, start, start + hdr) < 0 else
                             _traced(sink))(subj.decode("utf-8", "surrogateescape"),
                                            rep.decode("utf-8", "surrogateescape") if rep else "", hdr,
                                            buf[start:stop])
                            continue
                nl = find(b"\n", pos)
                end = n if nl < 0 else nl
                # Identify the op word: letters up to the first space/tab (or the end of what we have).
                c = buf[pos]
                if c in (67, 99) and buf[pos : pos + 7].upper() == b"CONNECT":
                    # nats-server needs no separator after CONNECT: "CONNECT{...}" works and "CONNECTX" is
                    # simply invalid JSON (closed without -ERR).
                    word, kind, astart = b"CONNECT", "ws", pos + 7
                elif c in (80, 112) and buf[pos + 1 : pos + 4] in (b"UB ", b"ub ", b"UB\t", b"ub\t") and nl >= 0:
                    # Fast path: "PUB <subject> [reply] <size>"
                    word, kind, astart = b"PUB", "ws", pos + 4
                else:
                    w = pos
                    while w < end and buf[w] not in (32, 9, 13):
                        w += 1
                        if w - pos > 7:
                            break
                    word = buf[pos:w].upper()
                    kind = _OPS.get(word)
                    if kind is None:
                        # A prefix of a valid word may be completed by the next read; anything else is an error
                        # right away (nats-server fails on the first byte that cannot continue an op).
                        if nl < 0 and w == end and word in _PREFIXES:
                            self._buf = buf[pos:]
                            return
                        if kind is None and word[:4] in (b"PING", b"PONG") or word[:3] == b"+OK":
                            kind = "line"
                            word = word[:4] if word[:1] != b"+" else b"+OK"
                        else:
                            self._fail(sink, ERR_UNKNOWN_OP, "unknown op %r" % bytes(buf[pos : pos + 16]))
                            return
                    if kind == "line":
                        op = PING if word == b"PING" else PONG if word == b"PONG" else OK
                        if nl < 0:
                            self._skip = op
                            return
                        on_op(op)
                        pos = nl + 1
                        continue
                    if w == end:
                        if nl < 0:  # the word is complete but its separator has not arrived yet
                            self._buf = buf[pos:]
                            return
                        self._fail(sink, ERR_UNKNOWN_OP, "op without arguments")
                        return
                    if buf[w] == 13:  # "PUB\r": nats-server wants a space or tab after the op word
                        self._fail(sink, ERR_UNKNOWN_OP, "op not followed by a space")
                        return
                    astart = w + 1
                while astart < end and buf[astart] in (32, 9):
                    astart += 1
                if astart == nl:
                    # The first argument byte is the newline itself: nats-server takes it as the start of the
                    # argument and reads on to the next newline (parser.go OP_*_SPC -> *_ARG).
                    nl = find(b"\n", astart + 1)
                if nl < 0:
                    if n - astart - (find(b"\r", astart + 1) >= 0) > mcl:
                        self._fail(sink, ERR_MAX_CONTROL_LINE, "incomplete line over max_control_line")
                        return
                    self._buf = buf[pos:]
                    return
                # nats-server's drop: a CR anywhere after the first argument byte drops the byte before the LF.
                aend = nl - 1 if find(b"\r", astart + 1, nl) >= 0 else nl
                arg = buf[astart:aend]
                if len(arg) > mcl:
                    self._fail(sink, ERR_MAX_CONTROL_LINE, "line over max_control_line")
                    return
                pos = nl + 1
                if word == b"PUB" or word == b"HPUB":
                    pos = self._pub(word, arg, buf, pos, sink)
                    if pos < 0:
                        return
                elif word == b"SUB":
                    args = split_args(arg, True)
                    if len(args) == 2:
                        on_op(Sub(args[0].decode("utf-8", "surrogateescape"), "", args[1].decode("utf-8", "surrogateescape")))
                    elif len(args) == 3:
                        on_op(
                            Sub(
                                args[0].decode("utf-8", "surrogateescape"),
                                args[1].decode("utf-8", "surrogateescape"),
                                args[2].decode("utf-8", "surrogateescape"),
                            )
                        )
                    else:
                        self._fail(sink, "", "SUB argument count")
                        return
                elif word == b"UNSUB":
                    args = split_args(arg, True)
                    if len(args) == 1:
                        on_op(Unsub(args[0].decode("utf-8", "surrogateescape"), 0))
                    elif len(args) == 2:
                        # A max that does not parse counts as none: nats-server unsubscribes at once.
                        m = max(_parse_size(args[1]), 0)
                        on_op(Unsub(args[0].decode("utf-8", "surrogateescape"), m))
                    else:
                        self._fail(sink, "", "UNSUB argument count")
                        return
                elif word == b"CONNECT":
                    on_op(Connect(bytes(arg)))
                    # A CONNECT may change how the connection takes a PUB (verbose, pedantic, headers: the client's
                    # _update_pub_path) and its max_payload (the account's limit): the rest of this read uses the
                    # new ones, as the general path (_pub, sink.on_pub) always does.
                    on_pub = sink.on_pub
                    maxp = self.max_payload
                elif word == b"INFO":
                    on_op(Info(bytes(arg)))
                else:  # -ERR
                    on_op(Err(bytes(arg)))
                    self._dead = True
                    return
        finally:
            self.msgs += msgs
            self.bytes += nbytes

    def _pub(self, word: bytes, arg: bytes, buf: bytes, pos: int, sink) -> int:
        """Parse PUB/HPUB arguments and take the payload if it is all here.  Returns the new position or -1."""
        args = split_args(arg)
        if word == b"PUB":
            na = len(args)
            if na == 2:
                reply = ""
            elif na == 3:
                reply = args[1].decode("utf-8", "surrogateescape")
            else:
                self._fail(sink, "", "PUB argument count")
                return -1
            size = _parse_size(args[-1])
            if size < 0:
                self._fail(sink, "", "PUB bad size")
                return -1
            hdr = 0
        else:
            na = len(args)
            if na == 3:
                reply = ""
            elif na == 4:
                reply = args[1].decode("utf-8", "surrogateescape")
            else:
                self._fail(sink, "", "HPUB argument count")
                return -1
            hdr = _parse_size(args[-2])
            size = _parse_size(args[-1])
            if hdr < 0 or size < 0 or hdr > size:
                self._fail(sink, "", "HPUB bad sizes")
                return -1
        if size > self.max_payload:
            self._fail(sink, ERR_MAX_PAYLOAD, "payload %d > max_payload %d" % (size, self.max_payload))
            return -1
        subject = args[0].decode("utf-8", "surrogateescape")
        end = pos + size
        if len(buf) >= end + 2:
            if buf[end] != 13 or buf[end + 1] != 10:
                self._fail(sink, ERR_UNKNOWN_OP, "payload not followed by CRLF")
                return -1
            self.msgs += 1
            self.bytes += size
            _hand(sink, subject, reply, hdr, buf[pos:end])
            return end + 2
        # Payload incomplete: keep what we have in a growable buffer.
        rest = buf[pos:]
        if len(rest) >= end + 2 - pos:  # pragma: no cover - handled above
            return -1
        if len(buf) > end and buf[end] != 13:
            self._fail(sink, ERR_UNKNOWN_OP, "payload not followed by CRLF")
            return -1
        self._pending = (subject, reply, hdr, size)
        self._buf = bytearray(rest)
        return len(buf)
