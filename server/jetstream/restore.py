"""Taking a stream backup in (``$JS.API.STREAM.RESTORE.<stream>``), as nats-server 2.15 does.

Theory of operation
-------------------
After the API handler accepted the request (api_snapshot.py) a :class:`RestoreSession` subscribes to
``$JS.SNAPSHOT.RESTORE.<stream>.<id>`` and the client sends the backup there as requests (jetstream_api.go
processStreamRestore):

- every chunk gets an empty reply.  A failure of the restore itself is not reported on the chunk: the rest of the
  chunks are acknowledged and dropped, and the error comes in the reply to the final message (nats-server acks a
  chunk with an empty message once its restore goroutine has finished, successfully or not).
- an empty message ends the input; its reply is a ``stream_create_response``: the stream info, or 10062
  ``restore failed: <error>``.  The partly restored stream is removed on failure.
- a chunk without a reply subject cancels the restore (nats-server logs it and answers nothing); 5 s without a
  chunk cancels it too ("is stalled").

The chunks are decoded as they arrive, synchronously (S2 frames -> archive entries -> store), so a restore never
holds more than one chunk and one archive entry in memory.  The entries are handled as stream_backup.go
RestoreStreamV2 does: ``state.json`` first (the stream is created then, its first sequence set by compacting to it),
``consumer_count`` consumer entries, messages in sequence order (gaps become deleted sequences, a message whose
``Nats-TTL`` already passed is stored as a gap), the end mark, then trailing deleted sequences up to ``last_seq``.
The consumers are opened after the messages are in, with their stored state.  Errors use nats-server's texts.

The format before 2.15 (a tar of the file store's message blocks, which nats-server 2.15 still reads) is not
implemented: such a backup fails with a restore error that says so, rather than being half understood.
"""
from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

from skiff.protocol.errors import ApiError
from skiff.protocol.jsapi.consumer_config import ConsumerConfig
from skiff.protocol.jsapi.gojson import go_quote
from skiff.protocol.jsapi.subjects import RESTORE_DELIVER_T
from skiff.storage.records import ConsumerState, Pending, SequencePair
from skiff.storage.s2stream import S2Decoder, S2Error
from skiff.storage.snaparchive import ArchiveError, ArchiveReader, Entry

from ..ids import nuid
from . import advisories, jsonout, persist
from .consumer import Consumer
from .publish_checks import message_ttl
from .consumer_writes import meta_doc, open_store
from .stream_consumers import consumer_set

if TYPE_CHECKING:  # pragma: no cover
    from skiff.protocol.jsapi.stream_config import StreamConfig

    from .engine import JetStream
    from .stream import Stream

STALL_TIMEOUT = 5.0
CREATE_RESPONSE = "io.nats.jetstream.api.v1.stream_create_response"
V1_NOT_SUPPORTED = ("snapshot format of nats-server 2.14 and earlier (a tar of message blocks) is not supported "
                    "by Skiff: take the backup from nats-server 2.15 or later")
_MAX_META_ENTRY = 64 << 20  # state.json / consumer entries: far more than any real one


class RestoreError(Exception):
    """A failed restore; ``str()`` is the text after ``restore failed: ``."""


def restoring(js: "JetStream") -> set[str]:
    """Names of the streams being restored right now (they are not in ``js.streams`` until complete)."""
    s = getattr(js, "_restoring", None)
    if s is None:
        s = js._restoring = set()  # type: ignore[attr-defined]
    return s


def _parse_consumer_state(doc: Any) -> ConsumerState:
    d, a = doc.get("delivered") or {}, doc.get("ack_floor") or {}
    st = ConsumerState(SequencePair(int(d.get("consumer_seq", 0)), int(d.get("stream_seq", 0))),
                       SequencePair(int(a.get("consumer_seq", 0)), int(a.get("stream_seq", 0))))
    for k, p in (doc.get("pending") or {}).items():
        # Pending's fields have no json tags in nats-server; Go matches them case-insensitively
        p = {f.lower(): v for f, v in (p or {}).items()}
        st.pending[int(k)] = Pending(int(p.get("sequence") or 0), int(p.get("timestamp") or 0))
    for k, n in (doc.get("redelivered") or {}).items():
        st.redelivered[int(k)] = int(n)
    return st


