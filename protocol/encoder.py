"""Server -> client frames (nats-server client.go msgHeader / sendProto), built from pre-encoded pieces.

Subjects travel as ``str`` inside Skiff and are encoded with ``surrogateescape`` so that any byte a client sent
comes back unchanged (the parser decodes the same way).
"""
from __future__ import annotations

import json

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
    """One MSG (hdr_len == 0) or HMSG frame. ``sid`` and ``subject`` are already encoded."""
    if hdr_len:
        if reply:
            head = b"HMSG %s %s %s %d %d\r\n" % (subject, sid, reply, hdr_len, len(data))
        else:
            head = b"HMSG %s %s %d %d\r\n" % (subject, sid, hdr_len, len(data))
    elif reply:
        head = b"MSG %s %s %s %d\r\n" % (subject, sid, reply, len(data))
    else:
        head = b"MSG %s %s %d\r\n" % (subject, sid, len(data))
    return head + data + CRLF
