"""Priority groups (ADR-42) against both servers: pinned_client (pin minted on the first pull, Nats-Pin-Id on every
message, standbys, 423 statuses, priority_timeout, UNPIN and its errors, PINNED / UNPINNED advisories, consumer
info), overflow (min_pending / min_ack_pending), prioritized (lower priority first, round-robin within a level),
and the config and pull-request validation errors.  Durations are short and real; the exact boundaries are in
test_priority_clock.py (Skiff with a driven clock)."""
from __future__ import annotations

import asyncio
import json
import re

import pytest

from tests.jetstream.test_consumer_support import MS, SECOND, add_consumer, cinfo, pull, status
from tests.jetstream.test_priority_support import (
    PIN_HDR, Puller, data, events, next_event, no_event, statuses, validate_group_event,
)

NUID = re.compile(r"[0-9A-Za-z]{22}")
ZERO_TIME = "0001-01-01T00:00:00Z"


async def _stream(jsc, n: int = 0) -> str:
    s = jsc.name()
    await jsc.create(s)
    for i in range(n):
        await jsc.pub(f"{s}.a", b"m%d" % i)
    return s


async def _pinned(jsc, s: str, **cfg) -> dict:
    cfg.setdefault("ack_policy", "explicit")
    return await add_consumer(jsc, s, "C", priority_policy="pinned_client", priority_groups=["G"], **cfg)


# ---------------------------------------------------------------------------------------------- pinned_client
async def test_pin_minted_on_first_pull_and_on_every_message(jsc):
    s = await _stream(jsc, 3)
    pinned_ev = await events(jsc.nc, "PINNED", s, "C")
    r = await _pinned(jsc, s)
    assert r["config"]["priority_timeout"] == 120 * SECOND  # the 2m default (JsDefaultPinnedTTL)
    # No pin yet: the group is listed with Go's zero time and no client id.
    assert r["priority_groups"] == [{"group": "G", "pinned_ts": ZERO_TIME}]

    a = Puller(jsc.nc, s, "C")
    await a.request(2)
    msgs = await a.collect(2)
    assert data(msgs) == [b"m0", b"m1"]
    pin = msgs[0].headers[PIN_HDR]
    assert NUID.fullmatch(pin) and all(m.headers[PIN_HDR] == pin for m in msgs)

    ev = await next_event(pinned_ev)
    validate_group_event(ev)
    assert (ev["account"], ev["stream"], ev["consumer"], ev["group"], ev["pinned_id"]) == ("$G", s, "C", "G", pin)
    info = await cinfo(jsc, s, "C")
    (g,) = info["priority_groups"]
    assert g["group"] == "G" and g["pinned_client_id"] == pin and g["pinned_ts"] != ZERO_TIME

    # The pinned client's next pull carries the id and keeps the same pin; no new advisory.
    await a.request(5, expires=300 * MS)
    msgs = await a.collect(timeout=0.6)
    assert data(msgs) == [b"m2"] and msgs[0].headers[PIN_HDR] == pin
    assert statuses(msgs) == [(408, "Request Timeout")]
    assert await no_event(pinned_ev)


async def test_pin_header_follows_stored_headers(jsc):
    s = await _stream(jsc)
    await jsc.pub(f"{s}.a", b"x", headers={"X-Order": "7"})
    await _pinned(jsc, s)
    (m,) = await pull(jsc.nc, s, "C", {"batch": 1, "group": "G"}, timeout=0.3)
    assert list(m.headers) == ["X-Order", PIN_HDR]
    assert m.headers["X-Order"] == "7"


