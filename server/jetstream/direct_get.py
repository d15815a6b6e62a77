"""Direct Get (ADR-31): raw stored messages answered by the stream itself, not through the JSON API.

Theory of operation
-------------------
A stream with ``allow_direct`` queue-subscribes (group ``_sys_``, as nats-server does so that mirrors may join) to
``$JS.API.DIRECT.GET.<stream>`` (JSON body) and ``$JS.API.DIRECT.GET.<stream>.>`` (the subject after the stream
name is the key for "last message on subject", body empty or ``{}``-like).  Without ``allow_direct`` nobody
subscribes, so a requester gets no-responders.

A hit is the stored message, published to the reply inbox with no reply subject, its original headers plus
``Nats-Stream``, ``Nats-Subject``, ``Nats-Sequence``, ``Nats-Time-Stamp`` (RFC3339Nano, UTC); ``no_hdr`` sends the
payload with no headers at all.  Batches (``batch``, ``multi_last``) add ``Nats-Num-Pending`` and
``Nats-Last-Sequence`` (the previous sequence sent, 0 first) and end with ``NATS/1.0 204 EOB`` carrying the same two
headers (+ ``Nats-UpTo-Sequence`` for multi_last).  Failures are status-only messages: ``404 Message Not Found``,
``404 No Results``, ``408 Empty Request`` / ``Malformed Request`` / ``Bad Request``, ``413 Too Many Results``,
``412 Required Api Level``.  All of this follows nats-server stream.go processDirectGet* / getDirectRequest.

Headers are added with nats-server's ``genHeader`` (append ``Key: value`` before the final CRLF, existing keys kept).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from skiff.protocol.jsapi.gojson import GoDecodeError
from skiff.protocol.jsapi.requests import JSApiMsgGetRequest
from skiff.protocol.jsapi.subjects import API
from skiff.protocol.jsapi.timefmt import format_time
from skiff.storage.errors import TooManyResultsError

from .api import api_level_too_high, handlers_of, serves

if TYPE_CHECKING:  # pragma: no cover
    from .stream import Stream

QUEUE = "_sys_"
MAX_MULTI = 1024  # maxAllowedResponses in getDirectMulti
DEFAULT_MAX_BYTES = 64 * 1024 * 1024  # the server's max_pending when the request sets no max_bytes

ST_EMPTY = b"NATS/1.0 408 Empty Request\r\n\r\n"
ST_MALFORMED = b"NATS/1.0 408 Malformed Request\r\n\r\n"
ST_BAD = b"NATS/1.0 408 Bad Request\r\n\r\n"
ST_NOT_FOUND = b"NATS/1.0 404 Message Not Found\r\n\r\n"
ST_NO_RESULTS = b"NATS/1.0 404 No Results\r\n\r\n"
ST_TOO_MANY = b"NATS/1.0 413 Too Many Results\r\n\r\n"
ST_API_LEVEL = b"NATS/1.0 412 Required Api Level\r\n\r\n"


def subscribe_direct(stream: "Stream", name: str = "") -> list:
    """Answer direct gets for ``name`` (default: the stream's own; a mirror with ``mirror_direct`` also answers
    for its origin, in the same queue group: nats-server subscribeToMirrorDirect)."""
    srv = stream.server
    g = DirectGet(stream)
    name = name or stream.name
    # The API table's DIRECT.GET rows with the stream's name filled in, each to its @serves handler.
    return [srv.subscribe_internal(API[row].fill(name), handler, queue=QUEUE) for row, handler, _ in handlers_of(g)]


def gen_header(hdr: bytes, key: str, value: str) -> bytes:
    """nats-server genHeader: append a header line to an existing block (no replacement)."""
    line = f"{key}: {value}\r\n".encode("utf-8", "surrogateescape")
    if not hdr:
        return b"NATS/1.0\r\n" + line + b"\r\n"
    return hdr[:-2] + line + b"\r\n"


def _parse(body: bytes) -> JSApiMsgGetRequest | None:
    """json.Unmarshal (lenient: unknown fields ignored); None when malformed."""
    try:
        return JSApiMsgGetRequest.from_json(body, strict=False, unmarshal=True)
    except (GoDecodeError, ValueError):
        return None


class DirectGet:
    def __init__(self, stream: "Stream") -> None:
        self.stream = stream
        # The first header line every answer adds (genHeader order: stream, subject, sequence, time stamp).
        self._stream_line = f"Nats-Stream: {stream.name}\r\n".encode("utf-8", "surrogateescape")

    def _send(self, reply: str, hdr: bytes, data: bytes = b"") -> None:
        self.stream.server.publish(reply, data, hdr=hdr)

    def _stored_hdr(self, sm) -> bytes:
        """The four gen_header calls of a single get in one go: the stored headers (or a bare ``NATS/1.0``) plus
        Nats-Stream, Nats-Subject, Nats-Sequence and Nats-Time-Stamp; the bytes gen_header would build."""
        base = sm.hdr[:-2] if sm.hdr else b"NATS/1.0\r\n"
        return (base + self._stream_line
                + f"Nats-Subject: {sm.subject}\r\nNats-Sequence: {sm.seq}\r\nNats-Time-Stamp: "
                  f"{format_time(sm.ts)}\r\n\r\n".encode("utf-8", "surrogateescape"))

    # ------------------------------------------------------------------ the two subscriptions
    @serves("DIRECT.GET")
    def on_request(self, sub, subject: str, reply: str, hdr_len: int, data: bytes, origin) -> None:
        if not reply:
            return
        hdr, body = bytes(data[:hdr_len]), bytes(data[hdr_len:])
        if hdr and api_level_too_high(hdr):
            return self._send(reply, ST_API_LEVEL)
        if not body:
            return self._send(reply, ST_EMPTY)
        req = _parse(body)
        if req is None:
            return self._send(reply, ST_MALFORMED)
        if req.seq == 0 and not req.last_by_subj and not req.next_by_subj and not req.multi_last and req.start_time is None:
            return self._send(reply, ST_EMPTY)
        if ((req.seq > 0 and req.last_by_subj) or (req.seq > 0 and req.start_time is not None)
                or (req.start_time is not None and req.last_by_subj) or (req.last_by_subj and req.next_by_subj)
                or (req.last_by_subj and req.batch > 0) or (req.last_by_subj and req.multi_last)
                or (req.next_by_subj and req.multi_last) or (req.up_to_seq > 0 and req.up_to_time is not None)):
            return self._send(reply, ST_BAD)
        self.get(req, reply)

    @serves("DIRECT.GET.LAST")
    def on_last_by_subject(self, sub, subject: str, reply: str, hdr_len: int, data: bytes, origin) -> None:
        if not reply:
            return
        if hdr_len and api_level_too_high(bytes(data[:hdr_len])):
            return self._send(reply, ST_API_LEVEL)
        parts = subject.split(".", 5)
        key = parts[5] if len(parts) > 5 else ""
        if len(data) == hdr_len:
            # No body: what KV get sends (the key in the subject).  Straight to the store, no request object.
            if not key:
                return self._send(reply, ST_BAD)
            sm = self.stream.store.load_last_msg(key)
            if sm is None:
                return self._send(reply, ST_NOT_FOUND)
            hdr = self._stored_hdr(sm)
            srv = self.stream.server
            srv.route(None, reply, "", len(hdr), hdr + sm.data)
            return
        parsed = _parse(bytes(data[hdr_len:]))
        if parsed is None:
            return self._send(reply, ST_MALFORMED)
        req = parsed
        if not key:
            return self._send(reply, ST_BAD)
        if (req.last_by_subj or req.next_by_subj or req.multi_last or req.seq or req.batch
                or req.start_time is not None or req.up_to_seq or req.up_to_time is not None):
            return self._send(reply, ST_BAD)
        req = req.model_copy(update={"last_by_subj": key})
        self.get(req, reply)

    # ------------------------------------------------------------------ getDirectRequest
    def get(self, req: JSApiMsgGetRequest, reply: str) -> None:
        if req.multi_last:
            return self.get_multi(req, reply)
        store = self.stream.store
        seq = store.get_seq_from_time(req.start_time.unix_ns) if req.start_time is not None else req.seq
        batch = req.batch
        # Any non-zero batch is a batch request (Go: batch != 0); a negative one runs no loop turn below and
        # sends only the EOB.
        is_batch = batch != 0
        np = 0
        if is_batch:
            np = store.num_pending(seq, req.next_by_subj or "")
        else:
            batch = 1
        mb = req.max_bytes or DEFAULT_MAX_BYTES
        sent_bytes = 0
        lseq = 0
        for i in range(batch):
            if seq > 0 and not req.next_by_subj:
                if i == 0 and not is_batch:
                    sm = store.load_msg(seq)
                else:
                    sm, _ = store.load_next_msg("", seq)
                    if sm is not None:
                        seq = sm.seq
                seq += 1
            elif req.next_by_subj:
                sm, _ = store.load_next_msg(req.next_by_subj, seq)
                if sm is not None:
                    seq = sm.seq
                seq += 1
            else:
                sm = store.load_last_msg(req.last_by_subj)
            if sm is None:
                if batch > 1 and i > 0:
                    break
                return self._send(reply, ST_NOT_FOUND)
            hdr = b""
            if not req.no_hdr:
                hdr = self._stored_hdr(sm)
                if is_batch:
                    if np > 0:
                        np -= 1
                    hdr = gen_header(hdr, "Nats-Num-Pending", str(np))
                    hdr = gen_header(hdr, "Nats-Last-Sequence", str(lseq))
            lseq = sm.seq
            self._send(reply, hdr, sm.data)
            sent_bytes += len(sm.subject) + len(sm.hdr) + len(sm.data)
            if sent_bytes >= mb:
                break
        if is_batch:
            # nats-server recounts when the stream moved on; the store is consistent here, so count now.
            np = store.num_pending(seq, req.next_by_subj or "") if seq <= store.last_seq else 0
            self._send(reply, b"NATS/1.0 204 EOB\r\nNats-Num-Pending: %d\r\nNats-Last-Sequence: %d\r\n\r\n" % (np, lseq))

    def get_multi(self, req: JSApiMsgGetRequest, reply: str) -> None:
        store = self.stream.store
        mb = req.max_bytes or DEFAULT_MAX_BYTES
        up_to = req.up_to_seq
        if req.up_to_time is not None:
            up_to = store.get_seq_from_time(req.up_to_time.unix_ns)
            if up_to <= store.first_seq:
                return self._send(reply, ST_NO_RESULTS)
            up_to -= 1
        elif (up_to and self.stream.config.storage == "file"
                and not (store.first_seq <= up_to <= store.last_seq)):
            # filestore.go multiLastSeqsLocked: selectMsgBlockWithIndex finds no block for a sequence outside
            # the stream, so nothing is selected (the memory store has no such check and caps nothing).
            return self._send(reply, ST_NO_RESULTS)
        if up_to == 0:
            up_to = store.last_seq
        try:
            seqs = store.multi_last_seqs(req.multi_last, up_to, MAX_MULTI)
        except TooManyResultsError:
            return self._send(reply, ST_TOO_MANY)
        if not seqs:
            return self._send(reply, ST_NO_RESULTS)
        np = len(seqs)
        lseq = 0
        sent = sent_bytes = 0
        for seq in seqs:
            if np > 0:
                np -= 1
            if seq < req.seq:
                continue
            sm = store.load_msg(seq)
            if sm is None:
                return self._send(reply, ST_NOT_FOUND)
            hdr = gen_header(self._stored_hdr(sm), "Nats-Num-Pending", str(np))
            hdr = gen_header(hdr, "Nats-Last-Sequence", str(lseq))
            lseq = sm.seq
            self._send(reply, hdr, sm.data)
            sent_bytes += len(sm.subject) + len(sm.hdr) + len(sm.data)
            if sent_bytes >= mb:
                break
            sent += 1
            if req.batch > 0 and sent >= req.batch:
                break
        self._send(reply, b"NATS/1.0 204 EOB\r\nNats-Num-Pending: %d\r\nNats-Last-Sequence: %d\r\n"
                          b"Nats-UpTo-Sequence: %d\r\n\r\n" % (np, lseq, up_to))

