"""Leaf node connections over TLS (issue #11), in the four arrangements of test_leafnodes.py: nats-server on both
sides (the oracle), Skiff on both, a Skiff spoke of a nats-server hub and a nats-server spoke of a Skiff hub.

What nats-server 2.15 does (leafnode.go createLeafNode, processLeafnodeInfo, client.go doTLSHandshake): a hub with
``leafnodes { tls }`` sends its INFO in plain text with ``tls_required`` and then expects a ClientHello
(``handshake_first``: the handshake first and the INFO after it); a spoke upgrades when its remote has ``tls {}`` or
when the hub's INFO asks for it, and checks the hub's certificate against the URL's host.  A mismatch makes no link
and is logged; the certificates are conf/certs (server-cert: server use only, client-cert: client use only).
"""
from __future__ import annotations

import asyncio
import json
import socket
import ssl
import subprocess
import time
import urllib.request

import nats
import pytest

from skiff.server.conf import ConfigError
from skiff.server.options import options_from_config
from tests.cluster.conftest import publish_until_received, wait_listening
from tests.cluster.test_leafnodes import LeafPair, pytest_generate_tests  # noqa: F401 (the pair parameters)
from tests.harness import ROOT, ServerProcess, free_ports, nats_server_binary

CERTS = ROOT / "conf" / "certs"


def tls(cert: str = "", ca: str = "ca.pem", **extra) -> str:
    """A ``tls { }`` block of conf/certs files: ``cert`` names the pair (``server`` -> server-cert.pem and
    server-key.pem)."""
    fields = []
    if cert:
        fields += [f'cert_file: "{CERTS / (cert + "-cert.pem")}"', f'key_file: "{CERTS / (cert + "-key.pem")}"']
    if ca:
        fields.append(f'ca_file: "{CERTS / ca}"')
    fields += [f"{k}: {json.dumps(v)}" for k, v in extra.items()]
    return "tls { " + ", ".join(fields) + " }"


HUB_MTLS = tls("server", verify=True)  # the hub asks every spoke for a certificate signed by ca.pem
SPOKE_MTLS = tls("client")


def _get(node: ServerProcess, path: str) -> dict:
    with urllib.request.urlopen(f"{node.http_url}{path}", timeout=2) as r:
        return json.loads(r.read())


async def test_messages_cross_both_ways_over_mutual_tls(pair):
    lp = LeafPair(pair, hub_extra=HUB_MTLS, spoke_extra=SPOKE_MTLS)
    try:
        lp.start()
        hub_side, spoke_side = lp.leafz(lp.hub)["leafs"], lp.leafz(lp.spoke)["leafs"]
        assert [lf["is_spoke"] for lf in hub_side] == [False] and [lf["is_spoke"] for lf in spoke_side] == [True]
        assert spoke_side[0]["port"] == lp.leaf_port and spoke_side[0]["account"] == "$G"
        # varz says what the hub requires; the auth timeout is the TLS timeout + 1 s (getDefaultAuthTimeout)
        leaf = _get(lp.hub, "/varz")["leaf"]
        assert {k: leaf.get(k) for k in ("tls_required", "tls_verify", "tls_timeout", "auth_timeout")} == \
            {"tls_required": True, "tls_verify": True, "tls_timeout": 2, "auth_timeout": 3}
        hub, spoke = await nats.connect(lp.hub.url), await nats.connect(lp.spoke.url)
        at_hub, at_spoke = [], []

        async def on_hub(m):
            at_hub.append((m.subject, m.data))

        async def on_spoke(m):
            at_spoke.append((m.subject, m.data, m.headers))

        async def answer(m):
            await m.respond(b"spoke:" + m.data)
        await hub.subscribe("up.>", cb=on_hub)
        await spoke.subscribe("down.>", cb=on_spoke)
        await spoke.subscribe("svc", cb=answer)
        await hub.flush()
        await spoke.flush()
        await publish_until_received(spoke, "up.a", b"1", at_hub, why=lambda: lp.hub.log() + lp.spoke.log())
        deadline = time.monotonic() + 10
        while not at_spoke:
            assert time.monotonic() < deadline, lp.hub.log() + lp.spoke.log()
            await hub.publish("down.b", b"2", headers={"K": "v"})
            await hub.flush()
            await asyncio.sleep(0.1)
        assert set(at_hub) == {("up.a", b"1")} and at_spoke[0] == ("down.b", b"2", {"K": "v"})
        r = await hub.request("svc", b"q", timeout=2)
        assert r.data == b"spoke:q"
        await hub.close()
        await spoke.close()
    finally:
        lp.cleanup()


