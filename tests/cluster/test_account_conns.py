"""An account JWT's ``conn`` and ``leaf`` limits hold for the whole cluster (issue #11).

Each server publishes its counts of an account (``$SYS.SERVER.ACCOUNT.<acc>.CONNS``, events.go accConnsUpdate) and
adds the other servers' ones when it checks the limits (accounts.go MaxTotalConnectionsReached,
maxTotalLeafNodesReached); an update that shows the account over a limit closes the newest connections
(accounts.go updateRemoteServer); a server's counts go when it announces its shutdown (remoteServerShutdown).  The
cluster tests run on two nodes in every arrangement of Skiff and nats-server (the update is JSON, so a mixed cluster
counts across both); the clients and leafs are spoken by hand (JwtLeaf) so that the exact answer is compared.
"""
from __future__ import annotations

import asyncio
import json
import time

import nats
import pytest

from tests import jwt_helpers as jh
from tests.cluster.conftest import wait_listening
from tests.cluster.test_leafnodes import LIMIT_ERR, JwtLeaf
from tests.conftest import selected_targets
from tests.harness import ServerProcess, free_ports

PAIRS = {
    "nats-server": ("nats-server", "nats-server"),
    "skiff": ("skiff", "skiff"),
    "skiff-seed": ("skiff", "nats-server"),
    "nats-seed": ("nats-server", "skiff"),
}


def pytest_generate_tests(metafunc):
    if "pair" in metafunc.fixturenames:
        targets = selected_targets(metafunc.config)
        names = [n for n in PAIRS if len(targets) > 1 or n == targets[0]]
        metafunc.parametrize("pair", [PAIRS[n] for n in names], ids=names)


class OperatorCluster:
    """Operator-mode nodes (FULL resolver, the system account and APP preloaded) routed to the first, each with a
    leaf port."""

    def __init__(self, kinds, tmp_path, limits: dict, extra: str = "") -> None:
        self.op, self.sys_key, self.app = jh.new_key("O"), jh.new_key("A"), jh.new_key("A")
        sys_user = jh.new_key("U")
        self.sys_creds = jh.write_creds(str(tmp_path / "sys.creds"), jh.user_jwt(sys_user, self.sys_key), sys_user)
        n = len(kinds)
        self.cluster_ports, self.leaf_ports = free_ports(n), free_ports(n)
        self.nodes: list[ServerProcess] = []
        for i, kind in enumerate(kinds):
            jwt_dir = tmp_path / f"jwt{i}"
            jwt_dir.mkdir()
            routes = f', routes: ["nats-route://127.0.0.1:{self.cluster_ports[0]}"]' if i else ""
            self.nodes.append(ServerProcess(kind=kind, jetstream=False, config=(
                f"operator: {jh.operator_jwt(self.op, system_account=self.sys_key.public)}\n"
                f'resolver {{ type: full, dir: "{jwt_dir}" }}\n'
                f"resolver_preload {{\n  {self.sys_key.public}: {jh.account_jwt(self.sys_key, self.op, name='SYS')}\n"
                f"  {self.app.public}: {jh.account_jwt(self.app, self.op, name='APP', limits=limits)}\n}}\n"
                f'cluster {{ name: c1, listen: "127.0.0.1:{self.cluster_ports[i]}"{routes} }}\n'
                f'leafnodes {{ listen: "127.0.0.1:{self.leaf_ports[i]}" }}\n' + extra)))

    def start(self) -> "OperatorCluster":
        for node in self.nodes:
            node.start()
        for p in self.cluster_ports + self.leaf_ports:
            wait_listening(p)
        return self

    def client(self, i: int) -> JwtLeaf:
        u = jh.new_key("U")
        return JwtLeaf(self.nodes[i].port, jh.user_jwt(u, self.app), u, None)

    def leaf(self, i: int, name: str) -> JwtLeaf:
        u = jh.new_key("U")
        return JwtLeaf(self.leaf_ports[i], jh.user_jwt(u, self.app), u, name)

    def wait_leafs(self, i: int, n: int) -> None:
        import urllib.request

        deadline = time.monotonic() + 10
        while True:
            with urllib.request.urlopen(f"{self.nodes[i].http_url}/leafz", timeout=2) as r:
                if json.loads(r.read())["leafnodes"] == n:
                    return
            assert time.monotonic() < deadline, self.logs()
            time.sleep(0.02)

    def logs(self) -> str:
        return "\n".join(n.log()[-3000:] for n in self.nodes)

    def cleanup(self) -> None:
        for node in self.nodes:
            node.cleanup()


