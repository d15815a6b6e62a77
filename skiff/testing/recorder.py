"""A recorder of the protocol operations each client sent and received, to assert on.

Theory of operation
-------------------
Off by default and free when off: the server holds ``recorder = None`` and the connection checks that one attribute
where it already checks ``-V`` tracing (server/core/client.py ``on_op``, ``_pub``, ``flush``), and an armed recorder
moves each connection off the PUB fast path the way ``-V`` does (``_update_pub_path``).  So the recorder sees
exactly what the trace sees: every operation a client sent, once parsed (CONNECT, PUB/HPUB, SUB, UNSUB, PING,
PONG), and every protocol line written to it (INFO, MSG/HMSG, +OK, -ERR, PING, PONG), in order, when its output is
flushed.  Writes that bypass the connection (the WebSocket close frame, TLS records) are not protocol operations
and are not recorded.

``Recorder(server).start()`` arms it (or ``with Recorder(server):``); ``stop()`` disarms; the recorded ``Op`` list
stays readable.  Query helpers filter by connection (cid, or the CONNECT ``name``), direction and operation.

JetStream acks are PUBs to the ``$JS.ACK.`` subject a delivery carried as its reply (nats-server consumer.go
``processAck``): :meth:`Recorder.acks` decodes them into :class:`Ack` (stream, consumer, stream and consumer
sequence, delivery count, and the kind: ``+ACK`` (an empty payload and the deprecated ``+OK`` too), ``-NAK``,
``+WPI``, ``+TERM``, ``+NXT``), so a test can say "the client acked sequence 5 twice".
"""
from __future__ import annotations

import json
from collections import Counter, deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable

from skiff.protocol.parser import Connect, Ping, Pong, Pub, Sub, Unsub

if TYPE_CHECKING:  # pragma: no cover
    from skiff.server.core.client import ClientConnection
    from skiff.server.core.server import Server

__all__ = ["Ack", "Op", "Recorder", "parse_ack_subject"]

SENT = "sent"  # by the client, to the server
RECEIVED = "received"  # by the client, from the server


@dataclass(frozen=True)
class Op:
    """One protocol operation.  ``data`` is the whole message (header block included) for PUB/HPUB/MSG/HMSG,
    ``text`` the JSON of CONNECT/INFO or the text of -ERR; ``size`` counts ``data``'s bytes as the protocol line
    does (empty ``data`` when the recorder keeps no payloads)."""

    index: int  # order over the whole recording
    cid: int
    name: str  # the client's CONNECT name when the op was recorded
    direction: str  # SENT or RECEIVED
    op: str  # CONNECT PUB HPUB SUB UNSUB PING PONG INFO MSG HMSG +OK -ERR
    subject: str = ""
    reply: str = ""
    sid: str = ""
    queue: str = ""
    hdr_len: int = 0
    size: int = 0
    max_msgs: int = 0  # UNSUB <sid> <max>
    data: bytes = b""
    text: str = ""
    time_ns: int = 0  # the server's clock

    @property
    def payload(self) -> bytes:
        return self.data[self.hdr_len:]

    @property
    def hdr(self) -> bytes:
        return self.data[:self.hdr_len]


ACK_KINDS = ("+ACK", "-NAK", "+WPI", "+TERM", "+NXT")


@dataclass(frozen=True)
class Ack:
    cid: int
    name: str
    kind: str  # one of ACK_KINDS, or "unknown" for a payload nats-server ignores
    stream: str
    consumer: str
    stream_seq: int
    consumer_seq: int
    delivered: int  # the delivery count the ack subject carries
    body: bytes  # what followed the kind (-NAK {"delay":...}, +NXT {"batch":...}, +TERM reason)
    sync: bool  # the ack had a reply subject (AckSync / double ack)
    op: Op


