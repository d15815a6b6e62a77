"""Leaf node connections between Skiff and nats-server in every arrangement of hub and spoke (issue #11).

The hub listens with ``leafnodes { listen }``; the spoke dials it from ``leafnodes { remotes [...] }``.  The same
tests run for nats-server/nats-server (the oracle), Skiff/Skiff, a Skiff spoke of a nats-server hub (what developers
do to reach a shared system) and a nats-server spoke of a Skiff hub."""
from __future__ import annotations

import asyncio
import json
import socket
import time

import nats
import pytest

from tests.cluster.conftest import publish_until_received, wait_listening
from tests.conftest import selected_targets
from tests.harness import ServerProcess, free_ports

PAIRS = {
    "nats-server": ("nats-server", "nats-server"),
    "skiff": ("skiff", "skiff"),
    "skiff-spoke": ("nats-server", "skiff"),
    "skiff-hub": ("skiff", "nats-server"),
}


def pytest_generate_tests(metafunc):
    if "pair" in metafunc.fixturenames:
        targets = selected_targets(metafunc.config)
        names = [n for n in PAIRS if len(targets) > 1 or n == targets[0]]
        metafunc.parametrize("pair", [PAIRS[n] for n in names], ids=names)


class LeafPair:
    def __init__(self, kinds, hub_extra: str = "", remote_url: str = "nats-leaf://127.0.0.1:{port}",
                 spoke_extra: str = "") -> None:
        self.leaf_port, = free_ports(1)
        self.hub = ServerProcess(kind=kinds[0], jetstream=False, config=(
            f'leafnodes {{ listen: "127.0.0.1:{self.leaf_port}"' + (f", {hub_extra}" if hub_extra else "") + " }\n"))
        url = remote_url.format(port=self.leaf_port)
        self.spoke = ServerProcess(kind=kinds[1], jetstream=False, config=(
            f'leafnodes {{ remotes [ {{ url: "{url}"' + (f", {spoke_extra}" if spoke_extra else "") + " } ] }\n"))

    def start(self, connected: bool = True) -> "LeafPair":
        self.hub.start()
        self.spoke.start()
        if connected:
            self.wait_connected()
        return self

    def leafz(self, node: ServerProcess) -> dict:
        import urllib.request

        with urllib.request.urlopen(f"{node.http_url}/leafz", timeout=2) as r:
            return json.loads(r.read())

    def wait_connected(self, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while self.leafz(self.hub)["leafnodes"] != 1 or self.leafz(self.spoke)["leafnodes"] != 1:
            if time.monotonic() > deadline:
                raise AssertionError("leaf connection not made:\n" + self.hub.log() + self.spoke.log())
            time.sleep(0.05)

    def cleanup(self) -> None:
        self.hub.cleanup()
        self.spoke.cleanup()


@pytest.fixture
def leaf_pair(pair):
    made: list[LeafPair] = []

    def make(**kw) -> LeafPair:
        lp = LeafPair(pair, **kw)
        made.append(lp)
        return lp.start()

    yield make
    for lp in made:
        lp.cleanup()


async def _until(pred, timeout: float = 15.0) -> None:  # an upper bound for loaded CI machines
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


async def _settle(*ncs) -> None:
    for nc in ncs:
        await nc.flush()
    await asyncio.sleep(0.3)  # LS+ crosses the link


async def test_messages_requests_and_headers_cross_both_ways(leaf_pair):
    lp = leaf_pair()
    hub, spoke = await nats.connect(lp.hub.url), await nats.connect(lp.spoke.url)
    try:
        at_hub, at_spoke = [], []

        async def on_hub(m):
            at_hub.append((m.subject, m.data, m.headers))

        async def on_spoke(m):
            at_spoke.append((m.subject, m.data, m.headers))

        async def answer(m):
            await m.respond(b"from-spoke:" + m.data)
        await hub.subscribe("up.>", cb=on_hub)
        await spoke.subscribe("down.>", cb=on_spoke)
        await spoke.subscribe("svc.spoke", queue="workers", cb=answer)
        await _settle(hub, spoke)
        await hub.publish("down.a", b"1", headers={"K": "v"})
        await spoke.publish("up.b", b"2")
        await hub.flush()
        await spoke.flush()
        await _until(lambda: at_hub and at_spoke)
        assert at_spoke == [("down.a", b"1", {"K": "v"})] and at_hub == [("up.b", b"2", None)]
        r = await hub.request("svc.spoke", b"q", timeout=2)
        assert r.data == b"from-spoke:q"
        with pytest.raises(nats.errors.NoRespondersError):
            await spoke.request("svc.nobody", b"q", timeout=2)
    finally:
        await hub.close()
        await spoke.close()


def test_leafz_shows_the_links_rtt(leaf_pair):
    """/leafz ``rtt`` is the link's measured round trip (monitor.go Leafz: getRTT), not a constant 0s: both ends
    measure it from the PING/PONG of the link's start."""
    lp = leaf_pair()
    deadline = time.monotonic() + 15
    while True:
        rtts = [lp.leafz(node)["leafs"][0]["rtt"] for node in (lp.hub, lp.spoke)]
        if all(r != "0s" for r in rtts) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert all(r != "0s" and r[0].isdigit() and r.endswith(("s", "ms", "µs", "ns")) for r in rtts), rtts


async def test_queue_members_behind_a_leaf_are_a_fallback(leaf_pair):
    """A queue group prefers members on this server; a leaf connection's members get a message only when no
    other member can (client.go processMsgResults)."""
    lp = leaf_pair()
    pub, local, remote = (await nats.connect(lp.hub.url), await nats.connect(lp.hub.url),
                          await nats.connect(lp.spoke.url))
    try:
        got_local, got_remote = [], []

        async def on_local(m):
            got_local.append(m.data)

        async def on_remote(m):
            got_remote.append(m.data)
        lsub = await local.subscribe("jobs", queue="w", cb=on_local)
        await remote.subscribe("jobs", queue="w", cb=on_remote)
        await _settle(local, remote)
        for i in range(40):
            await pub.publish("jobs", b"%d" % i)
        await pub.flush()
        await _until(lambda: len(got_local) + len(got_remote) == 40)
        await asyncio.sleep(0.1)
        assert (len(got_local), len(got_remote)) == (40, 0)
        await lsub.unsubscribe()
        await _settle(local)
        for i in range(10):
            await pub.publish("jobs", b"%d" % i)
        await pub.flush()
        await _until(lambda: len(got_remote) == 10)
    finally:
        for nc in (pub, local, remote):
            await nc.close()


async def test_leaf_authorization_binds_an_account_and_refuses_a_wrong_password(pair):
    accounts = "accounts { A { users [ {user: a, password: a} ] }, B { users [ {user: b, password: b} ] } }\n"
    good = LeafPair(pair, hub_extra="authorization { users [ {user: leaf, password: s3cr3t, account: A} ] }",
                    remote_url="nats-leaf://leaf:s3cr3t@127.0.0.1:{port}")
    good.hub.config = accounts + good.hub.config
    try:
        good.start()
        a = await nats.connect(good.hub.url, user="a", password="a")
        b = await nats.connect(good.hub.url, user="b", password="b")
        spoke = await nats.connect(good.spoke.url)
        got_a, got_b = [], []

        async def on_a(m):
            got_a.append(m.data)

        async def on_b(m):
            got_b.append(m.data)
        await a.subscribe("from.leaf", cb=on_a)
        await b.subscribe("from.leaf", cb=on_b)
        await _settle(a, b)
        await spoke.publish("from.leaf", b"x")
        await spoke.flush()
        await _until(lambda: got_a)
        await asyncio.sleep(0.2)
        assert got_a == [b"x"] and got_b == []  # the link is bound to account A
        for nc in (a, b, spoke):
            await nc.close()
    finally:
        good.cleanup()
    bad = LeafPair(pair, hub_extra="authorization { user: leaf, password: s3cr3t }",
                   remote_url="nats-leaf://leaf:wrong@127.0.0.1:{port}")
    try:
        bad.start(connected=False)
        await asyncio.sleep(1.5)
        assert bad.leafz(bad.hub)["leafnodes"] == 0 and bad.leafz(bad.spoke)["leafnodes"] == 0
    finally:
        bad.cleanup()


class FakeLeaf:
    """A spoke spoken by hand to a hub's leaf port."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=3)
        self.buf = b""
        self.info = json.loads(self.line()[5:])

    def line(self) -> bytes:
        while b"\r\n" not in self.buf:
            d = self.sock.recv(65536)
            if not d:
                raise ConnectionError(f"closed; got {self.buf!r}")
            self.buf += d
        line, _, self.buf = self.buf.partition(b"\r\n")
        return line


def test_hub_refusals_and_loop_detection(target):
    port, = free_ports(1)
    hub = ServerProcess(kind=target, jetstream=False, config=(
        f'leafnodes {{ listen: "127.0.0.1:{port}", authorization {{ user: leaf, password: pw }} }}\n')).start()
    wait_listening(port)
    try:
        f = FakeLeaf(port)
        # What a spoke checks to know it reached a leaf port (leafnode.go processLeafnodeInfo)
        assert f.info["client_id"] > 0 and isinstance(f.info["leafnode_urls"], list) and f.info["nonce"]
        f.sock.sendall(b'CONNECT {"user":"leaf","pass":"nope","name":"fake","server_id":"NFAKE","headers":true}\r\n')
        assert f.line() == b"-ERR 'Authorization Violation'"
        f = FakeLeaf(port)
        f.sock.sendall(b'CONNECT {"user":"leaf","pass":"pw","name":"fake","server_id":"NFAKE","headers":true}\r\n'
                       b"PING\r\n")
        lds = None
        while True:
            line = f.line()
            if line.startswith(b"LS+ $LDS."):
                lds = line[4:]
            if line == b"PONG":
                break
        assert lds is not None
        f.sock.sendall(b"LS+ " + lds + b"\r\n")  # our own loop detection subject comes back: a loop
        while True:
            line = f.line()
            if line.startswith(b"-ERR"):
                break
        assert line == (b"-ERR 'Loop detected for leafnode account=\"$G\". Delaying attempt to reconnect for "
                        b"30s'")
    finally:
        hub.cleanup()


async def test_a_leaf_of_one_cluster_node_reaches_the_whole_cluster(pair):
    """A two-node cluster of the hub's kind; the spoke dials node 0; a client on node 1 and one on the spoke see
    each other's messages: interest travels leaf -> hub -> route and back (LS+ becomes RS+ and RS+ becomes LS+)."""
    hub_kind, spoke_kind = pair
    leaf_port, c0, c1 = free_ports(3)
    n0 = ServerProcess(kind=hub_kind, jetstream=False, args=["--cluster", f"nats://127.0.0.1:{c0}", "--cluster_name",
                                                             "c1"],
                       config=f'leafnodes {{ listen: "127.0.0.1:{leaf_port}" }}\n')
    n1 = ServerProcess(kind=hub_kind, jetstream=False, args=["--cluster", f"nats://127.0.0.1:{c1}", "--cluster_name",
                                                             "c1", "--routes", f"nats-route://127.0.0.1:{c0}"])
    spoke = ServerProcess(kind=spoke_kind, jetstream=False,
                          config=f'leafnodes {{ remotes [ {{ url: "nats-leaf://127.0.0.1:{leaf_port}" }} ] }}\n')
    try:
        for s in (n0, n1, spoke):
            s.start()
        lp = LeafPair.__new__(LeafPair)
        lp.hub, lp.spoke = n0, spoke
        lp.wait_connected()
        far, leaf = await nats.connect(n1.url), await nats.connect(spoke.url)
        at_far, at_leaf = [], []

        async def on_far(m):
            at_far.append(m.data)

        async def on_leaf(m):
            at_leaf.append(m.data)
        await far.subscribe("x.>", cb=on_far)
        await leaf.subscribe("y", cb=on_leaf)
        await far.flush()
        await leaf.flush()
        deadline = time.monotonic() + 10
        while not (at_far and at_leaf):  # until the interest has crossed both links
            assert time.monotonic() < deadline, (at_far, at_leaf)
            await leaf.publish("x.1", b"leaf->far")
            await far.publish("y", b"far->leaf")
            await leaf.flush()
            await far.flush()
            await asyncio.sleep(0.2)
        assert set(at_far) == {b"leaf->far"} and set(at_leaf) == {b"far->leaf"}
        await far.close()
        await leaf.close()
    finally:
        for s in (n0, n1, spoke):
            s.cleanup()


async def test_without_leaf_authorization_a_leaf_logs_in_as_a_client_would(pair):
    """No ``leafnodes { authorization }`` but client users: a leaf must present one of them (auth.go
    isLeafNodeAuthorized falls back to isClientAuthorized), and binds to that user's account."""
    accounts = "accounts { A { users [ {user: a, password: a} ] } }\n"
    anon = LeafPair(pair)
    anon.hub.config = accounts + anon.hub.config
    try:
        anon.start(connected=False)
        await asyncio.sleep(1.5)
        assert anon.leafz(anon.hub)["leafnodes"] == 0  # no credentials: refused, as a client would be
    finally:
        anon.cleanup()
    user = LeafPair(pair, remote_url="nats-leaf://a:a@127.0.0.1:{port}")
    user.hub.config = accounts + user.hub.config
    try:
        user.start()
        assert [lf["account"] for lf in user.leafz(user.hub)["leafs"]] == ["A"]
    finally:
        user.cleanup()


@pytest.mark.parametrize("hub_kind", ["nats-server", "skiff"])
async def test_a_spoke_with_a_creds_file_joins_an_operator_mode_hub(target, hub_kind):
    """A spoke's ``credentials``: the user JWT goes in CONNECT with the hub's nonce signed by the seed
    (leafnode.go sendLeafConnect).  The hub is in operator mode (conf/operator, the APP account from the resolver):
    it checks the JWT and the signature as for a client and binds the link to the JWT's account (auth.go
    isLeafNodeAuthorized); hub and spoke are each kind in turn."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    op = root / "conf" / "operator"
    text = (op / "operator.conf").read_text().replace("jetstream: enabled", "")
    text = text.replace("listen: 127.0.0.1:4222", "").replace("conf/operator/operator.jwt",
                                                                str(op / "operator.jwt"))
    leaf_port, = free_ports(1)
    hub = ServerProcess(kind=hub_kind, jetstream=False,
                        config=text + f'\nleafnodes {{ listen: "127.0.0.1:{leaf_port}" }}\n')
    spoke = ServerProcess(kind=target, jetstream=False, config=(
        f'leafnodes {{ remotes [ {{ url: "nats-leaf://127.0.0.1:{leaf_port}", '
        f'credentials: "{op / "creds" / "app.creds"}" }} ] }}\n'))
    try:
        hub.start()
        spoke.start()
        lp = LeafPair.__new__(LeafPair)
        lp.hub, lp.spoke = hub, spoke
        lp.wait_connected()
        hub_nc = await nats.connect(hub.url, user_credentials=str(op / "creds" / "app.creds"))
        spoke_nc = await nats.connect(spoke.url)
        got = []

        async def cb(m):
            got.append(m.data)
        await hub_nc.subscribe("op.leaf", cb=cb)
        await _settle(hub_nc)
        await publish_until_received(spoke_nc, "op.leaf", b"signed", got, timeout=5)
        assert set(got) == {b"signed"}
        await hub_nc.close()
        await spoke_nc.close()
    finally:
        hub.cleanup()
        spoke.cleanup()


@pytest.mark.parametrize("hub_kind", ["nats-server", "skiff"])
def test_an_operator_mode_hub_refuses_a_spoke_without_a_user_jwt(target, hub_kind, tmp_path):
    """A spoke with no credentials, and one with a user JWT its nonce signature does not match (sys.creds' JWT with
    app.creds' seed), are refused by an operator-mode hub: ``-ERR 'Authorization Violation'`` and no link."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    op = root / "conf" / "operator"
    text = (op / "operator.conf").read_text().replace("jetstream: enabled", "")
    text = text.replace("listen: 127.0.0.1:4222", "").replace("conf/operator/operator.jwt",
                                                                str(op / "operator.jwt"))
    app, sys_ = (op / "creds" / "app.creds").read_text(), (op / "creds" / "sys.creds").read_text()
    jwt_part = sys_.split("------END NATS USER JWT------")[0]
    seed_part = app[app.index("------END NATS USER JWT------"):]
    leaf_port, = free_ports(1)
    hub = ServerProcess(kind=hub_kind, jetstream=False,
                        config=text + f'\nleafnodes {{ listen: "127.0.0.1:{leaf_port}" }}\n')
    spokes = []
    try:
        hub.start()
        bad = tmp_path / "mixed.creds"
        bad.write_text(jwt_part + seed_part)
        for creds in ("", str(bad)):
            extra = f', credentials: "{creds}"' if creds else ""
            spoke = ServerProcess(kind=target, jetstream=False, config=(
                f'leafnodes {{ remotes [ {{ url: "nats-leaf://127.0.0.1:{leaf_port}"{extra} }} ] }}\n'))
            spokes.append(spoke)
            spoke.start()
            deadline = time.monotonic() + 10
            while "Authorization Violation" not in spoke.log():
                assert time.monotonic() < deadline, spoke.log() + hub.log()
                time.sleep(0.1)
            lp = LeafPair.__new__(LeafPair)
            lp.hub, lp.spoke = hub, spoke
            assert lp.leafz(hub)["leafnodes"] == 0 and lp.leafz(spoke)["leafnodes"] == 0
            spoke.cleanup()
    finally:
        hub.cleanup()
        for s in spokes:
            s.cleanup()


@pytest.mark.parametrize("how", ["revoked", "expired"])
@pytest.mark.parametrize("hub_kind", ["nats-server", "skiff"])
async def test_a_revoked_or_expired_leaf_user_jwt_closes_the_link(target, hub_kind, how, tmp_path):
    """An operator-mode hub closes a leaf connection as it closes a client when the user JWT it logged in with is
    revoked by an update of its account JWT (accounts.go updateAccountClaimsWithRefresh: every connection of the
    account, leafs included, is checked against the new revocations; ``-ERR 'User Authentication Revoked'``) or
    expires (client.go setExpiration: ``-ERR 'User Authentication Expired'``).  The spoke logs the error and
    dials again; a revoked JWT is refused from then on."""
    from tests import jwt_helpers as jh

    op, sys_key, acc = jh.new_key("O"), jh.new_key("A"), jh.new_key("A")
    sys_user, leaf_user = jh.new_key("U"), jh.new_key("U")
    now = int(time.time())
    jwt_dir = tmp_path / "jwt"
    jwt_dir.mkdir()
    sys_creds = jh.write_creds(str(tmp_path / "sys.creds"), jh.user_jwt(sys_user, sys_key), sys_user)
    exp = now + 4 if how == "expired" else 0
    leaf_creds = jh.write_creds(str(tmp_path / "leaf.creds"),
                                jh.user_jwt(leaf_user, acc, iat=now - 5, exp=exp), leaf_user)
    leaf_port, = free_ports(1)
    hub = ServerProcess(kind=hub_kind, jetstream=False, config=(
        f"operator: {jh.operator_jwt(op, system_account=sys_key.public)}\n"
        f'resolver {{ type: full, dir: "{jwt_dir}" }}\n'
        f"resolver_preload {{\n  {sys_key.public}: {jh.account_jwt(sys_key, op, name='SYS')}\n"
        f"  {acc.public}: {jh.account_jwt(acc, op, name='APP')}\n}}\n"
        f'leafnodes {{ listen: "127.0.0.1:{leaf_port}" }}\n'))
    spoke = ServerProcess(kind=target, jetstream=False, config=(
        f'leafnodes {{ remotes [ {{ url: "nats-leaf://127.0.0.1:{leaf_port}", credentials: "{leaf_creds}" }} ] }}\n'))
    lp = LeafPair.__new__(LeafPair)
    lp.hub, lp.spoke = hub, spoke
    try:
        hub.start()
        spoke.start()
        lp.wait_connected()
        assert [lf["account"] for lf in lp.leafz(hub)["leafs"]] == [acc.public]
        error = "User Authentication Expired"
        if how == "revoked":
            error = "User Authentication Revoked"
            nc = await nats.connect(hub.url, user_credentials=sys_creds)
            try:
                revoking = jh.account_jwt(acc, op, name="APP", revocations={leaf_user.public: now})
                reply = json.loads((await nc.request("$SYS.REQ.CLAIMS.UPDATE", revoking.encode(), timeout=2)).data)
                assert reply["data"]["message"] == "jwt updated"
            finally:
                await nc.close()
        deadline = time.monotonic() + 10
        while error not in spoke.log() or lp.leafz(hub)["leafnodes"] or lp.leafz(spoke)["leafnodes"]:
            assert time.monotonic() < deadline, spoke.log() + hub.log()
            await asyncio.sleep(0.05)
        # The spoke dials again (1 s later) and is refused: revoked, or no longer valid.
        deadline = time.monotonic() + 10
        while spoke.log().count("Authorization Violation") < 1:
            assert time.monotonic() < deadline, spoke.log() + hub.log()
            await asyncio.sleep(0.1)
        assert lp.leafz(hub)["leafnodes"] == 0 and lp.leafz(spoke)["leafnodes"] == 0
    finally:
        hub.cleanup()
        spoke.cleanup()


# ---------------------------------------------------------------------------------------------------- account limits
# An operator-mode hub counts leaf connections against the account JWT (accounts.go mleafs from jwt LeafNodeConn,
# ``limits.leaf``) and closes them with the account (removeCb, expiredTimeout).  The leafs here are spoken by hand
# (JwtLeaf) so that every byte the hub answers is compared; the last tests use real spokes of both kinds.

class JwtLeaf(FakeLeaf):
    """A spoke that logs in with a user JWT and the hub's nonce signed by the user's seed (leafnode.go
    sendLeafConnect); ``assert_up`` PINGs, and the PONG says the link is up.  On the client port (``name`` None)
    the same login is a client's."""

    def __init__(self, port: int, token: str, key, name: str | None) -> None:
        import base64

        super().__init__(port)
        sig = base64.urlsafe_b64encode(key.sign(self.info["nonce"].encode())).rstrip(b"=").decode()
        proto = {"jwt": token, "sig": sig, "headers": True}
        proto.update({"name": name, "server_id": "N" + name.upper()} if name else {"verbose": False})
        self.sock.sendall(b"CONNECT " + json.dumps(proto).encode() + b"\r\n")

    def next_line(self) -> bytes:
        """The next line that is not interest, INFO (the hub's INFO with connect_info) or the hub's own PING
        (answered)."""
        while True:
            line = self.line()
            if line == b"PING":
                self.sock.sendall(b"PONG\r\n")
            elif not line.startswith((b"LS+ ", b"INFO ")):
                return line

    def assert_up(self) -> None:
        self.sock.sendall(b"PING\r\n")
        assert self.next_line() == b"PONG"

    def assert_refused(self, error: bytes) -> None:
        assert self.next_line() == b"-ERR '" + error + b"'"
        self.assert_closed()

    def assert_closed(self) -> None:
        self.sock.settimeout(5)
        rest = b""
        while True:
            d = self.sock.recv(65536)
            if not d:
                break
            rest += d
        assert b"PONG" not in rest, rest


def _account_jwt_without(key: str, acc, op, null: bool = False, **limits) -> str:
    """An account JWT whose ``limits`` lack ``key`` (what an older nsc, or a hand-written JWT, gives), or hold a
    null for it."""
    from tests import jwt_helpers as jh

    lim = dict(jh.DEFAULT_ACCOUNT_LIMITS, mem_storage=0, disk_storage=0, streams=0, consumer=0, **limits)
    lim.pop(key)
    if null:
        lim[key] = None
    return jh.encode({"sub": acc.public, "name": "NOLEAF",
                      "nats": {"type": "account", "version": 2, "limits": lim,
                               "default_permissions": {"pub": {}, "sub": {}}}}, op)


class OperatorHub:
    """A hub in operator mode with a FULL resolver that allows deletes, the system account and the given account
    JWTs preloaded, and a leaf port."""

    def __init__(self, kind: str, tmp_path, accounts: dict) -> None:
        from tests import jwt_helpers as jh

        self.jh = jh
        self.op, self.sys_key, sys_user = jh.new_key("O"), jh.new_key("A"), jh.new_key("U")
        jwt_dir = tmp_path / "jwt"
        jwt_dir.mkdir()
        self.tmp_path = tmp_path
        self.sys_creds = jh.write_creds(str(tmp_path / "sys.creds"), jh.user_jwt(sys_user, self.sys_key), sys_user)
        self.leaf_port, = free_ports(1)
        preload = "".join(f"  {k}: {tok(self.op)}\n" for k, tok in accounts.items())
        self.server = ServerProcess(kind=kind, jetstream=False, config=(
            f"operator: {jh.operator_jwt(self.op, system_account=self.sys_key.public)}\n"
            f'resolver {{ type: full, dir: "{jwt_dir}", allow_delete: true }}\n'
            f"resolver_preload {{\n  {self.sys_key.public}: {jh.account_jwt(self.sys_key, self.op, name='SYS')}\n"
            f"{preload}}}\n"
            f'leafnodes {{ listen: "127.0.0.1:{self.leaf_port}" }}\n'))

    def start(self) -> "OperatorHub":
        self.server.start()
        wait_listening(self.leaf_port)
        return self

    def leaf(self, acc, name: str) -> JwtLeaf:
        u = self.jh.new_key("U")
        return JwtLeaf(self.leaf_port, self.jh.user_jwt(u, acc), u, name)

    def client(self, acc) -> JwtLeaf:
        u = self.jh.new_key("U")
        return JwtLeaf(self.server.port, self.jh.user_jwt(u, acc), u, None)

    async def claims(self, subject: str, token: str) -> dict:
        nc = await nats.connect(self.server.url, user_credentials=self.sys_creds)
        try:
            return json.loads((await nc.request(subject, token.encode(), timeout=2)).data)
        finally:
            await nc.close()

    def leafz(self) -> int:
        lp = LeafPair.__new__(LeafPair)
        return lp.leafz(self.server)["leafnodes"]


LIMIT_ERR = b"maximum account active connections exceeded"  # ErrTooManyAccountConnections (errors.go)


async def test_the_account_leaf_limit_refuses_leaf_connections_past_it(target, tmp_path):
    """``limits.leaf`` counts the account's leaf connections (client.go registerWithAccount ->
    maxTotalLeafNodesReached): past it the hub answers ``-ERR 'maximum account active connections exceeded'`` (the
    clients' words) and closes; clients of the account are not counted against it.  A JWT that leaves ``leaf`` out
    means 0: no leaf at all.  A later JWT with a lower limit closes no link on one server (only the counts other
    servers of a cluster report trim leafs, accounts.go updateRemoteServer); it refuses the next one."""
    from tests import jwt_helpers as jh

    app, noleaf, nullleaf = jh.new_key("A"), jh.new_key("A"), jh.new_key("A")
    hub = OperatorHub(target, tmp_path, {
        app.public: lambda op: jh.account_jwt(app, op, name="APP", limits={"leaf": 2}),
        noleaf.public: lambda op: _account_jwt_without("leaf", noleaf, op),
        nullleaf.public: lambda op: _account_jwt_without("leaf", nullleaf, op, null=True)}).start()
    leafs = []
    try:
        leafs = [hub.leaf(app, "a"), hub.leaf(app, "b")]
        for lf in leafs:
            lf.assert_up()
        third = hub.leaf(app, "c")
        third.assert_refused(LIMIT_ERR)
        for acc in (app, noleaf):
            c = hub.client(acc)
            c.assert_up()
            c.sock.close()
        hub.leaf(noleaf, "d").assert_refused(LIMIT_ERR)
        hub.leaf(nullleaf, "n").assert_refused(LIMIT_ERR)  # null is Go's zero too
        assert hub.leafz() == 2

        lowered = jh.account_jwt(app, hub.op, name="APP", limits={"leaf": 1})
        reply = await hub.claims("$SYS.REQ.CLAIMS.UPDATE", lowered)
        assert reply["data"]["message"] == "jwt updated"
        for lf in leafs:
            lf.assert_up()
        assert hub.leafz() == 2
        hub.leaf(app, "e").assert_refused(LIMIT_ERR)
        leafs[1].sock.close()  # one gone: still one too many for a limit of 1
        deadline = time.monotonic() + 5
        while hub.leafz() != 1:
            assert time.monotonic() < deadline, hub.server.log()
            time.sleep(0.05)
        hub.leaf(app, "f").assert_refused(LIMIT_ERR)
        leafs[0].sock.close()
        deadline = time.monotonic() + 5
        while hub.leafz() != 0:
            assert time.monotonic() < deadline, hub.server.log()
            time.sleep(0.05)
        g = hub.leaf(app, "g")
        g.assert_up()
        leafs.append(g)
    finally:
        for lf in leafs:
            lf.sock.close()
        hub.server.cleanup()


async def test_a_lower_connection_limit_counts_leaf_connections(target, tmp_path):
    """Account.clients holds leaf connections too: an update that lowers ``limits.conn`` keeps the oldest
    connections, leaf or client, and closes the rest with ``-ERR 'maximum account active connections exceeded'``
    (accounts.go updateAccountClaimsWithRefresh)."""
    from tests import jwt_helpers as jh

    app = jh.new_key("A")
    hub = OperatorHub(target, tmp_path, {
        app.public: lambda op: jh.account_jwt(app, op, name="APP", limits={"conn": 3})}).start()
    conns = []
    try:
        for make in (lambda: hub.leaf(app, "a"), lambda: hub.leaf(app, "b"), lambda: hub.client(app)):
            conns.append(make())
            conns[-1].assert_up()
            time.sleep(0.01)  # start times apart, so that "oldest" is well defined
        first, second, client = conns
        reply = await hub.claims("$SYS.REQ.CLAIMS.UPDATE", jh.account_jwt(app, hub.op, name="APP",
                                                                           limits={"conn": 1}))
        assert reply["data"]["message"] == "jwt updated"
        second.assert_refused(LIMIT_ERR)
        client.assert_refused(LIMIT_ERR)
        first.assert_up()
        assert hub.leafz() == 1
    finally:
        for c in conns:
            c.sock.close()
        hub.server.cleanup()


async def test_leaf_connections_fill_the_accounts_connection_limit(target, tmp_path):
    """A client is refused when the account's leaf connections fill ``limits.conn`` (accounts.go
    MaxTotalConnectionsReached counts Account.clients, which holds leafs too), and the account's STATZ counts them
    as ``leafnodes`` within ``total_conns`` (events.go statz)."""
    from tests import jwt_helpers as jh

    app = jh.new_key("A")
    hub = OperatorHub(target, tmp_path, {
        app.public: lambda op: jh.account_jwt(app, op, name="APP", limits={"conn": 2})}).start()
    conns = []
    try:
        conns = [hub.leaf(app, "a"), hub.leaf(app, "b")]
        for c in conns:
            c.assert_up()
        client = hub.client(app)
        client.assert_refused(LIMIT_ERR)
        conns[1].sock.close()
        deadline = time.monotonic() + 5
        while hub.leafz() != 1:
            assert time.monotonic() < deadline, hub.server.log()
            time.sleep(0.05)
        conns.append(hub.client(app))
        conns[-1].assert_up()
        statz = (await hub.claims(f"$SYS.REQ.ACCOUNT.{app.public}.STATZ", ""))["data"]["account_statz"]
        assert [(s["conns"], s["leafnodes"], s["total_conns"]) for s in statz] == [(1, 1, 2)]
    finally:
        for c in conns:
            c.sock.close()
        hub.server.cleanup()


@pytest.mark.parametrize("how", ["deleted", "expired"])
async def test_a_deleted_or_expired_account_closes_its_leaf_connections(target, tmp_path, how):
    """Deleting an account (``$SYS.REQ.CLAIMS.DELETE``, accounts.go removeCb) or reaching its JWT's ``exp``
    (checkExpiration) runs expiredTimeout: every client and leaf connection of the account gets ``-ERR 'Account
    Authentication Expired'`` and is closed.  After a delete the account is not found: a new leaf is an
    ``Authorization Violation``."""
    from tests import jwt_helpers as jh

    app = jh.new_key("A")
    hub = OperatorHub(target, tmp_path, {
        app.public: lambda op: jh.account_jwt(app, op, name="APP")}).start()
    lf = client = None
    try:
        lf = hub.leaf(app, "a")
        lf.assert_up()
        client = hub.client(app)
        client.assert_up()
        if how == "deleted":
            req = jh.encode({"sub": hub.op.public, "nats": {"accounts": [app.public]}}, hub.op)
            reply = await hub.claims("$SYS.REQ.CLAIMS.DELETE", req)
            assert reply["data"]["message"] == "deleted 1 accounts"
        else:
            expiring = jh.account_jwt(app, hub.op, name="APP", exp=int(time.time()) + 2)
            reply = await hub.claims("$SYS.REQ.CLAIMS.UPDATE", expiring)
            assert reply["data"]["message"] == "jwt updated"
        lf.assert_refused(b"Account Authentication Expired")
        client.assert_refused(b"Account Authentication Expired")
        assert hub.leafz() == 0
        if how == "deleted":
            hub.leaf(app, "b").assert_refused(b"Authorization Violation")
    finally:
        for c in (lf, client):
            if c is not None:
                c.sock.close()
        hub.server.cleanup()


@pytest.mark.parametrize("hub_kind", ["nats-server", "skiff"])
def test_a_spoke_past_the_hubs_leaf_limit_logs_the_refusal_and_stays_unlinked(target, hub_kind, tmp_path):
    """Real spokes of each kind against an operator-mode hub of each kind whose account allows one leaf: the first
    links, the second gets ``-ERR 'maximum account active connections exceeded'``, logs it and dials again (and is
    refused again) while the first stays."""
    from tests import jwt_helpers as jh

    app = jh.new_key("A")
    hub = OperatorHub(hub_kind, tmp_path, {
        app.public: lambda op: jh.account_jwt(app, op, name="APP", limits={"leaf": 1})})
    spokes = []
    try:
        hub.start()
        for name in ("one", "two"):
            u = jh.new_key("U")
            creds = jh.write_creds(str(tmp_path / f"{name}.creds"), jh.user_jwt(u, app), u)
            spokes.append(ServerProcess(kind=target, jetstream=False, config=(
                f'leafnodes {{ remotes [ {{ url: "nats-leaf://127.0.0.1:{hub.leaf_port}", credentials: "{creds}" }}'
                " ] }\n")).start())
            if name == "one":
                deadline = time.monotonic() + 10
                while hub.leafz() != 1:
                    assert time.monotonic() < deadline, hub.server.log() + spokes[0].log()
                    time.sleep(0.05)
        second = spokes[1]
        deadline = time.monotonic() + 10
        while second.log().count(LIMIT_ERR.decode()) < 2:  # refused, dialed again, refused again
            assert time.monotonic() < deadline, second.log() + hub.server.log()
            time.sleep(0.1)
        lp = LeafPair.__new__(LeafPair)
        assert hub.leafz() == 1 and lp.leafz(spokes[0])["leafnodes"] == 1 and lp.leafz(second)["leafnodes"] == 0
    finally:
        hub.server.cleanup()
        for s in spokes:
            s.cleanup()


def test_an_operator_mode_spoke_refuses_its_own_link_past_its_accounts_leaf_limit(pair, tmp_path):
    """The limit holds on the soliciting end too (leafnode.go leafNodeFinishConnectProcess -> registerWithAccount):
    a spoke in operator mode whose remote is bound to an account JWT without ``leaf`` (0) sends its CONNECT, then
    ``-ERR 'maximum account active connections exceeded'``, closes, and dials again a second later; the hub logs
    the error it was sent and no link is made."""
    from tests import jwt_helpers as jh

    hub_kind, spoke_kind = pair
    op, sys_key, acc = jh.new_key("O"), jh.new_key("A"), jh.new_key("A")
    leaf_port, = free_ports(1)
    hub = ServerProcess(kind=hub_kind, jetstream=False, config=f'leafnodes {{ listen: "127.0.0.1:{leaf_port}" }}\n')
    spoke = ServerProcess(kind=spoke_kind, jetstream=False, config=(
        f"operator: {jh.operator_jwt(op, system_account=sys_key.public)}\n"
        "resolver: MEMORY\n"
        f"resolver_preload {{\n  {sys_key.public}: {jh.account_jwt(sys_key, op, name='SYS')}\n"
        f"  {acc.public}: {_account_jwt_without('leaf', acc, op)}\n}}\n"
        f'leafnodes {{ remotes [ {{ url: "nats-leaf://127.0.0.1:{leaf_port}", account: {acc.public} }} ] }}\n'))
    try:
        hub.start()
        wait_listening(leaf_port)
        spoke.start()
        deadline = time.monotonic() + 10
        while spoke.log().count(LIMIT_ERR.decode()) < 2 or LIMIT_ERR.decode() not in hub.log():
            assert time.monotonic() < deadline, spoke.log() + hub.log()
            time.sleep(0.1)
        # No link lasts.  Each redial is listed by the hub for a moment, from the spoke's CONNECT to its -ERR (seen
        # with nats-server at both ends), so the /leafz of both is sampled until it shows no link at either end.
        lp = LeafPair.__new__(LeafPair)
        deadline = time.monotonic() + 5
        while (seen := (lp.leafz(hub)["leafnodes"], lp.leafz(spoke)["leafnodes"])) != (0, 0):
            assert time.monotonic() < deadline, f"a leaf link stays up (hub, spoke): {seen}"
            time.sleep(0.05)
    finally:
        hub.cleanup()
        spoke.cleanup()
