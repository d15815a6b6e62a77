"""Message schedules (``allow_msg_schedules``, ADR-51; nats-server server/scheduler.go, stream.go).

Theory of operation
-------------------
A *schedule* is an ordinary stored message with a ``Nats-Schedule`` header (see :mod:`.schedules_cron` for the
patterns) and a ``Nats-Schedule-Target`` subject of the same stream.  At most one schedule lives on a subject: the
publish check adds ``Nats-Rollup: sub`` so that a new schedule replaces the old one (stream.go
processJetStreamMsg).  When a schedule fires, the stream stores a new message on the target, bypassing the
publish checks as a sourced message would (``processJetStreamMsg(..., sourced=true)``):

* payload and headers are the schedule's own, or, with ``Nats-Schedule-Source``, those of the last message on
  that subject (falling back to the schedule's own when there is none: 2.14 subject sampling);
* ``Nats-Schedule*``, ``Nats-Expected-*``, ``Nats-Msg-Id``, ``Nats-TTL`` and ``Nats-Rollup`` are removed, then
  ``Nats-Scheduler: <schedule subject>`` and ``Nats-Schedule-Next: <RFC3339 next fire | purge>`` are appended, plus
  ``Nats-TTL`` from ``Nats-Schedule-TTL`` and ``Nats-Rollup`` from ``Nats-Schedule-Rollup``;
* when that message is stored, ``Nats-Schedule-Next: purge`` (a one-shot ``@at``) purges the schedule's subject,
  and a time moves the schedule to it (memstore.go storeRawMsg -> ``MsgScheduling.update``).

:class:`MsgScheduling` is ``scheduler.go``'s ``MsgScheduling`` on Skiff's one clock: ``schedules`` maps a subject to
``[seq, ts]`` (the next fire, Unix ns), a heap with lazy invalidation stands in for the timed hash wheel, and a
single ``clock.call_later`` timer runs :meth:`MsgScheduling.run`.  The timer never fires sooner than 250 ms after
it is (re)armed and is not pushed later once armed (resetTimer), so a cron ``* * * * * *`` published at
12:00:00.9 fires at 12:00:01.15, as nats-server does.  A schedule that fired is *in flight* until the message it
produced is stored; Skiff stores it synchronously, so this only matters when the store refuses it.

Restarts: the schedules are rebuilt from the stored messages (:meth:`MsgScheduling.recover`), replaying what
storing each message did, so a repeating schedule resumes at the ``Nats-Schedule-Next`` of its last fired message
when that message is still stored (nats-server keeps the same state in ``sched.db``), else at its next interval
from now; a fire time that passed while the server was down fires once, on the first tick.  Recovery reads every
message of the stream once (only streams with ``allow_msg_schedules``).  Removal of a schedule's message (purge, delete, limits) is noticed when it falls due, as the hash wheel
does.
"""
from __future__ import annotations

import heapq
from datetime import datetime, timezone, tzinfo
from typing import TYPE_CHECKING

from skiff.protocol.errors import ApiError
from skiff.protocol.headers import append as add_header, get_exact as slice_header, strip as strip_headers
from skiff.protocol.jsapi.timefmt import MS, SECOND, TimeParseError, format_time, parse_time
from skiff.protocol.subjects import is_valid_literal_subject, subjects_overlap

from .schedules_cron import parse_msg_schedule

if TYPE_CHECKING:  # pragma: no cover
    from .stream import Stream

SCHEDULE = "Nats-Schedule"
SCHEDULE_TIME_ZONE = "Nats-Schedule-Time-Zone"
SCHEDULE_TTL = "Nats-Schedule-TTL"
SCHEDULE_ROLLUP = "Nats-Schedule-Rollup"
SCHEDULE_TARGET = "Nats-Schedule-Target"
SCHEDULE_SOURCE = "Nats-Schedule-Source"
SCHEDULER = "Nats-Scheduler"
SCHEDULE_NEXT = "Nats-Schedule-Next"
SCHEDULE_NEXT_PURGE = "purge"
MSG_ID = "Nats-Msg-Id"
MSG_TTL = "Nats-TTL"
ROLLUP = "Nats-Rollup"
ROLLUP_SUB = "sub"
MIN_FIRE_INTERVAL = 250 * MS  # scheduler.go resetTimer: never fire more often than this
EARLY_WAKE = 10 * MS

