"""``-V`` protocol trace lines, in nats-server's format (server/client.go traceInOp, traceOutOp, traceMsg).

::

    127.0.0.1:41358 - cid:5 - "v2.9.0:python3:app" - "$G/user:x" - <<- [PUB foo r 2]
    127.0.0.1:41358 - cid:5 - "v2.9.0:python3:app" - "$G/user:x" - <<- MSG_PAYLOAD: ["hi"]
    127.0.0.1:41358 - cid:5 - "v2.9.0:python3:app" - "$G/user:x" - ->> [MSG foo 1 r 2]
    127.0.0.1:41358 - cid:5 - "v2.9.0:python3:app" - "$G/user:x" - ->> [OK]

``<<-`` is what the client sent, ``->>`` what the server sent it (MSG/HMSG with their payloads, +OK, PING, PONG,
-ERR; INFO is not traced, as in nats-server).  Outbound lines are traced when the connection's output is flushed, so
within one read they follow the inbound lines of that read rather than interleave with them.  Payloads are quoted
as Go's ``%q`` does and cut at ``max_traced_msg_len``; with ``trace_headers`` only the header block is traced
(without its closing blank line), and a message without headers not at all (client.go traceMsgInternal).  Nothing
here runs unless ``-V`` is on.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING

from skiff.protocol.parser import Connect, Ping, Pong, Pub, Sub, Unsub

from .. import log as logmod

if TYPE_CHECKING:  # pragma: no cover
    from .client import ClientConnection

_ESC = {7: "\\a", 8: "\\b", 12: "\\f", 10: "\\n", 13: "\\r", 9: "\\t", 11: "\\v", 0x22: '\\"', 0x5C: "\\\\"}


def go_quote(data: bytes) -> str:
    """The inside of Go's ``%q`` for a byte slice (strconv.Quote): printable UTF-8 kept, the rest escaped."""
    out: list[str] = []
    text = data.decode("utf-8", "surrogateescape")
    for ch in text:
        o = ord(ch)
        if o in _ESC:
            out.append(_ESC[o])
        elif 0xDC80 <= o <= 0xDCFF:  # an invalid UTF-8 byte
            out.append("\\x%02x" % (o - 0xDC00))
        elif o < 0x20 or o == 0x7F:
            out.append("\\x%02x" % o)
        elif o < 0x7F or ch.isprintable():
            out.append(ch)
        elif o <= 0xFFFF:
            out.append("\\u%04x" % o)
        else:
            out.append("\\U%08x" % o)
    return "".join(out)


def auth_user_label(opts: dict) -> str:
    """nats-server getAuthUserLabel: what the CONNECT authenticated with (not the matched user), "" for none."""
    if opts.get("nkey"):
        return f"nkey:{opts['nkey']}"
    if opts.get("user"):
        return f"user:{opts['user']}"
    if opts.get("auth_token"):
        return "token"
    return ""


def prefix(conn: "ClientConnection") -> str:
    """nats-server's per-connection log prefix: address and cid, then once connected the client's
    ``"v<version>:<lang>:<name>"`` and, when the CONNECT carried credentials (even on a server without auth),
    ``"<account>/<user label>"`` (client.go processConnect).  Fixed at the first CONNECT, as nats-server sets it only
    then (a later CONNECT's trace line already carries it)."""
    p = getattr(conn, "_trace_prefix", None)
    if p is not None:
        return p
    p = f"{conn.host}:{conn.port} - cid:{conn.cid}"
    if not conn.connected:
        return p
    ncs = ":".join(x for x in (f"v{conn.version}" if conn.version else "", conn.lang, conn.name) if x)
    user = auth_user_label(conn.connect_opts)
    acs = f"{conn.account.name}/{user}" if user else ""
    for part in (ncs, acs):
        if part:
            p += f' - "{go_quote(part.encode("utf-8", "surrogateescape"))}"'
    conn._trace_prefix = p
    return p


