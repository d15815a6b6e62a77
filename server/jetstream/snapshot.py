"""Streaming a stream snapshot out (``$JS.API.STREAM.SNAPSHOT.<stream>``), as nats-server 2.15 does.

Theory of operation
-------------------
The API handler answers first (``stream_snapshot_response`` with the config and state), then :func:`send` runs
as a task and publishes the backup to the request's ``deliver_subject`` in chunks (jetstream_api.go
streamSnapshot):

- chunk size 128 KiB by default, clamped to [1 KiB, 1 MiB]; window 8 MiB, clamped to [1 KiB, 32 MiB] and at least
  one chunk; ``window // chunk`` chunks may be unacknowledged at once.
- up to 2 s is given for interest on the deliver subject to show up.
- every full chunk carries the reply ``$JS.SNAPSHOT.ACK.<stream>.<id>.<chunk len>.<index>`` (index from 1); any
  message on ``$JS.SNAPSHOT.ACK.<stream>.<id>.>`` frees one slot.  A slot is taken before every read, the last
  short read included, which goes out with no reply.
- the end is an empty message: with the header ``NATS/1.0 204`` once a full chunk was sent, plain otherwise;
  ``408 No Interest`` when the receiver went away, ``408 No Flow Response`` when no slot came back for 5 s,
  ``500 <error>`` when reading the stream failed.

The bytes are the ``NATSARC1`` archive (storage/snaparchive.py) in an S2 stream (storage/s2stream.py), built by
:func:`archive_pieces` from the store a batch at a time between chunks, so a large stream never stalls the event
loop and never sits in memory whole (stream_backup.go streamSnapshotV2: ``state.json``, the consumers, every
message from the first to the last sequence at request time, the end mark).
"""
from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Iterator

from skiff.protocol.jsapi.subjects import SNAPSHOT_ACK_T
from skiff.storage.s2stream import S2Writer
from skiff.storage.snaparchive import MAGIC, encode_end, encode_entry

from ..ids import nuid

if TYPE_CHECKING:  # pragma: no cover
    from .stream import Stream

DEFAULT_CHUNK_SIZE = 128 * 1024
DEFAULT_WINDOW_SIZE = 8 * 1024 * 1024
ACK_TIMEOUT = 5.0  # snapshotAckTimeout
INTEREST_WAIT = 2.0
PIECE_SIZE = 256 * 1024  # archive bytes compressed at a time

HDR_DONE = b"NATS/1.0 204\r\n\r\n"
HDR_NO_INTEREST = b"NATS/1.0 408 No Interest\r\n\r\n"
HDR_NO_FLOW = b"NATS/1.0 408 No Flow Response\r\n\r\n"


def clamp_sizes(chunk_size: int, window_size: int) -> tuple[int, int]:
    """(chunk size, chunks in flight) as jetstream_api.go streamSnapshot computes them."""
    chunk = chunk_size or DEFAULT_CHUNK_SIZE
    wnd = window_size or DEFAULT_WINDOW_SIZE
    chunk = min(max(1024, chunk), 1024 * 1024)
    wnd = min(max(1024, wnd), 32 * 1024 * 1024)
    wnd = max(wnd, chunk)
    return chunk, wnd // chunk


def consumer_state_json(state, last_seq: int) -> dict:
    """ConsumerState as JSON, bounded to the snapshot's last sequence (stream_backup.go writeConsumerMsg)."""
    out: dict = {
        "delivered": {"consumer_seq": state.delivered.consumer_seq,
                      "stream_seq": min(state.delivered.stream_seq, last_seq)},
        "ack_floor": {"consumer_seq": state.ack_floor.consumer_seq,
                      "stream_seq": min(state.ack_floor.stream_seq, last_seq)},
    }
    # Pending has no json tags in nats-server (store.go): its fields go out as "Sequence" / "Timestamp"
    pending = {str(s): {"Sequence": p.sequence, "Timestamp": p.timestamp}
               for s, p in sorted(state.pending.items()) if s <= last_seq}
    if pending:
        out["pending"] = pending
    rdc = {str(s): n for s, n in sorted(state.redelivered.items()) if s <= last_seq}
    if rdc:
        out["redelivered"] = rdc
    return out


