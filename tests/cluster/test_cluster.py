"""Three-node clusters started with nats-server's flags: all nats-server, all Skiff, and mixed (issue #11).

Each node routes only to the first one; gossip must make the rest of the mesh.  The same tests run in every
arrangement, so a Skiff node must behave as a nats-server node does to a nats-server node and to its clients."""
from __future__ import annotations

import asyncio
import json
import re

import nats
import pytest
from nats.errors import NoRespondersError

from tests.cluster.conftest import publish_until_received


async def _until(pred, timeout: float = 15.0) -> None:
    # An upper bound only: three server processes on two loaded cores (CI runs two test workers) may need it.
    deadline = asyncio.get_running_loop().time() + timeout
    while not pred():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


def _pool(nc) -> set[str]:
    return {s.uri.netloc for s in nc._server_pool}


def _num_routes(node) -> int:
    import urllib.request

    with urllib.request.urlopen(f"{node.http_url}/routez", timeout=2) as r:
        return json.loads(r.read())["num_routes"]




async def test_gossip_makes_a_mesh_and_messages_cross_between_any_two_nodes(cluster):
    cluster.start()
    cluster.wait_mesh()
    urls = {f"127.0.0.1:{n.port}" for n in cluster.nodes}
    # node1 and node2 were told only of node0: their route to each other comes from gossip.
    ncs = [await nats.connect(n.url) for n in cluster.nodes]
    try:
        got: dict[int, list] = {0: [], 1: [], 2: []}
        for i, nc in enumerate(ncs):
            async def cb(m, i=i):
                got[i].append((m.subject, m.data, m.headers))
            await nc.subscribe("mesh.>", cb=cb)
            await nc.flush()
        # Interest travels as RS+; publish only once every node has every other node's.
        await asyncio.sleep(0.3)
        for i, nc in enumerate(ncs):
            await nc.publish(f"mesh.from{i}", b"x%d" % i, headers={"Origin": f"node{i}"})
            await nc.flush()
        await _until(lambda: all(len(v) == 3 for v in got.values()))
        await asyncio.sleep(0.1)
        for i in range(3):
            assert sorted(s for s, _, _ in got[i]) == ["mesh.from0", "mesh.from1", "mesh.from2"]  # once each
            assert {h["Origin"] for _, _, h in got[i]} == {"node0", "node1", "node2"}
        # Clients learn every server of the cluster from INFO connect_urls.
        await _until(lambda: all(urls <= _pool(nc) for nc in ncs))
    finally:
        for nc in ncs:
            await nc.close()


async def test_queue_groups_span_the_cluster_and_each_message_goes_to_one_member(cluster):
    """nats-server picks among all members of a group, local or behind a route, at random (client.go
    processMsgResults); when the local member leaves, the remote one gets everything."""
    cluster.start()
    cluster.wait_mesh()
    pub, remote = await nats.connect(cluster.nodes[0].url), await nats.connect(cluster.nodes[1].url)
    local = await nats.connect(cluster.nodes[0].url)
    try:
        got_local, got_remote = [], []

        async def on_local(m):
            got_local.append(m.data)

        async def on_remote(m):
            got_remote.append(m.data)
        lsub = await local.subscribe("work", queue="workers", cb=on_local)
        await remote.subscribe("work", queue="workers", cb=on_remote)
        # RS+ travel in order: once a probe subscribed after the queue member reaches it from node 0, node 0 knows
        # the remote member too.
        probe = await remote.subscribe("work.probe")
        await local.flush()
        await remote.flush()
        for _ in range(150):
            await pub.publish("work.probe", b"")
            await pub.flush()
            try:
                await probe.next_msg(timeout=0.1)
                break
            except nats.errors.TimeoutError:
                pass
        for i in range(200):
            await pub.publish("work", b"%d" % i)
        await pub.flush()
        await _until(lambda: len(got_local) + len(got_remote) == 200)
        await asyncio.sleep(0.1)
        assert len(got_local) + len(got_remote) == 200  # each message to exactly one member
        assert 40 < len(got_remote) < 160, len(got_remote)  # both members take a share (p < 1e-18 otherwise)
        await lsub.unsubscribe()
        await local.flush()
        after = {b"after-%d" % i for i in range(30)}
        for m in sorted(after):
            await pub.publish("work", m)
        await pub.flush()
        # Distinct payloads: what went where is in the failure message, and a late or repeated message of the first
        # round cannot hide or fake one of these.
        try:
            await _until(lambda: after <= set(got_remote))
        finally:
            late = [m for m in got_local if m.startswith(b"after-")]
            missing = sorted(after - set(got_remote))
            assert not late and not missing, (late, missing, len(got_local), len(got_remote))
        assert len(got_local) + len(got_remote) == 230
    finally:
        for nc in (pub, remote, local):
            await nc.close()