_INVALID = object()


def load_location(hdr: bytes) -> tzinfo | None | object:
    """stream.go loadMessageScheduleLocation: None without the header, ``_INVALID`` for an empty or unknown zone.
    A zone given as ``UTC`` is still a zone (and refused with ``@at`` / ``@every``), as in Go."""
    tz = slice_header(hdr, SCHEDULE_TIME_ZONE)
    if tz is None:
        return None
    if tz == "":
        return _INVALID
    if tz == "UTC":
        return timezone.utc
    import zoneinfo

    if tz == "Local":
        return _local_zone()

    try:
        return zoneinfo.ZoneInfo(tz)
    except (ValueError, zoneinfo.ZoneInfoNotFoundError, OSError):
        return _INVALID


def _local_zone() -> tzinfo:
    """Go's time.Local: $TZ ("" is UTC), else /etc/localtime, else UTC."""
    import os
    import zoneinfo

    name = os.environ.get("TZ")
    try:
        if name is not None:
            return zoneinfo.ZoneInfo(name.lstrip(":")) if name else timezone.utc
        with open("/etc/localtime", "rb") as f:
            return zoneinfo.ZoneInfo.from_file(f)
    except (OSError, ValueError, zoneinfo.ZoneInfoNotFoundError):
        return timezone.utc


def next_message_schedule(hdr: bytes, ts: int, now: int) -> tuple[int | None, ApiError | None]:
    """stream.go nextMessageSchedule: the next fire (None for no schedule) or the error for the PubAck."""
    loc = load_location(hdr)
    if loc is _INVALID:
        return None, ApiError.of("JSMessageSchedulesTimeZoneInvalidErr")
    nxt, _, ok = parse_msg_schedule(slice_header(hdr, SCHEDULE) or "", loc, ts, now)
    if not ok:
        return None, ApiError.of("JSMessageSchedulesPatternInvalidErr")
    return nxt, None


def unix_nano(ns: int) -> int:
    """Go's Time.UnixNano(): int64 nanoseconds, wrapping outside 1678-2262.  The hash wheel holds this value, so an
    ``@at 9999-...`` or a 290-year ``@every`` is due at once in nats-server; Skiff's scheduler keeps the same."""
    return ((ns + (1 << 63)) & ((1 << 64) - 1)) - (1 << 63)


def _valid_ttl(text: str) -> bool:
    from .publish_checks import parse_message_ttl

    return not isinstance(parse_message_ttl(text), ApiError)


