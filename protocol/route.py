"""The protocol between the servers of a cluster (nats-server route.go, parser.go; wave2-notes section 5.3), sans-IO.

A route carries, besides INFO/CONNECT/PING/PONG/-ERR/+OK::

    RS+ <account> <subject>[ <queue> <weight>]      interest of the remote side
    RS- <account> <subject>[ <queue>]                that interest is gone
    RMSG <account> <subject> [reply] <size>          a message for the receiver's subscribers
    RMSG <account> <subject> + <reply> <q1> [q2..] <size>   ... and one member of each of these queue groups
    RMSG <account> <subject> | <q1> [q2..] <size>           ... the same without a reply
    HMSG <account> <subject> [same forms] <hdr_size> <total_size>

``RouteParser.parse`` feeds bytes and calls ``sink.on_rmsg(account, subject, reply, queues, hdr_len, data)`` for
messages (``sink.on_traced_rmsg``, when the sink has it, for one whose header block asks for a trace: ADR-41) and
``sink.on_route_op(op)`` for everything else.  Leaf-origin forms (LS+/LS-/LMSG with an origin cluster)
are only sent to a server that announced ``lnoc`` in its route INFO; Skiff does not, so on a route they are a
protocol error, as any unknown operation is.

A leaf node connection (``RouteParser(leaf=True)``; nats-server leafnode.go, wave2-notes section 6) carries the same
forms without the account token, the link being bound to one account::

    LS+ <subject>[ <queue> <weight>]    LS- <subject>[ <queue>]
    LMSG <subject> [reply | + reply q.. | | q..] <size>      HMSG <subject> [...] <hdr_size> <total_size>

and the parser reports them with an empty account.

A route dedicated to one account (nats-server 2.10+ ``cluster { accounts }``, route.go: ``route_account`` in its INFO)
carries the route forms without the account token too; ``RouteParser.bind_account`` switches a route's parser to
that, reporting the bound account.

Fast path.  A message whose line ends in CRLF and whose payload is all in the buffer is handed over without the
general path's line object: its arguments are those the general path reads (``bytes.split()``), with its checks;
anything else, every error included, goes the general way.  The compiled scanner (protocol/_speedups.c
``scan_rmsgs``, when built and not turned off by SKIFF_PURE_PYTHON=1) takes every consecutive such message of a
read, of every form (queue lists, HMSG), in one call; the pure fast path takes the plain RMSG/LMSG form and leaves
the others to the general path, which answers the same.  tests/protocol/test_route_parser.py runs both over the
same random streams.
"""
from __future__ import annotations

from typing import NamedTuple

from .accel import speedups
from .parser import TRACE_NEEDLE, Connect, Err, Info, OK, PING, PONG, ProtocolError

# The compiled fast path (protocol/_speedups.c) when it was built and not turned off, else None.
scan_rmsgs = speedups.scan_rmsgs if speedups is not None else None

__all__ = ["RouteParser", "RSub", "RUnsub", "rs_plus", "rs_minus", "rmsg_head", "ls_plus", "ls_minus", "lmsg_head"]

ERR_UNKNOWN_OP = "Unknown Protocol Operation"
ERR_MAX_PAYLOAD = "Maximum Payload Violation"
#: nats-server MAX_CONTROL_LINE_SIZE; a route line (RS+ with a long subject) is held to the same limit.
MAX_CONTROL_LINE = 4096
#: the bits of RouteParser._stop
DEAD, PAUSED = 1, 2


class RSub(NamedTuple):
    account: str
    subject: str
    queue: str
    weight: int


class RUnsub(NamedTuple):
    account: str
    subject: str
    queue: str


def _s(b: bytes) -> str:
    return b.decode("utf-8", "surrogateescape")