async def test_requests_cross_the_cluster_and_no_responders_comes_back(cluster):
    cluster.start()
    cluster.wait_mesh()
    req, svc = await nats.connect(cluster.nodes[2].url), await nats.connect(cluster.nodes[1].url)
    try:
        async def answer(m):
            await m.respond(b"pong:" + m.data)
        await svc.subscribe("svc.echo", queue="q", cb=answer)
        await svc.flush()
        await asyncio.sleep(0.3)
        r = await req.request("svc.echo", b"hi", timeout=2)
        assert r.data == b"pong:hi"
        with pytest.raises(NoRespondersError):
            await req.request("svc.nobody", b"hi", timeout=2)
    finally:
        await req.close()
        await svc.close()


async def test_a_restarted_node_rejoins_and_clients_learn_of_new_nodes(cluster):
    cluster.start(2)
    cluster.wait_mesh()
    nc = await nats.connect(cluster.nodes[0].url)
    try:
        # A node that joins later reaches connected clients in an asynchronous INFO.
        cluster.start(3)
        cluster.wait_mesh()
        await _until(lambda: f"127.0.0.1:{cluster.nodes[2].port}" in _pool(nc))
        # node1 restarts on the same ports: the routes come back and messages cross again.
        cluster.nodes[1].restart()
        cluster.wait_mesh(15)
        sub_nc = await nats.connect(cluster.nodes[1].url)
        got = []

        async def cb(m):
            got.append(m.data)
        await sub_nc.subscribe("after.restart", cb=cb)
        await sub_nc.flush()
        await asyncio.sleep(0.3)
        await nc.publish("after.restart", b"back")
        await nc.flush()
        await _until(lambda: got == [b"back"])
        await sub_nc.close()
    finally:
        await nc.close()


async def test_system_account_routez_ping_is_answered_by_every_node(target):
    """``$SYS.REQ.SERVER.PING.ROUTEZ`` from a system user reaches both nodes of a cluster over the route, and each
    answers with its own routes (events.go, monitor.go Routez)."""
    from tests.harness import ServerProcess, free_ports

    conf = 'accounts { SYS { users [ { user: sys, password: sys } ] } }\nsystem_account: SYS\n'
    c0, c1 = free_ports(2)
    nodes = [ServerProcess(kind=target, jetstream=False, config=conf,
                           args=["--cluster", f"nats://127.0.0.1:{c}", "--cluster_name", "c1", "-n", f"n{i}"] +
                           (["--routes", f"nats-route://127.0.0.1:{c0}"] if i else []))
             for i, c in enumerate((c0, c1))]
    try:
        for n in nodes:
            n.start()
        nc = await nats.connect(nodes[0].url, user="sys", password="sys")
        inbox = nc.new_inbox()
        sub = await nc.subscribe(inbox)
        replies: dict[str, dict] = {}
        for _ in range(50):  # until the route is up and both nodes answer
            await nc.publish("$SYS.REQ.SERVER.PING.ROUTEZ", b"{}", reply=inbox)
            await nc.flush()
            await asyncio.sleep(0.2)
            while True:
                try:
                    m = await sub.next_msg(timeout=0.05)
                except nats.errors.TimeoutError:
                    break
                doc = json.loads(m.data)
                replies[doc["server"]["name"]] = doc["data"]
            if len(replies) == 2 and all(d["num_routes"] >= 1 for d in replies.values()):
                break
        assert set(replies) == {"n0", "n1"}
        assert {r["remote_name"] for r in replies["n0"]["routes"]} == {"n1"}
        assert {r["remote_name"] for r in replies["n1"]["routes"]} == {"n0"}
        await nc.close()
    finally:
        for n in nodes:
            n.cleanup()


