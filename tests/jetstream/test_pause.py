"""Consumer pause against both servers: ``pause_until`` at create and ``$JS.API.CONSUMER.PAUSE``; nothing delivered
while paused, heartbeats go on (pull and push), ``paused`` / ``pause_remaining`` in info, the PAUSE advisory,
resume at the deadline or by request, and the API's errors.  Short real durations; the exact deadline is in
test_pause_clock.py."""
from __future__ import annotations

import asyncio
import datetime
import time

from tests.jetstream.test_consumer_support import MS, SECOND, add_consumer, cinfo, pull, status
from tests.jetstream.test_priority_support import data, events, next_event, no_event, statuses, validate_event

ZERO_TIME = "0001-01-01T00:00:00Z"
PAUSE_ERR_EXTRA = {"paused": False, "pause_until": ZERO_TIME}


def rfc3339(seconds_from_now: float) -> str:
    """A UTC time as the servers print it back (Go RFC3339Nano: trailing zeros of the fraction trimmed)."""
    t = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=seconds_from_now)
    return t.strftime("%Y-%m-%dT%H:%M:%S.%f").rstrip("0").rstrip(".") + "Z"


async def _stream(jsc) -> str:
    s = jsc.name()
    await jsc.create(s)
    return s


async def test_pull_consumer_paused_until_deadline(jsc):
    s = await _stream(jsc)
    await add_consumer(jsc, s, "C", ack_policy="explicit")
    adv = await events(jsc.nc, "PAUSE", s, "C")
    until = rfc3339(1.0)
    t0 = time.monotonic()
    r = await jsc.api(f"CONSUMER.PAUSE.{s}.C", {"pause_until": until})
    assert (r["paused"], r["pause_until"]) == (True, until) and 0 < r["pause_remaining"] <= SECOND
    ev = await next_event(adv)
    validate_event(ev)
    assert (ev["stream"], ev["consumer"], ev["paused"], ev["pause_until"]) == (s, "C", True, until)
    info = await cinfo(jsc, s, "C")
    assert info["paused"] is True and 0 < info["pause_remaining"] <= SECOND
    assert info["config"]["pause_until"] == until

    # A pull waits through the pause and gets its idle heartbeats; the message comes at the deadline.
    await jsc.pub(f"{s}.a", b"m0")
    msgs = await pull(jsc.nc, s, "C", {"batch": 1, "expires": 3 * SECOND, "idle_heartbeat": 250 * MS},
                      timeout=2.0, until_status=False, max_msgs=20)
    elapsed = time.monotonic() - t0
    assert data(msgs) == [b"m0"]
    hbs = statuses(msgs)
    assert len(hbs) >= 2 and set(hbs) == {(100, "Idle Heartbeat")}
    assert status(msgs[-1]) is None and elapsed >= 0.9
    ev = await next_event(adv)
    validate_event(ev)
    assert (ev["paused"], ev["pause_until"]) == (False, until)  # the deadline, not the zero time
    info = await cinfo(jsc, s, "C")
    assert "paused" not in info and "pause_remaining" not in info
    assert info["config"]["pause_until"] == until  # the config keeps the (past) deadline


async def test_push_consumer_created_paused_heartbeats_then_resumed_by_request(jsc):
    s = await _stream(jsc)
    adv = await events(jsc.nc, "PAUSE", s, "P")
    sub = await jsc.nc.subscribe(f"dlv.{s}")
    until = rfc3339(60)
    r = await add_consumer(jsc, s, "P", ack_policy="explicit", deliver_subject=f"dlv.{s}",
                           idle_heartbeat=100 * MS, pause_until=until)
    assert r["paused"] is True and r["config"]["pause_until"] == until
    ev = await next_event(adv)
    assert (ev["paused"], ev["pause_until"]) == (True, until)
    await jsc.pub(f"{s}.a", b"m0")
    await asyncio.sleep(0.5)
    got = []
    while True:
        try:
            got.append(await sub.next_msg(timeout=0.05))
        except Exception:  # noqa: BLE001 - timeout: nothing more queued
            break
    assert data(got) == [] and len(statuses(got)) >= 3
    assert set(statuses(got)) == {(100, "Idle Heartbeat")}

    r = await jsc.api(f"CONSUMER.PAUSE.{s}.P", b"")  # an empty body resumes
    assert r == {"type": "io.nats.jetstream.api.v1.consumer_pause_response", "paused": False,
                 "pause_until": ZERO_TIME}
    ev = await next_event(adv)
    validate_event(ev)
    assert (ev["paused"], ev["pause_until"]) == (False, ZERO_TIME)
    for _ in range(20):
        m = await sub.next_msg(timeout=1)
        if status(m) is None:
            break
    assert m.data == b"m0"
    assert "pause_until" not in (await cinfo(jsc, s, "P"))["config"]


async def test_update_keeps_the_pause_and_announces_it(jsc):
    s = await _stream(jsc)
    adv = await events(jsc.nc, "PAUSE", s, "D")
    until = rfc3339(60)
    await add_consumer(jsc, s, "D", ack_policy="explicit", pause_until=until)
    assert (await next_event(adv))["paused"] is True
    # An update cannot change pause_until (nats-server copies the current one over the request's)...
    r = await add_consumer(jsc, s, "D", ack_policy="explicit", description="updated")
    assert r["paused"] is True and r["config"]["pause_until"] == until
    r = await add_consumer(jsc, s, "D", ack_policy="explicit", description="again", pause_until=rfc3339(5))
    assert r["config"]["pause_until"] == until
    # ...and every create/update request that finds the consumer paused sends the advisory again.
    for _ in range(2):
        ev = await next_event(adv)
        assert (ev["paused"], ev["pause_until"]) == (True, until)