@pytest.mark.parametrize("remote_first", [True, "auto", "300ms"])
async def test_handshake_first_and_a_host_name_in_the_url(pair, remote_first):
    """handshake_first on both ends; the spoke dials ``localhost``, the name it checks the certificate against.
    In a remote, ``auto`` and a delay are ``true`` (opts.go parseRemoteLeafNodes keeps only the boolean: the
    fallback delay is the accepting side's); on the hub they stay refused (tests/config/test_refusals.py)."""
    lp = LeafPair(pair, hub_extra=tls("server", ca="", handshake_first=True),
                  remote_url="nats-leaf://localhost:{port}", spoke_extra=tls(handshake_first=remote_first))
    try:
        lp.start()
        hub, spoke = await nats.connect(lp.hub.url), await nats.connect(lp.spoke.url)
        got = []

        async def cb(m):
            got.append(m.data)
        await hub.subscribe("first", cb=cb)
        await hub.flush()
        await publish_until_received(spoke, "first", b"tls first", got, why=lambda: lp.hub.log() + lp.spoke.log())
        assert set(got) == {b"tls first"}
        await hub.close()
        await spoke.close()
    finally:
        lp.cleanup()


async def test_the_hub_asks_for_tls_and_a_tls_url_alone_does_not(pair):
    """A remote without ``tls {}`` upgrades all the same when the hub's INFO says ``tls_required`` (remote.TLS =
    true), with the system's roots: the test CA is not among them, so the spoke refuses the hub's certificate.
    A ``tls://`` URL asks for nothing by itself in nats-server 2.15 (only ``wss://`` does): to a hub without TLS
    it makes a plain link."""
    lp = LeafPair(pair, hub_extra=tls("server", ca=""), remote_url="tls://127.0.0.1:{port}")
    try:
        lp.start(connected=False)
        _wait_log(lp.spoke, "TLS leafnode handshake error")
        assert lp.leafz(lp.hub)["leafnodes"] == 0 and lp.leafz(lp.spoke)["leafnodes"] == 0
    finally:
        lp.cleanup()
    plain = LeafPair(pair, remote_url="tls://127.0.0.1:{port}")
    try:
        plain.start()
    finally:
        plain.cleanup()


async def test_the_name_checked_is_the_urls_host_or_a_host_name_among_the_urls(pair):
    """The hub listens on 127.0.0.2, an address its certificate does not carry (it has 127.0.0.1, ::1 and
    localhost): a spoke dialing that IP refuses the certificate.  When another URL of the same remote names a host,
    that name is checked instead (leafnode.go saveTLSHostname), and the certificate carries ``localhost``."""
    hub_kind, spoke_kind = pair
    port, = free_ports(1)
    hub_node = ServerProcess(kind=hub_kind, jetstream=False, config=(
        f'leafnodes {{ listen: "127.0.0.2:{port}", {tls("server", ca="")} }}\n'))

    def spoke(urls: list[str]) -> ServerProcess:
        return ServerProcess(kind=spoke_kind, jetstream=False, config=(
            f"leafnodes {{ remotes [ {{ urls: {json.dumps(urls)}, no_randomize: true, {tls()} }} ] }}\n"))
    by_ip = spoke([f"nats-leaf://127.0.0.2:{port}"])
    named = spoke([f"nats-leaf://127.0.0.2:{port}", "nats-leaf://localhost:1"])
    lp = LeafPair.__new__(LeafPair)
    lp.hub = hub_node
    try:
        hub_node.start()
        by_ip.start()
        _wait_log(by_ip, "TLS leafnode handshake error")
        assert lp.leafz(by_ip)["leafnodes"] == 0 and lp.leafz(hub_node)["leafnodes"] == 0
        by_ip.cleanup()
        named.start()
        lp.spoke = named
        lp.wait_connected()
    finally:
        for s in (hub_node, by_ip, named):
            s.cleanup()