class RouteParser:
    """Incremental parser of one route connection's input."""

    def __init__(self, max_payload: int = 64 * 1024 * 1024, leaf: bool = False,
                 accelerated: bool | None = None) -> None:
        """``accelerated``: None takes the compiled fast path when it is there; True insists on it (an ImportError
        without it), False runs the pure path (tests run both over the same inputs)."""
        if accelerated and scan_rmsgs is None:
            raise ImportError("skiff.protocol._speedups is not available (not built, or SKIFF_PURE_PYTHON is set)")
        self._scan = scan_rmsgs if accelerated is not False else None
        self.max_payload = max_payload
        self.leaf = leaf
        self._acc = 0 if leaf else 1  # how many account tokens a line carries
        self.account = b""  # the account a line without its token is for (leaf or dedicated route)
        self._account_str: str | None = "" if leaf else None  # the same decoded; None: lines name their account
        self._sub, self._unsub, self._msg_word = (b"LS+", b"LS-", b"LMSG") if leaf else (b"RS+", b"RS-", b"RMSG")
        self._fast = self._msg_word + b" "
        self._buf = b""
        self._msg: tuple | None = None  # (account, subject, reply, queues, hdr_len, size) waiting for its payload
        # Why parsing stops: bit DEAD (a protocol error) and bit PAUSED (``pause``), in one byte that the compiled
        # scanner reads after every message it hands over, as the pure loop does, without an attribute lookup.
        self._stop = bytearray(1)

    @property
    def dead(self) -> bool:
        """A protocol error was reported: all further input is ignored."""
        return bool(self._stop[0] & DEAD)

    @property
    def paused(self) -> bool:
        """Stopped after an operation: the rest of the input is not in this form (compressed)."""
        return bool(self._stop[0] & PAUSED)

    def pause(self) -> None:
        """Stop after the operation being reported: ``parse`` keeps the rest for ``resume``."""
        self._stop[0] |= PAUSED

    def resume(self) -> bytes:
        """The bytes after the pausing operation, not parsed; parsing goes on with whatever is fed next."""
        rest, self._buf = self._buf, b""
        self._stop[0] &= ~PAUSED
        return rest

    def bind_account(self, name: str) -> None:
        """From now on lines carry no account token: they are all for ``name`` (a dedicated route)."""
        self._acc = 0
        self.account = name.encode("utf-8", "surrogateescape")
        self._account_str = _s(self.account)

    def parse(self, data: bytes, sink) -> None:
        stop = self._stop
        if stop[0] & DEAD:
            return
        buf = self._buf + data if self._buf else data
        self._buf = b""
        pos, n = 0, len(buf)
        scan = self._scan if type(buf) is bytes else None  # the compiled scanner reads bytes only
        while pos < n and not stop[0]:
            if self._msg is not None:
                acc, subj, reply, queues, hdr, size = self._msg
                end = pos + size
                if n < end + 2:
                    break
                if buf[end:end + 2] != b"\r\n":
                    return self._fail(sink, ERR_UNKNOWN_OP, "payload not followed by CRLF")
                self._msg = None
                data = bytes(buf[pos:end])
                if hdr and data.find(TRACE_NEEDLE, 0, hdr) >= 0:  # asks for a trace (the C scanner leaves it here)
                    getattr(sink, "on_traced_rmsg", sink.on_rmsg)(acc, subj, reply, queues, hdr, data)
                else:
                    sink.on_rmsg(acc, subj, reply, queues, hdr, data)
                pos = end + 2
                continue
            if scan is not None:
                # Every consecutive complete message from here, in one call (protocol/_speedups.c); it stops where
                # the general path has to look, and after an operation that stopped this loop.
                pos = scan(stop, buf, pos, self._msg_word, self._account_str, self.max_payload, sink.on_rmsg)
                if pos >= n or stop[0]:
                    break
            nl = buf.find(b"\n", pos)
            if scan is None and nl > 0 and buf[pos:pos + 5] == self._fast and buf[nl - 1] == 13:
                # Fast path: "RMSG <acc> <subject> [reply] <size>" (LMSG without <acc>) with the payload all here.
                # The arguments split as the general path splits them (on any whitespace), so either takes a line
                # to the same message.
                args = buf[pos + 5:nl].split()
                a = self._acc
                if 2 + a <= len(args) <= 3 + a and args[-1].isdigit():
                    size = int(args[-1])
                    start = nl + 1
                    end = start + size
                    if end + 2 <= n and buf[end] == 13 and buf[end + 1] == 10 and size <= self.max_payload:
                        sink.on_rmsg(_s(args[0]) if a else _s(self.account), _s(args[a]),
                                     _s(args[a + 1]) if len(args) == 3 + a else "", (), 0, buf[start:end])
                        pos = end + 2
                        continue
            if nl < 0:
                if n - pos > MAX_CONTROL_LINE:
                    return self._fail(sink, "Maximum Control Line Exceeded", "line too long")
                break
            line = buf[pos:nl].rstrip(b"\r")
            pos = nl + 1
            self._line(line, sink)
        self._buf = buf[pos:] if pos < n else b""

    def _fail(self, sink, err: str, detail: str) -> None:
        self._stop[0] |= DEAD
        self._buf = b""
        sink.on_route_op(ProtocolError(err, detail))

    def _line(self, line: bytes, sink) -> None:
        word, _, rest = line.partition(b" ")
        w = word.upper()
        if w == b"PING":
            sink.on_route_op(PING)
        elif w == b"PONG":
            sink.on_route_op(PONG)
        elif w == b"+OK":
            sink.on_route_op(OK)
        elif w == b"INFO":
            sink.on_route_op(Info(rest.strip()))
        elif w == b"CONNECT":
            sink.on_route_op(Connect(rest.strip()))
        elif w == b"-ERR":
            sink.on_route_op(Err(rest.strip()))
        elif w == self._sub:
            args = rest.split()
            if not self._acc:
                args.insert(0, self.account)
            if len(args) == 2:
                sink.on_route_op(RSub(_s(args[0]), _s(args[1]), "", 0))
            elif len(args) in (3, 4):
                weight = 1
                if len(args) == 4:
                    if not args[3].isdigit():
                        return self._fail(sink, "", "bad queue weight")
                    weight = int(args[3])
                sink.on_route_op(RSub(_s(args[0]), _s(args[1]), _s(args[2]), weight))
            else:
                self._fail(sink, "", "RS+ argument count")  # closed without an -ERR, as nats-server does
        elif w == self._unsub:
            args = rest.split()
            if not self._acc:
                args.insert(0, self.account)
            if len(args) in (2, 3):
                sink.on_route_op(RUnsub(_s(args[0]), _s(args[1]), _s(args[2]) if len(args) == 3 else ""))
            else:
                self._fail(sink, "", "RS- argument count")
        elif w == self._msg_word or w == b"HMSG":
            args = rest.split()
            if not self._acc:
                args.insert(0, self.account)
            self._msg_args(w == b"HMSG", args, sink)
        else:
            self._fail(sink, ERR_UNKNOWN_OP, "unknown route op %r" % bytes(line[:16]))

    def _msg_args(self, headers: bool, args: list[bytes], sink) -> None:
        """``<acc> <subject> [reply | + reply q.. | | q..] [hdr] <size>`` (route.go processRoutedMsgArgs).  Bad
        arguments close the route without an -ERR, as nats-server does (a Protocol Violation in its log)."""
        nsizes = 2 if headers else 1
        if len(args) < 2 + nsizes:
            return self._fail(sink, "", "RMSG argument count")
        sizes = args[-nsizes:]
        if not all(s.isdigit() for s in sizes):
            return self._fail(sink, "", "RMSG bad size")
        size = int(sizes[-1])
        hdr = int(sizes[0]) if headers else 0
        if hdr > size:
            return self._fail(sink, "", "RMSG header size over total size")
        if size > self.max_payload:
            return self._fail(sink, ERR_MAX_PAYLOAD, "RMSG payload over max_payload")
        mid = args[2:-nsizes]
        reply, queues = "", ()
        if len(mid) == 1:
            reply = _s(mid[0])
        elif len(mid) > 1:
            if mid[0] == b"+" and len(mid) >= 3:
                reply, queues = _s(mid[1]), tuple(_s(q) for q in mid[2:])
            elif mid[0] == b"|":
                queues = tuple(_s(q) for q in mid[1:])
            else:  # a reply indicator other than + or | (route.go: "processRoutedMsgArgs Bad or Missing ...")
                return self._fail(sink, "", "RMSG bad reply indicator")
        self._msg = (_s(args[0]), _s(args[1]), reply, queues, hdr, size)


