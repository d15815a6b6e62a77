"""One consumer: its state and position over the stream, its pending count, info, purge handling and stop.

Theory of operation
-------------------
A consumer is a cursor over its stream (nats-server ``consumer``).  Its bookkeeping is ``core``, a
:class:`~.consumer_core.ConsumerCore` with no I/O: ``sseq`` (the next stream sequence to look at), ``dseq`` (the next
consumer / delivery sequence), ``pending`` / ``rdc`` / ``rdq`` (what is delivered but not acknowledged, and what
comes back), ``adflr`` / ``asflr`` (the ack floor).  The halves of this class feed it events (a delivery, an ack, a
NAK, an expired ack timer) and carry out what it decides.  Every change is mirrored into the ``ConsumerStore``
(``update_delivered`` / ``update_acks``), which is what consumer info reports and what a restart reads back; file
stores are flushed by the stream's :class:`~.stream_consumers.ConsumerSet` shortly after a change and when the
server stops, so a delivered-but-unacked message is redelivered after a restart.

Delivery (:mod:`.delivery`) never waits: it runs in-line whenever something may allow it (a new message, a pull
request, an ack, new interest, a timer).  The other halves of the class live next to it, by concept: acks
(:mod:`.acks`), redelivery (:mod:`.redelivery`), pull requests (:mod:`.pull`), priority groups (:mod:`.priority`),
push delivery (:mod:`.push`), pause (:mod:`.pause`), inactivity and config updates (:mod:`.lifecycle`).  This
module holds the core and the rest of the state, the start position, the pending count, info, purge handling and
stop.

A consumer that cannot use a new message (no waiting pull, no push interest, at max_ack_pending, paused) is not in
its stream's *ready* set and costs nothing per published message; being kicked by an ack, a pull request or new
interest puts it back (:meth:`_update_ready`).

The ack subject carries ``pending``: the messages left to deliver after this one, which KV watchers and object store
readers use to detect the end of the initial data.  It comes from :meth:`num_pending`, a count kept from the store's
``num_pending`` and adjusted while the consumer delivers or is ready (new matching messages add one), so it is exact
without a store query per message.
"""
from __future__ import annotations

import asyncio
import random
import secrets
from collections import deque
from typing import TYPE_CHECKING

from skiff.protocol.jsapi.consumer_config import ConsumerConfig, filter_subjects, is_durable, with_dynamic_consumer_metadata
from skiff.protocol.jsapi.timefmt import format_time
from skiff.protocol.subjects import has_wildcard, subject_matches
from skiff.storage.consumer import FileConsumerStore
from skiff.storage.records import ConsumerState, Pending, SequencePair

from ..version import API_LEVEL, VERSION
from . import consumer_advisories as adv
from . import jsonout
from .acks import AckMixin
from .consumer_core import ConsumerCore
from .delivery import DeliveryMixin
from .lifecycle import LifecycleMixin, sample_freq
from .pause import PauseMixin
from .priority import PriorityMixin
from .pull import PullMixin, WaitQueue
from .push import PushMixin
from .redelivery import RedeliveryMixin

if TYPE_CHECKING:  # pragma: no cover
    from skiff.storage.base import ConsumerStore
    from .stream_consumers import ConsumerSet

_B62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def create_consumer_name() -> str:
    """An 8-character name for a legacy ephemeral (nats-server createConsumerName)."""
    return "".join(secrets.choice(_B62) for _ in range(8))