async def test_websocket_clients_are_told_the_websocket_urls_of_the_cluster(target):
    """A WebSocket client's INFO ``connect_urls`` lists the cluster's WebSocket addresses (routes carry them as
    ``ws_connect_urls``), never the client ports it could not use; a plain client still gets the client ports."""
    from tests.harness import ServerProcess, free_ports

    c0, c1, w0, w1 = free_ports(4)
    nodes = [ServerProcess(kind=target, jetstream=False,
                           config=f'websocket {{ listen: "127.0.0.1:{w}", no_tls: true }}\n',
                           args=["--cluster", f"nats://127.0.0.1:{c}", "--cluster_name", "c1"] +
                           (["--routes", f"nats-route://127.0.0.1:{c0}"] if i else []))
             for i, (c, w) in enumerate(((c0, w0), (c1, w1)))]
    try:
        for n in nodes:
            n.start()
        # nats.py keeps the connect_urls of the first INFO in _server_info (later INFOs only feed its server pool),
        # so connect once the route is up: a node is ready as soon as its client port is, before its routes are
        # (a Skiff node now starts fast enough to show the difference).
        await _until(lambda: _num_routes(nodes[0]) >= 1 and _num_routes(nodes[1]) >= 1)
        ws = await nats.connect(f"ws://127.0.0.1:{w0}")
        tcp = await nats.connect(nodes[0].url)
        await _until(lambda: f"127.0.0.1:{w1}" in (ws._server_info.get("connect_urls") or []))
        assert set(ws._server_info["connect_urls"]) == {f"127.0.0.1:{w0}", f"127.0.0.1:{w1}"}
        await _until(lambda: f"127.0.0.1:{nodes[1].port}" in (tcp._server_info.get("connect_urls") or []))
        assert not {f"127.0.0.1:{w0}", f"127.0.0.1:{w1}"} & set(tcp._server_info["connect_urls"])
        await ws.close()
        await tcp.close()
    finally:
        for n in nodes:
            n.cleanup()


async def test_the_conf_cluster_example_runs_mixed():
    """conf/cluster's two files, one node Skiff and the other nats-server, with route authorization: a message
    crosses.  The files' fixed ports are swapped for free ones (tests run side by side)."""
    from tests.harness import ROOT, ServerProcess, free_ports

    ports = dict(zip(("4242", "4243", "6242", "6243"), map(str, free_ports(4))))

    def text(name: str) -> str:
        t = (ROOT / "conf" / "cluster" / name).read_text()
        # one pass, whole port numbers only: a free port that contains "4242" is never rewritten again
        return re.sub(r"(?<=127\.0\.0\.1:)(4242|4243|6242|6243)\b", lambda m: ports[m.group(1)], t)
    a = ServerProcess(kind="skiff", jetstream=False, port=int(ports["4242"]), config=text("node-a.conf"))
    b = ServerProcess(kind="nats-server", jetstream=False, port=int(ports["4243"]), config=text("node-b.conf"))
    try:
        a.start()
        b.start()
        na, nb = await nats.connect(a.url), await nats.connect(b.url)
        got = []

        async def cb(m):
            got.append(m.data)
        await nb.subscribe("demo.x", cb=cb)
        await nb.flush()
        await publish_until_received(na, "demo.x", b"across", got)
        assert set(got) == {b"across"}
        await na.close()
        await nb.close()
    finally:
        a.cleanup()
        b.cleanup()


@pytest.mark.parametrize("kinds", [("nats-server", "nats-server"), ("skiff", "skiff"), ("skiff", "nats-server"),
                                   ("nats-server", "skiff")], ids=["nats-server", "skiff", "skiff-seed", "nats-seed"])