def _payload(conn: "ClientConnection", arrow: str, data: bytes, hdr_len: int) -> None:
    if conn.server.options.trace_headers:
        data = data[:hdr_len - 4] if hdr_len else b""  # the header block minus its final CRLF CRLF
    if not data:
        return  # nats-server: no line for an empty payload
    limit = logmod.MAX_TRACED_MSG_LEN
    if limit and len(data) > limit:
        logmod.trace(f'{prefix(conn)} - {arrow} MSG_PAYLOAD: ["{go_quote(data[:limit])}..."]')
    else:
        logmod.trace(f'{prefix(conn)} - {arrow} MSG_PAYLOAD: ["{go_quote(data)}"]')


def trace_in(conn: "ClientConnection", op) -> None:
    """One operation the client sent."""
    t = type(op)
    if t is Pub:
        r = f" {op.reply}" if op.reply else ""
        if op.hdr_len:
            line = f"HPUB {op.subject}{r} {op.hdr_len} {len(op.data)}"
        else:
            line = f"PUB {op.subject}{r} {len(op.data)}"
        logmod.trace(f"{prefix(conn)} - <<- [{line}]")
        _payload(conn, "<<-", op.data, op.hdr_len)
        return
    if t is Connect:
        line = "CONNECT " + redact(op.raw.decode("utf-8", "replace"))
    elif t is Sub:
        line = f"SUB {op.subject} {op.queue + ' ' if op.queue else ''}{op.sid}"
    elif t is Unsub:
        line = f"UNSUB {op.sid}" + (f" {op.max_msgs}" if op.max_msgs else "")
    elif t is Ping:
        line = "PING"
    elif t is Pong:
        line = "PONG"
    else:
        return  # protocol errors are traced as the -ERR the server sends back
    logmod.trace(f"{prefix(conn)} - <<- [{line}]")


def trace_out(conn: "ClientConnection", data: bytes) -> None:
    """Every protocol line in ``data`` (one flush of the connection's output)."""
    pos, n = 0, len(data)
    while pos < n:
        eol = data.find(b"\r\n", pos)
        if eol < 0:
            return
        line = data[pos:eol]
        pos = eol + 2
        if line.startswith((b"MSG ", b"HMSG ")):
            args = line.split(b" ")
            try:
                size = int(args[-1])
                hdr_len = int(args[-2]) if line[0] == 72 else 0  # HMSG <subject> <sid> [reply] <hdr> <total>
            except (IndexError, ValueError):
                return
            logmod.trace(f"{prefix(conn)} - ->> [{line.decode('utf-8', 'replace')}]")
            _payload(conn, "->>", data[pos:pos + size], hdr_len)
            pos += size + 2
        elif line == b"+OK":
            logmod.trace(f"{prefix(conn)} - ->> [OK]")
        elif line in (b"PING", b"PONG"):
            logmod.trace(f"{prefix(conn)} - ->> [{line.decode()}]")
        elif line.startswith(b"-ERR "):
            text = line[5:].decode("utf-8", "replace").strip("'")
            logmod.trace(f"{prefix(conn)} - ->> [-ERR {text}]")
        # INFO is not traced (nats-server neither)


# nats-server client.go prefixAuthPat / exactAuthPat: the value of pass*, auth_token*, sig, proxy_sig and nkey.
# Compiled by re (and kept in its cache) with the first CONNECT traced, not at import: ~2 M instructions a start.
_PREFIX_AUTH = r'"?\s*(?:auth_token\S*?|pass\S*?)"?\s*[:=]\s*"?([^",\r\n}]*)'
_EXACT_AUTH = r'(?:^|[^A-Za-z0-9_])"?\s*(?:proxy_sig|nkey|sig)"?\s*[:=]\s*"?([^",\r\n}]*)'


def _redact_with(pat: str, text: str) -> str:
    for m in reversed(list(re.finditer(pat, text))):
        text = text[:m.start(1)] + "[REDACTED]" + text[m.end(1):]
    return text


def redact(connect_json: str) -> str:
    """CONNECT with its secrets replaced, byte for byte as nats-server's removeSecretsFromTrace does."""
    return _redact_with(_EXACT_AUTH, _redact_with(_PREFIX_AUTH, connect_json))
