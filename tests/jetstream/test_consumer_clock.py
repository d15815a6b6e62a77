"""Consumer timers driven by a ManualClock on an embedded Skiff: ack_wait, backoff, NAK delays, pull expiry and
heartbeats, push heartbeats, inactive_threshold.  Time only moves when the test says so, so boundaries are exact
(to the 1 ms that nats-server adds to ack timers) and nothing sleeps."""
from __future__ import annotations

import asyncio
import json

import nats
import pytest

from skiff.server.clock import ManualClock
from skiff.server.core.server import Server
from tests.jetstream.test_consumer_support import MS, SECOND, ack_info, status

pytestmark = pytest.mark.skiff_only


class Env:
    def __init__(self, clock, srv, nc) -> None:
        self.clock, self.srv, self.nc = clock, srv, nc

    async def api(self, suffix: str, body=b"") -> dict:
        if isinstance(body, dict):
            body = json.dumps(body).encode()
        return json.loads((await self.nc.request("$JS.API." + suffix, body, timeout=2)).data)

    async def pub(self, subject: str, data: bytes = b"x") -> None:
        await self.nc.request(subject, data, timeout=2)

    async def consumer(self, stream: str, name: str, **cfg) -> dict:
        cfg.setdefault("durable_name", name)
        r = await self.api(f"CONSUMER.CREATE.{stream}.{name}", {"stream_name": stream, "config": cfg})
        assert "error" not in r, r
        return r

    async def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)
        await self.nc.flush()
        await asyncio.sleep(0)

    async def request(self, stream: str, consumer: str, body: dict):
        inbox = self.nc.new_inbox()
        sub = await self.nc.subscribe(inbox)
        await self.nc.publish(f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer}", json.dumps(body).encode(),
                              reply=inbox)
        await self.nc.flush()
        return sub


async def drain(sub, timeout: float = 0.05) -> list:
    out = []
    while True:
        try:
            out.append(await sub.next_msg(timeout=timeout))
        except (nats.errors.TimeoutError, asyncio.TimeoutError):
            return out


@pytest.fixture
async def env(nats_server, nats_clock):
    """The plugin's fixtures (skiff/testing/plugin.py), as a user's suite would use them."""
    nc = await nats.connect(nats_server.client_url, allow_reconnect=False)
    await nc.request("$JS.API.STREAM.CREATE.S", json.dumps({"name": "S", "subjects": ["s.>"]}).encode())
    yield Env(nats_clock.clock, nats_server, nc)
    await nc.close()


async def test_ack_wait_boundary(env, target):
    await env.pub("s.a")
    await env.consumer("S", "C", ack_policy="explicit", ack_wait=10 * SECOND)
    sub = await env.request("S", "C", {"batch": 5})
    (m,) = await drain(sub)
    assert ack_info(m.reply)["delivered"] == 1
    await env.advance(10.0)  # ack_wait + 1ms has not passed yet
    assert await drain(sub) == []
    await env.advance(0.002)
    (m,) = await drain(sub)
    assert ack_info(m.reply)["delivered"] == 2


async def test_backoff_schedule_and_max_deliver(env, target):
    adv = await env.nc.subscribe("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.S.C")
    await env.pub("s.a")
    r = await env.consumer("S", "C", ack_policy="explicit", backoff=[SECOND, 5 * SECOND], max_deliver=3)
    assert r["config"]["ack_wait"] == SECOND
    sub = await env.request("S", "C", {"batch": 10})
    assert len(await drain(sub)) == 1
    await env.advance(1.002)
    assert [ack_info(m.reply)["delivered"] for m in await drain(sub)] == [2]
    await env.advance(4.9)
    assert await drain(sub) == []
    await env.advance(0.2)
    assert [ack_info(m.reply)["delivered"] for m in await drain(sub)] == [3]
    await env.advance(5.1)
    await env.advance(5.1)
    assert await drain(sub) == []
    ev = json.loads((await adv.next_msg(timeout=1)).data)
    assert (ev["stream_seq"], ev["deliveries"]) == (1, 3)
    info = await env.api("CONSUMER.INFO.S.C")
    assert info["num_ack_pending"] == 0


