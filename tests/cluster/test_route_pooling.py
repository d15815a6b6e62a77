"""Route pooling and dedicated routes per account (nats-server 2.10+, route.go addRoute; ``cluster { pool_size,
accounts }``), on Skiff, on nats-server and in mixed clusters.

What nats-server 2.15 does, and these tests check on both servers: with ``pool_size: N`` a server keeps N
connections to every other server that pools too, plus one per pinned account (``accounts``, and the system account
$SYS, pinned by default); a server with ``pool_size: -1`` (no pooling, as before 2.10) gets a single connection that
carries every account.  /routez lists every connection; dedicated ones name their ``account``.  Messages of
several accounts cross whichever connection carries them.
"""
from __future__ import annotations

import asyncio
import json
import re
import subprocess
import time
import urllib.request

import nats
import pytest

from skiff.server.conf import ConfigError
from skiff.server.options import options_from_config
from tests.cluster.conftest import wait_listening
from tests.cluster.test_route_protocol import FAKE_ID, FakeRoute
from tests.conftest import selected_targets
from tests.harness import ServerProcess, free_port, free_ports, nats_server_binary

ACCOUNTS = """
accounts {
  A { users [ { user: a, password: a } ] }
  B { users [ { user: b, password: b } ] }
  C { users [ { user: c, password: c } ] }
}
"""


def _arrangements(config) -> list[tuple[str, str]]:
    targets = selected_targets(config)
    out = [(t, t) for t in targets]
    if len(targets) > 1:
        out += [("skiff", "nats-server"), ("nats-server", "skiff")]
    return out


def pytest_generate_tests(metafunc):  # noqa: D103 (collected by pytest from this module)
    if "pair" in metafunc.fixturenames:
        arr = _arrangements(metafunc.config)
        metafunc.parametrize("pair", arr, ids=[f"{a}+{b}" for a, b in arr])


class Pair:
    """Two servers, the second with a route to the first, each with its own cluster { } extras."""

    def __init__(self, kinds: tuple[str, str], extra: tuple[str, str], top: str = "") -> None:
        self.ports = free_ports(2)
        self.nodes: list[ServerProcess] = []
        for i, kind in enumerate(kinds):
            routes = f'routes: ["nats-route://127.0.0.1:{self.ports[0]}"]' if i else ""
            conf = (f"server_name: node{i}\n{top}\n{ACCOUNTS}\n"
                    f"cluster {{ name: c1, listen: \"127.0.0.1:{self.ports[i]}\"\n {routes}\n {extra[i]} }}\n")
            self.nodes.append(ServerProcess(kind=kind, config=conf, jetstream=False).start())

    def routez(self, i: int) -> dict:
        with urllib.request.urlopen(f"{self.nodes[i].http_url}/routez", timeout=2) as r:
            return json.loads(r.read())

    def wait_routes(self, want: int, timeout: float = 10.0) -> list[dict]:
        """Until both servers list ``want`` route connections (and stay there a moment: a pool fills up one
        connection at a time, and an extra one is closed as a duplicate)."""
        deadline = time.monotonic() + timeout
        stable = 0
        while True:
            counts = [self.routez(i)["num_routes"] for i in range(2)]
            stable = stable + 1 if counts == [want, want] else 0
            if stable >= 5:
                return [self.routez(i) for i in range(2)]
            if time.monotonic() > deadline:
                raise AssertionError(f"route connections {counts}, expected {want} each\n" +
                                     "\n".join(n.log()[-3000:] for n in self.nodes))
            time.sleep(0.1)

    def cleanup(self) -> None:
        for n in self.nodes:
            n.cleanup()


@pytest.fixture
def pairs():
    made: list[Pair] = []

    def make(kinds, extra=("", ""), top="") -> Pair:
        p = Pair(kinds, extra, top)
        made.append(p)
        return p

    yield make
    for p in made:
        p.cleanup()