class SysWatch:
    """A system-account client on one node that records the account connection events it sees (the ones the
    node's own remoteConnsUpdate handler gets, in the same order) and the shutdown announcements."""

    def __init__(self, oc: OperatorCluster) -> None:
        self.oc = oc
        self.events: list[tuple[str, dict]] = []
        self.nc = None

    async def start(self, i: int) -> "SysWatch":
        self.nc = await nats.connect(self.oc.nodes[i].url, user_credentials=self.oc.sys_creds)

        async def cb(m):
            self.events.append((m.subject, json.loads(m.data)))
        await self.nc.subscribe(f"$SYS.SERVER.ACCOUNT.{self.oc.app.public}.CONNS", cb=cb)
        await self.nc.subscribe("$SYS.SERVER.*.SHUTDOWN", cb=cb)
        await self.nc.flush()
        return self

    async def wait(self, what: str, pred, timeout: float = 10.0) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            for subject, ev in self.events:
                if pred(subject, ev):
                    return ev
            assert time.monotonic() < deadline, f"no {what}: {self.events}\n{self.oc.logs()}"
            await asyncio.sleep(0.02)

    async def counts(self, server_id: str, conns: int, leafs: int = 0) -> dict:
        """Until ``server_id`` reported these counts of the account (the last event matters: earlier ones may
        match an older state)."""
        def pred(subject, ev) -> bool:
            mine = [e for s, e in self.events if s.endswith(".CONNS") and e["server"]["id"] == server_id]
            return bool(mine) and mine[-1]["conns"] == conns and mine[-1]["leafnodes"] == leafs
        return await self.wait(f"CONNS {conns}/{leafs} from {server_id}", pred)

    async def publish(self, subject: str, doc: dict) -> None:
        await self.nc.publish(subject, json.dumps(doc).encode())
        await self.nc.flush()


def server_id(node: ServerProcess) -> str:
    import urllib.request

    with urllib.request.urlopen(f"{node.http_url}/varz", timeout=2) as r:
        return json.loads(r.read())["server_id"]


async def wait_routed(oc: OperatorCluster, watch: SysWatch) -> None:
    """Until node 0's system account events reach node 1: a system client on node 0 publishes an event
    of its own (no server of this cluster has that id) until node 1's watcher sees it."""
    nc = await nats.connect(oc.nodes[0].url, user_credentials=oc.sys_creds)
    try:
        deadline = time.monotonic() + 10
        while not any(s.endswith(".SHUTDOWN") and e.get("id") == "NPROBE" for s, e in watch.events):
            assert time.monotonic() < deadline, oc.logs()
            await nc.publish("$SYS.SERVER.NPROBE.SHUTDOWN", json.dumps({"id": "NPROBE"}).encode())
            await nc.flush()
            await asyncio.sleep(0.05)
    finally:
        await nc.close()


@pytest.fixture
def operator_cluster(tmp_path):
    made: list[OperatorCluster] = []

    def make(kinds, limits: dict, extra: str = "") -> OperatorCluster:
        oc = OperatorCluster(kinds, tmp_path, limits, extra)
        made.append(oc)
        return oc.start()

    yield make
    for oc in made:
        oc.cleanup()


async def admitted_soon(oc, connect) -> None:
    """New connections (``connect()``) are refused with the limit error until one is admitted, within 5 s: a server
    drops another's counts when it handles the announcement, which nats-server does on its events goroutine."""
    deadline = time.monotonic() + 5
    while True:
        c = connect()
        c.sock.sendall(b"PING\r\n")
        line = c.next_line()
        if line == b"PONG":
            return
        assert line == b"-ERR '" + LIMIT_ERR + b"'", line
        assert time.monotonic() < deadline, oc.logs()
        await asyncio.sleep(0.05)


