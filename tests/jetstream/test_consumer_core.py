"""The consumer's bookkeeping core (server/jetstream/consumer_core.py) with no socket, no event loop and no clock:
tables of event sequences and the state each leaves, then a property test of the invariants over random sequences;
last the pull wait queue's own decisions (server/jetstream/pull.py ``WaitQueue``) and the choice of the request a
message goes to (server/jetstream/priority.py ``select_request``), also without I/O.

The expected floors follow nats-server consumer.go (processAckMsg / checkPending / hasMaxDeliveries / purge); the
same behaviour is checked end to end against both servers in test_ack.py, test_consumer_clock.py and test_pull.py.
"""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skiff.server.jetstream.consumer_core import (
    ACK_WAIT_DELAY, ALREADY, NAK_DELAYED, NAK_IGNORED, NAK_QUEUED, ConsumerCore, MaxDelivered,
)
from skiff.server.jetstream.priority import DO_PIN, DO_STATUS, DO_UNPIN, select_request
from skiff.server.jetstream.pull import (
    SWEEP_HEARTBEAT, SWEEP_NO_MESSAGES, SWEEP_TIMEOUT, WaitingRequest, WaitQueue,
)

S = 1_000_000_000  # ns per second
AW = 30 * S  # the default ack_wait


class Driver:
    """Plays events against a core the way the consumer does: a new message advances the stream cursor, a
    redelivery comes from the queue."""

    def __init__(self, **cfg) -> None:
        self.core = ConsumerCore(**cfg)
        self.results: list = []

    def run(self, events) -> "Driver":
        for ev in events:
            self.results.append(getattr(self, "ev_" + ev[0])(*ev[1:]))
        return self

    def ev_deliver(self, seq: int, now: int = 0):
        c = self.core
        if seq >= c.sseq:
            c.sseq = seq + 1
        return c.deliver(seq, now)

    def ev_redeliver(self, now: int = 0):
        """Take the head of the redelivery queue and send it (or see it hit max_deliver)."""
        seq, dc, md = self.core.take_redelivery()
        if md is not None:
            return md
        self.core.deliver(seq, now)
        return seq, dc

    def ev_ack(self, seq: int, dseq: int):
        return self.core.ack(seq, dseq)

    def ev_nak(self, seq: int, dseq: int, delay=None, now: int = 0):
        return self.core.nak(seq, dseq, delay, now)

    def ev_progress(self, seq: int, now: int):
        return self.core.progress(seq, now)

    def ev_check(self, now: int, first: int = 1):
        return self.core.check_pending(now, first)

    def ev_purge(self, first: int, gone):
        return self.core.purged(first, gone)

    @property
    def floor(self) -> tuple[int, int]:
        return self.core.adflr, self.core.asflr