async def test_nak_delay(env, target):
    await env.pub("s.a")
    await env.consumer("S", "C", ack_policy="explicit", ack_wait=30 * SECOND)
    sub = await env.request("S", "C", {"batch": 10})
    (m,) = await drain(sub)
    await env.nc.publish(m.reply, b"-NAK 5s")
    await env.nc.flush()
    await env.advance(4.9)
    assert await drain(sub) == []
    await env.advance(0.2)
    (m,) = await drain(sub)
    assert ack_info(m.reply)["delivered"] == 2


async def test_pull_expiry_and_heartbeats(env, target):
    await env.consumer("S", "C", ack_policy="explicit")
    sub = await env.request("S", "C", {"batch": 2, "expires": 10 * SECOND, "idle_heartbeat": 3 * SECOND})
    await env.advance(2.9)
    assert await drain(sub) == []
    await env.advance(0.2)
    assert [status(m) for m in await drain(sub)] == [(100, "Idle Heartbeat")]
    await env.advance(3.0)
    assert [status(m) for m in await drain(sub)] == [(100, "Idle Heartbeat")]
    await env.pub("s.a")  # a delivery pushes the next heartbeat back
    assert [status(m) for m in await drain(sub)] == [None]
    await env.advance(2.9)
    assert await drain(sub) == []
    await env.advance(1.0)  # 10s since the request
    msgs = await drain(sub)
    assert [status(m) for m in msgs][-1] == (408, "Request Timeout")
    assert msgs[-1].headers["Nats-Pending-Messages"] == "1"


async def test_push_heartbeats_only_while_bound(env, target):
    sub = await env.nc.subscribe("dlv")
    await env.consumer("S", "P", deliver_subject="dlv", idle_heartbeat=2 * SECOND)
    await env.advance(1.9)
    assert await drain(sub) == []
    await env.advance(0.2)
    (hb,) = await drain(sub)
    assert status(hb) == (100, "Idle Heartbeat")
    await sub.unsubscribe()
    await env.nc.flush()
    sub2 = await env.nc.subscribe("other")
    await env.advance(5)
    assert await drain(sub2) == []


async def test_push_heartbeat_timer_not_rearmed_per_delivery(env, target, monkeypatch):
    """Deliveries only record their time; the idle heartbeat still goes out exactly idle_heartbeat after the last
    one (push.py _hb_fired re-arms for the remainder), and delivering makes no clock timers (it made one each)."""
    sub = await env.nc.subscribe("dlv")
    await env.consumer("S", "P", deliver_subject="dlv", idle_heartbeat=2 * SECOND, ack_policy="none")
    await env.advance(1.5)
    timers = []
    orig = env.clock.call_later
    monkeypatch.setattr(env.clock, "call_later",
                        lambda d, cb, *a: timers.append(getattr(cb, "__name__", "")) or orig(d, cb, *a))
    for _ in range(50):
        await env.pub("s.a")
    monkeypatch.setattr(env.clock, "call_later", orig)
    assert len(await drain(sub)) == 50
    assert "_hb_fired" not in timers
    await env.advance(0.5)  # the first timer fires 2s after start: 0.5s after the deliveries it re-arms
    assert await drain(sub) == []
    await env.advance(1.5 - 0.001)
    assert await drain(sub) == []
    await env.advance(0.001)
    (hb,) = await drain(sub)
    assert status(hb) == (100, "Idle Heartbeat")
    assert hb.headers["Nats-Last-Consumer"] == "50" and hb.headers["Nats-Last-Stream"] == "50"
    await env.advance(1.999)
    assert await drain(sub) == []
    await env.advance(0.001)
    assert [status(m) for m in await drain(sub)] == [(100, "Idle Heartbeat")]