async def test_the_conn_limit_counts_the_clients_of_the_other_servers(pair, operator_cluster):
    """``conn: 2``, two clients on node 0: node 1 refuses the third with nats-server's words and closes it, and
    node 0's clients stay.  When one of them goes, node 1 admits one again; when node 0 shuts down (its
    ``$SYS.SERVER.<id>.SHUTDOWN``), node 1 no longer counts its clients.

    Node 1 must have loaded the account to keep node 0's counts (remoteConnsUpdate drops the others); a client of
    the account that came and went first makes sure, as nats-server loads an account lazily."""
    oc = operator_cluster(pair, {"conn": 2})
    watch = await SysWatch(oc).start(1)
    try:
        await wait_routed(oc, watch)
        warm = oc.client(1)
        warm.assert_up()
        warm.sock.close()
        a0 = server_id(oc.nodes[0])
        first, second = oc.client(0), oc.client(0)
        first.assert_up()
        second.assert_up()
        await watch.counts(a0, 2)
        oc.client(1).assert_refused(LIMIT_ERR)
        first.assert_up()
        second.assert_up()

        second.sock.close()
        await watch.counts(a0, 1)
        third = oc.client(1)
        third.assert_up()
        oc.client(1).assert_refused(LIMIT_ERR)  # 1 here + 1 there

        oc.nodes[0].stop()
        await watch.wait("shutdown of node 0", lambda s, e: s == f"$SYS.SERVER.{a0}.SHUTDOWN")
        # A server that handles the announcement in-line (Skiff) has dropped the counts by now; nats-server
        # queues it for its events goroutine: the next client may come a moment before.
        await admitted_soon(oc, lambda: oc.client(1))
    finally:
        await watch.nc.close()


async def test_a_server_entering_lame_duck_mode_is_no_longer_counted(pair, operator_cluster):
    """lameDuckMode announces itself (``$SYS.SERVER.<id>.LAMEDUCK``) and the others handle it as a shutdown
    (remoteServerShutdown): its clients, still connected for the grace period, no longer fill the account."""
    import signal

    oc = operator_cluster(pair, {"conn": 2}, 'lame_duck_grace_period: "20s"\nlame_duck_duration: "30s"\n')
    watch = await SysWatch(oc).start(1)
    lame: list = []

    async def cb(m):
        lame.append(m.subject)
    await watch.nc.subscribe("$SYS.SERVER.*.LAMEDUCK", cb=cb)
    try:
        await wait_routed(oc, watch)
        warm = oc.client(1)
        warm.assert_up()
        warm.sock.close()
        a0 = server_id(oc.nodes[0])
        held = [oc.client(0), oc.client(0)]
        for c in held:
            c.assert_up()
        await watch.counts(a0, 2)
        oc.client(1).assert_refused(LIMIT_ERR)
        oc.nodes[0].proc.send_signal(signal.SIGUSR2)
        deadline = time.monotonic() + 10
        while f"$SYS.SERVER.{a0}.LAMEDUCK" not in lame:
            assert time.monotonic() < deadline, oc.logs()
            await asyncio.sleep(0.02)
        await admitted_soon(oc, lambda: oc.client(1))  # nats-server: on its events goroutine, a moment later
    finally:
        await watch.nc.close()


async def test_the_leaf_limit_counts_the_leafs_of_the_other_servers(pair, operator_cluster):
    """``leaf: 1``, a leaf connection on node 0: node 1 refuses a second leaf of the account with the same error
    (client.go registerWithAccount -> maxTotalLeafNodesReached adds nrleafs).  The other servers' leafs do not count
    against ``conn`` (nrclients only): a client still gets in on node 1."""
    oc = operator_cluster(pair, {"leaf": 1, "conn": 2})
    watch = await SysWatch(oc).start(1)
    try:
        await wait_routed(oc, watch)
        warm = oc.client(1)
        warm.assert_up()
        warm.sock.close()
        a0 = server_id(oc.nodes[0])
        lf = oc.leaf(0, "s0")
        lf.assert_up()
        await watch.counts(a0, 0, 1)
        oc.leaf(1, "s1").assert_refused(LIMIT_ERR)
        lf.assert_up()
        c1, c2 = oc.client(1), oc.client(1)
        c1.assert_up()
        c2.assert_up()  # 2 clients here; node 0's leaf is not one of node 1's ``conn``
    finally:
        await watch.nc.close()