def check_publish(stream: "Stream", subject: str, hdr: bytes, now: int) -> ApiError | bytes:
    """The message-schedule checks of processJetStreamMsg on a stream with ``allow_msg_schedules``, in Go's order.
    Returns the header to store (a schedule gets ``Nats-Rollup: sub``) or the error for the PubAck."""
    get = slice_header
    nxt, err = next_message_schedule(hdr, now, now)
    if err is not None:
        return err
    if nxt is not None:
        ttl = get(hdr, SCHEDULE_TTL)
        if ttl and not _valid_ttl(ttl):
            return ApiError.of("JSMessageSchedulesTTLInvalidErr")
        srollup = get(hdr, SCHEDULE_ROLLUP)
        if srollup and srollup != ROLLUP_SUB:
            return ApiError.of("JSMessageSchedulesRollupInvalidErr")
        if ttl and not stream.config.allow_msg_ttl:
            return ApiError.of("JSMessageTTLDisabledErr")
        target = get(hdr, SCHEDULE_TARGET) or ""
        if not target or not is_valid_literal_subject(target) or target == subject:
            return ApiError.of("JSMessageSchedulesTargetInvalidErr")
        source = get(hdr, SCHEDULE_SOURCE) or ""
        if source and (source == target or source == subject or not is_valid_literal_subject(source)):
            return ApiError.of("JSMessageSchedulesSourceInvalidErr")
        subjects = stream.config.subjects or []
        if not any(subjects_overlap(s, target) for s in subjects):
            return ApiError.of("JSMessageSchedulesTargetInvalidErr")
        if source and not any(subjects_overlap(s, source) for s in subjects):
            return ApiError.of("JSMessageSchedulesSourceInvalidErr")
        rollup = get(hdr, ROLLUP)
        if not rollup:
            hdr = add_header(hdr, ROLLUP, ROLLUP_SUB)
        elif rollup.lower() != ROLLUP_SUB:
            return ApiError.of("JSMessageSchedulesRollupInvalidErr")
    scheduler = purged_scheduler(subject, hdr)
    if isinstance(scheduler, ApiError):
        return scheduler
    if scheduler is not None:
        # The purged subject must hold a schedule, or nothing (kept for backward compatibility in Go).
        last = stream.store.load_last_msg(scheduler)
        if last is not None and not get(last.hdr, SCHEDULE):
            return ApiError.of("JSMessageSchedulesSchedulerInvalidErr")
    return hdr


def purged_scheduler(subject: str, hdr: bytes) -> str | ApiError | None:
    """The Nats-Schedule-Next / Nats-Scheduler checks of processJetStreamMsg, made whether or not the stream allows
    schedules: clients may only use Nats-Schedule-Next to purge a schedule, naming it in Nats-Scheduler (a valid
    subject other than the message's), and Nats-Scheduler only with it.  Returns the subject a purge names, None
    when the message asks for none, or the error."""
    nxt = slice_header(hdr, SCHEDULE_NEXT)
    scheduler = slice_header(hdr, SCHEDULER)
    if nxt:
        if nxt != SCHEDULE_NEXT_PURGE or not scheduler or scheduler == subject \
                or not is_valid_literal_subject(scheduler):
            return ApiError.of("JSMessageSchedulesSchedulerInvalidErr")
        return scheduler
    if scheduler:
        return ApiError.of("JSMessageSchedulesSchedulerInvalidErr")
    return None


def purge_scheduler(stream: "Stream", hdr: bytes) -> None:
    """processJetStreamMsgWithRollup: a stored ``Nats-Schedule-Next: purge`` removes the schedule it names."""
    if slice_header(hdr, SCHEDULE_NEXT) != SCHEDULE_NEXT_PURGE:
        return
    scheduler = slice_header(hdr, SCHEDULER)
    if scheduler:
        stream.purge(scheduler)
        if stream.scheduling is not None:
            stream.scheduling.remove_subject(scheduler)