# (case id, config, events, ack floor (delivery, stream) afterwards, pending stream seqs afterwards, rdq afterwards)
FLOOR_CASES = [
    ("in order", {}, [("deliver", 1), ("deliver", 2), ("deliver", 3), ("ack", 1, 1)], (1, 1), [2, 3], []),
    ("last ack empties pending: floor is the last delivery", {},
     [("deliver", 1), ("deliver", 2), ("ack", 2, 2), ("ack", 1, 1)], (2, 2), [], []),
    ("an ack above the floor leaves it", {}, [("deliver", 1), ("deliver", 2), ("deliver", 3), ("ack", 2, 2)],
     (0, 0), [1, 3], []),
    ("the floor jumps to below the next outstanding delivery", {},
     [("deliver", 1), ("deliver", 2), ("deliver", 3), ("deliver", 4), ("ack", 2, 2), ("ack", 1, 1)], (2, 2), [3, 4],
     []),
    ("stream gaps (a filtered consumer): the floor's stream seq is below the next outstanding one", {},
     [("deliver", 2), ("deliver", 5), ("deliver", 9), ("ack", 2, 1)], (1, 4), [5, 9], []),
    ("an ack of a sequence never delivered is ignored", {}, [("deliver", 1), ("ack", 7, 7)], (0, 0), [1], []),
    ("a double ack changes nothing", {}, [("deliver", 1), ("deliver", 2), ("ack", 1, 1), ("ack", 1, 1)], (1, 1),
     [2], []),
    ("ack all drops everything up to the acked message", {"ack_policy": "all"},
     [("deliver", 1), ("deliver", 2), ("deliver", 3), ("deliver", 4), ("ack", 3, 3)], (3, 3), [4], []),
    ("ack none: sent is acked", {"ack_policy": "none"}, [("deliver", 1), ("deliver", 2)], (2, 2), [], []),
    ("a redelivered message keeps its first delivery sequence", {},
     [("deliver", 1), ("deliver", 2), ("nak", 1, 1), ("redeliver",), ("ack", 1, 3)], (1, 1), [2], []),
    ("NAK queues, an ack unqueues", {}, [("deliver", 1), ("deliver", 2), ("nak", 2, 2), ("ack", 2, 2)], (0, 0), [1],
     []),
    ("NAK of a delivery at or below the floor is ignored", {},
     [("deliver", 1), ("deliver", 2), ("ack", 1, 1), ("nak", 1, 1)], (1, 1), [2], []),
    ("expiry queues in stream order", {},
     [("deliver", 3, 0), ("deliver", 1, 1), ("check", AW + 1)], (0, 0), [1, 3], [1, 3]),
    ("max_deliver reached at expiry: the message leaves pending like an ack", {"max_deliver": 1},
     [("deliver", 1, 0), ("deliver", 2, 5 * S), ("check", AW)], (1, 1), [2], []),
    ("max_deliver reached when the redelivery is taken", {"max_deliver": 2},
     [("deliver", 1, 0), ("deliver", 2, 0), ("nak", 1, 1), ("redeliver",), ("nak", 1, 3), ("redeliver",)],
     (1, 1), [2], []),
    ("purge: pending messages gone count as acked", {},
     [("deliver", 1), ("deliver", 2), ("deliver", 3), ("deliver", 4), ("purge", 3, [1, 2])], (2, 2), [3, 4], []),
    ("purge of everything: the floor is the last delivery", {},
     [("deliver", 1), ("deliver", 2), ("purge", 10, [1, 2])], (2, 9), [], []),
    ("expiry drops messages below the stream's first sequence", {},
     [("deliver", 1, 0), ("deliver", 2, 0), ("deliver", 3, 0), ("check", 1, 3)], (2, 2), [3], []),
]


@pytest.mark.parametrize("cfg,events,floor,pending,rdq", [c[1:] for c in FLOOR_CASES],
                         ids=[c[0] for c in FLOOR_CASES])
def test_floor_pending_and_queue(cfg, events, floor, pending, rdq):
    d = Driver(**cfg).run(events)
    assert d.floor == floor
    assert list(d.core.pending) == pending
    assert list(d.core.rdq) == rdq


def test_delivery_sequences_and_counts():
    d = Driver().run([("deliver", 1), ("deliver", 2), ("nak", 2, 2), ("nak", 1, 1), ("redeliver",), ("redeliver",)])
    assert d.results[:2] == [1, 2]
    # Redeliveries go in the order they were NAKed, each with its delivery count.
    assert d.results[4:] == [(2, 2), (1, 2)]
    assert d.core.dseq == 5 and d.core.rdc == {1: 1, 2: 1}
    assert d.core.pending == {1: [1, 0], 2: [2, 0]}


def test_out_of_order_delivery_keeps_pending_sorted():
    # A redelivery of a message that left pending (max_deliver raised, a restart) comes back below newer ones.
    d = Driver().run([("deliver", 5), ("deliver", 6)])
    d.core.deliver(2, 0)
    assert list(d.core.pending) == [2, 5, 6]


