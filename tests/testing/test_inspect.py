"""skiff.testing.inspect: snapshots of streams, messages, consumers, connections and accounts, read from the
running server's own structures (embedded Skiff with a driven clock)."""
from __future__ import annotations

import asyncio
import json

import nats
import pytest

from skiff.server.clock import ManualClock
from skiff.server.core.server import Server
from skiff.testing.inspect import Inspector, SeqPair, to_json

pytestmark = pytest.mark.skiff_only


@pytest.fixture
async def env(tmp_path):
    clock = ManualClock()
    srv = Server(port=0, jetstream=True, store_dir=str(tmp_path), clock=clock)
    await srv.start()
    nc = await nats.connect(srv.client_url, name="inspected")
    js = nc.jetstream()
    yield srv, clock, nc, js
    await nc.close()
    await srv.shutdown()


async def test_streams_and_messages(env):
    srv, _, nc, js = env
    await js.add_stream(name="S", subjects=["s.>"])
    for i in range(5):
        await js.publish(f"s.{'a' if i % 2 == 0 else 'b'}", f"m{i}".encode(), headers={"K": str(i)})
    ins = Inspector(srv)
    (st,) = ins.streams()
    assert (st.name, st.account, st.messages, st.first_seq, st.last_seq, st.num_subjects) == ("S", "$G", 5, 1, 5, 2)
    assert st.config["subjects"] == ["s.>"]
    assert [(m.seq, m.data) for m in ins.messages("S", subject="s.b")] == [(2, b"m1"), (4, b"m3")]
    assert [m.seq for m in ins.messages("S", start_seq=3, limit=2)] == [3, 4]
    m = ins.message("S", 5)
    assert m.subject == "s.a" and b"K: 4" in m.hdr
    await js.delete_msg("S", 5)
    assert ins.message("S", 5) is None and ins.stream("S").messages == 4
    with pytest.raises(KeyError):
        ins.stream("NOPE")


async def test_consumer_pending_ack_floor_and_redeliveries(env):
    srv, clock, nc, js = env
    await js.add_stream(name="S", subjects=["s.>"])
    for i in range(4):
        await js.publish("s.x", b"%d" % i)
    psub = await js.pull_subscribe("s.x", durable="C", config=nats.js.api.ConsumerConfig(ack_wait=5))
    msgs = await psub.fetch(3, timeout=1)
    await msgs[0].ack()
    await nc.flush()
    ins = Inspector(srv)
    c = ins.consumer("S", "C")
    assert c.delivered == SeqPair(3, 3) and c.ack_floor == SeqPair(1, 1)
    assert (c.num_pending, c.num_ack_pending, c.num_redelivered) == (1, 2, 0)
    assert set(c.pending) == {2, 3} and c.redelivered == {} and c.delivery_count(2) == 1
    clock.advance(5.1)  # ack_wait runs out: 2 and 3 are due again
    again = await psub.fetch(2, timeout=1)
    assert [m.metadata.sequence.stream for m in again] == [2, 3]
    c = ins.consumer("S", "C")
    assert c.redelivered == {2: 1, 3: 1} and c.num_redelivered == 2 and c.delivery_count(3) == 2
    # A pull request that waits shows in `waiting`.
    fut = asyncio.ensure_future(nc.request("$JS.API.CONSUMER.MSG.NEXT.S.C",
                                           json.dumps({"batch": 7, "expires": 30_000_000_000}).encode(), timeout=2))
    await nc.flush()
    await asyncio.sleep(0.05)
    # 1 message was pending: it goes to the request, which waits for 6 more
    (w,) = ins.consumer("S", "C").waiting
    assert (w.batch, w.delivered, w.no_wait) == (6, 1, False) and 29 < w.expires_in <= 30
    fut.cancel()
    assert [c.name for c in ins.consumers("S")] == ["C"] and ins.stream("S").consumers == ("C",)


async def test_connections_and_accounts(env):
    srv, _, nc, js = env
    await nc.subscribe("a.*", queue="q")
    await nc.subscribe("b")
    await nc.flush()
    ins = Inspector(srv)
    conn = ins.connection_named("inspected")
    assert conn.account == "$G" and conn.kind == "nats" and conn.lang == "python3"
    assert [(s.subject, s.queue) for s in conn.subscriptions if s.subject != "_INBOX.*" and
            not s.subject.startswith("_INBOX.")] == [("a.*", "q"), ("b", "")]
    assert conn.pending_bytes == 0 and ins.connection(conn.cid) == conn
    assert [c.cid for c in ins.connections()] == [conn.cid]
    g = {a.name: a for a in ins.accounts()}["$G"]
    assert g.num_connections == 1 and g.num_subscriptions == len(conn.subscriptions) and g.jetstream
    await js.add_stream(name="T", subjects=["t"])
    assert {a.name: a for a in ins.accounts()}["$G"].streams == ("T",)


async def test_to_json_round_trips_through_json(env):
    srv, _, nc, js = env
    await js.add_stream(name="S", subjects=["s"])
    await js.publish("s", b"\x00bin")
    ins = Inspector(srv)
    doc = json.loads(json.dumps(to_json({"stream": ins.stream("S"), "msgs": ins.messages("S")})))
    assert doc["stream"]["name"] == "S" and doc["msgs"][0]["data"] == "AGJpbg=="
