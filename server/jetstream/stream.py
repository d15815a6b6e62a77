"""One stream: its config, its store, the internal subscriptions on its subjects, its life cycle, removal and expiry.

Theory of operation
-------------------
The publish path (a message from the stream's subscriptions to the store and its PubAck) is
:class:`~.stream_publish.StreamPublishing`, the base of :class:`Stream`; this module holds the rest.

Hooks for consumers (the consumer side of JetStream is built on these; this module knows nothing about consumers):

``consumers``        name -> consumer object; ``state.consumer_count`` is its length.
``interest``         ``Callable[[subject], bool]`` or None.  Interest retention stores a message only if it returns
                     True (nats-server: no consumers / no matching filter -> the sequence is consumed, not stored,
                     and the publisher still gets a normal PubAck).
``on_new_message``   callbacks ``(seq, subject)`` after a message is stored (after the ack was queued).
``on_removed``       callbacks ``(seq, subject)`` for every message removed one by one (limits, age, TTL, MSG.DELETE,
                     a rolled-back write); ``on_purged`` callbacks ``()`` after bulk removals (purge, roll-up).
``on_deleted``       callbacks ``()`` when the stream is deleted (consumers stop).
``on_stopped``       callbacks ``()`` when the stream stops without being deleted, before its store closes
                     (consumers write their state).
``remove_msg(seq)``  for interest/workqueue retention: remove a message every consumer is done with.

Age and TTL expiry: one clock timer per stream, armed for ``store.next_expiry()``; when it fires, ``store.expire``
removes what is due and, with ``subject_delete_marker_ttl``, a marker is stored where the removal emptied a subject
(ADR-43: ``Nats-Marker-Reason: MaxAge``, ``Nats-TTL``, ``Nats-Rollup: sub``).
"""
from __future__ import annotations

import time
import weakref
from functools import partial

from typing import TYPE_CHECKING, Any, Callable

from skiff.protocol import headers
from skiff.protocol.jsapi.stream_config import StreamConfig, with_dynamic_metadata
from skiff.protocol.jsapi.timefmt import SECOND, format_go_duration
from skiff.protocol.subjects import subject_matches
from skiff.storage.base import StreamStore
from skiff.storage.errors import StoreWriteError

from ..clock import LoopClock
from ..version import API_LEVEL, VERSION
from . import jsonout
from .batching import Batching
from .dedupe import DedupeWindow
from .publish_checks import MSG_ID, MSG_TTL, ROLLUP_SUB, is_subject_delete_marker
from .transform import new_transform
from .stream_publish import StreamPublishing

if TYPE_CHECKING:  # pragma: no cover
    from .engine import JetStream

MARKER_REASON_MAXAGE = "MaxAge"