async def test_inactive_threshold_deletes_pull_consumer(env, target):
    adv = await env.nc.subscribe("$JS.EVENT.ADVISORY.CONSUMER.DELETED.S.E")
    r = await env.api("CONSUMER.CREATE.S.E", {"stream_name": "S", "config": {
        "name": "E", "ack_policy": "explicit", "inactive_threshold": 10 * SECOND}})
    assert "error" not in r, r
    await env.advance(9.0)
    assert "error" not in await env.api("CONSUMER.INFO.S.E")
    await env.advance(2.1)  # threshold plus up to 1s of nats-server's jitter
    r = await env.api("CONSUMER.INFO.S.E")
    assert r["error"]["err_code"] == 10014
    ev = json.loads((await adv.next_msg(timeout=1)).data)
    assert ev["action"] == "delete"


async def test_acks_push_back_a_pull_consumers_inactivity_without_timer_work(env, target, monkeypatch):
    """An ack is activity: a pull consumer acked at 8s of a 10s inactive_threshold lives until ~10s after that
    ack.  The acks only record the time; the one timer re-arms for the rest when it fires (lifecycle.py
    Inactivity._fired), instead of being cancelled and re-armed by every ack."""
    from skiff.server.jetstream.lifecycle import Inactivity

    for i in range(20):
        await env.pub("s.a", b"%d" % i)
    r = await env.api("CONSUMER.CREATE.S.E", {"stream_name": "S", "config": {
        "name": "E", "ack_policy": "explicit", "inactive_threshold": 10 * SECOND}})
    assert "error" not in r, r
    sub = await env.request("S", "E", {"batch": 20, "expires": SECOND})
    msgs = await drain(sub)
    assert len(msgs) == 20
    await env.advance(8.0)
    arms = []
    orig = Inactivity.arm
    monkeypatch.setattr(Inactivity, "arm", lambda self, delay=0.0: arms.append(delay) or orig(self, delay))
    for m in msgs:
        await env.nc.request(m.reply, b"+ACK", timeout=2)  # answered once applied
    assert arms == []
    await env.advance(9.0)  # 17s: the creation's deadline (10-11s) is long past
    assert (await env.api("CONSUMER.INFO.S.E"))["num_ack_pending"] == 0
    await env.advance(2.1)  # the acks' deadline plus up to 1s of nats-server's jitter
    assert (await env.api("CONSUMER.INFO.S.E"))["error"]["err_code"] == 10014


async def test_push_ephemeral_deleted_after_interest_goes(env, target):
    sub = await env.nc.subscribe("eph")
    r = await env.api("CONSUMER.CREATE.S", {"stream_name": "S", "config": {"deliver_subject": "eph"}})
    name = r["name"]
    await env.advance(30)
    assert "error" not in await env.api(f"CONSUMER.INFO.S.{name}")  # bound: kept
    await sub.unsubscribe()
    await env.nc.flush()
    await env.advance(6.1)
    assert (await env.api(f"CONSUMER.INFO.S.{name}"))["error"]["err_code"] == 10014


async def test_state_survives_restart_embedded(tmp_path, target):
    clock = ManualClock()
    srv = Server(clock=clock, jetstream=True, store_dir=str(tmp_path))
    await srv.start()
    nc = await nats.connect(srv.client_url, allow_reconnect=False)
    e = Env(clock, srv, nc)
    await e.api("STREAM.CREATE.S", {"name": "S", "subjects": ["s.>"]})
    for i in range(3):
        await e.pub("s.a", b"%d" % i)
    await e.consumer("S", "C", ack_policy="explicit", ack_wait=30 * SECOND)
    sub = await e.request("S", "C", {"batch": 3})
    msgs = await drain(sub)
    await nc.request(msgs[1].reply, b"+ACK")
    await nc.close()
    await srv.shutdown()

    srv = Server(clock=clock, jetstream=True, store_dir=str(tmp_path))
    await srv.start()
    nc = await nats.connect(srv.client_url, allow_reconnect=False)
    e = Env(clock, srv, nc)
    try:
        info = await e.api("CONSUMER.INFO.S.C")
        assert info["num_ack_pending"] == 2 and info["delivered"]["stream_seq"] == 3
        sub = await e.request("S", "C", {"batch": 3})
        assert await drain(sub) == []
        # The stored pending times are the messages' own timestamps (nats-server passes pmsg.ts to the store),
        # so the redelivery comes ack_wait after they were stored.
        await e.advance(29.0)
        assert await drain(sub) == []
        await e.advance(1.1)
        msgs = await drain(sub)
        assert sorted(m.data for m in msgs) == [b"0", b"2"]
        assert all(ack_info(m.reply)["delivered"] == 2 for m in msgs)
    finally:
        await nc.close()
        await srv.shutdown()