async def _accounts_cross(pair: Pair) -> None:
    """A, B and C each subscribe on node 0 and publish on node 1; every account gets its own messages only."""
    subs, pubs = [], []
    try:
        got: dict[str, list[bytes]] = {}
        for acc in ("a", "b", "c"):
            nc = await nats.connect(pair.nodes[0].url, user=acc, password=acc)
            subs.append(nc)
            got[acc] = []

            async def cb(msg, acc=acc):
                got[acc].append(msg.data)

            await nc.subscribe("pool.>", cb=cb)
            await nc.flush()
        for acc in ("a", "b", "c"):
            pubs.append(await nats.connect(pair.nodes[1].url, user=acc, password=acc))
        deadline = time.monotonic() + 10
        while not all(got.values()):  # interest crosses the route asynchronously: publish until it arrives
            assert time.monotonic() < deadline, got
            for acc, nc in zip(("a", "b", "c"), pubs):
                await nc.publish("pool.probe", acc.encode())
                await nc.flush()
            await asyncio.sleep(0.05)
        for acc, nc in zip(("a", "b", "c"), pubs):
            for i in range(20):
                await nc.publish(f"pool.{i}", f"{acc}{i}".encode())
            await nc.flush()
        deadline = time.monotonic() + 5
        while not all(sum(d.startswith(a.encode()) and d != a.encode() for d in v) == 20 for a, v in got.items()):
            assert time.monotonic() < deadline, got
            await asyncio.sleep(0.05)
        for acc, v in got.items():
            assert {d[:1] for d in v} == {acc.encode()}, f"account {acc} got another account's message: {v}"
    finally:
        for nc in subs + pubs:
            await nc.close()


def test_pool_of_three_and_system_route(pair, pairs):
    """pool_size: 3 on both: 3 pooled connections and the dedicated $SYS one, on each side; three accounts'
    messages cross."""
    p = pairs(pair, ("pool_size: 3", "pool_size: 3"))
    rz = p.wait_routes(4)
    for z in rz:
        assert sorted(r.get("account", "") for r in z["routes"]) == ["", "", "", "$SYS"]
        assert len({r["remote_id"] for r in z["routes"]}) == 1
    asyncio.run(_accounts_cross(p))


def test_default_pool(pair, pairs):
    """Without pool_size both servers pool as nats-server does by default: 3 connections and $SYS's; /varz says
    pool_size 3 and counts the 4 connections to the one remote server."""
    p = pairs(pair)
    p.wait_routes(4)
    for n in p.nodes:
        with urllib.request.urlopen(f"{n.http_url}/varz", timeout=2) as r:
            v = json.loads(r.read())
        assert (v["cluster"]["pool_size"], v["routes"], v["remotes"]) == (3, 4, 1)


def test_pinned_accounts(pair, pairs):
    """accounts: [A, B] (pool_size 2): two pooled connections, one each for A, B and $SYS."""
    extra = "pool_size: 2, accounts: [A, B]"
    p = pairs(pair, (extra, extra))
    rz = p.wait_routes(5)
    for z in rz:
        assert sorted(r.get("account", "") for r in z["routes"]) == ["", "", "$SYS", "A", "B"]
    asyncio.run(_accounts_cross(p))
    # The dedicated route of A carried A's messages (the account is not on their lines: its route says it).
    for z in [p.routez(0)]:
        a = next(r for r in z["routes"] if r.get("account") == "A")
        assert a["out_msgs"] + a["in_msgs"] >= 20


def test_pooled_and_unpooled(pair, pairs):
    """A pooling server and one with pool_size: -1: a single connection, every account on it."""
    p = pairs(pair, ("pool_size: 3", "pool_size: -1"))
    rz = p.wait_routes(1)
    for z in rz:
        assert "account" not in z["routes"][0]
    asyncio.run(_accounts_cross(p))


def test_different_pool_sizes(pair, pairs):
    """Pool sizes 2 and 4: both keep max(2, 4) pooled connections (route.go effectivePoolSize) and $SYS's."""
    p = pairs(pair, ("pool_size: 2", "pool_size: 4"))
    p.wait_routes(5)
    asyncio.run(_accounts_cross(p))


@pytest.mark.parametrize("text, error", [
    ("cluster { listen: 127.0.0.1:-1, pool_size: -1, accounts: [A] }",
     "pool_size cannot be negative if pinned accounts are specified"),
    ("cluster { listen: 127.0.0.1:-1, accounts: [A, A] }",
     'found duplicate account name "A" in pinned accounts list ["A" "A" "$SYS"]'),
])
def test_refused(tmp_path, text, error):
    """Bad pooling settings are refused at start-up by both servers with nats-server's words (nats-server checks
    them when it starts, server.go validateOptions, not with -t)."""
    f = tmp_path / "c.conf"
    f.write_text(ACCOUNTS + text + "\n")
    with pytest.raises(ConfigError, match=re.escape(error)):
        options_from_config(str(f))
    out = subprocess.run([nats_server_binary(), "-c", str(f), "-p", "-1"], capture_output=True, text=True,
                         timeout=30)
    assert out.returncode != 0
    assert error in out.stdout + out.stderr