async def test_standbys_wait_while_a_client_is_pinned(jsc):
    s = await _stream(jsc, 4)
    await _pinned(jsc, s)
    a = Puller(jsc.nc, s, "C")
    await a.request(1)
    assert data(await a.collect(1)) == [b"m0"]
    # Three messages are waiting, yet a pull without the pin id gets none of them: it is a standby.
    b = Puller(jsc.nc, s, "C")
    await b.request(3, expires=300 * MS)
    msgs = await b.collect(timeout=0.6)
    assert statuses(msgs) == [(408, "Request Timeout")] and data(msgs) == []
    assert msgs[0].headers["Nats-Pending-Messages"] == "3"
    # A standby no_wait pull ends at once with 404.
    msgs = await pull(jsc.nc, s, "C", {"batch": 1, "group": "G", "no_wait": True})
    assert statuses(msgs) == [(404, "No Messages")]
    # The pinned client still gets them.
    await a.request(3)
    assert data(await a.collect(3)) == [b"m1", b"m2", b"m3"]


async def test_wrong_pin_id_gets_423(jsc):
    s = await _stream(jsc, 2)
    await _pinned(jsc, s)
    a = Puller(jsc.nc, s, "C")
    await a.request(1)
    await a.collect(1)
    # While a client is pinned, a request naming another id is refused on arrival, without pending headers.
    msgs = await pull(jsc.nc, s, "C", {"batch": 1, "group": "G", "id": "not-the-pin"})
    (m,) = msgs
    assert status(m) == (423, "Nats-Pin-Id mismatch")
    assert "Nats-Pending-Messages" not in m.headers and m.data == b""


async def test_stale_pin_id_without_pin_gets_wrong_pin_id_at_selection(jsc):
    s = await _stream(jsc)
    await _pinned(jsc, s)
    # No pin exists: a request carrying an id is queued, and ends with 423 when a message would go to it.
    stale = Puller(jsc.nc, s, "C")
    stale.pin = "stale-from-an-old-pin"
    await stale.request(5, expires=2 * SECOND)
    assert await stale.collect(timeout=0.2) == []
    await jsc.pub(f"{s}.a", b"m0")
    (m,) = await stale.collect()
    assert status(m) == (423, "Nats-Wrong-Pin-Id")
    assert (m.headers["Nats-Pending-Messages"], m.headers["Nats-Pending-Bytes"]) == ("5", "0")
    assert stale.pin == ""  # the client drops the id (ADR-42) and joins the candidates
    await stale.request(1)
    (m,) = await stale.collect(1)
    assert m.data == b"m0" and stale.pin


async def test_pin_moves_after_priority_timeout_without_pulls(jsc):
    s = await _stream(jsc, 1)
    unpinned = await events(jsc.nc, "UNPINNED", s, "C")
    pinned = await events(jsc.nc, "PINNED", s, "C")
    await _pinned(jsc, s, priority_timeout=600 * MS)
    a, b = Puller(jsc.nc, s, "C"), Puller(jsc.nc, s, "C")
    await a.request(1)
    await a.collect(1)
    first = a.pin
    assert (await next_event(pinned))["pinned_id"] == first
    # Pulls carrying the pin keep it past the timeout...
    for _ in range(3):
        await asyncio.sleep(0.25)
        await a.request(1, expires=200 * MS)
    assert await no_event(unpinned, 0.1)
    assert (await cinfo(jsc, s, "C"))["priority_groups"][0]["pinned_client_id"] == first
    # ...and without them it is dropped after priority_timeout.
    ev = await next_event(unpinned, 2.0)
    validate_group_event(ev)
    assert (ev["group"], ev["reason"]) == ("G", "timeout")
    assert (await cinfo(jsc, s, "C"))["priority_groups"] == [{"group": "G", "pinned_ts": ZERO_TIME}]
    # The next message pins the waiting standby.
    await b.request(1, expires=2 * SECOND)
    await jsc.pub(f"{s}.a", b"m1")
    (m,) = await b.collect(1)
    assert m.data == b"m1" and b.pin and b.pin != first
    assert (await next_event(pinned))["pinned_id"] == b.pin
    # The old client learns it lost the pin only when it pulls again.
    await a.collect(timeout=0.1)
    await a.request(1)
    (m,) = await a.collect(1)
    assert status(m) == (423, "Nats-Pin-Id mismatch")


