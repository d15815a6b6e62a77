"""Message tracing across a route (ADR-41), in every arrangement of two nodes: nats-server and nats-server, Skiff and
Skiff, and each mixed way round.  The first server forwards the message with ``Nats-Trace-Hop: 1`` and lists the
route as an egress with that hop; the second sends an event of its own with the route as its ingress.  A trace-only
message still crosses the route (the next server traces it) and is delivered on neither.
"""
from __future__ import annotations

import asyncio
import json

import nats
import pytest
from nats.errors import TimeoutError as NatsTimeoutError

from .conftest import publish_until_received


async def _events(sub, n: int) -> dict[str, dict]:
    """The next ``n`` trace events, by the name of the server that sent them."""
    out = {}
    for _ in range(n):
        ev = json.loads((await sub.next_msg(timeout=5)).data)
        out[ev["server"]["name"]] = ev
    return out


async def _send_traced(pub, far, subject: str, dest: str, only: bool) -> tuple[list, object]:
    """Subscribe ``far`` to ``subject`` and ``pub`` to ``dest``, wait until interest has crossed (plain messages until
    one arrives: RS+/LS+ take a moment, and the interest in ``dest`` goes the other way), then publish one traced
    message.  Returns what ``far`` receives from then on and the trace subscription."""
    got: list = []

    async def cb(m):
        got.append(m)

    await far.subscribe(subject, cb=cb)
    trace = await pub.subscribe(dest)
    await far.flush()
    await pub.flush()
    await publish_until_received(pub, subject, b"warm-up", got)
    await asyncio.sleep(0.3)
    got.clear()
    hdrs = {"Nats-Trace-Dest": dest}
    if only:
        hdrs["Nats-Trace-Only"] = "true"
    await pub.publish(subject, b"payload", headers=hdrs)
    return got, trace


@pytest.mark.parametrize("only", [False, True], ids=["delivered", "trace-only"])
async def test_a_traced_message_is_traced_by_each_server_it_crosses(cluster, only):
    cluster.start(2)
    cluster.wait_mesh()
    pub = await nats.connect(cluster.nodes[0].url, name="pub", allow_reconnect=False)
    sub_nc = await nats.connect(cluster.nodes[1].url, name="far", allow_reconnect=False)
    try:
        got, trace = await _send_traced(pub, sub_nc, "traced.x", "trace.dest", only)
        events = await _events(trace, 2)
        assert set(events) == {"node0", "node1"}
        first, second = events["node0"], events["node1"]
        # node0: the client's ingress, the route's egress with hop 1.
        assert first["hops"] == 1
        assert first["events"][0]["kind"] == 0 and first["events"][0]["name"] == "pub"
        [eg] = [e for e in first["events"] if e["type"] == "eg"]
        assert (eg["kind"], eg["name"], eg["hop"]) == (1, "node1", "1")
        # node1: the route's ingress (its request carries the hop header), the far client's egress.
        assert second["request"]["header"]["Nats-Trace-Hop"] == ["1"]
        assert "hops" not in second
        ingress = second["events"][0]
        assert (ingress["type"], ingress["kind"], ingress["name"], ingress["acc"], ingress["subj"]) == (
            "in", 1, "node0", "$G", "traced.x")
        [eg] = [e for e in second["events"] if e["type"] == "eg"]
        assert (eg["kind"], eg["name"], eg["sub"]) == (0, "far", "traced.x")
        await asyncio.sleep(0.3)
        if only:
            assert got == []
        else:
            [m] = got
            assert m.data == b"payload"
            assert m.headers["Nats-Trace-Dest"] == "trace.dest"
            assert m.headers["Nats-Trace-Hop"] == "1"  # what the route carried
        with pytest.raises(NatsTimeoutError):
            await trace.next_msg(timeout=0.2)
    finally:
        await pub.close()
        await sub_nc.close()


