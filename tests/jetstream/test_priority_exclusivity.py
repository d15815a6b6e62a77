"""Pinning is affinity, not a lock (ADR-42: "We should not describe this in terms of exclusivity").  Against both
servers, with short real durations; docs/exclusivity.md tells the same story with these tests as the example.

When the pin moves, the server cannot take back what the old client already holds: those messages stay with it and
are redelivered - to the new pinned client - only after their ack_wait.  With max_ack_pending 1 there is never more
than one message *pending* on the server, yet two clients work on the same message: the slow one still has it when
the other receives it again.  The server accepts the late ack of the old delivery and the ack of the new one alike.
max_deliver ends such a message with the MAX_DELIVERIES advisory, never silently.
"""
from __future__ import annotations

from tests.conftest import check_schema
from tests.jetstream.test_consumer_support import MS, SECOND, add_consumer, cinfo, status
from tests.jetstream.test_priority_support import (
    PIN_HDR, Puller, data, delivered, events, next_event, no_event, stream_seq, validate_group_event,
)


async def _setup(jsc, n: int, **cfg) -> str:
    s = jsc.name()
    await jsc.create(s)
    for i in range(n):
        await jsc.pub(f"{s}.a", b"job-%d" % i)
    await add_consumer(jsc, s, "C", ack_policy="explicit", priority_policy="pinned_client", priority_groups=["G"],
                       **cfg)
    return s


async def test_pin_moves_but_the_old_client_keeps_its_message(jsc):
    # The standby is pinned with the redelivery and keeps the pin for priority_timeout without pulling; the slow
    # client's last pull must come before that: 1 s leaves room for the acks and the info request between them on a
    # loaded machine (with 300 ms the pin lapsed first there, in CI, and the pull met no pin at all).
    s = await _setup(jsc, 2, ack_wait=3 * SECOND, max_ack_pending=1, priority_timeout=SECOND)
    unpinned = await events(jsc.nc, "UNPINNED", s, "C")
    slow, standby = Puller(jsc.nc, s, "C"), Puller(jsc.nc, s, "C")

    # The slow client is pinned and takes job-0; then it stops pulling (a long GC pause, a stuck disk...).
    await slow.request(1)
    (held,) = await slow.collect(1)
    assert held.data == b"job-0" and delivered(held) == 1
    old_pin = slow.pin
    await standby.request(1, expires=5 * SECOND)

    # Without pulls from the slow client its pin lapses after priority_timeout.
    ev = await next_event(unpinned, 2.0)
    validate_group_event(ev)
    assert ev["reason"] == "timeout"
    # The pin has moved away, but job-0 is not taken back from the slow client: the standby gets nothing until
    # job-0's ack_wait runs out (and max_ack_pending 1 holds job-1 back meanwhile).
    assert await standby.collect(timeout=0.6) == []

    # ack_wait over: job-0 is redelivered, to the standby, which is pinned with it.
    (again,) = await standby.collect(1, timeout=4.0)
    assert again.data == b"job-0" and stream_seq(again) == stream_seq(held) == 1
    assert delivered(again) == 2
    assert again.headers[PIN_HDR] == standby.pin != old_pin
    # Two clients now hold the same job.  Both acks are accepted: the server cannot tell a late worker from a
    # duplicate (the first ack to arrive settles the message, the second is a no-op with the same empty reply).
    assert (await jsc.nc.request(held.reply, b"+ACK", timeout=2)).data == b""
    assert (await jsc.nc.request(again.reply, b"+ACK", timeout=2)).data == b""
    info = await cinfo(jsc, s, "C")
    assert info["num_ack_pending"] == 0 and info["ack_floor"]["stream_seq"] == 1
    assert info["num_redelivered"] == 0  # settled: nothing is left to show there was an overlap

    # The slow client finds out it lost the pin only on its next pull - after it did the work.
    await slow.request(1)
    (m,) = await slow.collect(1)
    assert status(m) == (423, "Nats-Pin-Id mismatch")
    await standby.request(1)
    assert data(await standby.collect(1)) == [b"job-1"]