async def test_unpin_moves_the_pin_and_ends_stale_requests(jsc):
    s = await _stream(jsc, 1)
    unpinned = await events(jsc.nc, "UNPINNED", s, "C")
    pinned = await events(jsc.nc, "PINNED", s, "C")
    await _pinned(jsc, s)
    a, b = Puller(jsc.nc, s, "C"), Puller(jsc.nc, s, "C")
    await a.request(1)
    await a.collect(1)
    old = a.pin
    await next_event(pinned)
    await a.request(1, expires=3 * SECOND)  # waits with the pin id
    await b.request(1, expires=3 * SECOND)  # waits as a standby

    r = await jsc.api(f"CONSUMER.UNPIN.{s}.C", {"group": "G"})
    assert r == {"type": "io.nats.jetstream.api.v1.consumer_unpin_response"}
    ev = await next_event(unpinned)
    validate_group_event(ev)
    assert (ev["stream"], ev["consumer"], ev["group"], ev["reason"]) == (s, "C", "G", "admin")
    assert "pinned_client_id" not in (await cinfo(jsc, s, "C"))["priority_groups"][0]

    # The next message: A's queued request still names the old pin and is ended, B is pinned and served.
    await jsc.pub(f"{s}.a", b"m1")
    (m,) = await a.collect(1)
    assert status(m) == (423, "Nats-Wrong-Pin-Id") and m.headers["Nats-Pending-Messages"] == "1"
    (m,) = await b.collect(1)
    assert m.data == b"m1" and b.pin not in ("", old)
    assert (await next_event(pinned))["pinned_id"] == b.pin


async def test_unpin_errors(jsc):
    s = await _stream(jsc)
    await _pinned(jsc, s)
    await add_consumer(jsc, s, "PLAIN", ack_policy="explicit")
    cases = [
        (b"", 10025, "invalid JSON: unexpected end of JSON input"),
        (b"{}", 10025, "invalid JSON: consumer group not specified"),
        (b'{"group":""}', 10025, "invalid JSON: consumer group not specified"),
        (b"nope", 10025, "invalid JSON: invalid character 'o' in literal null (expecting 'u')"),
        (b'{"group":"a b"}', 10162, None),
        (b'{"group":"seventeen-chars-xx"}', 10162, None),
        (b'{"group":"X"}', 10160, "Provided priority group does not exist for this consumer"),
    ]
    for body, code, desc in cases:
        r = await jsc.api(f"CONSUMER.UNPIN.{s}.C", body)
        assert r["error"]["err_code"] == code, (body, r)
        if desc:
            assert r["error"]["description"] == desc
    # Unknown fields are ignored (plain json.Unmarshal), no pin is fine.
    assert "error" not in await jsc.api(f"CONSUMER.UNPIN.{s}.C", {"group": "G", "extra": 1})
    assert (await jsc.api(f"CONSUMER.UNPIN.{s}.PLAIN", {"group": "G"}))["error"]["err_code"] == 10160
    assert (await jsc.api(f"CONSUMER.UNPIN.{s}.NOPE", {"group": "G"}))["error"]["err_code"] == 10014
    assert (await jsc.api("CONSUMER.UNPIN.NO_SUCH_STREAM.C", {"group": "G"}))["error"]["err_code"] == 10059


async def test_plain_pull_on_pinned_consumer_is_not_pinned(jsc):
    """A plain-integer pull has no priority group: nats-server serves it while nobody is pinned, without pinning
    it, and its message carries an empty Nats-Pin-Id; afterwards it is a standby like any pull without an id."""
    s = await _stream(jsc, 3)
    await _pinned(jsc, s)
    msgs = await pull(jsc.nc, s, "C", b"1", timeout=0.3)
    assert data(msgs) == [b"m0"] and msgs[0].headers[PIN_HDR] == ""
    assert "pinned_client_id" not in (await cinfo(jsc, s, "C"))["priority_groups"][0]
    a = Puller(jsc.nc, s, "C")
    await a.request(1)
    await a.collect(1)
    assert a.pin
    assert data(await pull(jsc.nc, s, "C", b"1", timeout=0.3)) == []


