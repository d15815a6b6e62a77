"""The route protocol on the wire: a test speaks to one server's route port as a pre-2.10 server would (no pooling,
no compression), and compares what it gets with nats-server's bytes (wave2-notes section 5.3)."""
from __future__ import annotations

import json
import socket
import time

import nats
import pytest

from tests.cluster.conftest import wait_listening
from tests.harness import free_port

FAKE_ID = "NFAKEROUTEPEERXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX"


class FakeRoute:
    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=3)
        self.buf = b""
        self.info = json.loads(self.read_line()[5:])

    def read_line(self) -> bytes:
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError(f"closed; got {self.buf!r}")
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\r\n")
        return line

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def handshake(self, cluster: str = "c1", user: str = "", password: str = "", server_id: str = FAKE_ID,
                  proto: int = 1) -> None:
        connect = {"echo": True, "verbose": False, "pedantic": False, "tls_required": False, "headers": True,
                   "name": server_id, "cluster": cluster}
        if user:
            connect.update(user=user, **{"pass": password})
        info = {"server_id": server_id, "server_name": server_id[-8:], "version": "2.9.0", "proto": proto,
                "host": "127.0.0.1",
                "port": 1, "headers": True, "cluster": cluster}
        self.send(b"CONNECT " + json.dumps(connect).encode() + b"\r\nINFO " + json.dumps(info).encode() + b"\r\n")

    def sync(self) -> None:
        """PING/PONG: everything the server sent before its PONG is in the buffer."""
        self.send(b"PING\r\n")
        self.lines_until(b"PONG")

    def lines_until(self, end: bytes) -> list[bytes]:
        out = []
        while True:
            line = self.read_line()
            if line == end:
                return out
            out.append(line)

    def messages(self) -> list[bytes]:
        """The RMSG/HMSG lines (with payloads) that came before the next PONG, ignoring $SYS traffic."""
        self.send(b"PING\r\n")
        out = []
        while True:
            line = self.read_line()
            if line == b"PONG":
                return out
            if line.startswith((b"RMSG", b"HMSG")):
                payload = self.read_line()
                if not line.split()[1] == b"$SYS":
                    out.append(line + b"|" + payload)

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def node(server_factory):
    port = free_port()
    srv = server_factory("--cluster", f"nats://127.0.0.1:{port}", "--cluster_name", "c1", jetstream=False)
    srv.cluster_port = port
    wait_listening(port)  # the harness waits for the client port; the route port may open a moment later
    return srv



async def test_messages_cross_a_route_only_for_its_interest_with_queue_lists(node):
    r = FakeRoute(node.cluster_port)
    assert r.info["cluster"] == "c1" and r.info["headers"] is True
    r.handshake()
    r.sync()
    nc = await nats.connect(node.url)
    try:
        await nc.publish("foo", b"nobody")  # no remote interest: nothing crosses
        await nc.flush()
        assert r.messages() == []
        r.send(b"RS+ $G foo\r\nRS+ $G bar q 1\r\n")
        r.sync()
        await nc.publish("foo", b"one")
        await nc.publish("foo", b"two", reply="rep.1")
        await nc.publish("foo", b"hdr", headers={"A": "b"})
        await nc.publish("bar", b"queued")
        await nc.publish("bar", b"queued", reply="rep.2")
        await nc.flush()
        assert r.messages() == [
            b"RMSG $G foo 3|one",
            b"RMSG $G foo rep.1 3|two",
            b"HMSG $G foo 18 21|NATS/1.0",
            b"RMSG $G bar | q 6|queued",
            b"RMSG $G bar + rep.2 q 6|queued",
        ]
        r.send(b"RS- $G foo\r\n")
        r.sync()
        await nc.publish("foo", b"gone")
        await nc.flush()
        assert r.messages() == []
    finally:
        await nc.close()
        r.close()


async def test_one_message_per_route_with_the_queue_groups_it_serves(node):
    """Plain and queue interest of one route for a subject take one RMSG with the queue list; another route with
    plain interest gets its own plain RMSG (client.go processMsgResults: one message per route)."""
    a, b = FakeRoute(node.cluster_port), FakeRoute(node.cluster_port)
    a.handshake(server_id=FAKE_ID[:-1] + "A")
    b.handshake(server_id=FAKE_ID[:-1] + "B")
    a.sync()
    b.sync()
    nc = await nats.connect(node.url)
    try:
        a.send(b"RS+ $G foo\r\nRS+ $G foo q 1\r\nRS+ $G bar q 1\r\n")
        b.send(b"RS+ $G foo\r\nRS+ $G bar\r\n")
        a.sync()
        b.sync()
        await nc.publish("foo", b"one")
        await nc.publish("foo", b"two", reply="rep.1")
        await nc.publish("bar", b"three")
        await nc.flush()
        assert a.messages() == [b"RMSG $G foo | q 3|one", b"RMSG $G foo + rep.1 q 3|two", b"RMSG $G bar | q 5|three"]
        assert b.messages() == [b"RMSG $G foo 3|one", b"RMSG $G foo rep.1 3|two", b"RMSG $G bar 5|three"]
    finally:
        await nc.close()
        a.close()
        b.close()