ACK_RESULTS = [
    ("explicit", {}, [("deliver", 1), ("deliver", 2), ("ack", 2, 2)], (2, [2], False)),
    ("explicit, at max_ack_pending", {"max_ack_pending": 2}, [("deliver", 1), ("deliver", 2), ("ack", 1, 1)],
     (1, [1], True)),
    ("explicit, not pending: the ack's own delivery seq", {}, [("deliver", 1), ("deliver", 2), ("ack", 1, 1),
                                                               ("ack", 1, 1)], (1, [], False)),
    ("all: every pending message up to it", {"ack_policy": "all"},
     [("deliver", 1), ("deliver", 2), ("deliver", 3), ("ack", 3, 3)], (3, [1, 2, 3], False)),
    ("all: gaps in the stream", {"ack_policy": "all"},
     [("deliver", 2), ("deliver", 7), ("deliver", 9), ("ack", 7, 2)], (2, [2, 7], False)),
]


@pytest.mark.parametrize("cfg,events,expect", [c[1:] for c in ACK_RESULTS], ids=[c[0] for c in ACK_RESULTS])
def test_ack_result(cfg, events, expect):
    r = Driver(**cfg).run(events).results[-1]
    assert (r.dseq, sorted(r.acked), r.was_full) == expect


@pytest.mark.parametrize("policy,events,expect", [
    ("all", [("deliver", 1), ("deliver", 2), ("ack", 2, 2), ("ack", 1, 1)], ALREADY),
    ("explicit", [("deliver", 1), ("ack", 2, 2)], None),  # not delivered yet
    ("none", [("deliver", 1), ("ack", 1, 1)], None),
])
def test_ack_refusals(policy, events, expect):
    assert Driver(ack_policy=policy).run(events).results[-1] is expect


def test_flow_control_accepts_acks_beyond_the_cursor():
    # A flow-control consumer's acks (from the source side) may name sequences not delivered yet.
    c = ConsumerCore(ack_policy="flow_control", flow_control=True)
    r = c.ack(5, 5)
    assert r is not None and r.dseq == 5 and (c.adflr, c.asflr) == (5, 5)


NAKS = [
    ("plain", None, NAK_QUEUED, [1]),
    ("delayed", 5 * S, NAK_DELAYED, []),
]


@pytest.mark.parametrize("delay,result,rdq", [n[1:] for n in NAKS], ids=[n[0] for n in NAKS])
def test_nak(delay, result, rdq):
    d = Driver().run([("deliver", 1, 0), ("nak", 1, 1, delay, 10 * S)])
    assert d.results[-1] == result
    assert list(d.core.rdq) == rdq
    if delay is not None:
        # The entry's time moved so that its ack_wait ends ``delay`` after the NAK: due then, not before.
        assert d.core.check_pending(10 * S + delay - 1, 1).expired == []
        assert d.core.check_pending(10 * S + delay, 1).expired == [1]


@pytest.mark.parametrize("events", [
    [("deliver", 1), ("nak", 1, 3)],  # a delivery sequence not handed out yet
    [("deliver", 1), ("deliver", 2), ("ack", 2, 2), ("nak", 2, 2)],  # no longer pending
])
def test_nak_ignored(events):
    assert Driver().run(events).results[-1] == NAK_IGNORED


def test_progress_restarts_the_ack_timer():
    d = Driver().run([("deliver", 1, 0), ("progress", 1, 20 * S)])
    e = d.core.check_pending(AW, 1)
    assert e.expired == [] and e.next_check == pytest.approx(20.0)
    assert d.core.progress(2, 0) is None