def parse_ack_subject(subject: str) -> tuple[str, str, int, int, int] | None:
    """(stream, consumer, delivered, stream_seq, consumer_seq) of a ``$JS.ACK.`` subject, or None.

    Two forms (nats-server jsAckPre, ADR-15): ``$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<dseq>.<ts>.<pending>``
    and, from 2.9, ``$JS.ACK.<domain>.<account hash>.<stream>.<consumer>.<delivered>.<sseq>.<dseq>.<ts>.<pending>
    .<random>`` (11 tokens or more after ``$JS``)."""
    if not subject.startswith("$JS.ACK."):
        return None
    t = subject.split(".")
    if len(t) == 9:
        base = 2
    elif len(t) >= 11:
        base = 4
    else:
        return None
    try:
        return t[base], t[base + 1], int(t[base + 2]), int(t[base + 3]), int(t[base + 4])
    except ValueError:
        return None


def _ack_kind(payload: bytes) -> tuple[str, bytes]:
    # nats-server consumer.go processAck: the same order of tests.
    if not payload or payload in (b"+ACK", b"+OK"):
        return "+ACK", b""
    for kind, exact in ((b"+NXT", False), (b"-NAK", False), (b"+WPI", True), (b"+TERM", False)):
        if payload == kind or (not exact and payload.startswith(kind)):
            return kind.decode(), payload[len(kind):].strip()
    return "unknown", payload


