"""One stream: its config, its store, the internal subscriptions on its subjects, and the publish path.

Theory of operation
-------------------
A stream subscribes (internal subscriptions, one per configured subject) to what it captures, so any PUB/HPUB the
server routes there reaches :meth:`Stream.process` in-line, on the event loop, with or without a reply subject
(nats-server ``processInboundJetStreamMsg`` -> ``processJetStreamMsg``).  ``process`` runs to completion without
awaiting: header checks (:mod:`.publish_checks`), size checks, interest retention, TTL, ``store.store_msg``,
dedupe bookkeeping, roll-ups, then the PubAck is *queued* with the engine's :class:`~.durability.Durability`, which
sends it once the store has handed the write to the OS (and fsynced, with ``sync_always``).  Error acks are sent at
once through the same queue so that acks keep their order.

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
from skiff.protocol.errors import ApiError
from skiff.protocol.headers import id_values
from skiff.protocol.jsapi.stream_config import StreamConfig, with_dynamic_metadata
from skiff.protocol.jsapi.timefmt import SECOND, format_go_duration, format_time
from skiff.protocol.subjects import is_valid_literal_subject, subject_matches
from skiff.storage.base import StreamStore
from skiff.storage.errors import DiscardNewError, MsgTooLargeError, StoreClosedError, StoreError, StoreWriteError

from ..clock import LoopClock
from ..version import API_LEVEL, VERSION
from . import counters, jsonout
from .batching import Batching
from .dedupe import DedupeWindow
from .schedules import purge_scheduler
from .transform import new_transform
from .publish_checks import (
    FAST_BATCH_SUFFIX, MSG_ID, MSG_TTL, ROLLUP_ALL, ROLLUP_SUB, Checked, Duplicate, batch_refusal, check_headers,
    is_subject_delete_marker, message_ttl,
)

if TYPE_CHECKING:  # pragma: no cover
    from .engine import JetStream

MAX_HEADER_SIZE = 65535  # math.MaxUint16 in processJetStreamMsg
_K_INCR = counters.INCR.encode()  # as headers.nats_values() lists it
_TTL_NEEDLE = b"\r\n" + MSG_TTL.encode() + b":"
MARKER_REASON_MAXAGE = "MaxAge"


class Stream:
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

    # ------------------------------------------------------------------ publishing
    def _inbound(self, sub, subject: str, reply: str, hdr_len: int, data: bytes, origin) -> None:
        if hdr_len:
            hdr = bytes(data[:hdr_len])
            msg = bytes(data[hdr_len:])
            if self._plain and reply[-4:] != FAST_BATCH_SUFFIX:
                ids = id_values(hdr)
                if ids is not None:
                    try:
                        self._publish_with_ids(subject, reply, hdr, msg, ids[0], ids[1])
                    except Exception as e:
                        self.server.log_error("JetStream stream failed to process a message", stream=self.name,
                                              subject=subject, error=repr(e))
                    return
            if hdr[8:9] == b" ":  # removeHeaderStatusIfPresent: a status line is not stored
                hdr = _strip_status(hdr)
        elif self._plain:
            msg = bytes(data)
            hdr = b""
            if reply[-4:] == FAST_BATCH_SUFFIX:
                b = self._fast_expect.get(reply)
                if b is not None:  # the next in-order message of an open fast batch (FastBatches.append)
                    try:
                        self.batching.fast.append(b, subject, reply, msg)
                    except Exception as e:
                        self.server.log_error("JetStream stream failed to process a message", stream=self.name,
                                              subject=subject, error=repr(e))
                    return
                # any other fast batch message: process() below
            else:
                # The common publish, no headers, on a stream without subject transform, seal or counters: process()
                # and check() reduced to what applies to it (same checks, same order), then store_checked().
                try:
                    mms = self._max_msg_size
                    if mms >= 0 and len(msg) > mms:
                        err = ApiError.of("JSStreamMessageExceedsMaximumErr")
                    else:
                        err = self.js.check_resources(self, len(subject) + len(msg))
                    if err is None:
                        self.store_checked(subject, reply, b"", msg, "", "", b"}", bool(reply) and not self._no_ack)
                    else:
                        self._nak(reply, bool(reply) and not self._no_ack, err)
                except Exception as e:
                    self.server.log_error("JetStream stream failed to process a message", stream=self.name,
                                          subject=subject, error=repr(e))
                return
        else:
            hdr, msg = b"", bytes(data)
        try:
            self.process(subject, reply, hdr, msg)
        except Exception as e:  # a bug (here or in a consumer hook) must not cost the publisher its connection
            self.server.log_error("JetStream stream failed to process a message", stream=self.name,
                                  subject=subject, error=repr(e))

    def process(self, subject: str, reply: str, hdr: bytes, msg: bytes, sourced: bool = False) -> int:
        """Store one published message; returns its sequence, or 0 when it was not stored.  ``sourced``: a
        message the server made (a fired schedule) or a source brought in (sourcing.py) skips the checks nats-server
        skips for it (publish_checks.check_headers)."""
        if self.closed:
            return 0
        if self._itr is not None:  # subject_transform applies before anything else
            subject = self._itr.match(subject) or subject
        can_respond = bool(reply) and not self._no_ack
        if self._sealed:
            return self._nak(reply, can_respond, ApiError.of("JSStreamSealedErr"))
        if reply[-4:] == FAST_BATCH_SUFFIX or (hdr and b"Nats-Batch-Id:" in hdr):
            batch = batch_refusal(reply, hdr)
            if batch is not None:
                # nats-server processJetStream{Atomic,Fast}BatchMsg: sealed, the server and account limits, the
                # size, then "disabled".
                err = self.js.check_resources(self, len(subject) + len(hdr) + len(msg), len(hdr))
                if err is not None:
                    return self._nak(reply, can_respond, err)
                mms = self._max_msg_size
                if mms >= 0 and (len(hdr) > mms or len(msg) > mms - len(hdr)):
                    return self._nak(reply, can_respond, ApiError.of("JSStreamMessageExceedsMaximumErr"))
                if batch == "JSBatchPublishDisabledErr":
                    if self.config.allow_batched:
                        return self.batching.fast.process(subject, reply, hdr, msg, can_respond)
                elif self.config.allow_atomic:
                    return self.batching.process_atomic(subject, reply, hdr, msg, can_respond)
                return self._nak(reply, can_respond, ApiError.of(batch))
        mms = self._max_msg_size
        if mms >= 0 and (len(hdr) > mms or len(msg) > mms - len(hdr)):
            # nats-server 2.15.1 refuses a message over max_msg_size before any header check (a duplicate, a wrong
            # expected stream or sequence, a TTL or counter refusal: measured); check() repeats it after a counter or
            # a schedule rewrote the message, as processJetStreamMsg does.
            return self._nak(reply, can_respond, ApiError.of("JSStreamMessageExceedsMaximumErr"))
        res = self.check(subject, hdr, msg, sourced)
        if res.__class__ is tuple:
            return self.store_checked(subject, reply, *res, can_respond, sourced)
        if isinstance(res, Duplicate):
            if can_respond:
                self.js.durability.send(reply, self._pub_ack_prefix + b"%d,\"duplicate\": true}" % res.seq)
            return 0
        return self._nak(reply, can_respond, res)

    def _publish_with_ids(self, subject: str, reply: str, hdr: bytes, msg: bytes, raw_id: bytes | None,
                          raw_stream: bytes | None) -> None:
        """:meth:`process` for a publish whose headers are only Nats-Msg-Id and/or Nats-Expected-Stream
        (:func:`~protocol.headers.id_values`: the Spark connector's writes, the clients' ``publish(msg_id=...)``) on
        a :attr:`_plain` stream: what :meth:`process`, :meth:`check` and :func:`.publish_checks.check_headers` do for
        such a block, in their order (max_msg_size 10054, expected stream 10060, the duplicate, the header size 10097,
        the resources), then :meth:`store_checked`.  No batch, schedule, counter, TTL or roll-up check applies: their keys are absent."""
        can_respond = bool(reply) and not self._no_ack
        hlen = len(hdr)
        mms = self._max_msg_size
        if mms >= 0 and (hlen > mms or len(msg) > mms - hlen):
            self._nak(reply, can_respond, ApiError.of("JSStreamMessageExceedsMaximumErr"))
            return
        if raw_stream:
            sname = raw_stream.decode("utf-8", "surrogateescape")  # headers.text in-line
            if sname and sname != self.name:
                self._nak(reply, can_respond, ApiError.of("JSStreamNotMatchErr"))
                return
        msg_id = raw_id.decode("utf-8", "surrogateescape") if raw_id else ""
        if msg_id:
            dup = self.dedupe.check(msg_id)
            if dup:
                if can_respond:
                    self.js.durability.send(reply, self._pub_ack_prefix + b"%d,\"duplicate\": true}" % dup)
                return
        if hlen > MAX_HEADER_SIZE:
            err = ApiError.of("JSStreamHeaderExceedsMaximumErr")
        else:
            err = self.js.check_resources(self, len(subject) + hlen + len(msg), hlen)
        if err is not None:
            self._nak(reply, can_respond, err)
            return
        self.store_checked(subject, reply, hdr, msg, msg_id, "", b"}", can_respond)

    def check(self, subject: str, hdr: bytes, msg: bytes, sourced: bool = False,
              counted: int = -1) -> "tuple | Duplicate | ApiError":
        """The checks half of :meth:`process`: ``(hdr, msg, msg_id, rollup, ack_tail)`` for the store (counters
        rewrite the message), a :class:`Duplicate`, or the error for the PubAck.  ``counted``: the size a batch
        message already had checked against the limits (check_resources counts what it lets through until the
        next refresh, so a second check of the same message would count it twice)."""
        msg_id = rollup = ""
        incr = None
        if hdr:
            values = headers.nats_values(hdr)  # one scan; the checks read only the keys it found
            if _K_INCR in values:
                incr = counters.check_incr(hdr, msg, self._counter)
                if isinstance(incr, ApiError):
                    return incr
            res = check_headers(self, subject, hdr, sourced, values)
            if res.__class__ is not Checked:
                return res
            msg_id, rollup, new_hdr = res
            if new_hdr is not None:
                hdr = new_hdr
        ack_tail = b"}"
        if self._counter:
            if incr is None:
                return ApiError.of("JSMessageIncrMissingErr")
            res = counters.apply(self.store, subject, hdr, incr)
            if isinstance(res, ApiError):
                return res
            hdr, msg, value = res
            maxp = self.server.options.max_payload
            if len(hdr) > maxp or len(msg) > maxp - len(hdr):
                return ApiError.of("JSStreamMessageExceedsMaximumErr")
            ack_tail = b',"val":"' + value.encode() + b'"}'
        mms = self._max_msg_size
        if mms >= 0 and (len(hdr) > mms or len(msg) > mms - len(hdr)):
            return ApiError.of("JSStreamMessageExceedsMaximumErr")
        if len(hdr) > MAX_HEADER_SIZE:
            return ApiError.of("JSStreamHeaderExceedsMaximumErr")
        size = len(subject) + len(hdr) + len(msg)
        if size != counted:
            err = self.js.check_resources(self, size, len(hdr))
            if err is not None:
                return err
        return (hdr, msg, msg_id, rollup, ack_tail)

    def store_checked(self, subject: str, reply: str, hdr: bytes, msg: bytes, msg_id: str, rollup: str,
                      ack_tail: bytes, can_respond: bool, sourced: bool = False) -> int:
        """The store half of :meth:`process`, for a message whose checks passed (an atomic batch's commit
        checks all its messages first, then stores each through here: batching.py)."""
        js = self.js
        store = self.store
        now = self._time_ns()
        if self._interest_retention and not (self.consumers and self.interest is not None and self.interest(subject)):
            # No interest: the sequence is used up, nothing is stored, the publisher gets a normal ack.
            seq = store.skip_msg(ts=now)
            self.last_msg_id = msg_id
            self.dedupe.store(msg_id, seq, now)
            if rollup and self._allow_rollup:
                self._rollup(subject, rollup, 0)
            if hdr and self._allow_rollup and b"Nats-Schedule-Next:" in hdr:
                purge_scheduler(self, hdr)
            js.durability.stored(self, seq, reply if can_respond else "", ack_tail)
            return seq

        ttl = 0
        if hdr and _TTL_NEEDLE in hdr:  # what message_ttl's lookup searches for: absent, it returns 0
            ttl = message_ttl(hdr)
            if isinstance(ttl, ApiError):
                if sourced:
                    ttl = 0
                else:
                    return self._nak(reply, can_respond, ttl)
            if sourced and not self.config.allow_msg_ttl:
                ttl = 0  # kept in the header, not applied
            sdm = self._sdm_ttl
            if ttl > 0 and sdm > 0 and ttl < sdm // SECOND:
                # Markers must outlive the message they stand for: raise the TTL and rewrite the header.
                ttl = sdm // SECOND
                hdr = headers.set_values(hdr, {MSG_TTL: str(ttl)})
        rp_subject, rp_last = "", 0
        if self._rp is not None:
            rp_subject = self._rp.match(subject) or ""
            if rp_subject and not is_valid_literal_subject(rp_subject):
                rp_subject = ""  # nats-server suppresses a republish to an invalid subject
            if rp_subject:
                last = store.load_last_msg(subject)
                rp_last = last.seq if last is not None else 0
        try:
            seq = store.store_msg(subject, hdr, msg, now, ttl)
        except (DiscardNewError, MsgTooLargeError) as e:
            return self._nak(reply, can_respond, ApiError.of("JSStreamStoreFailedF", err=str(e)))
        except StoreClosedError:
            return 0
        except StoreError as e:  # nats-server logs store failures and does not answer
            self.server.log_error("JetStream failed to store a msg", stream=self.name, error=str(e))
            return 0
        self.last_msg_id = msg_id
        if msg_id:
            self.dedupe.store(msg_id, seq, now)
        if self.scheduling is not None:
            self.scheduling.stored(seq, subject, hdr, now)
        if rollup and self._allow_rollup:
            self._rollup(subject, rollup, 1)
        if hdr and self._allow_rollup and b"Nats-Schedule-Next:" in hdr:
            purge_scheduler(self, hdr)  # processJetStreamMsgWithRollup: a fired @at removes its schedule
        if rp_subject:
            self._republish(rp_subject, subject, seq, now, rp_last, hdr, msg)
        js.durability.stored(self, seq, reply if can_respond else "", ack_tail)
        if self._max_age or ttl:
            if self._expiry_timer is None or (ttl > 0 and now + ttl * SECOND < self._expiry_at):
                self._arm_expiry(force=True)
        for cb in self.on_new_message:
            cb(seq, subject)
        return seq

    def store_mirrored(self, subject: str, hdr: bytes, msg: bytes, seq: int, ts: int) -> bool:
        """Store a mirrored message at the origin's sequence and time (processJetStreamMsg with ``lseq`` and
        ``ts`` from the mirror); gaps were skipped by the caller.  False when it could not be stored."""
        if self.closed:
            return False
        store = self.store
        if store.msgs == 0 and store.first_seq == 0 and seq > 1:
            store.compact(seq)  # a fresh mirror starting past 1 (opt_start_seq / filtered): begin there
        ttl = 0
        if hdr and self.config.allow_msg_ttl:
            t = message_ttl(hdr)
            ttl = t if isinstance(t, int) else 0
        try:
            store.store_raw(seq, subject, hdr, msg, ts, ttl)
        except StoreClosedError:
            return False
        except StoreError as e:
            self.server.log_warning("JetStream error processing inbound mirror message", stream=self.name,
                                    error=str(e))
            return False
        self.js.durability.stored(self, seq, "")
        if self._max_age or ttl:
            self._arm_expiry(force=True)
        for cb in self.on_new_message:
            cb(seq, subject)
        return True

    def _republish(self, to: str, subject: str, seq: int, ts: int, last: int, hdr: bytes, msg: bytes) -> None:
        """nats-server's republish: the stored message plus Nats-Stream/-Subject/-Sequence/-Time-Stamp/
        -Last-Sequence (the previous sequence on this subject), and Nats-Msg-Size instead of the payload with
        ``headers_only``; appended after the message's own headers."""
        extra = (f"Nats-Stream: {self.name}\r\nNats-Subject: {subject}\r\nNats-Sequence: {seq}\r\n"
                 f"Nats-Time-Stamp: {format_time(ts)}\r\nNats-Last-Sequence: {last}\r\n")
        if self._rp_headers_only:
            extra += f"Nats-Msg-Size: {len(msg)}\r\n"
            msg = b""
        base = hdr[:-2] if hdr else b"NATS/1.0\r\n"
        self.server.publish(to, msg, hdr=base + extra.encode("utf-8", "surrogateescape") + b"\r\n")

    def ack_payload(self, seq: int, tail: bytes = b"}") -> bytes:
        return self._pub_ack_prefix + b"%d" % seq + tail

    def error_ack(self, err: ApiError) -> bytes:
        # nats-server builds error acks from PubAck{Stream: name}: no domain, even when one is configured.
        return jsonout.dumpb({"error": err.to_dict(), "stream": self.name, "seq": 0})

    def _nak(self, reply: str, can_respond: bool, err: ApiError) -> int:
        if can_respond:
            self.js.durability.send(reply, self.error_ack(err))
        return 0

    def _rollup(self, subject: str, kind: str, keep: int) -> None:
        if kind == ROLLUP_SUB:
            self.purge(subject, 0, keep)
        elif kind == ROLLUP_ALL:
            self.purge(None, 0, keep)

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


def _strip_status(hdr: bytes) -> bytes:
    end = hdr.find(b"\r\n")
    return b"NATS/1.0" + hdr[end:] if end > 0 else hdr