def test_expiry_shifts_times_by_one_offset_and_rearms():
    d = Driver().run([("deliver", 1, 0), ("deliver", 2, 2 * S), ("deliver", 3, 40 * S)])
    e = d.core.check_pending(45 * S, 1)
    assert e.expired == [1, 2] and e.maxed == [] and not e.changed
    # Both moved by the first one's lateness (45 s): their 2 s apart survives into the next round.
    assert d.core.pending[1][1] == 45 * S and d.core.pending[2][1] == 47 * S
    assert e.next_check == pytest.approx(25.0)  # message 3: 30 s after 40 s


def test_nothing_pending_stops_the_timer():
    d = Driver().run([("deliver", 1, 0), ("ack", 1, 1)])
    e = d.core.check_pending(AW, 1)
    assert e.next_check is None and d.floor == (1, 1)


def test_backoff_timeouts():
    d = Driver(ack_wait=1 * S, backoff=[1 * S, 5 * S, 20 * S])
    c = d.core
    d.run([("deliver", 1, 0)])
    assert c.ack_timeout(1) == 1.0 + ACK_WAIT_DELAY
    assert d.run([("check", 1 * S)]).results[-1].expired == [1]
    d.run([("redeliver", 1 * S)])
    assert c.ack_timeout(1) == 5.0 + ACK_WAIT_DELAY
    assert c.check_pending(5 * S, 1).expired == []
    assert c.check_pending(6 * S, 1).expired == [1]
    d.run([("redeliver", 6 * S), ("check", 26 * S), ("redeliver", 26 * S)])
    assert c.rdc[1] == 3
    assert c.ack_timeout(1) == 20.0 + ACK_WAIT_DELAY  # the last value repeats


def test_max_deliver_at_expiry():
    d = Driver(max_deliver=1, max_ack_pending=2).run([("deliver", 1, 0), ("deliver", 2, 0), ("check", AW)])
    e = d.results[-1]
    # Delivered once each, max_deliver 1: both given up, the advisory due for each, the floor at the last delivery.
    assert e.expired == [] and e.maxed == [MaxDelivered(1, 1, [1, 0], True), MaxDelivered(2, 1, [2, 0], True)]
    assert e.unblocked and e.next_check is None
    assert d.core.rdc == {1: 1, 2: 1} and d.floor == (2, 2)


def test_max_deliver_is_seen_when_the_redelivery_is_taken():
    d = Driver(max_deliver=2).run([("deliver", 1, 0), ("deliver", 2, 0), ("check", AW), ("redeliver", AW),
                                   ("redeliver", AW), ("check", 2 * AW)])
    # nats-server's deliveryCount is the redelivery count (1 when none): after two deliveries the expiry still
    # queues them, and taking them from the queue finds the limit.
    assert d.results[-1].expired == [1, 2] and d.results[-1].maxed == []
    d.run([("redeliver",), ("redeliver",)])
    assert d.results[-2:] == [MaxDelivered(1, 2, [1, 2 * AW], True), MaxDelivered(2, 2, [2, 2 * AW], True)]
    assert d.core.rdc == {1: 2, 2: 2} and not d.core.pending and d.floor == (4, 2)


def test_max_deliver_when_taken_from_the_queue():
    d = Driver(max_deliver=1).run([("deliver", 1, 0), ("nak", 1, 1)])
    md = d.run([("redeliver",)]).results[-1]
    assert md == MaxDelivered(1, 1, [1, 0], True)
    assert d.core.pending == {} and d.floor == (1, 1)


def test_put_back():
    d = Driver().run([("deliver", 1), ("nak", 1, 1)])
    seq, dc, md = d.core.take_redelivery()
    assert (seq, dc, md) == (1, 2, None) and d.core.rdc == {1: 1}
    d.core.put_back(seq, requeue=True)  # nobody to send it to
    assert d.core.rdc == {1: 0} and list(d.core.rdq) == [1]
    d.core.take_redelivery()
    d.core.put_back(seq, requeue=False)  # the message is gone from the stream
    assert d.core.rdc == {1: 0} and not d.core.rdq


