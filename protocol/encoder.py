"""Server -> client frames (nats-server client.go msgHeader / sendProto), built from pre-encoded pieces.

Subjects travel as ``str`` inside Skiff and are encoded with ``surrogateescape`` so that any byte a client sent
comes back unchanged (the parser decodes the same way).
"""
from __future__ import annotations

import json

from skiff.protocol.accel import speedups

PING = b"PING\r\n"
PONG = b"PONG\r\n"
OK = b"+OK\r\n"
CRLF = b"\r\n"


def enc(s: str) -> bytes:
    return s.encode("utf-8", "surrogateescape")


def info(fields: dict) -> bytes:
    """``INFO {json}``; compact separators like Go's encoding/json."""
    return b"INFO " + json.dumps(fields, separators=(",", ":")).encode() + b" \r\n"


def err(text: str) -> bytes:
    """``-ERR '<text>'``: nats-server always single-quotes the text."""
    return b"-ERR '" + enc(text) + b"'\r\n"


def msg(subject: bytes, sid: bytes, reply: bytes, hdr_len: int, data: bytes) -> bytes:
    """One MSG (hdr_len == 0) or HMSG frame, whole. ``sid`` and ``subject`` are already encoded."""
    head, tail = msg_parts(subject.decode("utf-8", "surrogateescape"), reply.decode("utf-8", "surrogateescape"),
                           hdr_len, len(data))
    return head + sid + tail + data + CRLF


_MSG_HEADS: dict[str, bytes] = {}
_HMSG_HEADS: dict[str, bytes] = {}
_TAILS: dict[int, bytes] = {}  # " <size>\r\n" by size, " <hdr> <size>\r\n" by hdr << 32 | size: senders repeat sizes


def msg_parts(subject: str, reply: str, hdr_len: int, size: int) -> tuple[bytes, bytes]:
    """(head, tail) of a MSG/HMSG frame: ``MSG <subject> `` and `` [reply] [hdr_len] <size>\\r\\n``.

    Heads are kept per subject (at most 8,192 of each kind): a stream of messages on one subject, the common
    case, then costs one dict lookup instead of an encode and two concatenations (12% of a core pub/sub profile).
    The server writes every MSG/HMSG as ``head, sid, tail, data, CRLF`` (server/core/server.py route)."""
    heads = _HMSG_HEADS if hdr_len else _MSG_HEADS
    head = heads.get(subject)
    if head is None:
        if len(heads) >= 8192:
            heads.clear()
        head = heads[subject] = (b"HMSG " if hdr_len else b"MSG ") + subject.encode("utf-8", "surrogateescape") + b" "
    if reply:
        r = reply.encode("utf-8", "surrogateescape")
        return head, (b" %s %d %d\r\n" % (r, hdr_len, size)) if hdr_len else (b" %s %d\r\n" % (r, size))
    if hdr_len:
        key = hdr_len << 32 | size  # HMSG tails by (header size, size): JetStream publishers repeat both
        tail = _TAILS.get(key)
        if tail is None:
            if len(_TAILS) >= 4096:
                _TAILS.clear()
            tail = _TAILS[key] = b" %d %d\r\n" % (hdr_len, size)
        return head, tail
    tail = _TAILS.get(size)
    if tail is None:
        if len(_TAILS) >= 4096:
            _TAILS.clear()
        tail = _TAILS[size] = b" %d\r\n" % size
    return head, tail


# The compiled msg_parts (protocol/_speedups.c) when it was built and not turned off (SKIFF_PURE_PYTHON=1): the same
# bytes without the interpreter's call and formatting (tests/protocol/test_speedups.py compares the two).
pure_msg_parts = msg_parts
if speedups is not None:
    msg_parts = speedups.msg_parts  # noqa: F811
