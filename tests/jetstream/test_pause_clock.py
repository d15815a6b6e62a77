"""Consumer pause with a driven clock (embedded Skiff, ManualClock): delivery resumes exactly at the deadline,
pull heartbeats go on while paused, and redeliveries wait for the resume too."""
from __future__ import annotations

import pytest

from skiff.protocol.jsapi.timefmt import format_time
from tests.jetstream.test_consumer_support import SECOND
from tests.jetstream.test_priority_support import (
    ClockEnv, Puller, data, delivered, events, next_event, no_event, statuses, validate_event,
)

pytestmark = pytest.mark.skiff_only


@pytest.fixture
async def env(tmp_path):
    e = await ClockEnv.start(str(tmp_path))
    yield e
    await e.stop()


async def _request(env, body):
    p = Puller(env.nc, "S", "C", group="")  # a consumer without priority groups
    await p.request(**body)
    return p


async def test_resume_exactly_at_the_deadline(env, target):
    await env.consumer("C", ack_policy="explicit")
    adv = await events(env.nc, "PAUSE", "S", "C")
    until = format_time(env.now_ns() + 10 * SECOND)
    r = await env.api("CONSUMER.PAUSE.S.C", {"pause_until": until})
    assert r["paused"] is True and r["pause_remaining"] == 10 * SECOND
    validate_event(await next_event(adv, 1))
    p = await _request(env, {"batch": 1, "expires": 20 * SECOND, "idle_heartbeat": 3 * SECOND})
    await env.pub("s.a", b"m0")
    await env.advance(9.999)
    msgs = await p.collect(timeout=0.05)
    assert data(msgs) == [] and len(statuses(msgs)) == 3  # heartbeats at 3, 6 and 9 s
    info = await env.api("CONSUMER.INFO.S.C")
    assert info["paused"] is True and info["pause_remaining"] == 1_000_000
    await env.advance(0.001)
    assert data(await p.collect(1)) == [b"m0"]
    ev = await next_event(adv, 1)
    validate_event(ev)
    assert (ev["paused"], ev["pause_until"]) == (False, until)


async def test_redelivery_waits_for_the_resume(env, target):
    await env.pub("s.a", b"m0")
    await env.consumer("C", ack_policy="explicit", ack_wait=5 * SECOND)
    p = await _request(env, {"batch": 5, "expires": 60 * SECOND})
    (m,) = await p.collect(1)
    assert delivered(m) == 1
    await env.api("CONSUMER.PAUSE.S.C", {"pause_until": format_time(env.now_ns() + 20 * SECOND)})
    await env.advance(19.9)  # ack_wait ran out at 5s, but nothing is delivered while paused
    assert await p.collect(timeout=0.05) == []
    adv = await events(env.nc, "PAUSE", "S", "C")
    await env.advance(0.1)
    (m,) = await p.collect(1)
    assert (m.data, delivered(m)) == (b"m0", 2)
    assert (await next_event(adv, 1))["paused"] is False
    assert await no_event(adv, 0.05)