def archive_pieces(stream: "Stream", state: dict, include_consumers: bool, now_ns: int) -> Iterator[bytes]:
    """The uncompressed archive, a piece of about ``PIECE_SIZE`` bytes at a time."""
    buf = bytearray(MAGIC)
    consumers = list(stream.consumers.values()) if include_consumers else []
    st = dict(state)
    st["consumer_count"] = len(consumers)
    last_seq = int(state["last_seq"])
    body = json.dumps(st, separators=(",", ":")).encode()
    encode_entry(buf, b"state.json", now_ns, 0, b"", body)
    for c in consumers:
        doc = ('{"config":' + c.config.to_json() + ',"state":'
               + json.dumps(consumer_state_json(c.store.state(), last_seq), separators=(",", ":")) + "}")
        encode_entry(buf, ("consumers/" + c.name).encode(), now_ns, 0, b"", doc.encode())
    store = stream.store
    seq = int(state["first_seq"]) - 1
    while seq < last_seq:
        if len(buf) >= PIECE_SIZE:
            yield bytes(buf)
            buf.clear()
        if stream.closed:
            raise RuntimeError("stream closed")
        sm, _ = store.load_next_msg("", seq + 1)
        if sm is None or sm.seq > last_seq:
            break
        seq = sm.seq
        encode_entry(buf, sm.subject.encode(), sm.ts, sm.seq, sm.hdr, sm.data)
    encode_end(buf)
    yield bytes(buf)


async def send(stream: "Stream", deliver_subject: str, state: dict, include_consumers: bool,
               chunk_size: int, window_size: int) -> str | None:
    """Stream the snapshot to ``deliver_subject``; returns the error text (None when it completed)."""
    srv = stream.server
    chunk, max_inflight = clamp_sizes(chunk_size, window_size)
    loop = asyncio.get_running_loop()
    had_interest = srv.sublist.has_interest(deliver_subject)
    if not had_interest:
        deadline = loop.time() + INTEREST_WAIT
        while loop.time() < deadline:
            await asyncio.sleep(0.01)
            if srv.sublist.has_interest(deliver_subject):
                had_interest = True
                break

    slots = asyncio.Semaphore(max_inflight)

    def on_ack(sub, subject, reply, hdr_len, data, origin) -> None:
        slots.release()

    ack_subj = SNAPSHOT_ACK_T.format(stream=stream.name, id=nuid())
    ack_sub = srv.subscribe_internal(ack_subj + ".>", on_ack)
    pieces = archive_pieces(stream, state, include_consumers, srv.clock.time_ns())
    writer = S2Writer()
    out = bytearray()
    done_reading = False
    hdr = b""
    err: str | None = None
    index = 1
    last_send = loop.time()
    try:
        while True:
            try:
                await asyncio.wait_for(slots.acquire(), max(0.0, last_send + ACK_TIMEOUT - loop.time()))
            except asyncio.TimeoutError:
                err, hdr = "no flow response", HDR_NO_FLOW
                break
            if had_interest and not srv.sublist.has_interest(deliver_subject):
                err, hdr = "no interest", HDR_NO_INTEREST
                break
            try:
                while len(out) < chunk and not done_reading:
                    piece = next(pieces, None)
                    if piece is None:
                        done_reading = True
                    else:
                        out += writer.encode(piece)
            except Exception as e:  # noqa: BLE001 - a store read failed: the receiver gets a 500, not a hang
                err = str(e) or type(e).__name__
                hdr = f"NATS/1.0 500 {err}\r\n\r\n".encode()
                break
            if len(out) < chunk:  # the last, short read goes without a reply
                if out:
                    srv.publish(deliver_subject, bytes(out))
                break
            srv.publish(deliver_subject, bytes(out[:chunk]), f"{ack_subj}.{chunk}.{index}")
            del out[:chunk]
            if not hdr:
                hdr = HDR_DONE
            index += 1
            last_send = loop.time()
            await asyncio.sleep(0)  # let the receiver's acks and everyone else in between chunks
    finally:
        srv.unsubscribe_internal(ack_sub)
        srv.publish(deliver_subject, b"", "", hdr)
    return err