def _format_next(ns: int, loc: tzinfo | None) -> str:
    """Go's next.Format(time.RFC3339Nano) in the schedule's zone (UTC without one)."""
    if loc is None:
        return format_time(ns)
    off = datetime.fromtimestamp(ns // SECOND, loc).utcoffset()
    return format_time(ns, int(off.total_seconds()) if off else 0)


class MsgScheduling:
    """scheduler.go MsgScheduling for one stream (see the module docstring)."""

    def __init__(self, stream: "Stream") -> None:
        self.stream = stream
        self.clock = stream.clock
        self.schedules: dict[str, list[int]] = {}  # subject -> [seq, ts]
        self.seq_to_subj: dict[int, str] = {}
        self.inflight: set[str] = set()
        self._heap: list[tuple[int, int]] = []  # (ts, seq); stale entries are skipped
        self._timer = None
        self._deadline = 0
        self.running = False
        self.stopped = False

    # ------------------------------------------------------------------ the table
    def _push(self, seq: int, ts: int) -> None:
        heap = self._heap
        if len(heap) > 2 * len(self.schedules) + 64:
            # Replaced and removed schedules leave stale entries behind; rebuild before they pile up.
            heap[:] = [(t, q) for q, t in self.schedules.values()]
            heapq.heapify(heap)
        heapq.heappush(heap, (ts, seq))

    def _valid(self, ts: int, seq: int) -> bool:
        subj = self.seq_to_subj.get(seq)
        return subj is not None and self.schedules[subj] == [seq, ts]

    def init(self, seq: int, subj: str, ts: int) -> None:
        old = self.schedules.get(subj)
        if old is not None:
            self.seq_to_subj.pop(old[0], None)
        self.schedules[subj] = [seq, ts]
        self.seq_to_subj[seq] = subj
        self._push(seq, ts)
        self.inflight.discard(subj)

    def add(self, seq: int, subj: str, ts: int) -> None:
        self.init(seq, subj, ts)
        self.reset_timer()

    def update(self, subj: str, ts: int) -> None:
        sched = self.schedules.get(subj)
        if sched is not None:
            sched[1] = ts
            self._push(sched[0], ts)
            self.inflight.discard(subj)
            self.reset_timer()

    def remove(self, seq: int) -> None:
        subj = self.seq_to_subj.get(seq)
        if subj is not None:
            self.remove_subject(subj)

    def remove_subject(self, subj: str) -> None:
        sched = self.schedules.pop(subj, None)
        if sched is not None:
            self.seq_to_subj.pop(sched[0], None)
            self.inflight.discard(subj)

    def next_expiration(self) -> int | None:
        heap = self._heap
        while heap and not self._valid(*heap[0]):
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    # ------------------------------------------------------------------ storing (memstore.go storeRawMsg)
    def stored(self, seq: int, subj: str, hdr: bytes, ts: int, arm: bool = True) -> None:
        """What storing a message does to the schedules: a schedule is added (replacing the subject's), any other
        message but a fired one cancels the subject's schedule, and a fired message moves its schedule on."""
        if not hdr or b"Nats-Schedul" not in hdr:
            if self.schedules:
                self.remove_subject(subj)
            return
        nxt, err = next_message_schedule(hdr, ts, self.clock.time_ns())
        if err is None and nxt is not None:
            self.init(seq, subj, unix_nano(nxt))
        elif not slice_header(hdr, SCHEDULER):
            self.remove_subject(subj)
        nv = slice_header(hdr, SCHEDULE_NEXT)
        if nv and nv != SCHEDULE_NEXT_PURGE:
            scheduler = slice_header(hdr, SCHEDULER)
            try:
                at = unix_nano(parse_time(nv).unix_ns)
            except TimeParseError:
                at = None
            if at is not None and scheduler:
                sched = self.schedules.get(scheduler)
                if sched is not None:
                    sched[1] = at
                    self._push(sched[0], at)
                    self.inflight.discard(scheduler)
        if arm:
            self.reset_timer()

    def recover(self) -> None:
        """Rebuild from the stored messages after a restart (memstore.go recoverMsgSchedulingState, plus the
        Nats-Schedule-Next moves nats-server's file store keeps in sched.db)."""
        store = self.stream.store
        seq = store.first_seq
        last = store.last_seq
        while seq and seq <= last:
            m, _ = store.load_next_msg("", seq)
            if m is None:
                break
            self.stored(m.seq, m.subject, m.hdr, m.ts, arm=False)
            seq = m.seq + 1
        self.reset_timer()

    # ------------------------------------------------------------------ the timer
    def reset_timer(self) -> None:
        if self.running or self.stopped:
            return
        nxt = self.next_expiration()
        if nxt is None:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            return
        now = self.clock.time_ns()
        fire_in = max(nxt - now, MIN_FIRE_INTERVAL)
        deadline = now + fire_in
        # Never push an armed timer later: continuous resets would starve it (resetTimer).
        if self._deadline > 0 and deadline > self._deadline and self._timer is not None:
            return
        self._deadline = deadline
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self.clock.call_later(fire_in / SECOND, self.run)

    def stop(self) -> None:
        self.stopped = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def run(self) -> None:
        """The timer fired: store what fell due, in schedule sequence order (runMsgScheduling)."""
        self._timer = None
        stream = self.stream
        if self.stopped or stream.closed:
            return
        # The loop's timers are in milliseconds and its clock is not the wall clock: a wake-up a hair before the
        # fire time waits for it rather than for a whole new 250 ms tick (Go timers never fire early).
        nxt = self.next_expiration()
        early = nxt - self.clock.time_ns() if nxt is not None else 0
        if 0 < early <= EARLY_WAKE:
            self._timer = self.clock.call_later(early / SECOND + 0.001, self.run)
            return
        self.running = True
        try:
            for target, hdr, msg in self._due(self.clock.time_ns()):
                if stream.closed:
                    break
                try:
                    stream.process(target, "", hdr, msg, sourced=True)
                except Exception as e:  # a bug must not stop the other schedules
                    stream.server.log_error("JetStream failed to store a scheduled message", stream=stream.name,
                                            subject=target, error=repr(e))
        finally:
            self.running = False
            self._deadline = 0
        self.reset_timer()

    def _due(self, now: int) -> list[tuple[str, bytes, bytes]]:
        """getScheduledMessages: the messages of every schedule due by ``now``; invalid schedules are dropped."""
        heap = self._heap
        due: set[tuple[int, int]] = set()
        while heap and heap[0][0] <= now:
            ts, seq = heapq.heappop(heap)
            if self._valid(ts, seq):
                due.add((ts, seq))
        out: list[tuple[int, str, bytes, bytes]] = []
        store = self.stream.store
        for ts, seq in due:
            sm = store.load_msg(seq)
            if sm is None:
                self.remove(seq)
                continue
            subj = sm.subject
            if subj in self.inflight:  # not stored yet: do not fire twice
                self._push(seq, ts)
                continue
            try:
                built = self._build(sm, ts)
            except Exception as e:  # a schedule Skiff cannot build is dropped, as an invalid one is
                self.stream.server.log_error("JetStream failed to build a scheduled message",
                                             stream=self.stream.name, subject=subj, error=repr(e))
                built = None
            if built is None:
                self.remove(seq)
                continue
            out.append((seq, *built))
            self.inflight.add(subj)
            self._push(seq, ts)  # stays due until the fired message moves or removes it
        out.sort(key=lambda e: e[0])
        return [e[1:] for e in out]

    def _build(self, sm, ts: int) -> tuple[str, bytes, bytes] | None:
        get = slice_header
        hdr = sm.hdr
        pattern = get(hdr, SCHEDULE)
        if not pattern:
            return None
        loc = load_location(hdr)
        if loc is _INVALID:
            return None
        nxt, repeat, ok = parse_msg_schedule(pattern, loc, ts, self.clock.time_ns())
        if not ok or nxt is None:
            return None
        ttl = get(hdr, SCHEDULE_TTL) or ""
        if ttl and not _valid_ttl(ttl):
            return None
        target = get(hdr, SCHEDULE_TARGET)
        if not target:
            return None
        rollup = get(hdr, SCHEDULE_ROLLUP) or ""
        source = get(hdr, SCHEDULE_SOURCE)
        body = sm.data
        if source:
            src = self.stream.store.load_last_msg(source)
            if src is not None:  # no message on the source: the schedule's own content
                hdr, body = src.hdr, src.data
        out = strip_headers(hdr, keys=(MSG_ID, MSG_TTL, ROLLUP), prefixes=(SCHEDULE, "Nats-Expected-"))
        out = add_header(out, SCHEDULER, sm.subject)
        out = add_header(out, SCHEDULE_NEXT, _format_next(nxt, loc) if repeat else SCHEDULE_NEXT_PURGE)
        if ttl:
            out = add_header(out, MSG_TTL, ttl)
        if rollup:
            out = add_header(out, ROLLUP, rollup)
        return target, out, body