async def test_routes_with_mutual_tls_and_a_plain_route_refused(kinds):
    """cluster { tls { verify } }: TLS first on every route, both ends checked against the CA, in mixed clusters;
    a node without TLS never gets a route to them (the handshake fails)."""
    from tests.harness import ROOT, ServerProcess, free_ports

    certs = ROOT / "conf" / "certs"
    tls = (f'tls {{ cert_file: "{certs / "route-cert.pem"}", key_file: "{certs / "route-key.pem"}", '
           f'ca_file: "{certs / "ca.pem"}", verify: true }}')
    c0, c1, c2 = free_ports(3)

    def conf(port: int, routes: list[int], with_tls: bool = True) -> str:
        r = ", ".join(f'"nats-route://127.0.0.1:{p}"' for p in routes)
        return (f'cluster {{ name: c1, listen: "127.0.0.1:{port}", routes: [{r}]' +
                (f", {tls}" if with_tls else "") + " }\n")
    a = ServerProcess(kind=kinds[0], jetstream=False, config=conf(c0, []))
    b = ServerProcess(kind=kinds[1], jetstream=False, config=conf(c1, [c0]))
    plain = ServerProcess(kind=kinds[1], jetstream=False, config=conf(c2, [c0], with_tls=False))
    try:
        for s in (a, b, plain):
            s.start()
        na, nb = await nats.connect(a.url), await nats.connect(b.url)
        got = []

        async def cb(m):
            got.append(m.data)
        await nb.subscribe("tls.x", cb=cb)
        await nb.flush()
        await publish_until_received(na, "tls.x", b"over tls", got, why=lambda: a.log() + b.log())
        assert set(got) == {b"over tls"}
        import urllib.request

        await asyncio.sleep(1.5)  # the plain node has tried and been refused
        with urllib.request.urlopen(f"{plain.http_url}/routez", timeout=2) as r:
            assert json.loads(r.read())["num_routes"] == 0
        with urllib.request.urlopen(f"{a.http_url}/routez", timeout=2) as r:
            assert {x["remote_id"] for x in json.loads(r.read())["routes"]} != set()
        await na.close()
        await nb.close()
    finally:
        for s in (a, b, plain):
            s.cleanup()


async def test_a_cluster_in_operator_mode_routes_an_account_by_its_public_key(target):
    """Operator mode (conf/operator, memory resolver) in a two-node cluster: RS+ and RMSG name the APP account by
    its public key; a subscriber with app.creds on node 1 gets what a publisher with the same creds sends on node 0.
    (An account a route names that this server has not loaded is fetched from its resolver: Accounts.lookup.)"""
    from tests.harness import ROOT, ServerProcess, free_ports

    op = ROOT / "conf" / "operator"
    base = (op / "operator.conf").read_text().replace("jetstream: enabled", "").replace(
        "listen: 127.0.0.1:4222", "").replace("conf/operator/operator.jwt", str(op / "operator.jwt"))
    c0, c1 = free_ports(2)
    nodes = [ServerProcess(kind=target, jetstream=False, config=base + (
        f'\ncluster {{ name: c1, listen: "127.0.0.1:{c}"' +
        (f', routes: ["nats-route://127.0.0.1:{c0}"]' if i else "") + " }\n")) for i, c in enumerate((c0, c1))]
    creds = str(op / "creds" / "app.creds")
    try:
        for n in nodes:
            n.start()
        sub_nc = await nats.connect(nodes[1].url, user_credentials=creds)
        got = []

        async def cb(m):
            got.append(m.data)
        await sub_nc.subscribe("op.cluster", cb=cb)
        await sub_nc.flush()
        pub_nc = await nats.connect(nodes[0].url, user_credentials=creds)
        await publish_until_received(pub_nc, "op.cluster", b"app", got, why=lambda: nodes[0].log()[-2000:])
        assert set(got) == {b"app"}
        await sub_nc.close()
        await pub_nc.close()
    finally:
        for n in nodes:
            n.cleanup()