class Consumer(DeliveryMixin, LifecycleMixin, PauseMixin, AckMixin, RedeliveryMixin, PullMixin, PriorityMixin,
               PushMixin):
    # Thousands of consumers per stream are normal: no per-instance __dict__.
    __slots__ = (
        "cset", "stream", "server", "clock", "_config", "core", "name", "created", "store", "persistent", "closed",
        "durable", "filters", "_literal", "_wild", "filtered", "lss", "lss_resume", "sfreq", "waiting", "active",
        "ldt", "lat", "_ptmr", "_ptmr_end", "_hb_timer",
        "_dtmr", "_wq_timer", "_wq_timer_at", "_pause_timer", "_delay_timer", "_lwqic", "dthresh", "pbytes", "maxpb",
        "pblimit", "fcsz", "fcid", "_rl_rate", "_rl_burst", "_rl_tokens", "_rl_last", "_unwatch", "_replay",
        "_replay_lseq", "_lts", "_held", "_npc", "_np_last", "_np_gen", "_running", "_again", "_continue_scheduled",
        "_stop", "_ack_pre", "_pin", "_fwc_prefix", "__weakref__",
    )

    def __init__(self, cset: "ConsumerSet", config: ConsumerConfig, name: str, created: int,
                 store: "ConsumerStore") -> None:
        stream = cset.stream
        self.cset = cset
        self.stream = stream
        self.server = stream.server
        self.clock = stream.clock
        self.core = ConsumerCore()
        self.config = config  # configures the core (the property below)
        self.name = name
        self.created = created
        self.store = store
        self.persistent = isinstance(store, FileConsumerStore)
        self.closed = False
        self.durable = is_durable(config)
        self._set_filters(config)
        self.lss: deque[int] | None = None
        self.lss_resume = 0
        self.sfreq = sample_freq(config.sample_freq)
        self.waiting: WaitQueue | None = None if config.deliver_subject else WaitQueue(config.max_waiting)
        self.active = False
        self.ldt = 0
        self.lat = 0
        # timers (all from the server clock)
        self._ptmr = None
        self._ptmr_end = 0.0
        self._hb_timer = None
        self._dtmr = None
        self._wq_timer = None
        self._wq_timer_at = 0.0
        self._pause_timer = None
        self._delay_timer = None
        self._lwqic = 0.0
        self.dthresh = 0.0
        # push flow control / rate limit
        self.pbytes = self.maxpb = self.pblimit = self.fcsz = 0
        self.fcid = ""
        self._rl_rate = 0.0
        self._rl_burst = self._rl_tokens = self._rl_last = 0.0
        self._unwatch = None
        # replay original
        self._replay = config.replay_policy == "original"
        self._replay_lseq = 0
        self._lts = 0
        # a prepared delivery waiting for replay spacing or the rate limit
        self._held = None
        # num pending cache (see num_pending)
        self._npc = -1
        self._np_last = -1
        self._np_gen = -1
        self._running = False
        self._again = False
        self._stop = ""
        self._continue_scheduled = False
        self._ack_pre = f"$JS.ACK.{stream.name}.{name}."
        self._pin = None  # pinned_client: the current pin (priority.Pin), in memory only

    # ------------------------------------------------------------------ config and the core's state
    @property
    def config(self) -> ConsumerConfig:
        return self._config

    @config.setter
    def config(self, cfg: ConsumerConfig) -> None:
        self._config = cfg
        self.core.configure(cfg.ack_policy, cfg.ack_wait, cfg.backoff, cfg.max_ack_pending, cfg.max_deliver,
                            cfg.flow_control)

    # Read by the stream's consumer set (stream_consumers.py) and the life cycle (lifecycle.py); the state is the
    # core's, these only name it.
    @property
    def pending(self) -> dict[int, list[int]]:
        return self.core.pending

    @property
    def rdc(self) -> dict[int, int]:
        return self.core.rdc

    @property
    def sseq(self) -> int:
        return self.core.sseq

    # lifecycle.update_config sets these before the new config (which carries the same values) is assigned.
    @property
    def maxp(self) -> int:
        return self.core.maxp

    @maxp.setter
    def maxp(self, v: int) -> None:
        self.core.maxp = v

    @property
    def maxdc(self) -> int:
        return self.core.maxdc

    @maxdc.setter
    def maxdc(self, v: int) -> None:
        self.core.maxdc = max(v, 0)

    # ------------------------------------------------------------------ filters
    def _set_filters(self, config: ConsumerConfig) -> None:
        fs = filter_subjects(config)
        self.filters = fs
        self._literal = {f for f in fs if not has_wildcard(f)}
        self._wild = [f for f in fs if has_wildcard(f)]
        # "a.b.>" with no other wildcard matches exactly the subjects starting with "a.b.": a str.startswith
        # instead of a token walk for the delivery fast path (delivery.py _load_next).
        f0 = fs[0] if len(fs) == 1 else ""
        self._fwc_prefix = f0[:-1] if f0.endswith(".>") and not has_wildcard(f0[:-2]) else None
        # A single filter that is exactly the stream's only subject is no filter at all (nats-server isFiltered).
        subs = self.stream.config.subjects or []
        self.filtered = bool(fs) and not (len(fs) == 1 and len(subs) == 1 and subs[0] == fs[0])

    def matches(self, subject: str) -> bool:
        if not self.filters:
            return True
        if subject in self._literal:
            return True
        for f in self._wild:
            if subject_matches(f, subject):
                return True
        return False

    # ------------------------------------------------------------------ start / state
    def start(self, has_state: bool) -> None:
        """Position the consumer (from the stored state or the deliver policy) and begin delivering."""
        if has_state:
            self._apply_stored_state()
        else:
            self._select_starting_seq()
        if self.waiting is None:
            self._start_push()
        self._update_inactive_threshold()
        if self.dthresh > 0 and (self.waiting is not None or not self.active):
            self._dtmr = self.clock.call_later(self.dthresh, self._delete_not_active)
        self._update_pause_timer()
        if self._replay:
            self._replay_lseq = self.stream.store.last_seq
        if self.core.pending:
            # After a restart check pending soon (nats-server: 500ms-1.5s, or sooner with a short ack_wait).
            delay = 0.5 + random.random()
            if self.config.ack_wait / 1e9 < delay:
                delay = self._ack_wait(0)
            self._reset_ptmr(delay)
            self.cset.has_pending(self)
        # The caller kicks delivery off (after taking the create reply's info snapshot, as nats-server does).

    def _apply_stored_state(self) -> None:
        st = self.store
        core = self.core
        core.restore((st.dc, st.ds), (st.ac, st.as_), st.pending, st.redelivered)
        last = self.stream.store.last_seq
        if core.sseq - 1 > last:
            core.reconcile(last)
        core.forget_redelivered_below(self.stream.store.first_seq)

    def _select_starting_seq(self) -> None:
        """nats-server selectStartingSeqNo."""
        cfg = self.config
        store = self.stream.store
        first, last = store.first_seq, store.last_seq
        dp = cfg.deliver_policy
        sseq = 0
        if cfg.opt_start_seq == 0:
            if dp == "all":
                sseq = first
            elif dp == "last":
                if not self.filters:
                    sseq = last
                else:
                    for f in self.filters:
                        ss = store.filtered_state(1, f)
                        if ss.last > sseq:
                            sseq = ss.last
            elif dp == "last_per_subject":
                if self.stream.config.max_msgs_per_subject == 1:
                    sseq = first
                else:
                    seqs = store.multi_last_seqs(self.filters or [">"], 0, 0)
                    self.lss_resume = last
                    if not seqs:
                        sseq = last
                    else:
                        sseq = seqs[0]
                        self.lss = deque(seqs)
            elif cfg.opt_start_time is not None:
                sseq = store.get_seq_from_time(cfg.opt_start_time.unix_ns)
                if self.filters:
                    nseq = last
                    for f in self.filters:
                        ss = store.filtered_state(first, f)
                        if sseq <= ss.first < nseq:
                            nseq = ss.first
                    if sseq < nseq < last:
                        sseq = nseq
            else:  # new
                sseq = last + 1
        else:
            sseq = cfg.opt_start_seq
        if first == 0 and cfg.opt_start_seq == 0:
            sseq = 1
        elif sseq > last and cfg.opt_start_seq == 0:
            sseq = last + 1
        elif sseq < first:
            sseq = first
        self.core.start_at(sseq)
        if hasattr(self.store, "set_starting"):
            self.store.set_starting(self.core.sseq - 1)
            self._state_changed()

    def _state_changed(self) -> None:
        if self.persistent:
            self.cset.dirty(self)

    # ------------------------------------------------------------------ num pending
    def num_pending(self) -> int:
        store = self.stream.store
        last = store.last_seq
        if self._npc >= 0 and self._np_last == last and self._np_gen == self.cset.gen:
            return self._npc
        n = self._calc_num_pending()
        self._npc, self._np_last, self._np_gen = n, last, self.cset.gen
        return n

    def _np_valid(self) -> bool:
        return self._npc >= 0 and self._np_last == self.stream.store.last_seq and self._np_gen == self.cset.gen

    def _calc_num_pending(self) -> int:
        if self.lss:
            return len(self.lss) + self._count(self.lss_resume + 1)
        return self._count(self.core.sseq)

    def _count(self, start: int) -> int:
        store = self.stream.store
        if start > store.last_seq:
            return 0
        if not self.filters:
            return store.num_pending(start, "")
        return sum(store.num_pending(start, f) for f in self.filters)

    # ------------------------------------------------------------------ retention / purge
    def need_ack(self, sseq: int, subject: str) -> bool:
        """nats-server needAck: does this consumer still have to see (or ack) ``sseq``?"""
        if self.filtered and not self.matches(subject):
            return False
        return self.core.needs(sseq)

    def purged(self, first: int) -> None:
        """The stream was purged (fully, by subject or up to a sequence); ``first`` is its new first sequence
        (nats-server consumer.purge, always checking the remaining pending messages: Skiff is not told which
        subject was purged)."""
        if self.closed:
            return
        store = self.stream.store
        core = self.core
        if self.lss:
            self.lss = deque(s for s in self.lss if s >= first and store.load_msg(s) is not None) or None
        gone = [seq for seq in core.pending if seq < first or store.load_msg(seq) is None]
        changed = core.purged(first, gone)
        if gone:
            self.lat = self.clock.time_ns()
        if not core.pending:
            self.cset.maybe_no_pending(self)
        self._npc = -1
        if changed:
            # nats-server writes the consumer's own view to the store after a purge (writeStoreState).
            self._write_store_state()
        self.kick()

    def _store_update_failed(self, op: str, err: Exception) -> None:
        """The state store refused an update (a store bug or a state it thinks impossible).  The consumer's own
        view is what it acts on, so log loudly and, once the operation in progress is complete, write that view
        to the store (as after a purge), so that info and a restart do not drift from what clients saw."""
        self.server.log_error("JetStream consumer state update failed, rewriting the state", stream=self.stream.name,
                              consumer=self.name, op=op, error=f"{type(err).__name__}: {err}")
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (a synchronous unit test)
            self._resync_store()
            return
        loop.call_soon(self._resync_store)

    def _resync_store(self) -> None:
        if not self.closed:
            self._write_store_state()

    def _write_store_state(self) -> None:
        core = self.core
        state = ConsumerState(SequencePair(core.dseq - 1, core.sseq - 1), SequencePair(core.adflr, core.asflr),
                              {s: Pending(p[0], p[1]) for s, p in core.pending.items()}, dict(core.rdc))
        try:
            self.store.set_state(state, force=True)
        except ValueError as e:  # the store refuses a state it thinks impossible (storage/consumer.py set_state)
            self.server.log_warning("JetStream consumer state not written", stream=self.stream.name,
                                    consumer=self.name, error=str(e))
        self._state_changed()

    # ------------------------------------------------------------------ stop
    def stop(self, delete: bool = False, advisory: bool = True, remove_files: bool = True) -> None:
        """Stop; with ``delete`` also remove the state, unless ``remove_files`` is False: the stream is being
        deleted and its directory, with every consumer's, was already renamed aside in one step (persist.py)."""
        if self.closed:
            return
        if delete and advisory:
            adv.action(self, False)
        if self.waiting is not None:
            self._release_waiting(notify=delete)
        self.closed = True
        for t in (self._ptmr, self._dtmr, self._pause_timer, self._delay_timer):
            if t is not None:
                t.cancel()
        self._ptmr = self._dtmr = self._pause_timer = self._delay_timer = None
        self._unassign_pin()
        self._stop_push()
        self.cset.forget(self)
        try:
            if delete:
                if remove_files:
                    self.store.delete()
                else:
                    self.store.discard()
            else:
                self.store.flush()
                self.store.stop()
        except Exception as e:  # noqa: BLE001 - a failing disk must not break a shutdown or a delete
            self.server.log_error("JetStream consumer store close failed", stream=self.stream.name,
                                  consumer=self.name, error=str(e))

    # ------------------------------------------------------------------ info
    def info(self, dynamic_meta: bool = True) -> dict:
        cfg = self.config
        if dynamic_meta:
            cfg = with_dynamic_consumer_metadata(cfg, VERSION, API_LEVEL)
        st = self.store
        if st.dc != 0 or st.ds != 0:
            d_c, d_s = st.dc, st.ds
        else:
            d_c, d_s = max(self.core.dseq, 1) - 1, max(self.core.sseq, 1) - 1
        delivered: dict = {"consumer_seq": d_c, "stream_seq": d_s}
        if self.ldt:
            delivered["last_active"] = format_time(self.ldt)
        ack_floor: dict = {"consumer_seq": st.ac, "stream_seq": st.as_}
        if self.lat:
            ack_floor["last_active"] = format_time(self.lat)
        if self.waiting is not None:
            self._process_waiting(False)
        out: dict = {
            "stream_name": self.stream.name,
            "name": self.name,
            "created": format_time(self.created),
            "config": jsonout.Raw(cfg.to_json()),
            "delivered": delivered,
            "ack_floor": ack_floor,
            "num_ack_pending": len(self.core.pending),
            "num_redelivered": 0 if cfg.max_deliver == 1 else len(self.core.rdc),
            "num_waiting": len(self.waiting) if self.waiting is not None else 0,
            "num_pending": self._info_num_pending(),
        }
        if self.waiting is None and self.active:
            out["push_bound"] = True
        if self._paused():
            out["paused"] = True
            out["pause_remaining"] = self.config.pause_until.unix_ns - self.clock.time_ns()
        out["ts"] = format_time(self.clock.time_ns())
        groups = self._priority_groups_info()
        if groups:
            out["priority_groups"] = groups
        return out

    def _info_num_pending(self) -> int:
        store = self.stream.store
        if self.core.sseq > store.last_seq and not self.lss:
            return 0
        return self.num_pending()