def _fake_pooled(port: int, **extra) -> FakeRoute:
    """A route that offers pooling (a 2.10+ server's INFO with ``extra``) as the accepted side sees it."""
    r = FakeRoute(port)
    connect = {"echo": True, "verbose": False, "pedantic": False, "tls_required": False, "headers": True,
               "name": FAKE_ID, "cluster": "c1"}
    info = {"server_id": FAKE_ID, "server_name": "fake", "version": "2.15.0", "proto": 3, "host": "127.0.0.1",
            "port": 1, "headers": True, "cluster": "c1", **extra}
    r.send(b"CONNECT " + json.dumps(connect).encode() + b"\r\nINFO " + json.dumps(info).encode() + b"\r\n")
    return r


def _error(r: FakeRoute) -> bytes:
    """The -ERR line the server answers with before it closes the route."""
    while True:
        line = r.read_line()
        if line.startswith(b"-ERR"):
            return line


@pytest.mark.parametrize("cluster_extra, info, err", [
    ("pool_size: 3", {"route_pool_size": 3, "route_pool_idx": 7},
     b"-ERR 'Invalid route pool index: 7 - pool size is 3'"),
    ("pool_size: 3", {"route_pool_size": 3, "route_account": "B"}, b"-ERR 'No route for account \"B\"'"),
    ("pool_size: 3", {"route_pool_size": 3, "route_account": "Z"},
     b"-ERR 'Unable to lookup account \"Z\": account missing'"),
    ("pool_size: -1", {"route_pool_size": 3, "route_account": "A"},
     b"-ERR 'Not possible to have a dedicated route for account \"A\" between those servers'"),
])
def test_wire_refusals(server_factory, cluster_extra, info, err):
    """What a pooled server refuses on its route port, byte for byte as nats-server (route.go addRoute): a pool
    index outside the pool, a dedicated route for an account it does not pin or does not know, and any dedicated
    route when it does not pool."""
    port = free_port()
    server_factory(jetstream=False, config=f'{ACCOUNTS}\ncluster {{ name: c1, listen: "127.0.0.1:{port}", '
                                           f'{cluster_extra} }}\n')
    wait_listening(port)
    r = _fake_pooled(port, **info)
    try:
        assert _error(r) == err
        with pytest.raises((ConnectionError, OSError)):
            for _ in range(100):
                r.read_line()
    finally:
        r.close()


def test_pooled_info(server_factory):
    """A server with pool_size: 3 offers it in its route INFO (route_pool_size), and none when it does not pool."""
    for extra, want in (("pool_size: 3", 3), ("pool_size: -1", None)):
        port = free_port()
        server_factory(jetstream=False, config=f'cluster {{ name: c1, listen: "127.0.0.1:{port}", {extra} }}\n')
        wait_listening(port)
        r = FakeRoute(port)
        try:
            assert r.info.get("route_pool_size") == want
            assert "route_pool_idx" not in r.info and "route_account" not in r.info
        finally:
            r.close()


def test_a_closed_unpooled_route_redials_the_whole_pool(pair, pairs):
    """A pooling server with pinned accounts dials a server with pool_size: -1: one connection, the dedicated
    ones refused ("Not possible to have a dedicated route ...", never dialed again).  When that single route closes,
    nats-server dials the pool and every pinned account's route again (route.go removeRoute: a "no pool" route was
    the last one to that remote), so a remote that comes back with pooling gets the full set: 3 pooled
    connections and the dedicated ones of A and $SYS."""
    p = pairs(pair, ("pool_size: -1", "accounts: [A]"))
    p.wait_routes(1)
    node = p.nodes[0]
    node.stop()
    node.config = node.config.replace("pool_size: -1", "accounts: [A]")
    node.start()
    rz = p.wait_routes(5, timeout=15)
    for z in rz:
        assert sorted(r.get("account", "") for r in z["routes"]) == ["", "", "", "$SYS", "A"]
    asyncio.run(_accounts_cross(p))