def test_an_insecure_remote_checks_nothing(pair):
    """``insecure: true`` (InsecureSkipVerify): no CA, and still a link to a hub whose certificate nothing vouches
    for."""
    lp = LeafPair(pair, hub_extra=tls("server", ca=""), spoke_extra="tls { insecure: true }")
    try:
        lp.start()
    finally:
        lp.cleanup()


MISMATCHES = {
    # (hub's extra, spoke's extra, whose log says what)
    "no client certificate under verify": (HUB_MTLS, tls(), ("hub", "TLS leafnode handshake error")),
    "a CA that did not sign the hub": (HUB_MTLS, tls("client", ca="client-cert.pem"),
                                       ("spoke", "TLS leafnode handshake error")),
    # the ClientHello is not the CONNECT a hub without TLS expects first (parser.go OP_START: authErr)
    "TLS to a hub without TLS": ("", SPOKE_MTLS, ("hub", "authentication error")),
    # the hub waits for a ClientHello, the spoke for INFO, until the hub's TLS timeout: both log at debug level only
    "handshake first on the hub only": (tls("server", ca="", handshake_first=True), tls(), None),
}


@pytest.mark.parametrize("case", list(MISMATCHES), ids=list(MISMATCHES))
def test_a_tls_mismatch_makes_no_link(pair, case):
    hub_extra, spoke_extra, logged = MISMATCHES[case]
    lp = LeafPair(pair, hub_extra=hub_extra, spoke_extra=spoke_extra)
    try:
        lp.start(connected=False)
        if logged is None:
            time.sleep(1.5)
        else:
            _wait_log(lp.hub if logged[0] == "hub" else lp.spoke, logged[1])
        assert lp.leafz(lp.hub)["leafnodes"] == 0 and lp.leafz(lp.spoke)["leafnodes"] == 0, \
            lp.hub.log() + lp.spoke.log()
    finally:
        lp.cleanup()


def _wait_log(node: ServerProcess, text: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while text not in node.log():
        assert time.monotonic() < deadline, f"{text!r} not logged:\n{node.log()}"
        time.sleep(0.05)


def _hub(target: str, block: str) -> tuple[ServerProcess, int]:
    port, = free_ports(1)
    hub = ServerProcess(kind=target, jetstream=False,
                        config=f'leafnodes {{ listen: "127.0.0.1:{port}", {block} }}\n').start()
    wait_listening(port)
    return hub, port


def _lines(sock) -> "callable":
    buf = bytearray()

    def line() -> bytes:
        while b"\r\n" not in buf:
            d = sock.recv(65536)
            if not d:
                raise ConnectionError(f"closed; got {bytes(buf)!r}")
            buf.extend(d)
        i = buf.index(b"\r\n")
        out = bytes(buf[:i])
        del buf[:i + 2]
        return out
    return line


def _client_ctx(cert: bool = True) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(CERTS / "ca.pem"))
    if cert:
        ctx.load_cert_chain(str(CERTS / "client-cert.pem"), str(CERTS / "client-key.pem"))
    return ctx


CONNECT = b'CONNECT {"name":"fake","server_id":"NFAKE","headers":true}\r\nPING\r\n'