class RestoreSession:
    def __init__(self, js: "JetStream", cfg: "StreamConfig", origin=None) -> None:
        self.js = js
        self.server = js.server
        self.origin = origin  # the client that asked: named in the restore advisories
        self.start = js.server.clock.time_ns()
        advisories.transfer(js.server, "restore_create", cfg.name, origin)
        self.cfg = cfg
        self.name = cfg.name
        self.subject = RESTORE_DELIVER_T.format(stream=cfg.name, id=nuid())
        self.s2 = S2Decoder()
        self.archive = ArchiveReader(check=self._check_entry)
        self.error: str | None = None
        self.decoded = 0  # uncompressed bytes seen (the archive starts after 8 of them)
        self.stream: "Stream | None" = None
        self.state: dict | None = None
        self.consumers_left = 0
        self.consumers: list[tuple[str, ConsumerConfig, ConsumerState]] = []
        self.lseq = 0
        self.eob = False
        self.total = 0
        self.closed = False
        self.finishing = False  # the end came; the consumers' files are being written (_finish)
        self.stores: dict | None = None  # consumer name -> its store, opened and written by _consumer_files
        self.created = 0  # the restored consumers' creation time (their meta.inf says it)
        self.max_payload = int(getattr(self.server.options, "max_payload", 1024 * 1024) or 1024 * 1024)
        self.sub = self.server.subscribe_internal(self.subject, self._on_chunk)
        self.timer = self.server.clock.call_later(STALL_TIMEOUT, self._stalled)

    # ------------------------------------------------------------------ input
    def _on_chunk(self, sub, subject: str, reply: str, hdr_len: int, data: bytes, origin) -> None:
        if self.closed or self.finishing:
            return
        if not reply:
            self.server.log_warning("JetStream restore requires a reply subject for each chunk, cancelled",
                                    stream=self.name)
            self._close(failed=True)
            return
        msg = data[hdr_len:] if hdr_len else data
        if not msg:
            self._finish(reply)
            return
        self.timer.cancel()
        self.timer = self.server.clock.call_later(STALL_TIMEOUT, self._stalled)
        self.total += len(msg)
        if self.error is None and not self.eob:
            try:
                self._feed(bytes(msg))
            except (S2Error, ArchiveError, RestoreError) as e:
                self.error = str(e)
            except ApiError as e:
                self.error = e.description
            except Exception as e:  # noqa: BLE001 - a bug or a failing disk fails the restore, never the server
                self.server.log_error("JetStream restore failed", stream=self.name, error=repr(e))
                self.error = str(e) or type(e).__name__
        self.server.publish(reply, b"")

    def _stalled(self) -> None:
        if self.closed:
            return
        self.server.log_warning("JetStream restore is stalled, cancelled", stream=self.name)
        self._close(failed=True)

    def _feed(self, data: bytes) -> None:
        for block in self.s2.feed(data):
            if self.decoded < 8 and not self.archive.started:
                head = block[:8 - self.decoded]
                if head != b"NATSARC1"[self.decoded:self.decoded + len(head)]:
                    raise RestoreError(V1_NOT_SUPPORTED)
            self.decoded += len(block)
            for e in self.archive.feed(block):
                self._entry(e)
                if self.eob:
                    return

    # ------------------------------------------------------------------ entries
    def _check_entry(self, e: Entry) -> None:
        """Before an entry's body is read (RestoreStreamV2's size checks)."""
        if self.state is None or self.consumers_left:
            if e.header_size + e.payload_size > _MAX_META_ENTRY:
                raise RestoreError("archive: invalid archive stream")
            return
        seq = e.sequence
        if seq == 0:
            return
        mp = self.max_payload
        if e.header_size > mp or e.payload_size > mp - e.header_size:
            raise RestoreError(f"message sequence {seq} exceeds maximum payload size")
        mms = self.cfg.max_msg_size
        if mms >= 0 and (e.header_size > mms or e.payload_size > mms - e.header_size):
            raise RestoreError(f"message sequence {seq} exceeds maximum message size")

    def _entry(self, e: Entry) -> None:
        if self.state is None:
            if e.name != "state.json":
                raise RestoreError("expected state.json first")
            try:
                st = json.loads(e.data)
                if not isinstance(st, dict):
                    raise ValueError("state.json is not an object")
            except ValueError as x:
                raise RestoreError(f"error in state.json: {x}") from None
            self._create_stream(st)
            return
        if self.consumers_left:
            name = e.name[len("consumers/"):] if e.name.startswith("consumers/") else None
            if name is None:
                raise RestoreError(f"expected consumer, found {go_quote(e.name)}")
            try:
                doc = json.loads(e.data)
            except ValueError as x:
                raise RestoreError(f"failed to decode consumer {go_quote(name)} state: {x}") from None
            if not isinstance(doc, dict) or doc.get("config") is None:
                raise RestoreError(f"consumer {go_quote(name)} is missing config")
            if doc.get("state") is None:
                raise RestoreError(f"consumer {go_quote(name)} is missing state")
            try:
                cfg = ConsumerConfig.from_json(json.dumps(doc["config"]), strict=False)
                cst = _parse_consumer_state(doc["state"])
            except Exception as x:  # noqa: BLE001
                raise RestoreError(f"failed to decode consumer {go_quote(name)} state: {x}") from None
            self.consumers.append((name, cfg, cst))
            self.consumers_left -= 1
            return
        self._message(e)

    def _create_stream(self, st: dict) -> None:
        js, cfg = self.js, self.cfg
        # Two restores of one name may both be accepted; the second to reach its state.json finds the name taken.
        if cfg.name in js.streams or cfg.name in restoring(js):
            raise ApiError.of("JSStreamNameExistRestoreFailedErr")
        nbytes = int(st.get("bytes") or 0)
        if nbytes > 0:  # the whole footprint is reserved before anything is stored (RestoreStreamV2)
            err = js.check_stream_limits(cfg.model_copy(update={"max_bytes": max(cfg.max_bytes, nbytes)}))
            if err is not None:
                raise err
        stream = self._open(cfg)
        self.stream = stream
        restoring(js).add(cfg.name)
        first = int(st.get("first_seq") or 0)
        if first > 1:
            stream.store.compact(first)
        self.lseq = max(first, 1) - 1
        self.state = st
        self.consumers_left = max(int(st.get("consumer_count") or 0), 0)

    def _open(self, cfg: "StreamConfig") -> "Stream":
        js = self.js
        created = self.server.clock.time_ns()
        if cfg.storage != "memory":
            js._prepare_stream_dir(cfg.name)
            persist.write_stream_meta(js.root, cfg, created)
        try:
            return js._open(cfg, created)
        except Exception:
            if cfg.storage != "memory":
                js.root.delete_stream(cfg.name)
            raise

    def _message(self, e: Entry) -> None:
        seq = e.sequence
        if seq == 0:
            if e.timestamp == 0 and e.header_size == 0 and e.payload_size == 0:
                self.eob = True
                return
            raise RestoreError("expected message sequence")
        if len(e.data) < e.header_size:
            raise RestoreError(f"failed to parse message sequence {seq}: invalid header length")
        if seq <= self.lseq:
            raise RestoreError(f"message sequence {seq} out of order")
        store = self.stream.store
        gap = seq - self.lseq - 1
        if gap > 0:
            store.skip_msgs(self.lseq + 1, gap)
        self.lseq = seq
        hdr = e.data[:e.header_size]
        body = e.data[e.header_size:]
        ttl = message_ttl(hdr) if hdr else 0
        if isinstance(ttl, ApiError):
            raise RestoreError("failed to parse message TTL: invalid per-message TTL")
        if ttl > 0 and self.server.clock.time_ns() > e.timestamp + ttl * 1_000_000_000:
            store.skip_msgs(seq, 1)  # expired already: keep the sequence, not the message
            return
        err = self.js.check_resources(self.stream, len(e.data) + len(e.name), e.header_size)
        if err is not None:
            raise err
        store.store_raw(seq, e.name, hdr, body, e.timestamp, ttl)

    # ------------------------------------------------------------------ the end
    def _input_error(self) -> str:
        """Why the input ended too early, in the words nats-server uses for the same place."""
        if not self.s2.at_chunk_boundary:
            return "s2: corrupt input"
        if not self.archive.started:
            return "EOF" if self.decoded == 0 else "unexpected EOF"
        pending = self.archive._pending
        if pending is None:
            return "archive: invalid archive stream" if not self.archive.at_entry_boundary else "EOF"
        if self.state is None:
            return "expected state.json contents"
        if self.consumers_left:
            name = pending.name[len("consumers/"):]
            return f"failed to read consumer {go_quote(name)} state: archive: invalid archive stream"
        return f"failed to read message sequence {pending.sequence}: archive: invalid archive stream"

    def _finish(self, reply: str) -> None:
        err = self.error
        if err is None and not self.eob:
            err = self._input_error()
        if err is None and self.stream is not None and self.stream.path is not None and self.consumers:
            # The consumers' stores are opened and their meta.inf and state written in a worker thread before
            # the reply (issue #13: metadata writes off the loop); later chunks are dropped meanwhile.
            self.finishing = True
            self.timer.cancel()
            now = self.server.clock.time_ns()
            todo = [(name, cfg, cst, meta_doc(cfg, now)) for name, cfg, cst in self.consumers]
            fut = asyncio.get_running_loop().run_in_executor(None, _consumer_files, self.stream, todo)
            fut.add_done_callback(lambda f: self._files_written(reply, now, f))
            return
        self._conclude(reply, err)

    def _files_written(self, reply: str, now: int, fut) -> None:
        if self.closed:  # cancelled meanwhile (the server stops)
            return
        err = None
        try:
            self.stores = fut.result()
        except Exception as e:  # noqa: BLE001 - a failing disk or a bad consumer state fails the restore
            self.server.log_error("JetStream restore failed", stream=self.name, error=repr(e))
            err = str(e) or type(e).__name__
        self.created = now
        self._conclude(reply, err)

    def _conclude(self, reply: str, err: str | None) -> None:
        if err is None:
            try:
                self._complete()
            except ApiError as e:
                err = e.description
            except Exception as e:  # noqa: BLE001
                self.server.log_error("JetStream restore failed", stream=self.name, error=repr(e))
                err = str(e) or type(e).__name__
        # Whether it worked or not, before the reply (processStreamRestore finish); a stalled restore sends none.
        advisories.transfer(self.server, "restore_complete", self.name, self.origin, start=self.start,
                            end=self.server.clock.time_ns(), bytes=self.total)
        if err is not None:
            self._close(failed=True)
            self.server.log_warning("JetStream restore failed", stream=self.name, error=err, bytes=self.total)
            out: dict = {"type": CREATE_RESPONSE,
                         "error": ApiError.of("JSStreamRestoreErrF", err=err).to_dict()}
        else:
            self._close(failed=False)
            from .api_streams import stream_info  # api_streams imports the API package that imports this module

            out = {"type": CREATE_RESPONSE}
            out.update(stream_info(self.js, self.stream, domain=False))
            self.server.log.info("Completed restore", stream=self.name, bytes=self.total)
        self.server.publish(reply, jsonout.dumpb(out))

    def _complete(self) -> None:
        js, stream, st = self.js, self.stream, self.state or {}
        store = stream.store
        last = int(st.get("last_seq") or 0)
        if self.lseq < last:  # trailing deleted sequences must not be handed out again
            store.skip_msgs(self.lseq + 1, last - self.lseq)
        if stream.config.name in js.streams:
            raise ApiError.of("JSStreamNameExistRestoreFailedErr")
        store.flush()
        js.streams[stream.name] = stream
        try:
            stream.rebuild_dedupe()
        except Exception as e:  # noqa: BLE001 - dedupe is best effort, as at recovery
            self.server.log_warning("JetStream dedupe rebuild failed", stream=stream.name, error=str(e))
        stream.start()
        cs = consumer_set(stream)
        now = self.created or self.server.clock.time_ns()
        stores = self.stores or {}
        for name, cfg, cst in self.consumers:
            cstore = stores.get(name)
            if cstore is None:  # a memory stream's: nothing on disk
                cstore = open_store(stream, name, cfg)
                cstore.set_state(cst, force=True)
            c = Consumer(cs, cfg, name, now, cstore)
            cs.add(c)
            c.start(has_state=cst.delivered.consumer_seq != 0 or cst.delivered.stream_seq != 0)
            c.kick()
        advisories.stream_action(self.server, stream.name, advisories.ACTION_CREATE)

    def _close(self, failed: bool) -> None:
        if self.closed:
            return
        self.closed = True
        self.timer.cancel()
        self.server.unsubscribe_internal(self.sub)
        stream = self.stream
        if stream is not None:
            restoring(self.js).discard(self.name)
        if failed and stream is not None:
            if self.js.streams.get(stream.name) is stream:
                self.js.delete_stream(stream)
            else:
                aside = persist.move_stream_aside(self.js.root, stream.name) if stream.path is not None else None
                stream.stop(delete=True)
                if aside is not None:
                    persist.remove_in_background(aside)


def _consumer_files(stream: "Stream", todo: list) -> dict:
    """Worker thread: open the store of each restored consumer of a file stream, set its state, write its
    ``meta.inf`` (unless ``mem_storage``) and its state file; the stores by name.  The stream is not registered
    yet: nothing else touches these stores.  Both files are written before the restore answers, so a restored
    consumer survives a kill -9 right after the reply (as the meta.inf and state written on the loop did)."""
    out = {}
    for name, cfg, cst, doc in todo:
        store = open_store(stream, name, cfg)
        store.set_state(cst, force=True)
        if not cfg.mem_storage:
            store.create_meta(doc)
            store.flush()
        out[name] = store
    return out