# ---------------------------------------------------------------------------------------------- overflow
async def test_overflow_min_pending(jsc):
    s = await _stream(jsc)
    await add_consumer(jsc, s, "C", ack_policy="explicit", priority_policy="overflow", priority_groups=["G"])
    p = Puller(jsc.nc, s, "C")
    await p.request(10, expires=5 * SECOND, min_pending=3)
    for i in range(2):
        await jsc.pub(f"{s}.a", b"m%d" % i)
    assert await p.collect(timeout=0.2) == []  # 2 pending < 3: the request waits
    await jsc.pub(f"{s}.a", b"m2")
    # Served while num_pending (counting the message at hand) is at least 3: just the first one.
    assert data(await p.collect(timeout=0.3)) == [b"m0"]
    info = await cinfo(jsc, s, "C")
    assert (info["num_pending"], info["num_waiting"]) == (2, 1)
    # A no_wait pull is refused: the parked request already claims more than is pending...
    msgs = await pull(jsc.nc, s, "C", {"batch": 2, "group": "G", "no_wait": True})
    assert statuses(msgs) == [(408, "Requests Pending")]
    # ...but a waiting request without thresholds is served at once, past the parked one.
    msgs = await pull(jsc.nc, s, "C", {"batch": 5, "group": "G", "expires": 300 * MS}, timeout=0.6)
    assert data(msgs) == [b"m1", b"m2"] and statuses(msgs) == [(408, "Request Timeout")]


async def test_overflow_min_ack_pending(jsc):
    s = await _stream(jsc, 6)
    await add_consumer(jsc, s, "C", ack_policy="explicit", priority_policy="overflow", priority_groups=["G"])
    p = Puller(jsc.nc, s, "C")
    await p.request(10, expires=5 * SECOND, min_ack_pending=3)
    assert await p.collect(timeout=0.2) == []  # nothing unacknowledged yet
    main = await pull(jsc.nc, s, "C", {"batch": 2, "group": "G"}, timeout=0.3)
    assert data(main) == [b"m0", b"m1"]
    assert await p.collect(timeout=0.2) == []  # 2 < 3
    main = await pull(jsc.nc, s, "C", {"batch": 1, "group": "G"}, timeout=0.3)
    assert data(main) == [b"m2"]
    # 3 unacknowledged: the overflow request now takes the rest (ack pending only grows as it is served).
    assert data(await p.collect(timeout=0.3)) == [b"m3", b"m4", b"m5"]
    info = await cinfo(jsc, s, "C")
    assert info["num_ack_pending"] == 6
    assert info["priority_groups"] == [{"group": "G", "pinned_ts": ZERO_TIME}]


# ---------------------------------------------------------------------------------------------- prioritized
async def test_prioritized_lower_first_round_robin_within_a_level(jsc):
    s = await _stream(jsc)
    await add_consumer(jsc, s, "C", ack_policy="explicit", priority_policy="prioritized", priority_groups=["G"])
    log: list[tuple[str, bytes]] = []

    async def puller(tag: str, body: bytes | dict) -> None:
        inbox = jsc.nc.new_inbox()

        async def cb(m):
            if status(m) is None:
                log.append((tag, m.data))
        await jsc.nc.subscribe(inbox, cb=cb)
        payload = body if isinstance(body, bytes) else json.dumps(body).encode()
        await jsc.nc.publish(f"$JS.API.CONSUMER.MSG.NEXT.{s}.C", payload, reply=inbox)
        await jsc.nc.flush()

    await puller("plain", b"2")  # no priority group at all: after every level
    await puller("p5", {"batch": 2, "group": "G", "priority": 5})
    await puller("p0a", {"batch": 2, "group": "G"})  # no priority field: 0
    await puller("p2", {"batch": 2, "group": "G", "priority": 2})
    await puller("p0b", {"batch": 2, "group": "G", "priority": 0})
    for i in range(10):
        await jsc.pub(f"{s}.a", b"m%d" % i)
    for _ in range(50):
        if len(log) == 10:
            break
        await asyncio.sleep(0.02)
    assert [t for t, _ in log] == ["p0a", "p0b", "p0a", "p0b", "p2", "p2", "p5", "p5", "plain", "plain"]
    assert [d for _, d in log] == [b"m%d" % i for i in range(10)]