@pytest.mark.parametrize("limit", ["conn", "leaf"])
async def test_an_update_that_shows_the_account_over_its_limit_closes_the_newest(target, tmp_path, limit):
    """accounts.go updateRemoteServer: a report of another server that puts the account over ``conn`` closes the
    newest connections here, as many as it is over (the oldest stay); over ``leaf``, the newest leafs.  The report
    is any message on ``$SYS.SERVER.ACCOUNT.<acc>.CONNS`` in the system account, so a system user stands in for
    a server of the cluster here (a lone server tracks the others as a cluster member does); its shutdown
    announcement takes its counts away."""
    oc = OperatorCluster([target], tmp_path, {"conn": 3, "leaf": 2} if limit == "conn" else {"leaf": 2})
    oc.start()
    watch = await SysWatch(oc).start(0)
    try:
        old = oc.client(0)
        old.assert_up()
        if limit == "conn":
            mid, new = oc.client(0), oc.client(0)
            mid.assert_up()
            new.assert_up()
        else:
            # nats-server registers a leaf with its account after it answered the leaf's first PING: the order of
            # registration, which decides the newest, is the one /leafz shows.
            mid = oc.leaf(0, "l1")
            mid.assert_up()
            oc.wait_leafs(0, 1)
            new = oc.leaf(0, "l2")
            new.assert_up()
            oc.wait_leafs(0, 2)
        report = {"type": "io.nats.server.advisory.v1.account_connections", "acc": oc.app.public,
                  "server": {"name": "fake", "host": "127.0.0.1", "id": "NFAKESERVER", "seq": 1},
                  "conns": 1 if limit == "conn" else 0, "leafnodes": 0 if limit == "conn" else 1}
        await watch.publish(f"$SYS.SERVER.ACCOUNT.{oc.app.public}.CONNS", report)
        new.assert_refused(LIMIT_ERR)
        old.assert_up()
        mid.assert_up()
        # The fake server's counts hold until it announces its shutdown: the limit is full until then.
        if limit == "conn":
            oc.client(0).assert_refused(LIMIT_ERR)
        else:
            oc.leaf(0, "l3").assert_refused(LIMIT_ERR)
        await watch.publish("$SYS.SERVER.NFAKESERVER.SHUTDOWN", report["server"])
        await admitted_soon(oc, lambda: oc.client(0) if limit == "conn" else oc.leaf(0, "l4"))
    finally:
        await watch.nc.close()
        oc.cleanup()


def test_a_leaf_limit_below_minus_one_admits_no_leaf(target, tmp_path):
    """``leaf: -2`` (nats-server compares it: ``nleafs + nrleafs >= -2``): every leaf connection of the account is
    refused with the same error; its clients are not concerned."""
    oc = OperatorCluster([target], tmp_path, {"leaf": -2}).start()
    try:
        oc.leaf(0, "x").assert_refused(LIMIT_ERR)
        oc.client(0).assert_up()
    finally:
        oc.cleanup()


@pytest.mark.skiff_only
async def test_a_silent_servers_counts_expire_after_150_seconds():
    """events.go checkRemoteServers: every 90 s (chkOrph) the servers not heard from for more than 150 s (orphMax)
    are dropped as if they had announced their shutdown; a server with connections reports them every 30 s, so
    only one that went away unannounced (``kill -9``, a cut network) gets there.  nats-server's sweep runs on
    real time; Skiff's on its clock, which this test drives (the limit here comes from the configuration, which
    holds for the cluster as a JWT's does)."""
    from skiff.server.clock import ManualClock
    from skiff.server.core.server import Server
    from skiff.server.options import options_from_string

    clock = ManualClock()
    opts = options_from_string("""
accounts {
  APP { users [ { user: a, password: a } ], limits { max_connections: 2 } }
  SYS { users [ { user: s, password: s } ] }
}
system_account: SYS
ping_interval: "1h"
""", host="127.0.0.1", port=-1)  # -1: a random port (0 is nats-server's default, 4222)
    async with Server(opts, clock=clock) as srv:
        sys_nc = await nats.connect(srv.client_url, user="s", password="s")

        async def report(seq: int) -> None:
            await sys_nc.publish("$SYS.SERVER.ACCOUNT.APP.CONNS", json.dumps({
                "acc": "APP", "conns": 1, "leafnodes": 0,
                "server": {"name": "gone", "host": "127.0.0.1", "id": "NGONE", "seq": seq}}).encode())
            await sys_nc.flush()

        async def connect() -> bytes:
            reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
            await reader.readline()  # INFO
            writer.write(b'CONNECT {"user":"a","pass":"a","verbose":false}\r\nPING\r\n')
            line = await asyncio.wait_for(reader.readline(), 2)
            held.append(writer)
            return line

        held: list = []
        try:
            await report(1)
            assert await connect() == b"PONG\r\n"
            assert await connect() == b"-ERR 'maximum account active connections exceeded'\r\n"
            clock.advance(100)  # first sweep at 90 s: 90 s of silence is not yet 150
            await report(2)  # heard from again at 100 s
            clock.advance(80)  # sweep at 180 s: 80 s of silence
            assert await connect() == b"-ERR 'maximum account active connections exceeded'\r\n"
            clock.advance(90)  # sweep at 270 s: 170 s of silence: gone
            assert await connect() == b"PONG\r\n"
        finally:
            for w in held:
                w.close()
            await sys_nc.close()