async def test_max_deliver_ends_the_overlap_with_an_advisory(jsc):
    s = await _setup(jsc, 2, ack_wait=500 * MS, max_ack_pending=1, max_deliver=2)
    maxd = await events(jsc.nc, "MAX_DELIVERIES", s, "C")
    first, second = Puller(jsc.nc, s, "C"), Puller(jsc.nc, s, "C")

    await first.request(1)
    (m0a,) = await first.collect(1)
    assert (m0a.data, delivered(m0a)) == (b"job-0", 1)
    await second.request(2, expires=5 * SECOND)
    # The pin is moved (UNPIN); job-0 comes back after ack_wait to the second client; it does not ack either.
    assert "error" not in await jsc.api(f"CONSUMER.UNPIN.{s}.C", {"group": "G"})
    (m0b,) = await second.collect(1, timeout=3.0)
    assert (m0b.data, delivered(m0b)) == (b"job-0", 2)
    # After the second ack_wait the server gives up on job-0: the advisory says so, and the consumer moves on.
    ev = await next_event(maxd, 3.0)
    check_schema(ev)
    assert (ev["stream"], ev["consumer"], ev["stream_seq"], ev["deliveries"]) == (s, "C", 1, 2)
    (m,) = await second.collect(1, timeout=2.0)
    assert (m.data, delivered(m)) == (b"job-1", 1)
    info = await cinfo(jsc, s, "C")
    assert info["num_ack_pending"] == 1  # job-1 only: job-0 is no longer pending anywhere
    assert await no_event(maxd)
    # A late ack for job-0 from either client is still answered, and changes nothing.
    for late in (m0a, m0b):
        assert (await jsc.nc.request(late.reply, b"+ACK", timeout=2)).data == b""
    assert (await cinfo(jsc, s, "C"))["num_ack_pending"] == 1


async def test_max_ack_pending_one_is_not_mutual_exclusion_across_an_unpin(jsc):
    """The same with UNPIN as the trigger (an operator moving work away from a node): the old client's message
    still waits for its ack_wait, and is then delivered to the new pin while the old client may still be on it."""
    s = await _setup(jsc, 1, ack_wait=800 * MS, max_ack_pending=1)
    a, b = Puller(jsc.nc, s, "C"), Puller(jsc.nc, s, "C")
    await a.request(1)
    (held,) = await a.collect(1)
    await b.request(1, expires=5 * SECOND)
    r = await jsc.api(f"CONSUMER.UNPIN.{s}.C", {"group": "G"})
    assert "error" not in r
    assert await b.collect(timeout=0.4) == []  # unpinned at once, but job-0 is still the old client's
    (again,) = await b.collect(1, timeout=3.0)
    assert stream_seq(again) == stream_seq(held) and delivered(again) == 2
    assert (await cinfo(jsc, s, "C"))["priority_groups"][0]["pinned_client_id"] == b.pin


async def test_a_pull_that_outlives_priority_timeout_loses_the_pin_midway(jsc):
    """The pin's timer is pushed back by pull *requests* carrying the pin, not by deliveries: one long pull (expires
    above priority_timeout) loses the pin while it waits, and its next message is refused with 423 - which is why
    ADR-42 asks for priority_timeout well above expires."""
    s = await _setup(jsc, 1, priority_timeout=300 * MS)
    unpinned = await events(jsc.nc, "UNPINNED", s, "C")
    p = Puller(jsc.nc, s, "C")
    await p.request(5, expires=5 * SECOND)
    (m,) = await p.collect(1)
    assert m.data == b"job-0" and p.pin
    assert (await next_event(unpinned, 2.0))["reason"] == "timeout"
    await jsc.pub(f"{s}.a", b"job-1")
    (m,) = await p.collect(1)
    assert status(m) == (423, "Nats-Wrong-Pin-Id")
    assert m.headers["Nats-Pending-Messages"] == "4"
    await p.request(1)  # without the id now: pinned again, with a new id
    (m,) = await p.collect(1)
    assert m.data == b"job-1" and m.headers[PIN_HDR] == p.pin