# ---------------------------------------------------------------------------------------------- validation
PULL_ERRORS = [
    ("none", {"min_pending": 1}, (400, "Bad Request - Not a Overflow Priority consumer")),
    ("pinned_client", {"group": "G", "min_ack_pending": 1}, (400, "Bad Request - Not a Overflow Priority consumer")),
    ("overflow", {"group": "G", "id": "x"}, (400, "Bad Request - Not a Pinned Client Priority consumer")),
    ("none", {"id": "x"}, (400, "Bad Request - Not a Pinned Client Priority consumer")),
    ("prioritized", {"group": "G", "priority": 10}, (400, "Bad Request - Priority must be between 0 and 9")),
    ("none", {"priority": -1}, (400, "Bad Request - Priority must be between 0 and 9")),
    ("overflow", {}, (400, "Bad Request - Priority Group missing")),
    ("pinned_client", {"group": ""}, (400, "Bad Request - Priority Group missing")),
    ("prioritized", {"group": "H"}, (400, "Bad Request - Invalid Priority Group")),
]


async def test_pull_request_errors(jsc):
    s = await _stream(jsc, 1)
    for policy in ("none", "overflow", "pinned_client", "prioritized"):
        cfg: dict = {"ack_policy": "explicit"}
        if policy != "none":
            cfg.update(priority_policy=policy, priority_groups=["G"])
        await add_consumer(jsc, s, policy.upper(), **cfg)
    for policy, body, want in PULL_ERRORS:
        msgs = await pull(jsc.nc, s, policy.upper(), {"batch": 1, **body})
        assert [status(m) for m in msgs] == [want], (policy, body)
    # A group on a consumer without a policy is ignored.
    assert data(await pull(jsc.nc, s, "NONE", {"batch": 1, "group": "anything"}, timeout=0.3)) == [b"m0"]


CONFIG_ERRORS = [
    ({"deliver_subject": "dlv.x", "priority_policy": "pinned_client", "priority_groups": ["G"]}, 10178),
    ({"priority_policy": "overflow"}, 10159),
    ({"priority_policy": "overflow", "priority_groups": []}, 10159),
    ({"priority_policy": "overflow", "priority_groups": [""]}, 10161),
    ({"priority_policy": "prioritized", "priority_groups": ["a b"]}, 10162),
    ({"priority_policy": "prioritized", "priority_groups": ["x" * 17]}, 10162),
    ({"priority_groups": ["G"]}, 10196),
    ({"priority_timeout": SECOND}, 10197),
    ({"priority_policy": "weird", "priority_groups": ["G"]}, 10025),
]


@pytest.mark.parametrize("cfg,code", CONFIG_ERRORS, ids=[str(c) for _, c in CONFIG_ERRORS])
async def test_config_errors(jsc, cfg, code):
    s = await _stream(jsc)
    r = await add_consumer(jsc, s, None, check=False, **cfg)
    assert r["error"]["err_code"] == code, r


async def test_config_defaults_and_policy_update(jsc):
    s = await _stream(jsc)
    r = await add_consumer(jsc, s, "C", ack_policy="explicit", priority_policy="pinned_client",
                           priority_groups=["G"], priority_timeout=-5)
    assert r["config"]["priority_timeout"] == 120 * SECOND  # negative counts as unset
    r = await add_consumer(jsc, s, "C", ack_policy="explicit", priority_policy="pinned_client",
                           priority_groups=["G"], priority_timeout=5 * SECOND)
    assert r["config"]["priority_timeout"] == 5 * SECOND
    # ADR-42 calls policy and groups immutable, but nats-server 2.15 takes the change.
    r = await add_consumer(jsc, s, "C", ack_policy="explicit", priority_policy="overflow", priority_groups=["G"])
    assert r["config"]["priority_policy"] == "overflow" and "priority_timeout" not in r["config"]