def test_the_hub_sends_info_in_plain_text_then_upgrades(target):
    """INFO first, in the clear, with tls_required and tls_verify; then a ClientHello is due (plain text instead
    closes the connection without a word); after the handshake the leaf protocol runs inside TLS."""
    hub, port = _hub(target, HUB_MTLS)
    try:
        sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        line = _lines(sock)()
        assert line.startswith(b"INFO ")
        info = json.loads(line[5:])
        assert (info["tls_required"], info["tls_verify"], info["auth_required"]) == (True, True, True)
        tsock = _client_ctx().wrap_socket(sock, server_hostname="127.0.0.1")
        tsock.sendall(CONNECT)
        read = _lines(tsock)
        while (got := read()) != b"PONG":
            assert not got.startswith(b"-ERR"), got
        tsock.close()
        plain = socket.create_connection(("127.0.0.1", port), timeout=5)
        assert _lines(plain)().startswith(b"INFO ")
        plain.sendall(CONNECT)
        assert plain.recv(4096) == b""  # Go: "first record does not look like a TLS handshake"
        plain.close()
    finally:
        hub.cleanup()


def test_handshake_first_says_nothing_before_the_handshake(target):
    hub, port = _hub(target, tls("server", ca="", handshake_first=True))
    try:
        sock = socket.create_connection(("127.0.0.1", port), timeout=0.5)
        with pytest.raises(socket.timeout):
            sock.recv(4096)
        sock.settimeout(5)
        tsock = _client_ctx(cert=False).wrap_socket(sock, server_hostname="localhost")
        info = json.loads(_lines(tsock)()[5:])  # the INFO comes inside TLS
        assert info["tls_required"] is True and "tls_verify" not in info
        tsock.close()
    finally:
        hub.cleanup()


# ------------------------------------------------------------------------------------------------ configuration

def _conf(tmp_path, text: str):
    f = tmp_path / "leaf.conf"
    f.write_text(f"port: 4222\n{text}\n")
    return f


def remote(block: str, url: str = "nats-leaf://127.0.0.1:7422") -> str:
    return f'leafnodes {{ remotes [ {{ url: "{url}", {block} }} ] }}'


def hub(block: str) -> str:
    return f"leafnodes {{ port: 7422, {block} }}"


CONFIG_ERRORS = [
    # GenTLSConfig's errors, at the line of the block
    (remote(f'tls {{ cert_file: "{CERTS / "client-cert.pem"}" }}'), "missing 'key_file' in TLS configuration"),
    (hub(f'tls {{ key_file: "{CERTS / "server-key.pem"}" }}'), "missing 'cert_file' in TLS configuration"),
    (remote('tls { ca_file: "/nonexistent/ca.pem" }'), "open /nonexistent/ca.pem: no such file or directory"),
    (remote(tls(ca="client-key.pem")), "failed to parse root ca certificate"),
]


@pytest.mark.parametrize("text,error", CONFIG_ERRORS, ids=[e for _, e in CONFIG_ERRORS])
def test_leaf_tls_files_are_checked_as_nats_server_does(tmp_path, text, error):
    f = _conf(tmp_path, text)
    with pytest.raises(ConfigError) as ei:
        options_from_config(str(f))
    assert str(ei.value).startswith(f"{f}:2:") and str(ei.value).endswith(error), str(ei.value)
    oracle = subprocess.run([nats_server_binary(), "-c", str(f), "-t"], capture_output=True, text=True, timeout=30)
    assert oracle.returncode != 0 and f"{f}:2:" in oracle.stderr and error in oracle.stderr, oracle.stderr


ACCEPTED = [
    remote(tls()),  # a remote needs no certificate: it is a client
    remote(tls("client", timeout=3, verify=True), url="tls://localhost:7422"),
    hub(tls()),  # no certificate: nats-server starts, and every handshake then fails ("no certificates configured")
    hub(tls("server", verify=True, timeout=3, insecure=True)),
]


@pytest.mark.parametrize("text", ACCEPTED)
def test_leaf_tls_blocks_both_servers_accept(tmp_path, text):
    f = _conf(tmp_path, text)
    opts = options_from_config(str(f)).leafnodes
    assert opts.tls is not None or opts.remotes[0].tls is not None
    oracle = subprocess.run([nats_server_binary(), "-c", str(f), "-t"], capture_output=True, text=True, timeout=30)
    assert oracle.returncode == 0, oracle.stderr