# ---------------------------------------------------------------------------------------------- encoders
def rs_plus(account: str, subject: str, queue: str = "", weight: int = 0) -> bytes:
    """``account`` empty on a dedicated route (its lines have no account token)."""
    if not account:
        return ls_plus(subject, queue, weight).replace(b"LS+", b"RS+", 1)
    if queue:
        return f"RS+ {account} {subject} {queue} {weight}\r\n".encode("utf-8", "surrogateescape")
    return f"RS+ {account} {subject}\r\n".encode("utf-8", "surrogateescape")


def rs_minus(account: str, subject: str, queue: str = "") -> bytes:
    if not account:
        return ls_minus(subject, queue).replace(b"LS-", b"RS-", 1)
    if queue:
        return f"RS- {account} {subject} {queue}\r\n".encode("utf-8", "surrogateescape")
    return f"RS- {account} {subject}\r\n".encode("utf-8", "surrogateescape")


def rmsg_head(account: str, subject: str, reply: str, queues: list[str] | tuple, hdr_len: int, size: int) -> bytes:
    """The RMSG/HMSG line of a message on a route (client.go msgHeaderForRouteOrLeaf)."""
    if not queues and not hdr_len and account:  # the common case, formatted in one step
        if reply:
            return f"RMSG {account} {subject} {reply} {size}\r\n".encode("utf-8", "surrogateescape")
        return f"RMSG {account} {subject} {size}\r\n".encode("utf-8", "surrogateescape")
    return _msg_head("RMSG", [account, subject] if account else [subject], reply, queues, hdr_len, size)