class Stream(StreamPublishing):
    def __init__(self, js: "JetStream", config: StreamConfig, created_ns: int, store: StreamStore,
                 path: str | None) -> None:
        self.js = js
        self.server = js.server
        self.clock = js.server.clock
        # The store time of every publish: LoopClock.time_ns is time.time_ns behind a method, read here without the
        # method's frame; any other clock (ManualClock in tests) is read through itself.
        self._time_ns = time.time_ns if type(self.clock) is LoopClock else self.clock.time_ns
        self.config = config
        self.name = config.name
        self.created = created_ns
        self.store = store
        self.path = path
        self.dedupe = DedupeWindow(config.duplicate_window, self.clock.time_ns)
        self.last_msg_id = ""
        self.closed = False
        # Consumer hooks (see module docstring).
        self.consumers: dict[str, Any] = {}
        self.interest: Callable[[str], bool] | None = None
        self.on_new_message: list[Callable[[int, str], None]] = []
        self.on_removed: list[Callable[[int, str], None]] = []
        self.on_purged: list[Callable[[], None]] = []
        self.on_deleted: list[Callable[[], None]] = []
        self.on_stopped: list[Callable[[], None]] = []
        self._subs: list = []
        self.unsubscribed: list[str] = []  # subjects a sliced create has yet to subscribe (api_streams.py)
        self._direct_subs: list = []
        self._expiry_timer = None
        self._expiry_at = 0
        self.sourcing = None  # mirror / sources (sourcing.py), while configured
        self.scheduling = None  # message schedules (schedules.py), with allow_msg_schedules
        self._pub_ack_prefix = self._ack_prefix()
        self._apply_flags()
        self.batching = Batching(self)
        self._fast_expect = self.batching.fast.expect  # _inbound's look-up of an open fast batch's next append
        store.on_remove = self._store_removed

    def _apply_flags(self) -> None:
        """Plain attributes for what the publish path reads on every message (cheaper than the config model),
        and the config's JSON, which INFO/LIST would otherwise re-encode on every request."""
        cfg = self.config
        self._config_json: dict[bool, str] = {}
        self._no_ack = cfg.no_ack
        self._sealed = cfg.sealed
        self._max_msg_size = cfg.max_msg_size
        self._interest_retention = cfg.retention == "interest"
        self._allow_rollup = cfg.allow_rollup_hdrs and not cfg.deny_purge
        self._max_age = cfg.max_age
        self._sdm_ttl = cfg.subject_delete_marker_ttl if cfg.max_msgs_per_subject != 1 else 0
        self._counter = cfg.allow_msg_counter
        st, rp = cfg.subject_transform, cfg.republish
        self._itr = new_transform(st.src, st.dest) if st is not None else None
        self._rp = new_transform(rp.src, rp.dest) if rp is not None else None
        self._rp_headers_only = bool(rp is not None and rp.headers_only)
        self.storage_kind = 0 if cfg.storage == "memory" else 1  # JetStream.check_resources' index
        # A message without headers needs none of process()'s special cases (see _inbound).
        self._plain = self._itr is None and not self._sealed and not self._counter and not self.closed

    # ------------------------------------------------------------------ life cycle
    def start(self, subscribe_first: int | None = None) -> list[str]:
        """Subscribe to the stream's subjects and arm its timers.  With ``subscribe_first`` only that many subjects
        are subscribed now; the rest are returned for :meth:`subscribe_subjects` (a 5,000-subject create is cut
        into slices on the loop: api_streams.py)."""
        subjects = list(self.config.subjects or [])
        if subscribe_first is not None and len(subjects) > subscribe_first:
            subjects, rest = subjects[:subscribe_first], subjects[subscribe_first:]
        else:
            rest = []
        self.subscribe_subjects(subjects)
        self._update_direct()
        self._arm_expiry()
        self._start_sourcing()
        self._start_scheduling()
        return rest

    def subscribe_subjects(self, subjects: list[str]) -> None:
        srv, inbound, subs = self.server, self._inbound, self._subs
        for subject in subjects:
            subs.append(srv.subscribe_internal(subject, inbound, server_msgs=True))

    def _start_sourcing(self) -> None:
        if self.sourcing is None and (self.config.mirror is not None or self.config.sources):
            from .sourcing import Sourcing

            self.sourcing = Sourcing(self)
            self.sourcing.start()

    def _start_scheduling(self) -> None:
        if self.scheduling is None and self.config.allow_msg_schedules:
            from .schedules import MsgScheduling

            self.scheduling = MsgScheduling(self)
            self.scheduling.recover()

    def _update_direct(self) -> None:
        from .direct_get import subscribe_direct

        if self.config.allow_direct and not self._direct_subs:
            self._direct_subs = subscribe_direct(self)
        elif not self.config.allow_direct and self._direct_subs:
            for sub in self._direct_subs:
                self.server.unsubscribe_internal(sub)
            self._direct_subs = []

    def stop(self, delete: bool = False) -> None:
        """Unsubscribe, cancel timers and stop (or delete) the store.  Idempotent."""
        if self.closed:
            return
        self.closed = True
        self._plain = False
        for sub in self._subs + self._direct_subs:
            self.server.unsubscribe_internal(sub)
        self._subs, self._direct_subs = [], []
        self.batching.clear()
        if self.sourcing is not None:
            self.sourcing.stop(delete_consumers=delete)
            self.sourcing = None
        if self._expiry_timer is not None:
            self._expiry_timer.cancel()
            self._expiry_timer = None
        if self.scheduling is not None:
            self.scheduling.stop()
        if delete:
            for cb in list(self.on_deleted):
                cb()
            self.store.on_remove = None
            self.store.delete()
        else:
            for cb in list(self.on_stopped):
                cb()
            self.store.stop()
            self.store.on_remove = None
        self._unlink_parts()

    def _unlink_parts(self) -> None:
        """Break the reference cycles between the stopped stream and its parts, so a stopped or deleted stream and its
        store (a stopped memory store keeps its messages) are freed by reference counting alone the moment the last
        holder lets go: one caught by ``gc.freeze()`` (server/core/gcpolicy.py freezes after start-up and bulk consumer
        creations) would otherwise never be freed (about 8.5 KB per deleted stream with a consumer).  The consumer hooks
        are let go (the consumer set keeps its own strong reference to the stream, for the consumers a stream delete
        finishes a slice per loop turn later, stream_consumers.py); the batches and the schedules, which hold the stream
        back and whose timers the stop cancelled, get a weak proxy.  The store's ``on_remove`` was let go above, the
        dedupe window's loader here.  tests/jetstream/test_stream_memory.py checks each shape with the collector off."""
        for hooks in (self.on_new_message, self.on_removed, self.on_purged, self.on_deleted, self.on_stopped):
            hooks.clear()  # bound methods of the consumer set, which holds the stream
        self.interest = None
        self.__dict__.pop("_consumer_set", None)
        self.dedupe.set_loader(None)  # a recovered stream's lazy id loader (rebuild_dedupe): reads the closed store
        proxy = weakref.proxy(self)
        for part in (self.batching, self.batching.fast, self.scheduling):
            if part is not None and part.stream is self:
                part.stream = proxy

    def update_config(self, config: StreamConfig) -> None:
        """Apply an already checked config (nats-server ``stream.update``): subjects, limits, direct get, dedupe."""
        old = self.config
        self.config = config
        if list(old.subjects or []) != list(config.subjects or []):
            for sub in self._subs:
                self.server.unsubscribe_internal(sub)
            self._subs = [self.server.subscribe_internal(s, self._inbound, server_msgs=True)
                          for s in config.subjects or []]
        self._update_direct()
        self.batching.clear(atomic=not config.allow_atomic, fast=not config.allow_batched)  # stream.update
        self.dedupe.set_window(config.duplicate_window)
        self._pub_ack_prefix = self._ack_prefix()
        self._apply_flags()
        self.store.update_config(self.js.store_config(config))  # may evict at once (new limits)
        self.js.durability.dirty(self)
        self._arm_expiry(force=True)
        if self.sourcing is not None:
            self.sourcing.update(old, config)
            if self.sourcing.idle:
                self.sourcing.stop()
                self.sourcing = None
        self._start_sourcing()
        self._start_scheduling()  # schedules can be enabled by an update, never disabled

    def _ack_prefix(self) -> bytes:
        domain = self.server.options.jetstream_domain
        if domain:
            return ('{"stream":' + jsonout.dumps(self.name) + ',"domain":' + jsonout.dumps(domain) + ',"seq":').encode()
        return ('{"stream":' + jsonout.dumps(self.name) + ',"seq":').encode()

    def config_json(self, dynamic_meta: bool) -> str:
        """The config as nats-server echoes it; with ``dynamic_meta`` plus ``_nats.ver`` / ``_nats.level``."""
        out = self._config_json.get(dynamic_meta)
        if out is None:
            cfg = with_dynamic_metadata(self.config, VERSION, API_LEVEL) if dynamic_meta else self.config
            out = self._config_json[dynamic_meta] = cfg.to_json()
        return out

    # ------------------------------------------------------------------ state
    @property
    def last_seq(self) -> int:
        return self.store.last_seq

    def state_json(self, deleted_details: bool = False) -> dict:
        st = self.store.state(deleted_details=deleted_details)
        out: dict = {
            "messages": st.messages,
            "bytes": st.bytes,
            "first_seq": st.first_seq,
            "first_ts": jsonout.time_json(st.first_ts),
            "last_seq": st.last_seq,
            "last_ts": jsonout.time_json(st.last_ts),
        }
        if st.num_subjects:
            out["num_subjects"] = st.num_subjects
        if st.num_deleted:
            out["num_deleted"] = st.num_deleted
        if deleted_details and st.deleted:
            out["deleted"] = list(st.deleted)
        if st.lost is not None and (st.lost.msgs or st.lost.bytes):
            out["lost"] = {"msgs": list(st.lost.msgs) or None, "bytes": st.lost.bytes}
        # Mirror/source consumers (``direct``) are not the stream's public consumers (nats-server
        # numPublicConsumers); $JS.API.INFO still counts them, as nats-server does.
        out["consumer_count"] = sum(1 for c in self.consumers.values() if not c.config.direct)
        return out

    # ------------------------------------------------------------------ removal
    def _store_removed(self, seq: int, subject: str) -> None:
        for cb in self.on_removed:
            cb(seq, subject)

    def purge(self, subject: str | None = None, seq: int = 0, keep: int = 0) -> int:
        n = self.store.purge(subject or None, seq, keep)
        self.js.durability.dirty(self)
        if n:
            for cb in list(self.on_purged):
                cb()
        return n

    def remove_msg(self, seq: int, erase: bool = False) -> bool:
        ok = self.store.erase_msg(seq) if erase else self.store.remove_msg(seq)
        if ok:
            self.js.durability.dirty(self)
        return ok

    def write_failed(self, err: StoreWriteError) -> None:
        """A flush failed and the store rolled back: forget what the lost messages left behind."""
        lost = set(err.seqs)
        self.dedupe.forget_seqs(lost)
        if lost:
            self.batching.fast.write_failed(min(lost))
            self.last_msg_id = ""
            for seq in sorted(lost):
                for cb in self.on_removed:
                    cb(seq, "")

    # ------------------------------------------------------------------ expiry (max_age, Nats-TTL)
    def _arm_expiry(self, force: bool = False) -> None:
        if self.closed:
            return
        if self._expiry_timer is not None:
            if not force:
                return
            self._expiry_timer.cancel()
            self._expiry_timer = None
        nxt = self.store.next_expiry()
        if nxt is None:
            return
        delay = max((nxt - self.clock.time_ns()) / 1e9, 0.0)
        self._expiry_at = nxt
        self._expiry_timer = self.clock.call_later(delay, self._expire)

    def _expire(self) -> None:
        self._expiry_timer = None
        if self.closed:
            return
        now = self.clock.time_ns()
        expired = self.store.expire(now)
        if expired:
            self.js.durability.dirty(self)
            sdm = self.config.subject_delete_marker_ttl
            if sdm > 0:
                marker = headers.build(
                    [("Nats-Marker-Reason", MARKER_REASON_MAXAGE),
                     (MSG_TTL, format_go_duration((sdm // SECOND) * SECOND)),
                     ("Nats-Rollup", ROLLUP_SUB)]
                )
                for e in expired:
                    if e.last_of_subject and not is_subject_delete_marker(e.hdr):
                        self.process(e.subject, "", marker, b"")
        nxt = self.store.next_expiry()
        if nxt is None:
            return
        # Wall and loop clocks drift a little: never spin on an expiry that is not quite due yet.
        delay = max((nxt - self.clock.time_ns()) / 1e9, 0.001)
        self._expiry_at = nxt
        self._expiry_timer = self.clock.call_later(delay, self._expire)

    # ------------------------------------------------------------------ recovery
    def rebuild_dedupe(self) -> None:
        """After a restart: the last Nats-Msg-Id now (Expected-Last-Msg-Id needs it), and the ids stored inside
        the window when a duplicate check first needs them (nats-server rebuildDedupe; see dedupe.py)."""
        store = self.store
        if store.msgs == 0:
            return
        last = store.load_last_msg("")
        if last is not None and last.hdr:
            self.last_msg_id = headers.get_exact(last.hdr, MSG_ID) or ""
        if self.config.duplicate_window > 0:
            self.dedupe.set_loader(partial(self._stored_msg_ids, store.last_seq))

    def _stored_msg_ids(self, up_to: int):
        store = self.store
        seq = store.get_seq_from_time(self.clock.time_ns() - self.config.duplicate_window)
        while seq <= up_to:
            m, _ = store.load_next_msg("", seq)
            if m is None or m.seq > up_to:
                return
            if m.hdr:
                msg_id = headers.get_exact(m.hdr, MSG_ID)
                if msg_id:
                    yield msg_id, m.seq, m.ts
            seq = m.seq + 1

    def captures(self, subject: str) -> bool:
        return any(subject_matches(s, subject) for s in self.config.subjects or [])