def _reload(node: ServerProcess, old: str, new: str) -> None:
    """Change ``old`` to ``new`` in the node's cluster block and send SIGHUP (nats-server --signal reload)."""
    import os
    import signal

    node.config = node.config.replace(old, new)
    with open(os.path.join(node._tmp, "server.conf"), "w") as f:
        f.write(node.config)
    mark = node.log().count("Reloaded")
    node.proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 10
    while node.log().count("Reloaded") == mark:
        assert time.monotonic() < deadline, node.log()
        time.sleep(0.05)


def test_reload_pins_and_unpins_accounts_and_resizes_the_pool(pair, pairs):
    """A configuration reload that changes ``accounts`` or ``pool_size`` (reload.go reloadClusterPoolAndAccounts):
    an added account moves to a dedicated route (the reloading server tells every remote over the pooled route
    that carried it, INFO ``route_account`` + ``route_acc_add_reqid``, waits for the answers, and dials the new
    route), a removed one goes back to the pool (its dedicated routes closed for good), and a new pool size closes
    the pooled routes and makes the pool again.  Both servers are reloaded in turn, the accepting one first; every
    account's messages cross after each step."""
    p = pairs(pair, ("pool_size: 2", "pool_size: 2"))
    p.wait_routes(3)
    steps = [
        ("pool_size: 2", "pool_size: 2, accounts: [A]", ["", "", "$SYS", "A"]),
        ("pool_size: 2, accounts: [A]", "pool_size: 3", ["", "", "", "$SYS"]),
    ]
    for old, new, routes in steps:
        for i in (0, 1):
            _reload(p.nodes[i], old, new)
        for z in p.wait_routes(4, timeout=15):
            assert sorted(r.get("account", "") for r in z["routes"]) == routes
        asyncio.run(_accounts_cross(p))
    for n in p.nodes:  # every remote answered the INFO that moved A (no 2 s timeout)
        assert "Timed out waiting for confirmation" not in n.log()


@pytest.mark.parametrize("old, new, error", [
    ('listen: "127.0.0.1:{port}"', 'listen: "127.0.0.1:{other}"',
     "config reload not supported for cluster port: old={port}, new={other}"),
    ("pool_size: 2", "pool_size: 2, accounts: [Z]",
     'unable to add account "Z" to the list of dedicated routes: account missing'),
    ('cluster {{ name: c1, listen: "127.0.0.1:{port}", pool_size: 2 }}', "",
     "config reload not supported for cluster host: old=127.0.0.1, new="),
])
def test_reload_refusals(server_factory, old, new, error):
    """What nats-server refuses on a reload of the cluster block (reload.go validateClusterOpts, diffOptions): the
    route port, a pinned account it does not know, the block removed; the server goes on with its old
    configuration."""
    port, other = free_ports(2)
    srv = server_factory(jetstream=False, config=f'{ACCOUNTS}\ncluster {{ name: c1, listen: "127.0.0.1:{port}", '
                                                 "pool_size: 2 }\n")
    wait_listening(port)
    _reload_expecting(srv, old.format(port=port, other=other), new.format(port=port, other=other),
                      f"Failed to reload server configuration: {error.format(port=port, other=other)}")
    wait_listening(port)


@pytest.mark.skiff_only
def test_reload_of_other_cluster_settings_is_refused_by_skiff(server_factory):
    """nats-server also changes the cluster name, routes, authorization, TLS, compression... on a reload; Skiff
    changes only pool_size and accounts and refuses the rest, loudly, rather than keep the old values silently."""
    port = free_port()
    srv = server_factory(jetstream=False, config=f'cluster {{ name: c1, listen: "127.0.0.1:{port}" }}\n')
    wait_listening(port)
    _reload_expecting(srv, "name: c1", "name: c2", "Failed to reload server configuration: config reload not "
                      "supported by Skiff for cluster name: only pool_size and accounts change at run time")


def _reload_expecting(node: ServerProcess, old: str, new: str, line: str) -> None:
    import os
    import signal

    assert old in node.config
    with open(os.path.join(node._tmp, "server.conf"), "w") as f:
        f.write(node.config.replace(old, new))
    node.proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 10
    while line not in node.log():
        assert time.monotonic() < deadline, node.log()
        time.sleep(0.05)
    assert "Reloaded server configuration" not in node.log()