async def test_pause_request_forms_and_errors(jsc):
    s = await _stream(jsc)
    await add_consumer(jsc, s, "C", ack_policy="explicit")
    past = rfc3339(-30)
    r = await jsc.api(f"CONSUMER.PAUSE.{s}.C", {"pause_until": past})
    assert (r["paused"], r["pause_until"]) == (False, past) and "pause_remaining" not in r
    for body in (b"{}", {"pause_until": ZERO_TIME}):
        r = await jsc.api(f"CONSUMER.PAUSE.{s}.C", body)
        assert (r["paused"], r["pause_until"]) == (False, ZERO_TIME)
    cases = [
        (f"CONSUMER.PAUSE.{s}.C", {"pause_until": "junk"}, 10025,
         'invalid JSON: parsing time "junk" as "2006-01-02T15:04:05Z07:00": cannot parse "junk" as "2006"'),
        (f"CONSUMER.PAUSE.{s}.C", {"x": 1}, 10025, 'invalid JSON: json: unknown field "x"'),
        (f"CONSUMER.PAUSE.{s}.NOPE", {}, 10014, "consumer not found"),
        ("CONSUMER.PAUSE.NO_SUCH_STREAM.C", {}, 10059, "stream not found"),
    ]
    for subject, body, code, desc in cases:
        r = await jsc.api(subject, body)
        assert (r["error"]["err_code"], r["error"]["description"]) == (code, desc)
        assert {k: r[k] for k in PAUSE_ERR_EXTRA} == PAUSE_ERR_EXTRA  # error replies keep the zero fields


async def test_pull_requests_expire_while_paused(jsc):
    s = await _stream(jsc)
    await jsc.pub(f"{s}.a", b"m0")
    await add_consumer(jsc, s, "C", ack_policy="explicit", pause_until=rfc3339(60))
    msgs = await pull(jsc.nc, s, "C", {"batch": 2, "expires": 300 * MS}, timeout=1)
    assert [status(m) for m in msgs] == [(408, "Request Timeout")]
    assert msgs[0].headers["Nats-Pending-Messages"] == "2"
    info = await cinfo(jsc, s, "C")
    assert info["num_pending"] == 1 and info["delivered"]["stream_seq"] == 0
    adv = await events(jsc.nc, "PAUSE", s, "C")
    await jsc.api(f"CONSUMER.PAUSE.{s}.C", {})
    assert (await next_event(adv))["paused"] is False
    assert data(await pull(jsc.nc, s, "C", {"batch": 1}, timeout=0.5)) == [b"m0"]
    assert await no_event(adv)


async def test_pause_required_api_level_checked_after_the_body(jsc):
    """jsConsumerPauseRequest decodes the body first (10025), then checks Nats-Required-Api-Level (10185), then
    looks up the stream and consumer: a bad body with a too-high level is 10025; a good one is 10185 even for a
    consumer that does not exist."""
    s = await _stream(jsc)
    await add_consumer(jsc, s, "C", ack_policy="explicit")
    high = {"Nats-Required-Api-Level": "999"}
    r = await jsc.api(f"CONSUMER.PAUSE.{s}.C", {"x": 1}, headers=high)
    assert (r["error"]["err_code"], r["error"]["description"]) == (10025, 'invalid JSON: json: unknown field "x"')
    for subject in (f"CONSUMER.PAUSE.{s}.C", f"CONSUMER.PAUSE.{s}.NOPE", "CONSUMER.PAUSE.NO_SUCH_STREAM.C"):
        r = await jsc.api(subject, {}, headers=high)
        assert r["error"]["err_code"] == 10185, (subject, r)
    r = await jsc.api(f"CONSUMER.PAUSE.{s}.C", b"", headers={"Nats-Required-Api-Level": "1"})
    assert (r["paused"], r["pause_until"]) == (False, ZERO_TIME)


async def test_resume_by_request_does_not_kick_delivery(jsc):
    """nats-server's CONSUMER.PAUSE resume only re-arms the pause timer (updateConfig signals new messages only for
    a changed max_ack_pending): a pull request that waited through the pause gets nothing until something else wakes
    the consumer - here a new message, which then delivers the oldest one."""
    s = await _stream(jsc)
    await jsc.pub(f"{s}.a", b"m0")
    await add_consumer(jsc, s, "C", ack_policy="explicit", pause_until=rfc3339(60))
    nc = jsc.nc
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    await nc.publish(f"$JS.API.CONSUMER.MSG.NEXT.{s}.C", b'{"batch": 1, "expires": 5000000000}', reply=inbox)
    await nc.flush()
    # nats-server queues pull requests to the consumer's own goroutine: resume only once the request waits there,
    # else a resume that overtakes it lets the request deliver at once (seen in 3 of 5 runs).
    for _ in range(100):
        if (await jsc.api(f"CONSUMER.INFO.{s}.C"))["num_waiting"] == 1:
            break
        await asyncio.sleep(0.02)
    else:
        raise AssertionError("the pull request never showed as waiting")
    r = await jsc.api(f"CONSUMER.PAUSE.{s}.C", b"")
    assert r["paused"] is False
    await asyncio.sleep(0.5)
    assert sub.pending_msgs == 0
    # A config update does not wake it either (updateConfig signals only for max_ack_pending).
    await add_consumer(jsc, s, "C", ack_policy="explicit", description="updated")
    await asyncio.sleep(0.3)
    assert sub.pending_msgs == 0
    await jsc.pub(f"{s}.a", b"m1")
    m = await sub.next_msg(timeout=2)
    assert m.data == b"m0"