async def test_local_interest_is_announced_and_routed_messages_reach_local_subscribers(node):
    r = FakeRoute(node.cluster_port)
    r.handshake()
    r.sync()
    nc = await nats.connect(node.url)
    try:
        got = []

        async def cb(m):
            got.append((m.subject, m.reply, m.data))
        await nc.subscribe("plain.*", cb=cb)
        await nc.subscribe("plain.*", cb=cb)  # a second plain subscription changes nothing remote
        await nc.subscribe("jobs", queue="w", cb=cb)
        await nc.subscribe("jobs", queue="w", cb=cb)
        await nc.flush()
        r.send(b"PING\r\n")
        seen = [ln for ln in r.lines_until(b"PONG") if not ln.startswith((b"RS+ $SYS", b"RS- $SYS", b"PING",
                                                                           b"RMSG $SYS", b"{"))]
        # RS+ for the plain subject once, the queue group with its weight each time it changes
        assert b"RS+ $G plain.*" in seen and seen.count(b"RS+ $G plain.*") == 1
        assert seen[-2:] == [b"RS+ $G jobs w 1", b"RS+ $G jobs w 2"]
        r.send(b"RMSG $G plain.x 2\r\nhi\r\nRMSG $G jobs | w 3\r\njob\r\nRMSG $G jobs 5\r\nnoone\r\n")
        r.sync()
        await nc.flush()
        for _ in range(50):
            if len(got) >= 3:
                break
            time.sleep(0.01)
            await nc.flush()
        # two plain subscribers, one queue member; a message without the queue list goes to no queue member
        assert sorted(got) == [("jobs", "", b"job"), ("plain.x", "", b"hi"), ("plain.x", "", b"hi")]
    finally:
        await nc.close()
        r.close()


@pytest.mark.parametrize("connect,reply", [
    (b'CONNECT {"name":"NX","cluster":"other"}\r\n',
     b"-ERR 'Rejecting connection, cluster name \"other\" does not match \"c1\"'"),
    (b'CONNECT {"lang":"python","verbose":false}\r\n', b"-ERR 'attempted to connect to route port'"),
    (b"FOO BAR\r\n", b"-ERR 'Authorization Violation'"),  # anything but CONNECT first, even without route auth
    (b'CONNECT {"name":"NX","cluster":"c1"}\r\nINFO {"server_id":"NX","cluster":"c1","port":1}\r\nFOO BAR\r\n',
     b"-ERR 'Unknown Protocol Operation'"),
])
def test_route_port_refusals(node, connect, reply):
    r = FakeRoute(node.cluster_port)
    r.send(connect)
    line = r.read_line()
    while line.startswith((b"RS+ ", b"PING", b"INFO ")):  # a registered route first gets the server's interest
        line = r.read_line()
    assert line == reply
    with pytest.raises((ConnectionError, OSError)):
        for _ in range(100):
            r.read_line()
    r.close()


def test_route_authorization(server_factory, tmp_path):
    port = free_port()
    conf = f'cluster {{ name: c1, listen: "127.0.0.1:{port}", authorization {{ user: ru, password: rp }} }}\n'
    srv = server_factory(config=conf, jetstream=False)
    wait_listening(port)
    for connect in (b'CONNECT {"user":"ru","pass":"bad","name":"NX","cluster":"c1"}\r\n', b"SUB foo 1\r\n"):
        r = FakeRoute(port)
        assert r.info.get("auth_required") is True
        r.send(connect)
        assert r.read_line() == b"-ERR 'Authorization Violation'"
        r.close()
    r = FakeRoute(port)
    r.handshake(user="ru", password="rp")
    r.sync()  # accepted: a PONG comes back
    r.close()
    assert srv.proc.poll() is None


def test_a_malformed_interest_line_closes_the_route_without_an_error(node):
    r = FakeRoute(node.cluster_port)
    r.handshake()
    r.sync()
    r.send(b"RS+ onlyone\r\n")
    with pytest.raises((ConnectionError, OSError)):
        for _ in range(1000):
            assert not r.read_line().startswith(b"-ERR"), "nats-server closes without an -ERR"
    r.close()


@pytest.mark.parametrize("proto", [1, 3], ids=["pre-tracing", "tracing"])
async def test_a_traced_message_goes_to_a_route_as_its_protocol_allows(node, proto):
    """Message tracing (ADR-41) across a route: the route's egress event has hop 1 and the message carries
    ``Nats-Trace-Hop: 1``; a route that announced a protocol before 3 (MsgTraceProto) would deliver a trace-only
    message, so it does not get one, and a delivered one is marked as untraceable there (msgtrace.go errors)."""
    r = FakeRoute(node.cluster_port)
    r.handshake(proto=proto)
    r.sync()
    nc = await nats.connect(node.url)
    try:
        trace = await nc.subscribe("trace.r")
        await nc.flush()
        r.send(b"RS+ $G foo\r\n")
        r.sync()
        for only in (True, False):
            hdrs = {"Nats-Trace-Dest": "trace.r"}
            if only:
                hdrs["Nats-Trace-Only"] = "true"
            await nc.publish("foo", b"x", headers=hdrs)
            await nc.flush()
            ev = json.loads((await trace.next_msg(timeout=2)).data)
            [eg] = [e for e in ev["events"] if e["type"] == "eg"]
            assert (eg["kind"], eg["hop"], ev["hops"]) == (1, "1", 1)
            r.send(b"PING\r\n")
            got = [line for line in r.lines_until(b"PONG") if not line.startswith(b"RMSG $SYS")]
            if proto >= 3:
                assert "error" not in eg
                assert got[0].startswith(b"HMSG $G foo ") and b"Nats-Trace-Hop: 1" in got
            elif only:
                assert eg["error"] == "Not delivered because remote does not support message tracing"
                assert got == []
            else:
                assert eg["error"] == ("Message delivered but remote does not support message tracing so no trace "
                                       "event generated from there")
                assert got[0].startswith(b"HMSG $G foo ") and b"Nats-Trace-Hop: 1" in got
    finally:
        await nc.close()
        r.close()
