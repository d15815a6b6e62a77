"""Priority groups with a driven clock (embedded Skiff, ManualClock): the pin lapses exactly at priority_timeout,
a pull carrying the pin pushes it back, and the affinity-not-a-lock timeline of test_priority_exclusivity.py with
exact times - the old client keeps its message until ack_wait, a due redelivery waits while the old pin stands, and
max_deliver ends the message with its advisory."""
from __future__ import annotations

import pytest

from tests.jetstream.test_consumer_support import SECOND, status
from tests.jetstream.test_priority_support import (
    PIN_HDR, ClockEnv, Puller, data, delivered, events, next_event, no_event, validate_group_event,
)

pytestmark = pytest.mark.skiff_only


@pytest.fixture
async def env(tmp_path):
    e = await ClockEnv.start(str(tmp_path))
    yield e
    await e.stop()


async def _pinned(env, **cfg) -> None:
    cfg.setdefault("ack_policy", "explicit")
    await env.consumer("C", priority_policy="pinned_client", priority_groups=["G"], **cfg)


async def test_pin_lapses_exactly_at_priority_timeout(env, target):
    await env.pub("s.a", b"m0")
    await _pinned(env, priority_timeout=10 * SECOND)
    unpinned = await events(env.nc, "UNPINNED", "S", "C")
    a = Puller(env.nc, "S", "C")
    await a.request(1)
    assert data(await a.collect(1)) == [b"m0"]
    await env.advance(9.999)
    assert await no_event(unpinned, 0.05)
    assert (await env.api("CONSUMER.INFO.S.C"))["priority_groups"][0]["pinned_client_id"] == a.pin
    await env.advance(0.001)
    ev = await next_event(unpinned, 1)
    validate_group_event(ev)
    assert ev["reason"] == "timeout"
    assert "pinned_client_id" not in (await env.api("CONSUMER.INFO.S.C"))["priority_groups"][0]


async def test_a_pull_with_the_pin_pushes_the_timeout_back(env, target):
    await env.pub("s.a", b"m0")
    await _pinned(env, priority_timeout=10 * SECOND)
    unpinned = await events(env.nc, "UNPINNED", "S", "C")
    a, other = Puller(env.nc, "S", "C"), Puller(env.nc, "S", "C")
    await a.request(1)
    await a.collect(1)
    await env.advance(9)
    await other.request(1, expires=30 * SECOND)  # a standby's pull does not touch the pin's timer
    await a.request(1, expires=30 * SECOND)  # the pinned client's pull does: now due at t=19
    await env.advance(9.999)
    assert await no_event(unpinned, 0.05)
    await env.advance(0.001)
    assert (await next_event(unpinned, 1))["reason"] == "timeout"


async def test_old_client_keeps_its_message_until_ack_wait(env, target):
    for i in range(2):
        await env.pub("s.a", b"job-%d" % i)
    await _pinned(env, ack_wait=30 * SECOND, max_ack_pending=1, priority_timeout=10 * SECOND)
    unpinned = await events(env.nc, "UNPINNED", "S", "C")
    slow, standby = Puller(env.nc, "S", "C"), Puller(env.nc, "S", "C")
    await slow.request(1)
    (held,) = await slow.collect(1)
    await standby.request(5, expires=300 * SECOND)
    await env.advance(10)
    assert (await next_event(unpinned, 1))["reason"] == "timeout"
    # The pin is gone at t=10, the message is not: it stays the slow client's until ack_wait (+1ms) at t=30.
    await env.advance(20)
    assert await standby.collect(timeout=0.05) == []
    await env.advance(0.002)
    (again,) = await standby.collect(1)
    assert (again.data, delivered(again)) == (b"job-0", 2) and again.headers[PIN_HDR] == standby.pin
    # Both acks are answered; the first settles job-0, max_ack_pending lets job-1 out to the new pin.
    assert (await env.nc.request(held.reply, b"+ACK", timeout=2)).data == b""
    (nxt,) = await standby.collect(1)
    assert (nxt.data, delivered(nxt)) == (b"job-1", 1)
    assert (await env.nc.request(again.reply, b"+ACK", timeout=2)).data == b""
    info = await env.api("CONSUMER.INFO.S.C")
    assert info["num_ack_pending"] == 1 and info["ack_floor"]["stream_seq"] == 1


async def test_due_redelivery_waits_for_the_old_pin_then_max_deliver_ends_it(env, target):
    for i in range(2):
        await env.pub("s.a", b"job-%d" % i)
    await _pinned(env, ack_wait=30 * SECOND, max_ack_pending=1, max_deliver=2, priority_timeout=45 * SECOND)
    maxd = await events(env.nc, "MAX_DELIVERIES", "S", "C")
    first, second = Puller(env.nc, "S", "C"), Puller(env.nc, "S", "C")
    await first.request(1)
    (m,) = await first.collect(1)
    assert (m.data, delivered(m)) == (b"job-0", 1)
    await second.request(5, expires=600 * SECOND)
    # t=30: job-0 is due again, but the first client is still pinned (it just has no pull waiting): nothing moves.
    await env.advance(30.002)
    assert await second.collect(timeout=0.05) == []
    # t=45: the pin lapses and the due redelivery goes to the second client, which is pinned with it.
    await env.advance(14.998)
    (m,) = await second.collect(1)
    assert (m.data, delivered(m)) == (b"job-0", 2) and second.pin
    # t=75: nobody acked; max_deliver 2 ends job-0 with the advisory, and the consumer goes on with job-1.
    await env.advance(30.002)
    ev = await next_event(maxd, 1)
    assert (ev["stream_seq"], ev["deliveries"]) == (1, 2)
    (m,) = await second.collect(1)
    assert (m.data, delivered(m)) == (b"job-1", 1)
    assert [status(x) for x in await second.collect(timeout=0.05)] == []
