"""The JetStream engine: the stream registry, recovery at start, flush/PubAcks, limits, and the stats docs.

Theory of operation
-------------------
``start()`` makes ``<store_dir>/jetstream``, reopens every stream found under ``$G/streams/`` (:meth:`recover`),
then subscribes the API router on ``$JS.API.>``.  A stream whose metadata or store cannot be read is logged loudly
and skipped: it never stops the server.  Its directory is left as it is: when the application declares the stream
again (KV and most applications do at start-up), :meth:`add_stream` opens the new stream on the old blocks, as
nats-server does (its ``newFileStore`` recovers whatever blocks the directory holds), so a damaged ``meta.inf`` costs
the metadata, never the messages.  A directory of unknown origin found at create time is set aside, never deleted.

The server calls ``flush()`` once per event-loop turn (before it writes client output) when ``has_pending`` is set,
so appends from one read are handed to the OS together and their PubAcks go out only after that (DESIGN.md); the
mechanics live in :mod:`.durability`.

Streams are created and deleted only here (``add_stream`` / ``delete_stream`` / ``update_stream``), which also
persist the metadata and send the stream advisories.  Consumers hang off ``Stream.consumers`` (see stream.py); the
engine counts them for ``$JS.API.INFO``, ``/jsz`` and ``/varz``.
"""
from __future__ import annotations

import asyncio
import os
import time
from typing import TYPE_CHECKING

from skiff.protocol.errors import ApiError
from skiff.protocol.jsapi.stream_config import StreamConfig
from skiff.protocol.jsapi._subjects import any_collide
from skiff.protocol.jsapi.timefmt import format_time
from skiff.storage.layout import StoreRoot

from ..version import API_LEVEL
from . import advisories, persist
from .account_limits import AccountLimits
from .api import ApiRouter
from .durability import Durability

if TYPE_CHECKING:  # pragma: no cover
    from ..core.server import Server
    from .stream import Stream


WAKE_SLICE = 4096  # asleep subjects woken per event-loop turn after a restart (_start_waking)


def _recover_consumers(stream: "Stream") -> None:
    """Reopen a recovered stream's consumers (stream_consumers.py, loaded with the first stream recovered)."""
    from .stream_consumers import recover

    recover(stream)