def _msg_head(word: str, parts: list[str], reply: str, queues: list[str] | tuple, hdr_len: int, size: int) -> bytes:
    """``<word|HMSG> <parts..> [reply | + reply q.. | | q..] [hdr_len] <size>``."""
    out = ["HMSG" if hdr_len else word, *parts]
    if queues:
        out += ["+", reply] if reply else ["|"]
        out += queues
    elif reply:
        out.append(reply)
    if hdr_len:
        out.append(str(hdr_len))
    out.append(str(size))
    return (" ".join(out) + "\r\n").encode("utf-8", "surrogateescape")


def ls_plus(subject: str, queue: str = "", weight: int = 0) -> bytes:
    if queue:
        return f"LS+ {subject} {queue} {weight}\r\n".encode("utf-8", "surrogateescape")
    return f"LS+ {subject}\r\n".encode("utf-8", "surrogateescape")


def ls_minus(subject: str, queue: str = "") -> bytes:
    if queue:
        return f"LS- {subject} {queue}\r\n".encode("utf-8", "surrogateescape")
    return f"LS- {subject}\r\n".encode("utf-8", "surrogateescape")


def lmsg_head(subject: str, reply: str, queues: list[str] | tuple, hdr_len: int, size: int) -> bytes:
    """The LMSG/HMSG line of a message on a leaf connection (no account token: the link is bound to one)."""
    return _msg_head("LMSG", [subject], reply, queues, hdr_len, size)
