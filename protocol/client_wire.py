"""The server -> client half of the NATS protocol, for a client: bytes in, events out.  Pure: no I/O, no clock.

Theory of operation
-------------------
Skiff's ``protocol.parser`` reads what a *client* sends (PUB, SUB, CONNECT ...).  A client needs the other
direction: ``INFO``, ``MSG``, ``HMSG``, ``PING``, ``PONG``, ``+OK`` and ``-ERR`` (nats-server client.go
``sendProto`` / ``msgHeader``).  :class:`ServerParser` turns whatever the socket delivered into those events, in
order.  Input may be split at any byte: the parser keeps an offset into one ``bytearray`` and only compacts it
after a whole read has been consumed, so a read holding a thousand small messages costs one copy, not a thousand.

Two states, as in nats-server's own parser:

* control line: the bytes up to ``\\r\\n`` (nats-server sends ``\\r\\n``; a bare ``\\n`` is accepted too);
* payload (after ``MSG``/``HMSG``): exactly ``size`` bytes then ``\\r\\n``.  ``HMSG`` carries the header block
  (``NATS/1.0 ...``, ADR-4) first; :class:`Msg` keeps it apart from the payload so callers parse it with
  ``protocol.headers`` only when they need it.

A line that is not one of those ops raises :class:`WireError`: the server speaks a protocol we do not understand,
and the connection must be dropped rather than guessed at.

The encoders at the bottom build client -> server frames (CONNECT, PUB, HPUB, SUB, UNSUB), the counterpart of
``protocol.encoder`` which builds server -> client frames; subjects are encoded with ``surrogateescape`` like
everywhere in Skiff (``protocol.encoder.enc``).
"""
from __future__ import annotations

import json
from typing import NamedTuple

from skiff.protocol.encoder import CRLF, PING, PONG, enc
# PING, PONG and +OK carry nothing, in either direction: the same events as the client parser's
from skiff.protocol.parser import OK as _OK, PING as _PING, PONG as _PONG, Ok, Ping, Pong

__all__ = [
    "Info", "Msg", "Ping", "Pong", "Ok", "Err", "ServerParser", "WireError",
    "connect", "pub", "sub", "unsub", "PING", "PONG",
]

MAX_CONTROL_LINE = 64 * 1024  # far above what a server sends; only protects against a runaway peer


class WireError(Exception):
    """The peer sent something that is not the NATS server protocol."""


class Info(NamedTuple):
    fields: dict


class Msg(NamedTuple):
    """MSG or HMSG.  ``hdr`` is the raw header block (b"" for MSG), ``data`` the payload without it."""

    subject: str
    sid: int
    reply: str
    hdr: bytes
    data: bytes


class Err(NamedTuple):
    """``-ERR 'text'``: the quotes nats-server always puts around the text are removed."""

    text: str


class ServerParser:
    """Feed bytes, get events.  ``feed`` returns every event completed by ``data``; the rest is kept."""

    __slots__ = ("_buf", "_pos")

    def __init__(self) -> None:
        self._buf = bytearray()
        self._pos = 0

    @property
    def pending(self) -> int:
        """Bytes received but not yet part of a complete event."""
        return len(self._buf) - self._pos

    def feed(self, data: bytes) -> list:
        buf = self._buf
        buf += data
        pos = self._pos
        end = len(buf)
        out: list = []
        append = out.append
        find = buf.find
        while pos < end:
            nl = find(b"\n", pos)
            if nl < 0:
                if end - pos > MAX_CONTROL_LINE:
                    raise WireError("control line too long")
                break
            line_end = nl - 1 if nl > pos and buf[nl - 1] == 13 else nl
            op = bytes(buf[pos:line_end])
            c = op[:1]
            if c == b"M" or c == b"H" or c == b"m" or c == b"h":
                args = op.split()
                name = args[0].upper()
                try:
                    if name == b"MSG":
                        hdr_len = 0
                        size = int(args[-1])
                        reply = args[3] if len(args) == 5 else b""
                    elif name == b"HMSG":
                        hdr_len = int(args[-2])
                        size = int(args[-1])
                        reply = args[3] if len(args) == 6 else b""
                    else:
                        raise WireError(f"unknown operation {op[:40]!r}")
                    sid = int(args[2])
                except (IndexError, ValueError) as e:
                    raise WireError(f"bad message line {op[:200]!r}") from e
                start = nl + 1
                stop = start + size
                if stop + 2 > end:
                    break  # payload not complete yet: keep the line too and parse it again later
                if hdr_len:
                    hdr = bytes(buf[start : start + hdr_len])
                    payload = bytes(buf[start + hdr_len : stop])
                else:
                    hdr = b""
                    payload = bytes(buf[start:stop])
                append(Msg(args[1].decode("utf-8", "surrogateescape"), sid,
                           reply.decode("utf-8", "surrogateescape"), hdr, payload))
                pos = stop + 2 if buf[stop] == 13 else stop + 1
                continue
            pos = nl + 1
            upper = op.upper()
            if upper.startswith(b"PING"):
                append(_PING)
            elif upper.startswith(b"PONG"):
                append(_PONG)
            elif upper.startswith(b"+OK"):
                append(_OK)
            elif upper.startswith(b"-ERR"):
                append(Err(op[4:].strip().strip(b"'").decode("utf-8", "replace")))
            elif upper.startswith(b"INFO"):
                try:
                    append(Info(json.loads(op[4:])))
                except ValueError as e:
                    raise WireError(f"bad INFO {op[:200]!r}") from e
            else:
                raise WireError(f"unknown operation {op[:40]!r}")
        if pos >= end:
            buf.clear()
            pos = 0
        elif pos > 65536:
            del buf[:pos]
            pos = 0
        self._pos = pos
        return out


# --- client -> server frames ---------------------------------------------------------------------------------

def connect(options: dict) -> bytes:
    """``CONNECT {json}``: the options nats-server reads in client.go ``processConnect``."""
    return b"CONNECT " + json.dumps(options, separators=(",", ":")).encode() + CRLF


def pub(subject: str, payload: bytes, reply: str = "", hdr: bytes = b"") -> bytes:
    """PUB, or HPUB when a header block is given (``hdr`` already includes its ``\\r\\n\\r\\n`` end)."""
    s = enc(subject)
    if hdr:
        hl = len(hdr)
        if reply:
            head = b"HPUB %s %s %d %d\r\n" % (s, enc(reply), hl, hl + len(payload))
        else:
            head = b"HPUB %s %d %d\r\n" % (s, hl, hl + len(payload))
        return b"".join((head, hdr, payload, CRLF))
    if reply:
        head = b"PUB %s %s %d\r\n" % (s, enc(reply), len(payload))
    else:
        head = b"PUB %s %d\r\n" % (s, len(payload))
    return b"".join((head, payload, CRLF))


def sub(subject: str, sid: int, queue: str = "") -> bytes:
    if queue:
        return b"SUB %s %s %d\r\n" % (enc(subject), enc(queue), sid)
    return b"SUB %s %d\r\n" % (enc(subject), sid)


def unsub(sid: int, max_msgs: int = 0) -> bytes:
    if max_msgs:
        return b"UNSUB %d %d\r\n" % (sid, max_msgs)
    return b"UNSUB %d\r\n" % sid