async def test_idle_consumers_do_no_work_per_published_message(env, target, monkeypatch):
    """The scale invariant: consumers without a waiting pull request, without push interest or at max_ack_pending
    are not in their stream's ready set, so publishing never calls into them."""
    from skiff.server.jetstream.consumer import Consumer
    from skiff.server.jetstream.delivery import Delivery

    for i in range(50):
        await env.consumer("S", f"idle{i}", ack_policy="explicit")
    await env.consumer("S", "full", ack_policy="explicit", max_ack_pending=1)
    await env.consumer("S", "push", deliver_subject="nobody.listens")
    await env.pub("s.a")
    sub = await env.request("S", "full", {"batch": 5})  # takes the one message, then waits at max_ack_pending
    assert len(await drain(sub)) == 1
    cset = env.srv.jetstream.streams["S"]._consumer_set
    assert cset.ready == set()
    calls = []
    for cls, name in ((Delivery, "kick"), (Consumer, "matches"), (Delivery, "_run")):
        orig = getattr(cls, name)
        monkeypatch.setattr(cls, name, lambda self, *a, _o=orig, _n=name: calls.append(_n) or _o(self, *a))
    for _ in range(20):
        await env.pub("s.a")
    assert calls == []
    # A waiting pull request makes its consumer ready; the next publish reaches exactly that one.
    await env.consumer("S", "waiter", ack_policy="explicit", deliver_policy="new")
    sub = await env.request("S", "waiter", {"batch": 1, "expires": 60 * SECOND})
    assert [c.name for c in cset.ready] == ["waiter"]
    calls.clear()
    await env.pub("s.a")
    assert len(await drain(sub)) == 1
    assert "kick" in calls and cset.ready == set()


def _record_runs(store, seqs: list, monkeypatch) -> None:
    """Record the sequences of what the store's run loads return (delivery.py _send_run) in ``seqs``."""
    orig_run = store.load_run

    def load_run(start, limit, accept=None):
        run = orig_run(start, limit, accept)
        seqs.extend(m.seq for m in run)
        return run

    monkeypatch.setattr(store, "load_run", load_run)


async def test_filter_equal_to_stream_subject_uses_unfiltered_loads(env, target, monkeypatch):
    """A consumer filtered on the stream's only subject (a wildcard) reads the next live message instead of the
    store's per-subject search (which cost ~17 us a message for 10 subjects, the unfiltered load ~5 us)."""
    for i in range(10):
        await env.pub(f"s.{i}", b"m%d" % i)
    await env.consumer("S", "C", ack_policy="none", filter_subject="s.>")
    store = env.srv.jetstream.streams["S"].store
    filters = []
    orig = store.load_next_msg
    monkeypatch.setattr(store, "load_next_msg", lambda f="", s=0: filters.append(f) or orig(f, s))
    by_seq = []
    orig_load = store.load_msg
    monkeypatch.setattr(store, "load_msg", lambda s: by_seq.append(s) or orig_load(s))
    _record_runs(store, by_seq, monkeypatch)
    from skiff.server.jetstream.consumer import Consumer

    matched = []
    orig_matches = Consumer.matches
    monkeypatch.setattr(Consumer, "matches", lambda self, subj: matched.append(subj) or orig_matches(self, subj))
    sub = await env.request("S", "C", {"batch": 10, "expires": 5 * SECOND})
    assert [m.data for m in await drain(sub)] == [b"m%d" % i for i in range(10)]
    # Each message is read by its sequence (delivery.py _load_next_any, or in a run: _send_run) or found by an
    # unfiltered search, never by the store's filtered one.
    assert by_seq[:10] == list(range(1, 11)) and set(filters) <= {""}
    assert matched == []  # "s.>" is checked with a prefix test, not the token walk