def pytest_generate_tests(metafunc):
    if "pair" in metafunc.fixturenames:
        from tests.cluster.test_leafnodes import PAIRS
        from tests.conftest import selected_targets

        targets = selected_targets(metafunc.config)
        names = [n for n in PAIRS if len(targets) > 1 or n == targets[0]]
        metafunc.parametrize("pair", [PAIRS[n] for n in names], ids=names)


@pytest.mark.parametrize("only", [False, True], ids=["delivered", "trace-only"])
async def test_a_traced_message_is_traced_on_both_ends_of_a_leaf_connection(pair, only):
    from tests.cluster.test_leafnodes import LeafPair

    lp = LeafPair(pair)
    try:
        lp.start()
        hub = await nats.connect(lp.hub.url, name="at-hub", allow_reconnect=False)
        spoke = await nats.connect(lp.spoke.url, name="at-spoke", allow_reconnect=False)
        got, trace = await _send_traced(hub, spoke, "leaf.x", "trace.leaf", only)
        evs = [json.loads((await trace.next_msg(timeout=5)).data) for _ in range(2)]
        by_kind = {ev["events"][0]["kind"]: ev for ev in evs}
        assert set(by_kind) == {0, 4}
        at_hub, at_spoke = by_kind[0], by_kind[4]
        [eg] = [e for e in at_hub["events"] if e["type"] == "eg"]
        assert (eg["kind"], eg["hop"], at_hub["hops"]) == (4, "1", 1)
        assert eg["name"] == at_spoke["server"]["name"]
        assert at_spoke["request"]["header"]["Nats-Trace-Hop"] == ["1"]
        assert at_spoke["events"][0]["name"] == at_hub["server"]["name"]
        [eg] = [e for e in at_spoke["events"] if e["type"] == "eg"]
        assert (eg["kind"], eg["name"], eg["sub"]) == (0, "at-spoke", "leaf.x")
        await asyncio.sleep(0.3)
        assert [m.data for m in got] == ([] if only else [b"payload"])
        await hub.close()
        await spoke.close()
    finally:
        lp.cleanup()


async def test_a_sampled_traceparent_is_traced_by_each_server_in_the_accounts_destination(arrangement):
    """An account trace destination (``msg_trace``) across a route: the first server samples the ``traceparent``,
    the next one traces what it gets in the same account (no sampling again), both to the account's destination."""
    from tests.harness import ServerProcess, free_ports

    ports = free_ports(2)
    nodes = []
    try:
        for i, kind in enumerate(arrangement[:2]):
            routes = f', routes: ["nats-route://127.0.0.1:{ports[0]}"]' if i else ""
            conf = (f'server_name: node{i}\n'
                    'accounts { T { users = [{user: t, password: t}], msg_trace: { dest: "trace.acc" } } }\n'
                    f'cluster {{ name: c1, listen: "127.0.0.1:{ports[i]}"{routes} }}\n')
            nodes.append(ServerProcess(kind=kind, jetstream=False, config=conf).start())
        pub = await nats.connect(nodes[0].url, user="t", password="t", allow_reconnect=False)
        far = await nats.connect(nodes[1].url, user="t", password="t", allow_reconnect=False)
        try:
            got: list = []

            async def cb(m):
                got.append(m)

            await far.subscribe("tp.x", cb=cb)
            trace = await pub.subscribe("trace.acc")
            await far.flush()
            await pub.flush()
            await publish_until_received(pub, "tp.x", b"warm-up", got, timeout=15)
            await asyncio.sleep(0.3)
            got.clear()
            parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
            await pub.publish("tp.x", b"payload", headers={"traceparent": parent})
            events = await _events(trace, 2)
            assert set(events) == {"node0", "node1"}
            assert events["node0"]["hops"] == 1
            assert events["node1"]["events"][0]["kind"] == 1
            assert events["node1"]["request"]["header"]["traceparent"] == [parent]
            await asyncio.sleep(0.2)
            [m] = got
            assert m.headers == {"traceparent": parent, "Nats-Trace-Hop": "1"}
        finally:
            await pub.close()
            await far.close()
    finally:
        for n in nodes:
            n.cleanup()