def test_expire_all():
    d = Driver(max_deliver=3).run([("deliver", 1, 0), ("nak", 1, 1), ("redeliver", S), ("nak", 1, 2),
                                   ("redeliver", S), ("deliver", 2, 2 * S), ("deliver", 3, 3 * S)])
    assert d.core.rdc == {1: 2}
    d.core.configure("explicit", AW, None, 0, 2, False)  # max_deliver lowered to 2
    expired, maxed = d.core.expire_all(10 * S)
    # 1 was delivered three times: it is given up instead of coming back; the others are due at once, with
    # their times moved by one offset (2's lateness).
    assert expired == [2, 3] and maxed == [MaxDelivered(1, 2, [1, S], True)]
    assert list(d.core.rdq) == [2, 3] and d.core.pending == {2: [4, 10 * S], 3: [5, 11 * S]}
    assert d.floor == (3, 1)  # 1 was the floor's next delivery: the floor moves to just below 2's (4, 2)


def test_needs():
    d = Driver().run([("deliver", 1), ("deliver", 2), ("ack", 1, 1)])
    assert [d.core.needs(s) for s in (1, 2, 3)] == [False, True, True]


def test_restore_and_reconcile():
    c = ConsumerCore()
    c.restore((5, 10), (2, 4), {8: (4, 100), 6: (3, 90), 10: (5, 110)}, {8: 2, 3: 1})
    assert (c.dseq, c.sseq, c.adflr, c.asflr) == (6, 11, 2, 4)
    assert list(c.pending) == [6, 8, 10] and c.pending[8] == [4, 100]
    c.forget_redelivered_below(5)
    assert c.rdc == {8: 2}
    c.reconcile(8)  # the stream now ends at 8
    assert list(c.pending) == [6, 8] and (c.sseq, c.dseq) == (9, 5)
    c.reconcile(3)  # below the ack floor: start over from what is left
    assert c.pending == {} and (c.asflr, c.adflr, c.sseq, c.dseq) == (3, 4, 4, 5)


def test_ack_all_of_a_redelivery_moves_the_delivery_floor_past_older_deliveries():
    """Two deliveries expire, the first is redelivered (delivery 3) and that delivery is acked with ack all: the
    floor becomes (delivery 3, stream 1) while stream 2 (delivery 2) is still pending, as nats-server's
    processAckMsg sets adflr/asflr for AckAll (found by test_invariants' search)."""
    c = ConsumerCore(ack_policy="all", ack_wait=AW)
    c.sseq = 2
    assert c.deliver(1, 0) == 1
    c.sseq = 3
    assert c.deliver(2, 0) == 2
    c.check_pending(30 * S, 1)
    seq, _, md = c.take_redelivery()
    assert (seq, md) == (1, None) and c.deliver(1, 30 * S) == 3
    c.ack(1, 3)
    assert (c.adflr, c.asflr) == (3, 1) and list(c.pending) == [2]


def test_start_at_clears():
    d = Driver().run([("deliver", 1), ("nak", 1, 1)])
    d.core.start_at(7)
    c = d.core
    assert (c.sseq, c.dseq, c.adflr, c.asflr) == (7, 1, 0, 6) and not c.pending and not c.rdc and not c.rdq