class JetStream:
    def __init__(self, server: "Server") -> None:
        self.server = server
        opts = server.options
        base = opts.store_dir
        # An embedded server without store_dir stores in a directory of its own, removed at stop; the
        # process substitutes nats-server's temporary directory before it gets here (runner.py).
        if not base:
            import tempfile  # only here: it imports shutil, bz2 and lzma (~7 ms of every start otherwise)

            base = self.temp_dir = tempfile.mkdtemp(prefix="skiff-js-")
        else:
            self.temp_dir = ""
        base = base or self.temp_dir
        self.store_dir = os.path.join(os.path.abspath(base), "jetstream")
        self.start_took_ns = 0  # how long start() took, for nats-server's "Took 1.5ms to start JetStream"
        # nats-server's layout: <store_dir>/jetstream/<account>/streams/... for the account JetStream runs in.
        self.root = StoreRoot(os.path.abspath(base), server.js_account.name)
        self.max_memory = opts.max_memory_store if opts.max_memory_store and opts.max_memory_store > 0 else _default_mem()
        self.max_storage = opts.max_file_store if opts.max_file_store and opts.max_file_store > 0 else _default_disk(self.store_dir)
        self.has_pending = False
        self.streams: dict[str, Stream] = {}
        self.router = ApiRouter(self)
        sync_interval = float(opts.sync_interval or 120)
        self.sync_always = bool(getattr(opts, "sync_always", False))
        self.durability = Durability(self, sync_always=self.sync_always, sync_interval=sync_interval)
        self.recovery_errors: dict[str, str] = {}
        # Stream directories found at start but not loaded (metadata unreadable or missing, store failed to open):
        # a create of that name adopts the blocks instead of starting empty.
        self.unloaded: set[str] = set()
        self._verify_task: asyncio.Task | None = None
        acc = server.js_account
        acl = self.acct_limits = AccountLimits(self, getattr(acc, "js_limits", None) or {}, getattr(acc, "js_tier", ""))
        # What the API handlers, restores and the publish path call, bound once (check_resources runs on every
        # publish: no second call in between).
        self.check_resources = acl.check_resources
        self.check_stream_limits = acl.check_stream_limits
        self.stream_limits = acl.stream_limits
        self.account_limit = acl.account_limit
        self.set_account_limits = acl.set
        # Called with each stream recovered at start, after it started (its consumers recover first).
        self.stream_recovered: list = [_recover_consumers]
        self.stopping = False  # stop() began: a create finishing its disk work off the loop gives up

    # ------------------------------------------------------------------ life cycle
    @property
    def api_total(self) -> int:
        return self.router.total

    @property
    def api_errors(self) -> int:
        return self.router.errors

    def start(self) -> None:
        t0 = time.perf_counter_ns()
        try:
            self._start()
        finally:
            self.start_took_ns = time.perf_counter_ns() - t0

    def _start(self) -> None:
        os.makedirs(self.store_dir, exist_ok=True)
        # The API handler modules load with the first request to one of their rows (api.py LAZY, issue #13).
        self.router.serve_later("api_streams", "api_consumers")
        self._subscribe_consumer_subjects()
        left = persist.remove_leftovers(self.root)  # stream deletes a crash interrupted
        if left:
            self.server.log_warning("JetStream removing streams left by an interrupted delete", count=len(left))
        self.recover()
        self._verify_task = self._start_block_verification()
        self._start_waking()
        self.router.start()
        self.durability.start()

    def _subscribe_consumer_subjects(self) -> None:
        """The three wildcard subscriptions that stand in for nats-server's per-consumer ones (api_consumers.py):
        pull requests, acks and flow-control answers.  They exist from the start (an ack or a pull request to a
        consumer that does not exist gets the no-responders status), but the consumer API they call loads with the
        first message one of them gets (or the first consumer request): each callback then hands its subscription
        the consumer API's own method, so later messages pay nothing for it."""
        from skiff.protocol.jsapi.subjects import ACK_PRE, API_PREFIX, DOMAIN_API_PRE_T, FC_PRE, REQUEST_NEXT_PRE

        srv = self.server
        router = self.router

        def later(subject: str, handler) -> None:
            def first(sub, *args) -> None:
                sub.callback = handler(router.load("api_consumers"))
                sub.callback(sub, *args)
            srv.subscribe_internal(subject, first)

        later(REQUEST_NEXT_PRE + ">", lambda h: h.on_next)
        domain = srv.options.jetstream_domain
        if domain:  # $JS.<domain>.API.CONSUMER.MSG.NEXT.<s>.<c> reaches the same consumers
            pre = DOMAIN_API_PRE_T.format(domain=domain)
            later(pre + REQUEST_NEXT_PRE[len(API_PREFIX):] + ">", lambda h: lambda sub, subject, *rest: h.on_next(
                sub, API_PREFIX + subject[len(pre):], *rest))
        later(ACK_PRE + ">", lambda h: h.on_ack)
        later(FC_PRE + ">", lambda h: h.on_fc)

    async def stop(self) -> None:
        self.stopping = True
        self.router.stop()
        if self._verify_task is not None:
            self._verify_task.cancel()
        await self.durability.stop()
        for stream in list(self.streams.values()):
            try:
                stream.stop()
            except Exception as e:
                self.server.log_error("JetStream stream stop failed", stream=stream.name, error=str(e))
        # A stopped engine lets go of its streams, as a delete does (delete_stream): whoever still holds the engine
        # (an embedding test, the Server object) must not keep every stream and its memory store alive.
        self.streams.clear()
        self.durability.release()
        if self.temp_dir:
            import shutil

            shutil.rmtree(self.temp_dir, ignore_errors=True)

    def flush(self) -> None:
        self.durability.flush()

    def healthy(self) -> bool:
        return True

    # ------------------------------------------------------------------ streams
    def store_config(self, cfg: StreamConfig):
        return persist.store_config(cfg, sync_interval_ns=int(self.durability.sync_interval * 1e9),
                                    sync_always=self.sync_always)

    def _open(self, cfg: StreamConfig, created: int) -> Stream:
        # Imported with the first stream (stream.py, batching, transforms, dedupe: ~2 ms a start without one).
        from .stream import Stream

        store = persist.open_store(cfg, self.root, self.server.clock.time_ns, self.store_config(cfg))
        path = None if cfg.storage == "memory" else str(self.root.stream_dir(cfg.name))
        return Stream(self, cfg, created, store, path)

    def add_stream(self, cfg: StreamConfig, subscribe_first: int | None = None) -> Stream:
        """Create and start a stream.  With ``subscribe_first``, subjects beyond that many are left in
        ``stream.unsubscribed`` for the caller to subscribe in slices (Stream.start)."""
        created, adopted = self._begin_stream(cfg)
        if cfg.storage != "memory":
            persist.write_stream_meta(self.root, cfg, created)
        return self._finish_stream(cfg, created, adopted, subscribe_first)

    async def add_stream_later(self, cfg: StreamConfig, subscribe_first: int | None = None) -> Stream:
        """:meth:`add_stream` with a file stream's ``meta.inf`` written in a worker thread: with its two fsyncs it
        held every client 10-20 ms on the loop (issue #13).  The API holds every other request meanwhile (a
        coroutine handler, api.py); a restore reaching its ``state.json`` meanwhile finds the name taken."""
        from .restore import restoring

        created, adopted = self._begin_stream(cfg)
        if cfg.storage != "memory":
            taken = restoring(self)
            taken.add(cfg.name)
            try:
                await asyncio.get_running_loop().run_in_executor(None, persist.write_stream_meta, self.root, cfg,
                                                                 created)
            finally:
                taken.discard(cfg.name)
            if self.stopping:  # no stream starts in an engine that stopped meanwhile (the next start loads it)
                raise RuntimeError("JetStream is stopping")
        return self._finish_stream(cfg, created, adopted, subscribe_first)

    def _begin_stream(self, cfg: StreamConfig) -> tuple[int, bool]:
        """(creation time, whether the blocks of an unloaded stream are adopted) of a new stream."""
        created = self.server.clock.time_ns()
        if not persist.safe_name(cfg.name):
            raise ApiError.of("JSStreamInvalidConfigF", err="stream name is required and can not contain '.', '*', '>', '\\', '/'")
        adopted = False
        if cfg.storage != "memory":
            adopted = self._prepare_stream_dir(cfg.name)
        return created, adopted

    def _finish_stream(self, cfg: StreamConfig, created: int, adopted: bool, subscribe_first: int | None) -> Stream:
        """Open, register and start a new stream whose ``meta.inf`` is written."""
        try:
            stream = self._open(cfg, created)
        except Exception:
            if cfg.storage != "memory" and not adopted:
                self.root.delete_stream(cfg.name)
            raise
        if adopted:
            self.unloaded.discard(cfg.name)
            self.recovery_errors.pop(cfg.name, None)
            st = stream.store.state()
            self.server.log_warning("JetStream stream declared again over the blocks of a stream that could not be "
                                    "loaded at start: its messages are kept", stream=cfg.name,
                                    messages=st.messages, first_seq=st.first_seq, last_seq=st.last_seq)
        self.streams[cfg.name] = stream
        stream.unsubscribed = stream.start(subscribe_first)
        advisories.stream_action(self.server, cfg.name, advisories.ACTION_CREATE)
        return stream

    def _prepare_stream_dir(self, name: str) -> bool:
        """Make way for a new file stream's directory; True when it adopts the blocks of an unloaded stream.

        Never deletes: a directory skipped at start is the stream the application is declaring again (adopted, as
        nats-server does); any other directory (leftovers of something this process did not finish) is renamed
        aside and logged, so whatever it holds can still be looked at."""
        if not self.root.stream_dir(name).exists():
            return False
        if name in self.unloaded:
            return True
        self.root.set_aside(name)  # logs where it went
        return False

    def update_stream(self, stream: Stream, cfg: StreamConfig, written: bool = False) -> None:
        """Apply ``cfg``; its ``meta.inf`` is written here first unless the caller did (``written``: the API
        handler writes it in a worker thread, :meth:`write_stream_meta_later`)."""
        self.acct_limits.stream_updated(stream.name)
        if stream.path is not None and not written:
            persist.write_stream_meta(self.root, cfg, stream.created)
        stream.update_config(cfg)
        advisories.stream_action(self.server, stream.name, advisories.ACTION_MODIFY)

    def write_stream_meta_later(self, stream: Stream, cfg: StreamConfig) -> "asyncio.Future":
        """The future of ``cfg`` written as file stream ``stream``'s ``meta.inf`` in a worker thread (an update):
        with its two fsyncs it held every client 10-20 ms on the loop (issue #13).  The caller applies the config
        once it is written (``update_stream(..., written=True)``), so a failed write changes nothing; the API
        holds the other requests meanwhile (a coroutine handler: api.py), so no create sees subjects a crash
        could take back."""
        doc = persist.stream_meta_doc(cfg, stream.created)
        return asyncio.get_running_loop().run_in_executor(None, persist.rewrite_stream_meta, self.root, stream.name,
                                                          doc)

    def delete_stream(self, stream: Stream) -> None:
        # Atomic on disk first (persist.py "Deleting a stream"): renamed aside, files removed off the loop.
        aside = persist.move_stream_aside(self.root, stream.name) if stream.path is not None else None
        self.streams.pop(stream.name, None)
        self.acct_limits.stream_deleted(stream.name)
        self.durability.forget(stream)
        stream.stop(delete=True)
        if aside is not None:
            persist.remove_in_background(aside)
        advisories.stream_action(self.server, stream.name, advisories.ACTION_DELETE)

    def lookup_config(self, name: str) -> StreamConfig | None:
        s = self.streams.get(name)
        return s.config if s is not None else None

    def subjects_overlap(self, subjects: list[str], own: Stream | None) -> bool:
        """nats-server jsAccount.subjectsOverlap: any subject colliding with another stream's subjects."""
        others = [a for s in self.streams.values() if s is not own for a in s.config.subjects or []]
        return any_collide(subjects, others)  # indexed: all pairs froze the event loop

    # ------------------------------------------------------------------ recovery
    def recover(self) -> None:
        for name in self.root.list_streams():
            path = str(self.root.streams_dir / name)
            try:
                cfg, created = persist.read_stream_meta(self.root, name)
                if cfg.name != name or not persist.safe_name(name):
                    raise ValueError(f"metadata names stream {cfg.name!r}, directory is {name!r}")
                if cfg.storage == "memory":
                    raise ValueError("memory stream metadata in the file store")
                if self.subjects_overlap(cfg.subjects or [], None):
                    raise ValueError("stream subjects overlap with an already recovered stream")
                stream = self._open(cfg, created)
            except FileNotFoundError:
                self.unloaded.add(name)
                self.server.log_warning("JetStream stream directory without metadata, skipped", path=path)
                continue
            except Exception as e:
                self.unloaded.add(name)
                self.recovery_errors[name] = str(e)
                self.server.log_error("JETSTREAM STREAM COULD NOT BE RECOVERED, SKIPPED (directory kept: declaring the "
                                      "stream again adopts its messages)", stream=name, path=path,
                                      error=f"{type(e).__name__}: {e}")
                continue
            self.streams[name] = stream
            try:
                from .batching import roll_back_torn_batch  # loaded by stream.py already

                torn = roll_back_torn_batch(stream)
                if torn:
                    self.server.log_warning("JetStream removed a partially written atomic batch (never acknowledged)",
                                            stream=name, seqs=f"{torn[-1]}-{torn[0]}")
            except Exception as e:
                self.server.log_error("JetStream torn batch check failed", stream=name, error=repr(e))
            try:
                stream.rebuild_dedupe()
            except Exception as e:  # dedupe is best effort; the messages are what matters
                self.server.log_warning("JetStream dedupe rebuild failed", stream=name, error=str(e))
            stream.start()
            for cb in self.stream_recovered:
                try:
                    cb(stream)
                except Exception as e:
                    self.server.log_error("JetStream consumer recovery failed", stream=name, error=repr(e))
            st = stream.store
            self.server.log.info("Restored stream", stream=name, messages=st.msgs, bytes=st.bytes)

    def _start_block_verification(self) -> "asyncio.Task | None":
        """Check the blocks recovered from their summaries against their checksums in a worker thread, so a start
        does not read every block yet damage under an intact summary is still found; the
        messages of a damaged block are then read back on the loop and the corrupt ones reported lost."""
        stores = [(s, s.store) for s in self.streams.values() if getattr(s.store, "_to_verify", None)]
        if not stores:
            return None
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return None

        async def run() -> None:
            for stream, store in stores:
                try:
                    bad = await loop.run_in_executor(None, store.verify_blocks)
                    if stream.closed or self.streams.get(stream.name) is not stream:
                        continue
                    lost = store.check_blocks(bad)
                except Exception as e:  # a check must never take the server down
                    self.server.log_error("JetStream block verification failed", stream=stream.name, error=repr(e))
                    continue
                if lost:
                    self.server.log_error("JetStream stream lost messages to block damage", stream=stream.name,
                                          lost=len(lost), seqs=lost[:20])
                    self.durability.dirty(stream)  # the tombstones of the lost messages
        return loop.create_task(run())

    def _start_waking(self) -> None:
        """Wake the subjects recovery left asleep (storage/seqindex.py) in slices on the loop once serving: the
        restart is not held up by making an object per subject, and no later request (a wildcard filter over
        every subject) pays for waking them all at once.  A slice of 4,096 subjects takes a few milliseconds."""
        stores = [s.store for s in self.streams.values() if getattr(s.store, "_lazy", None)]
        if not stores:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return

        def step() -> None:
            store = stores[0]
            try:
                more = not getattr(store, "_closed", False) and store.wake_some(WAKE_SLICE)
            except Exception as e:  # never take the server down; an asleep subject still wakes when asked for
                self.server.log_error("JetStream subject index wake-up failed", error=repr(e))
                more = False
            if not more:
                stores.pop(0)
            if stores:
                loop.call_soon(step)

        loop.call_soon(step)

    # ------------------------------------------------------------------ stats
    def totals(self, leave_out: "dict | set" = ()) -> dict:
        """Usage of the account's streams, those named in ``leave_out`` left out."""
        mem = sto = msgs = byts = cons = 0
        n = 0
        for s in self.streams.values():
            if leave_out and s.name in leave_out:
                continue
            n += 1
            b = s.store.bytes
            if s.config.storage == "memory":
                mem += b
            else:
                sto += b
            msgs += s.store.msgs
            byts += b
            cons += len(s.consumers)
        return {"streams": n, "consumers": cons, "messages": msgs, "bytes": byts,
                "memory": mem, "storage": sto}

    def account_info(self) -> dict:
        """JetStreamUsage: the account's usage, then its limits and tiers (account_limits.py)."""
        t = self.totals()
        reserved = self.acct_limits.reserved
        out: dict = {
            "memory": t["memory"],
            "storage": t["storage"],
            "reserved_memory": reserved("memory"),
            "reserved_storage": reserved("file"),
            "streams": t["streams"],
            "consumers": t["consumers"],
        }
        tiers = self.acct_limits.info(out)
        domain = self.server.options.jetstream_domain
        if domain:
            out["domain"] = domain
        out["api"] = {"level": API_LEVEL, "total": self.api_total, "errors": self.api_errors}
        if tiers is not None:
            out["tiers"] = tiers
        return out

    def config_doc(self) -> dict:
        """JetStreamConfig as /varz and /jsz show it (jetstream.go; omitempty fields left out when empty)."""
        opts = self.server.options
        out = {
            "max_memory": self.max_memory,
            "max_storage": self.max_storage,
            "store_dir": self.store_dir,
            "sync_interval": int((opts.sync_interval or 120) * 1e9),
        }
        if self.sync_always:
            out["sync_always"] = True
        if opts.jetstream_domain:
            out["domain"] = opts.jetstream_domain
        if opts.jetstream_unique_tag:
            out["unique_tag"] = opts.jetstream_unique_tag
        if opts.jetstream_strict:
            out["strict"] = True
        return out

    def server_limits(self) -> dict:
        """/varz and /jsz ``limits`` (JSLimitOpts): the batch limits the configuration set, then the default
        consumer limit nats-server always shows."""
        batch = self.server.options.jetstream_batch_limits
        return {**{k: v for k, v in batch.items() if v}, "default_max_consumers": 1000}

    def _stats(self, t: dict) -> dict:
        """JetStreamStats: /varz ``jetstream.stats``, and the head of /jsz (JSInfo embeds it)."""
        return {
            "memory": t["memory"],
            "storage": t["storage"],
            "reserved_memory": self.acct_limits.reserved("memory"),
            "reserved_storage": self.acct_limits.reserved("file"),
            "accounts": 1,
            "ha_assets": 0,
            "api": {"level": API_LEVEL, "total": self.api_total, "errors": self.api_errors},
        }

    def varz(self) -> dict:
        return {"config": self.config_doc(), "stats": self._stats(self.totals()), "limits": self.server_limits()}

    def jsz(self, params: dict) -> dict:
        t = self.totals()
        s = self.server
        return {
            **self._stats(t),
            "server_id": s.server_id,
            "now": format_time(s.clock.time_ns()),
            "config": self.config_doc(),
            "limits": self.server_limits(),
            "streams": t["streams"],
            "consumers": t["consumers"],
            "messages": t["messages"],
            "bytes": t["bytes"],
            "total": 1,
        }


def _default_mem() -> int:
    # nats-server: 75% of system memory.
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") * 0.75)
    except (ValueError, OSError):
        return 1 << 32


def _default_disk(path: str) -> int:
    # nats-server: 75% of the free space where the store lives (1 TB when unknown).
    # The store directory may not exist yet: ask the nearest existing ancestor (same file system).
    while path and not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    try:
        st = os.statvfs(path)
        return int(st.f_bavail * st.f_frsize * 0.75)
    except OSError:
        return 1 << 40