async def test_wildcard_filter_looks_at_the_next_message_first(env, target, monkeypatch):
    """A wildcard filter that selects most of the stream is served by unfiltered loads (delivery.py _load_next:
    one load instead of the store's search per subject); one that keeps missing stops looking after
    PROBE_MISSES misses and uses the filtered search, and the messages are the same either way."""
    from skiff.server.jetstream.delivery import PROBE_MISSES

    for i in range(10):
        await env.pub(f"s.{i}", b"m%d" % i)
    store = env.srv.jetstream.streams["S"].store
    filters = []
    orig = store.load_next_msg
    monkeypatch.setattr(store, "load_next_msg", lambda f="", s=0: filters.append(f) or orig(f, s))
    by_seq = []  # the unfiltered look reads the next sequence first (delivery.py _load_next_any), or a run
    orig_load = store.load_msg
    monkeypatch.setattr(store, "load_msg", lambda s: by_seq.append(s) or orig_load(s))
    _record_runs(store, by_seq, monkeypatch)
    await env.consumer("S", "C", ack_policy="none", filter_subject="s.*")
    sub = await env.request("S", "C", {"batch": 10, "expires": 5 * SECOND})
    assert [m.data for m in await drain(sub)] == [b"m%d" % i for i in range(10)]
    assert by_seq[:10] == list(range(1, 11)) and set(filters) <= {""}
    # 20 messages the filter does not select, each followed by one it does: misses, then the search
    for i in range(20):
        await env.pub(f"s.x.{i}", b"no")
        await env.pub(f"s.{i}", b"y%d" % i)
    filters.clear()
    by_seq.clear()
    sub = await env.request("S", "C", {"batch": 20, "expires": 5 * SECOND})
    assert [m.data for m in await drain(sub)] == [b"y%d" % i for i in range(20)]
    # PROBE_MISSES looks (each finds the stored "no" by its sequence; a run ends before it unread), then only the
    # search (the batch ends with the 20th)
    assert len(by_seq) == PROBE_MISSES and "" not in filters
    assert filters.count("s.*") == 20


async def test_ack_at_max_ack_pending_takes_one_message(env, target, monkeypatch):
    """A push consumer at max_ack_pending delivers one message per ack and stops there without asking for the
    next one (delivery.py _run)."""
    from skiff.server.jetstream.delivery import Delivery

    sub = await env.nc.subscribe("dlv")
    for i in range(4):
        await env.pub("s.a", b"m%d" % i)
    await env.consumer("S", "P", deliver_subject="dlv", ack_policy="explicit", max_ack_pending=1)
    (m,) = await drain(sub)
    calls = []
    orig = Delivery._get_next_msg
    monkeypatch.setattr(Delivery, "_get_next_msg", lambda self: calls.append(1) or orig(self))
    got = []
    for _ in range(3):
        await m.ack()
        await env.nc.flush()
        (m,) = await drain(sub)
        got.append(m.data)
    assert got == [b"m1", b"m2", b"m3"]
    assert len(calls) == 3


async def test_pending_consumer_joins_the_pending_set_once(env, target, monkeypatch):
    """Deliveries add to ``pending``; the stream's set of consumers with pending messages is joined once, when
    pending stops being empty (delivery.py Delivery.send), and left when it is empty again."""
    sub = await env.nc.subscribe("dlv")
    await env.consumer("S", "P", deliver_subject="dlv", ack_policy="explicit")
    cset = env.srv.jetstream.streams["S"]._consumer_set
    calls = []
    orig = cset.has_pending
    monkeypatch.setattr(cset, "has_pending", lambda c: calls.append(c.name) or orig(c))
    for i in range(5):
        await env.pub("s.a", b"m%d" % i)
    msgs = await drain(sub)
    assert len(msgs) == 5 and calls == ["P"]
    for m in msgs:
        await m.ack()
    await env.nc.flush()
    await asyncio.sleep(0.05)
    assert cset._with_pending == set()
    await env.pub("s.a", b"again")
    assert len(await drain(sub)) == 1 and calls == ["P", "P"]
    assert [c.name for c in cset._with_pending] == ["P"]