class Recorder:
    """Records every client's protocol operations while armed.  ``payloads=False`` keeps sizes only; ``limit``
    keeps the last ``limit`` operations."""

    def __init__(self, server: "Server", *, payloads: bool = True, limit: int | None = None) -> None:
        self.server = server
        self.payloads = payloads
        self._ops: deque[Op] = deque(maxlen=limit)
        self._n = 0

    # ------------------------------------------------------------------ arming
    @property
    def armed(self) -> bool:
        return self.server.recorder is self

    def start(self) -> "Recorder":
        srv = self.server
        if srv.recorder is not None and srv.recorder is not self:
            raise RuntimeError("another recorder is armed on this server")
        srv.recorder = self
        self._repath()
        return self

    def stop(self) -> "Recorder":
        if self.server.recorder is self:
            self.server.recorder = None
            self._repath()
        return self

    def _repath(self) -> None:
        for c in list(self.server.clients.values()):
            c._update_pub_path()  # the PUB fast path skips the recorder: leave it while armed

    def __enter__(self) -> "Recorder":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def clear(self) -> None:
        self._ops.clear()

    # ------------------------------------------------------------------ hooks (server/core/client.py)
    def _add(self, conn: "ClientConnection", direction: str, op: str, name: str | None = None, **kw) -> None:
        self._n += 1
        self._ops.append(Op(self._n, conn.cid, conn.name if name is None else name, direction, op,
                            time_ns=self.server.clock.time_ns(), **kw))

    def client_sent(self, conn: "ClientConnection", op) -> None:
        t = type(op)
        if t is Pub:
            data = bytes(op.data)
            self._add(conn, SENT, "HPUB" if op.hdr_len else "PUB", subject=op.subject, reply=op.reply,
                      hdr_len=op.hdr_len, size=len(data), data=data if self.payloads else b"")
        elif t is Sub:
            self._add(conn, SENT, "SUB", subject=op.subject, queue=op.queue or "", sid=op.sid)
        elif t is Unsub:
            self._add(conn, SENT, "UNSUB", sid=op.sid, max_msgs=op.max_msgs or 0)
        elif t is Ping:
            self._add(conn, SENT, "PING")
        elif t is Pong:
            self._add(conn, SENT, "PONG")
        elif t is Connect:
            from skiff.server.core.trace import redact

            text = op.raw.decode("utf-8", "replace")
            try:  # recorded before the connection reads it: take the name it is about to get
                name = json.loads(text).get("name")
            except (ValueError, AttributeError, RecursionError):
                name = None
            self._add(conn, SENT, "CONNECT", name=name if isinstance(name, str) else None, text=redact(text))
        # a protocol error shows as the -ERR it gets

    def client_received(self, conn: "ClientConnection", data: bytes) -> None:
        """One flush of the connection's output: every protocol line in it (as trace.trace_out reads them)."""
        pos, n = 0, len(data)
        while pos < n:
            eol = data.find(b"\r\n", pos)
            if eol < 0:
                return
            line = bytes(data[pos:eol])
            pos = eol + 2
            if line.startswith((b"MSG ", b"HMSG ")):
                parts = line.decode("utf-8", "surrogateescape").split(" ")
                try:
                    size = int(parts[-1])
                    hdr_len = int(parts[-2]) if parts[0] == "HMSG" else 0
                except ValueError:
                    return
                nargs = len(parts) - (3 if parts[0] == "HMSG" else 2)  # subject sid [reply]
                body = bytes(data[pos:pos + size])
                self._add(conn, RECEIVED, parts[0], subject=parts[1], sid=parts[2],
                          reply=parts[3] if nargs == 3 else "", hdr_len=hdr_len, size=size,
                          data=body if self.payloads else b"")
                pos += size + 2
            elif line == b"+OK":
                self._add(conn, RECEIVED, "+OK")
            elif line in (b"PING", b"PONG"):
                self._add(conn, RECEIVED, line.decode())
            elif line.startswith(b"-ERR"):
                self._add(conn, RECEIVED, "-ERR", text=line[4:].decode("utf-8", "replace").strip().strip("'"))
            elif line.startswith(b"INFO "):
                self._add(conn, RECEIVED, "INFO", text=line[5:].decode("utf-8", "replace"))

    # ------------------------------------------------------------------ queries
    def ops(self, cid: int | None = None, *, name: str | None = None, direction: str | None = None,
            op: str | Iterable[str] | None = None, subject: str | None = None) -> list[Op]:
        """Recorded operations in order, filtered by connection (cid or CONNECT name), direction, operation
        name(s) and subject (exact)."""
        kinds = {op} if isinstance(op, str) else set(op) if op is not None else None
        return [o for o in list(self._ops)
                if (cid is None or o.cid == cid) and (name is None or o.name == name)
                and (direction is None or o.direction == direction) and (kinds is None or o.op in kinds)
                and (subject is None or o.subject == subject)]

    def sent(self, cid: int | None = None, *, name: str | None = None, op: str | Iterable[str] | None = None,
             subject: str | None = None) -> list[Op]:
        return self.ops(cid, name=name, direction=SENT, op=op, subject=subject)

    def received(self, cid: int | None = None, *, name: str | None = None, op: str | Iterable[str] | None = None,
                 subject: str | None = None) -> list[Op]:
        return self.ops(cid, name=name, direction=RECEIVED, op=op, subject=subject)

    def acks(self, cid: int | None = None, *, name: str | None = None, stream: str | None = None,
             consumer: str | None = None, kind: str | None = None) -> list[Ack]:
        """The JetStream acks clients sent, decoded, in order."""
        out = []
        for o in self.sent(cid, name=name, op=("PUB", "HPUB")):
            parsed = parse_ack_subject(o.subject)
            if parsed is None:
                continue
            st, con, dc, sseq, dseq = parsed
            if (stream is not None and st != stream) or (consumer is not None and con != consumer):
                continue
            k, body = _ack_kind(o.payload)
            if kind is not None and k != kind:
                continue
            out.append(Ack(o.cid, o.name, k, st, con, sseq, dseq, dc, body, bool(o.reply), o))
        return out

    def ack_counts(self, cid: int | None = None, *, name: str | None = None, stream: str | None = None,
                   consumer: str | None = None, kind: str | None = "+ACK") -> Counter:
        """stream sequence -> how many acks of ``kind`` (every kind with None) were sent for it."""
        return Counter(a.stream_seq for a in self.acks(cid, name=name, stream=stream, consumer=consumer, kind=kind))

    def to_json(self) -> list[dict]:
        """The recording as JSON-ready data (the control interface's ``recorder.read``)."""
        from .inspect import to_json

        return to_json(list(self._ops))