# ---------------------------------------------------------------------------------------------- invariants
_EVENTS = st.lists(
    st.one_of(
        st.tuples(st.just("new"), st.integers(1, 3)),  # deliver a new message, skipping 0-2 stream seqs
        st.tuples(st.just("ack"), st.integers(0, 30)),  # ack the n-th delivery made so far
        st.tuples(st.just("nak"), st.integers(0, 30), st.sampled_from([None, 0, 2 * S])),
        st.tuples(st.just("progress"), st.integers(0, 30)),
        st.tuples(st.just("tick"), st.integers(0, 40)),  # seconds pass, then the ack timer fires
        st.tuples(st.just("redeliver")),
        st.tuples(st.just("purge"), st.integers(0, 3)),
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(policy=st.sampled_from(["explicit", "all"]), max_deliver=st.sampled_from([-1, 1, 2, 3]),
       backoff=st.sampled_from([None, [S, 5 * S, 20 * S]]), events=_EVENTS)
def test_invariants(policy, max_deliver, backoff, events):
    c = ConsumerCore(ack_policy=policy, ack_wait=backoff[0] if backoff else AW, backoff=backoff,
                     max_deliver=max_deliver)
    sent: list[tuple[int, int]] = []  # (stream seq, delivery seq) of every delivery, as the ack subjects carry them
    now = 0
    first = 1
    for ev in events:
        kind = ev[0]
        before = (c.adflr, c.asflr)
        if kind == "new":
            seq = c.sseq + ev[1] - 1
            c.sseq = seq + 1
            sent.append((seq, c.deliver(seq, now)))
        elif kind == "redeliver" and c.rdq:
            seq, _, md = c.take_redelivery()
            if md is None:
                sent.append((seq, c.deliver(seq, now)))
        elif kind in ("ack", "nak", "progress") and sent:
            seq, dseq = sent[ev[1] % len(sent)]
            if kind == "ack":
                c.ack(seq, dseq)
            elif kind == "nak":
                c.nak(seq, dseq, ev[2], now)
            else:
                c.progress(seq, now)
        elif kind == "tick":
            now += ev[1] * S
            c.check_pending(now, first)
        elif kind == "purge":
            first = min(first + ev[1], c.sseq)
            c.purged(first, [s for s in c.pending if s < first])
        # The ack floor never passes a message still waiting for its ack, and never goes back.  With ack all the
        # delivery-sequence floor may pass a pending message's first delivery: acking a redelivery (a later
        # delivery sequence) of a lower message moves it there, as nats-server's processAckMsg does
        # (test_ack_all_of_a_redelivery_moves_the_delivery_floor_past_older_deliveries).
        for s, p in c.pending.items():
            assert s > c.asflr and (p[0] > c.adflr or policy == "all"), (s, p, c.adflr, c.asflr)
            assert s < c.sseq and p[0] < c.dseq
        assert c.adflr >= before[0] and c.asflr >= before[1]
        assert c.adflr < c.dseq and c.asflr < c.sseq
        # pending in stream order; what is queued for redelivery is pending; nothing pending: the floor is the
        # last delivery (explicit acks: ack all may stop below it)
        assert list(c.pending) == sorted(c.pending)
        assert set(c.rdq) <= set(c.pending)
        if not c.pending and policy == "explicit":
            assert (c.adflr, c.asflr) == (c.dseq - 1, c.sseq - 1)


@settings(max_examples=300, deadline=None)
@given(gaps=st.lists(st.integers(1, 3), min_size=1, max_size=40), order=st.randoms(use_true_random=False),
       in_order=st.booleans())
def test_store_and_core_move_the_ack_floor_alike(gaps, order, in_order):
    """The consumer store (storage/consumer.py update_acks) and the core keep the same ack floor for any order of
    explicit acks, with stream sequences skipped (a filter) and acks repeated: both look at the next sequence first
    and fall back to their walk (first key or sequence scan) only when it is not pending."""
    from skiff.storage.consumer import MemoryConsumerStore
    from skiff.storage.records import StoredMsg

    c = ConsumerCore(ack_policy="explicit")
    store = MemoryConsumerStore("explicit")
    sent = []
    seq = 0
    for g in gaps:
        seq += g
        c.sseq = seq + 1
        d = c.deliver(seq, 0)
        sent.append((seq, d))
    store.update_delivered_run(1, [StoredMsg("s", s, 0, b"", b"") for s, _ in sent])
    acks = list(sent) + sent[: len(sent) // 3]  # some acked twice
    if not in_order:
        order.shuffle(acks)
    for s, d in acks:
        c.ack(s, d)
        store.update_acks(d, s)
        assert (store.ac, store.as_) == (c.adflr, c.asflr), (s, d)
        assert list(store.pending) == list(c.pending)
    assert (c.adflr, c.asflr) == sent[-1][::-1]


# ---------------------------------------------------------------------------------------------- waiting pull requests
def _wr(reply: str, expires: float = 0.0, no_wait: bool = False, d: int = 0, hb: float = 0.0) -> WaitingRequest:
    wr = WaitingRequest(reply, 10, 0, expires, 0.0, hb, no_wait)
    wr.d = d
    return wr


TO, NM, HB = SWEEP_TIMEOUT, SWEEP_NO_MESSAGES, SWEEP_HEARTBEAT

# (case id, requests, now, end of stream, what to send, requests kept, next timer) - nats-server processWaiting
SWEEPS = [
    ("expired: 408", [_wr("a", expires=5.0)], 5.0, False, [(TO, "a")], [], 0.0),
    ("not yet expired: the timer is its expiry", [_wr("a", expires=5.0)], 4.0, False, [], ["a"], 5.0),
    ("no interest: dropped silently", [_wr("gone", expires=5.0)], 1.0, False, [], [], 0.0),
    ("no_wait at the end of the stream: 404", [_wr("a", no_wait=True)], 1.0, True, [(NM, "a")], [], 0.0),
    ("no_wait before the end: waits", [_wr("a", no_wait=True)], 1.0, False, [], ["a"], 0.0),
    ("no_wait with expires that got nothing: waits for its expiry", [_wr("a", expires=9.0, no_wait=True)], 1.0, True,
     [], ["a"], 9.0),
    ("no_wait with expires that got some: 404", [_wr("a", expires=9.0, no_wait=True, d=1)], 1.0, True,
     [(NM, "a")], [], 0.0),
    ("heartbeat due: sent, next one an interval later", [_wr("a", hb=1.0)], 1.0, False, [(HB, "a")], ["a"], 2.0),
    ("heartbeat not due: the timer is the heartbeat", [_wr("a", expires=9.0, hb=1.0)], 0.5, False, [], ["a"], 1.0),
    ("queue order kept, earliest timer over all",
     [_wr("a", expires=3.0), _wr("b", no_wait=True), _wr("gone"), _wr("c", expires=7.0, hb=2.0), _wr("d", expires=6.0)],
     3.0, True, [(TO, "a"), (NM, "b"), (HB, "c")], ["c", "d"], 5.0),  # c's heartbeat: due at 2, next at 5
]


@pytest.mark.parametrize("reqs,now,eos,out,kept,fexp", [c[1:] for c in SWEEPS], ids=[c[0] for c in SWEEPS])
def test_wait_queue_sweep(reqs, now, eos, out, kept, fexp):
    wq = WaitQueue(10)
    for wr in reqs:
        assert wq.add(wr)
    got, nxt = wq.sweep(now, eos, lambda reply: reply != "gone")
    assert [(what, wr.reply) for what, wr in got] == out
    assert [wr.reply for wr in wq.q] == kept
    assert nxt == fexp


def test_wait_queue_round_robin():
    # nats-server waitQueue.pop: a request that wants more moves to the tail, one that is done leaves.
    wq = WaitQueue(10)
    a, b = _wr("a"), _wr("b")
    a.n = 2
    b.n = 1
    wq.add(a)
    wq.add(b)
    assert [wq.pop().reply for _ in range(3)] == ["a", "b", "a"]
    assert len(wq) == 0 and (a.d, b.d) == (2, 1)


# ---------------------------------------------------------------------- pull request selection (priority.py)
def _pr(reply: str, expires: float = 0.0, b: int = 0, pin: str = "", group: str = "g", min_pending: int = 0,
        prio: int = 0) -> WaitingRequest:
    wr = WaitingRequest(reply, 10, b, expires, 0.0, 0.0, False)
    wr.pin_id, wr.group, wr.min_pending, wr.priority = pin, group, min_pending, prio
    return wr


def _do(todo) -> list:
    return [(DO_STATUS, d[1], d[2].split(b"\r\n")[0].decode()) if d[0] == DO_STATUS
            else (d[0], d[1].reply) if d[0] == DO_PIN else (d[0],) for d in todo]


# (case id, requests, message size, policy, current pin, (num_pending + 1, ack pending), chosen, actions, queue after)
# - nats-server nextWaiting; the selection sends nothing, the pull adapter carries the actions out in order
SELECTIONS = [
    ("head served, moves to the tail", [_pr("a"), _pr("b")], 10, "none", None, (0, 0), "a",
     [], ["b", "a"]),
    ("expired head: 408, next one served", [_pr("a", expires=1.0), _pr("b")], 10, "none", None, (0, 0), "b",
     [(DO_STATUS, "a", "NATS/1.0 408 Request Timeout")], ["b"]),
    ("byte budget too small: 409, dropped", [_pr("a", b=5), _pr("b", b=50)], 10, "none", None, (0, 0), "b",
     [(DO_STATUS, "a", "NATS/1.0 409 Message Size Exceeds MaxBytes")], ["b"]),
    ("requester gone: dropped silently", [_pr("gone"), _pr("b")], 10, "none", None, (0, 0), "b", [], ["b"]),
    ("no pin: the first request without an id is pinned", [_pr("a")], 10, "pinned_client", None, (0, 0), "a",
     [(DO_PIN, "a")], ["a"]),
    ("no pin: an old id is refused with 423", [_pr("a", pin="old"), _pr("b")], 10, "pinned_client", None, (0, 0),
     "b", [(DO_STATUS, "a", "NATS/1.0 423 Nats-Wrong-Pin-Id"), (DO_PIN, "b")], ["b"]),
    ("pinned: standbys wait, the pin holder is served", [_pr("a"), _pr("p", pin="P")], 10, "pinned_client", "P",
     (0, 0), "p", [], ["a", "p"]),
    ("pinned: only standbys, nobody served", [_pr("a"), _pr("b")], 10, "pinned_client", "P", (0, 0), None, [],
     ["a", "b"]),
    ("pinned then too small: the pin goes with the request", [_pr("a", b=5), _pr("b", pin="x")], 10,
     "pinned_client", None, (0, 0), None,
     [(DO_PIN, "a"), (DO_STATUS, "a", "NATS/1.0 409 Message Size Exceeds MaxBytes"), (DO_UNPIN,),
      (DO_STATUS, "b", "NATS/1.0 423 Nats-Wrong-Pin-Id")], []),
    ("overflow below its threshold waits", [_pr("a", min_pending=5), _pr("b")], 10, "overflow", None, (3, 0), "b",
     [], ["a", "b"]),
    ("overflow at its threshold is served", [_pr("a", min_pending=3)], 10, "overflow", None, (3, 0), "a", [], ["a"]),
    ("prioritized: requeued behind its level", [_pr("a", prio=0), _pr("b", prio=0), _pr("c", prio=1)], 10,
     "prioritized", None, (0, 0), "a", [], ["b", "a", "c"]),
]


@pytest.mark.parametrize("reqs,sz,policy,pin,counts,chosen,actions,after", [c[1:] for c in SELECTIONS],
                         ids=[c[0] for c in SELECTIONS])
def test_select_request(reqs, sz, policy, pin, counts, chosen, actions, after):
    wq = WaitQueue(10)
    for wr in reqs:
        assert wq.add(wr)
    wr, todo = select_request(wq, 2.0, sz, policy, pin, lambda: counts, lambda reply: reply != "gone")
    assert (wr.reply if wr is not None else None) == chosen
    assert _do(todo) == actions
    assert [w.reply for w in wq.q] == after
