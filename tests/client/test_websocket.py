"""WebSocket clients against both servers (nats-server websocket.go): nats-py over ws:// and wss://, compression,
JetStream, the HTTP upgrade's answers (origins, malformed requests), frames in any split, control frames, the
close status of a refused frame, auth overrides of the websocket block, connection types, and monitoring.

Raw sockets speak the upgrade and the frames byte for byte where nats-py cannot (bad requests, bad frames).  A
refused frame closes the connection on both servers; nats-server sends its 1002 close frame first only sometimes
(its reader and writer race), so the test requires the close and, when a close frame came, its status and text.
"""
import asyncio
import base64
import concurrent.futures
import json
import os
import socket
import ssl
import struct
import time
import urllib.request
import zlib
from pathlib import Path

import aiohttp
import nats
import pytest

from tests.harness import free_port

CERTS = Path(__file__).resolve().parents[2] / "conf" / "certs"
KEY = "dGhlIHNhbXBsZSBub25jZQ=="
ACCEPT = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="  # RFC 6455's example accept value for KEY


def ws_conf(port: int, *lines: str, tls: bool = False) -> str:
    body = [f'listen: "127.0.0.1:{port}"']
    if tls:
        body.append(f'tls {{ cert_file: "{CERTS / "server-cert.pem"}", key_file: "{CERTS / "server-key.pem"}" }}')
    else:
        body.append("no_tls: true")
    return "websocket {\n  " + "\n  ".join(body + list(lines)) + "\n}\n"


def wait_port(port: int, timeout: float = 10.0) -> None:
    """The harness waits for the client port; the WebSocket port may open a moment later."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)


@pytest.fixture
def ws_server(server_factory):
    """Start a server with a websocket block; returns (server, websocket port)."""

    def start(*lines: str, tls: bool = False, jetstream: bool = False, config: str = ""):
        port = free_port()
        srv = server_factory(jetstream=jetstream, config=config + ws_conf(port, *lines, tls=tls))
        wait_port(port)
        return srv, port

    return start


def client_ctx() -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(CERTS / "ca.pem"))
    ctx.check_hostname = False
    return ctx


# -- raw WebSocket helpers ----------------------------------------------------------------------------------------

def upgrade_request(extra: str = "", method: str = "GET", key: str = KEY, host: str = "127.0.0.1") -> bytes:
    return (f"{method} / HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n{extra}\r\n").encode()


def read_until(s: socket.socket, marker: bytes, timeout: float = 3.0) -> bytes:
    s.settimeout(timeout)
    buf = b""
    while marker not in buf:
        d = s.recv(65536)
        if not d:
            break
        buf += d
    return buf


def read_all(s: socket.socket, timeout: float = 1.0) -> tuple[bytes, bool]:
    """Everything until EOF (True) or until nothing came for ``timeout`` (False)."""
    s.settimeout(timeout)
    buf = b""
    try:
        while True:
            d = s.recv(65536)
            if not d:
                return buf, True
            buf += d
    except socket.timeout:
        return buf, False
    except ConnectionResetError:
        return buf, True


def frame(op: int, payload: bytes, fin: bool = True, mask: bool = True, rsv: int = 0) -> bytes:
    b0 = (0x80 if fin else 0) | rsv | op
    n = len(payload)
    mbit = 0x80 if mask else 0
    if n < 126:
        hdr = bytes([b0, mbit | n])
    elif n < 65536:
        hdr = bytes([b0, mbit | 126]) + struct.pack("!H", n)
    else:
        hdr = bytes([b0, mbit | 127]) + struct.pack("!Q", n)
    if not mask:
        return hdr + payload
    k = os.urandom(4)
    return hdr + k + bytes(c ^ k[i % 4] for i, c in enumerate(payload))


def parse_frames(data: bytes) -> list[tuple[int, bytes]]:
    """Server frames (unmasked, uncompressed): [(opcode, payload)]."""
    out, pos = [], 0
    while pos + 2 <= len(data):
        op, n = data[pos] & 0x0F, data[pos + 1] & 0x7F
        pos += 2
        if n == 126:
            n = struct.unpack_from("!H", data, pos)[0]
            pos += 2
        elif n == 127:
            n = struct.unpack_from("!Q", data, pos)[0]
            pos += 8
        out.append((op, data[pos:pos + n]))
        pos += n
    return out


def ws_connect_raw(port: int, extra: str = "") -> tuple[socket.socket, bytes]:
    """An upgraded socket and what came after the 101 answer (the start of the INFO frame)."""
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(upgrade_request(extra))
    buf = read_until(s, b"\r\n\r\n")
    head, _, rest = buf.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 101 Switching Protocols"), head
    assert f"Sec-WebSocket-Accept: {ACCEPT}".encode() in head
    return s, rest


def ws_data(s: socket.socket, rest: bytes, want: bytes, timeout: float = 3.0) -> bytes:
    """Read binary frames until their payloads contain ``want``; returns the payloads."""
    buf = rest
    deadline = time.monotonic() + timeout
    while True:
        payload = b"".join(p for op, p in parse_frames(buf) if op == 2)
        if want in payload:
            return payload
        s.settimeout(max(deadline - time.monotonic(), 0.01))
        d = s.recv(65536)
        assert d, f"closed before {want!r}: {payload!r}"
        buf += d


def http_status(port: int, request: bytes) -> tuple[bytes, bytes, bool]:
    """(status line, body, closed) of the server's answer to ``request``."""
    s = socket.create_connection(("127.0.0.1", port))
    try:
        s.sendall(request)
        data, closed = read_all(s, 1.0)
    finally:
        s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return head.split(b"\r\n")[0], body, closed


def http_statuses(port: int, requests: list[bytes]) -> list[tuple[bytes, bytes, bool]]:
    """``http_status`` of each request, each on its own connection, all at once: every answer still gets its full
    second of reading, but the seconds overlap instead of adding up."""
    with concurrent.futures.ThreadPoolExecutor(len(requests)) as pool:
        return list(pool.map(lambda r: http_status(port, r), requests))


async def check_tcp_client_unaffected(srv) -> None:
    nc = await nats.connect(srv.url, allow_reconnect=False)
    sub = await nc.subscribe("still.ok")
    await nc.publish("still.ok", b"yes")
    assert (await sub.next_msg(timeout=2)).data == b"yes"
    await nc.close()


# -- nats-py over ws:// and wss:// --------------------------------------------------------------------------------

async def pubsub_roundtrip(url: str, tcp_url: str, **kw) -> None:
    nc = await nats.connect(url, allow_reconnect=False, **kw)
    tcp = await nats.connect(tcp_url, allow_reconnect=False)
    try:
        sub = await nc.subscribe("ws.>")
        await nc.flush()  # the SUB is in before anything is published (a run on a loaded machine timed out here)
        await nc.publish("ws.a", b"x" * 300, headers={"H": "v"})
        msg = await sub.next_msg(timeout=2)
        assert msg.subject == "ws.a" and msg.data == b"x" * 300 and msg.headers == {"H": "v"}
        # across transports both ways
        await tcp.publish("ws.from_tcp", b"hello")
        assert (await sub.next_msg(timeout=2)).data == b"hello"
        tsub = await tcp.subscribe("tcp.in")
        await tcp.flush()
        await nc.publish("tcp.in", b"from ws")
        assert (await tsub.next_msg(timeout=2)).data == b"from ws"

        async def echo(m):
            await m.respond(b"re:" + m.data)

        await tcp.subscribe("svc", cb=echo)
        await tcp.flush()
        for attempt in range(3):
            # nats-server once answered no responders right after the responder's flush (loaded machine)
            try:
                reply = await nc.request("svc", b"q", timeout=2)
                break
            except nats.errors.NoRespondersError:
                if attempt == 2:
                    raise
                await asyncio.sleep(0.2)
        assert reply.data == b"re:q"
        # a message bigger than one read: frames split and joined
        big = os.urandom(600_000)
        await nc.publish("ws.big", big)
        assert (await sub.next_msg(timeout=5)).data == big
    finally:
        await nc.close()
        await tcp.close()


async def test_nats_py_over_ws(ws_server):
    srv, port = ws_server()
    await pubsub_roundtrip(f"ws://127.0.0.1:{port}", srv.url)


async def test_nats_py_over_wss(ws_server):
    srv, port = ws_server(tls=True)
    await pubsub_roundtrip(f"wss://127.0.0.1:{port}", srv.url, tls=client_ctx())


async def test_jetstream_over_ws(ws_server):
    srv, port = ws_server(jetstream=True)
    nc = await nats.connect(f"ws://127.0.0.1:{port}", allow_reconnect=False)
    try:
        js = nc.jetstream()
        await js.add_stream(name="WS", subjects=["wsjs.>"])
        for i in range(5):
            ack = await js.publish("wsjs.a", f"m{i}".encode())
            assert ack.seq == i + 1
        psub = await js.pull_subscribe("wsjs.>", "d")
        msgs = await psub.fetch(5, timeout=3)
        assert [m.data for m in msgs] == [f"m{i}".encode() for i in range(5)]
        for m in msgs:
            await m.ack()
    finally:
        await nc.close()


async def test_ws_info_is_the_websocket_listeners(ws_server):
    """INFO over WebSocket carries the WebSocket host and port (client.go generateClientInfoJSON)."""
    srv, port = ws_server()
    s, rest = ws_connect_raw(port)
    try:
        payload = ws_data(s, rest, b"\r\n")
        info = json.loads(payload[5:payload.index(b"\r\n")])
        assert info["port"] == port and info["host"] == "127.0.0.1"
        assert "tls_required" not in info and info["headers"] is True
    finally:
        s.close()


# -- compression ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("enabled", [True, False])
async def test_compression(ws_server, enabled):
    """permessage-deflate is accepted only when the block enables it; deflated frames both ways carry the same
    NATS bytes (aiohttp inflates and deflates)."""
    srv, port = ws_server(f"compression: {str(enabled).lower()}")
    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(f"ws://127.0.0.1:{port}", compress=15) as ws:
            ext = ws._response.headers.get("Sec-WebSocket-Extensions")
            if enabled:
                assert ext == "permessage-deflate; server_no_context_takeover; client_no_context_takeover"
            else:
                assert ext is None
            info = await ws.receive(timeout=3)
            assert info.type == aiohttp.WSMsgType.BINARY and info.data.startswith(b"INFO ")
            payload = b"z" * 1000
            await ws.send_bytes(b'CONNECT {"verbose":false}\r\nSUB c 1\r\nPUB c %d\r\n%s\r\nPING\r\n'
                                % (len(payload), payload))
            got = b""
            while b"PONG\r\n" not in got:
                m = await ws.receive(timeout=3)
                assert m.type == aiohttp.WSMsgType.BINARY, m
                got += m.data
            assert got == b"MSG c 1 1000\r\n" + payload + b"\r\nPONG\r\n"


# -- the HTTP upgrade -------------------------------------------------------------------------------------------------

def test_origin_checks(ws_server):
    srv, port = ws_server("same_origin: true")
    evil, same, none = http_statuses(port, [
        upgrade_request("Origin: http://evil.example.com\r\n"),
        upgrade_request(f"Origin: http://127.0.0.1:{port}\r\n", host=f"127.0.0.1:{port}"),
        upgrade_request(),  # no Origin at all: not a browser, accepted
    ])
    assert evil[:2] == (b"HTTP/1.1 403 Forbidden", b"Forbidden\n")
    assert same[0] == b"HTTP/1.1 101 Switching Protocols"
    assert none[0] == b"HTTP/1.1 101 Switching Protocols"


def test_allowed_origins(ws_server):
    srv, port = ws_server('allowed_origins: ["http://good.example.com", "https://other.example.com:8443"]')
    cases = [("http://good.example.com", True), ("http://good.example.com:80", True),
             ("https://other.example.com:8443", True), ("https://good.example.com", False),
             ("http://evil.example.com", False), ("https://other.example.com", False)]
    answers = http_statuses(port, [upgrade_request(f"Origin: {origin}\r\n") for origin, _ in cases])
    for (origin, ok), (status, _, _) in zip(cases, answers):
        want = b"HTTP/1.1 101 Switching Protocols" if ok else b"HTTP/1.1 403 Forbidden"
        assert status == want, origin


BAD_REQUESTS = [
    ("post", upgrade_request(method="POST"), b"HTTP/1.1 405 Method Not Allowed", b"Method Not Allowed\n", False),
    ("no upgrade", upgrade_request().replace(b"Upgrade: websocket\r\n", b""), b"HTTP/1.1 400 Bad Request",
     b"Bad Request\n", False),
    ("no connection", upgrade_request().replace(b"Connection: Upgrade\r\n", b""), b"HTTP/1.1 400 Bad Request",
     b"Bad Request\n", False),
    ("no key", upgrade_request().replace(f"Sec-WebSocket-Key: {KEY}\r\n".encode(), b""),
     b"HTTP/1.1 400 Bad Request", b"Bad Request\n", False),
    ("short key", upgrade_request(key=base64.b64encode(b"x" * 8).decode()), b"HTTP/1.1 400 Bad Request",
     b"Bad Request\n", False),
    ("version 8", upgrade_request().replace(b"Version: 13", b"Version: 8"), b"HTTP/1.1 400 Bad Request",
     b"Bad Request\n", False),
    ("no host", upgrade_request().replace(b"Host: 127.0.0.1\r\n", b""),
     b"HTTP/1.1 400 Bad Request: missing required Host header", b"400 Bad Request: missing required Host header",
     True),
    ("not http", b"HELLO\r\n\r\n", b"HTTP/1.1 400 Bad Request", b"400 Bad Request", True),
]


@pytest.mark.parametrize("name,request_bytes,status,body,closes", BAD_REQUESTS, ids=[r[0] for r in BAD_REQUESTS])
async def test_malformed_handshake(ws_server, name, request_bytes, status, body, closes):
    """Each refusal with nats-server's (Go net/http's) status line and body; Go's own parse errors close the
    socket, wsUpgrade's refusals keep it for another request.  Other clients never notice."""
    srv, port = ws_server()
    got_status, got_body, closed = http_status(port, request_bytes)
    assert (got_status, got_body, closed) == (status, body, closes)
    await check_tcp_client_unaffected(srv)


def test_keep_alive_after_a_refusal(ws_server):
    """After a refused upgrade the same socket can send a good one (Go's keep-alive)."""
    srv, port = ws_server()
    s = socket.create_connection(("127.0.0.1", port))
    try:
        s.sendall(upgrade_request(method="POST"))
        first = read_until(s, b"Method Not Allowed\n")
        assert first.startswith(b"HTTP/1.1 405")
        s.sendall(upgrade_request())
        assert read_until(s, b"\r\n\r\n").startswith(b"HTTP/1.1 101 Switching Protocols")
    finally:
        s.close()


def test_data_before_the_handshake_completes(ws_server):
    """Bytes after the request, before the 101: closed with no answer."""
    srv, port = ws_server()
    s = socket.create_connection(("127.0.0.1", port))
    try:
        s.sendall(upgrade_request() + frame(2, b"PING\r\n"))
        data, closed = read_all(s, 2.0)
        assert (data, closed) == (b"", True)
    finally:
        s.close()


# -- frames ---------------------------------------------------------------------------------------------------------

def test_frames_in_any_split(ws_server):
    """Partial frames (fed a byte at a time), continuation frames, several NATS operations in one frame and one
    operation over several frames, text frames, and a ping in between: all the same NATS stream."""
    srv, port = ws_server()
    s, rest = ws_connect_raw(port)
    try:
        stream = (frame(2, b'CONNECT {"verbose":false}\r\nSUB a 1\r\nPU') + frame(2, b"B a 2\r\nhi\r\nPI", fin=False)
                  + frame(9, b"ping-data") + frame(0, b"NG\r\n") + frame(1, b"PUB a 3\r\nabc\r\nPING\r\n"))
        for i in range(len(stream)):
            s.sendall(stream[i:i + 1])
        payload = ws_data(s, rest, b"abc\r\nPONG\r\n")
        assert payload.endswith(b"MSG a 1 2\r\nhi\r\nPONG\r\nMSG a 1 3\r\nabc\r\nPONG\r\n")
    finally:
        s.close()


def test_ping_is_answered_with_its_payload(ws_server):
    srv, port = ws_server()
    s, rest = ws_connect_raw(port)
    try:
        ws_data(s, rest, b"\r\n")
        s.sendall(frame(9, b"hello"))
        data, closed = read_all(s, 1.0)
        assert (10, b"hello") in parse_frames(data) and not closed
    finally:
        s.close()


@pytest.mark.parametrize("payload,echo", [(struct.pack("!H", 1000) + b"bye", struct.pack("!H", 1000) + b"bye"),
                                          (b"", b""),
                                          (struct.pack("!H", 1000) + b"\xff",
                                           struct.pack("!H", 1007) + b"invalid utf8 body in close frame")],
                         ids=["status", "empty", "bad-utf8"])
def test_client_close_is_echoed(ws_server, payload, echo):
    srv, port = ws_server()
    s, rest = ws_connect_raw(port)
    try:
        ws_data(s, rest, b"\r\n")
        s.sendall(frame(8, payload))
        data, closed = read_all(s, 2.0)
        assert closed and parse_frames(data)[-1] == (8, echo)
    finally:
        s.close()


BAD_FRAMES = [
    ("unmasked", frame(2, b"PING\r\n", mask=False), "mask bit missing"),
    ("rsv2", frame(2, b"PING\r\n", rsv=0x20), "RSV2 and RSV3 must be clear"),
    ("rsv1 not negotiated", frame(2, b"PING\r\n", rsv=0x40),
     "compressed frame received without negotiated permessage-deflate"),
    ("unknown opcode", frame(3, b"x"), "unknown opcode 3"),
    ("control too big", frame(9, b"x" * 126), "control frame length bigger than maximum allowed of 125 bytes"),
    ("control not final", frame(9, b"x", fin=False), "control frame does not have final bit set"),
    ("continuation first", frame(0, b"PING\r\n"), "invalid continuation frame"),
    ("new message in a message", frame(2, b"PI", fin=False) + frame(2, b"NG\r\n"),
     "new message started before final frame for previous message was received"),
    ("close of 1 byte", frame(8, b"a"), "close frame payload cannot be 1 byte"),
    ("reserved close status", frame(8, struct.pack("!H", 1004)), "invalid close status code 1004"),
]


@pytest.mark.parametrize("name,data,reason", BAD_FRAMES, ids=[b[0] for b in BAD_FRAMES])
async def test_malformed_frame_closes_with_1002(ws_server, name, data, reason):
    srv, port = ws_server()
    s, rest = ws_connect_raw(port)
    try:
        ws_data(s, rest, b"\r\n")
        s.sendall(data)
        out, closed = read_all(s, 2.0)
        assert closed, f"{name}: still open"
        closes = [p for op, p in parse_frames(out) if op == 8]
        if closes:  # nats-server sends it most of the time (its reader and writer race)
            assert closes[-1] == struct.pack("!H", 1002) + reason.encode()
    finally:
        s.close()
    await check_tcp_client_unaffected(srv)


def test_nats_protocol_error_over_ws(ws_server):
    """A NATS protocol error inside frames: the -ERR in a binary frame, then the connection closes."""
    srv, port = ws_server()
    s, rest = ws_connect_raw(port)
    try:
        ws_data(s, rest, b"\r\n")
        s.sendall(frame(2, b"FOO\r\n"))
        out, closed = read_all(s, 2.0)
        assert closed
        data = b"".join(p for op, p in parse_frames(out) if op == 2)
        assert data in (b"", b"-ERR 'Unknown Protocol Operation'\r\n")  # nats-server races here too
    finally:
        s.close()


# -- authentication -------------------------------------------------------------------------------------------------

async def connect_fails(url: str, **kw) -> None:
    with pytest.raises(Exception):
        nc = await nats.connect(url, allow_reconnect=False, max_reconnect_attempts=0, connect_timeout=2, **kw)
        await nc.close()


async def test_websocket_auth_override(ws_server):
    """websocket { authorization { user, password } } applies to WebSocket clients only (wsConfigAuth)."""
    srv, port = ws_server("authorization { user: wsuser, password: wspass }")
    url = f"ws://127.0.0.1:{port}"
    await connect_fails(url)
    await connect_fails(url, user="wsuser", password="nope")
    nc = await nats.connect(url, user="wsuser", password="wspass", allow_reconnect=False)
    await nc.close()
    await check_tcp_client_unaffected(srv)  # the client port still needs nothing


async def test_websocket_no_auth_user(ws_server):
    """websocket { no_auth_user } logs credential-less WebSocket clients in as that user; not on the client port."""
    users = 'authorization { users: [{user: a, password: pa}, {user: b, password: pb}] }\n'
    srv, port = ws_server("no_auth_user: b", config=users)
    nc = await nats.connect(f"ws://127.0.0.1:{port}", name="anon", allow_reconnect=False)
    try:
        await nc.flush()
        connz = json.load(urllib.request.urlopen(f"{srv.http_url}/connz?auth=true"))
        assert [c.get("authorized_user") for c in connz["connections"] if c.get("name") == "anon"] == ["b"]
    finally:
        await nc.close()
    await connect_fails(srv.url)  # the client port has no no_auth_user


async def test_allowed_connection_types(ws_server):
    users = ("authorization { users: [{user: std, password: p, allowed_connection_types: [STANDARD]},\n"
             "  {user: web, password: p, allowed_connection_types: [websocket]}] }\n")
    srv, port = ws_server(config=users)
    ws_url = f"ws://127.0.0.1:{port}"
    await connect_fails(ws_url, user="std", password="p")
    await connect_fails(srv.url, user="web", password="p")
    for url, user in ((srv.url, "std"), (ws_url, "web")):
        nc = await nats.connect(url, user=user, password="p", allow_reconnect=False)
        await nc.close()


# -- monitoring -----------------------------------------------------------------------------------------------------

async def test_connz_and_varz(ws_server):
    srv, port = ws_server("compression: true", 'allowed_origins: ["http://a.example.com"]', "handshake_timeout: 5s")
    nc = await nats.connect(f"ws://127.0.0.1:{port}", name="wsclient", allow_reconnect=False)
    tcp = await nats.connect(srv.url, name="tcpclient", allow_reconnect=False)
    try:
        await nc.flush()
        connz = json.load(urllib.request.urlopen(f"{srv.http_url}/connz"))
        types = {c["name"]: (c["kind"], c["type"]) for c in connz["connections"] if c.get("name")}
        assert types == {"wsclient": ("Client", "websocket"), "tcpclient": ("Client", "nats")}
        varz = json.load(urllib.request.urlopen(f"{srv.http_url}/varz"))
        ws = varz["websocket"]
        assert ws["host"] == "127.0.0.1" and ws["port"] == port
        assert ws["no_tls"] is True and ws["compression"] is True
        assert ws["allowed_origins"] == ["http://a.example.com"] and ws["handshake_timeout"] == 5_000_000_000
    finally:
        await nc.close()
        await tcp.close()
    await asyncio.sleep(0.2)
    closed = json.load(urllib.request.urlopen(f"{srv.http_url}/connz?state=closed"))
    named = {c["name"]: c["type"] for c in closed["connections"] if c.get("name")}
    assert named == {"wsclient": "websocket", "tcpclient": "nats"}


# -- configuration --------------------------------------------------------------------------------------------------

def test_websocket_requires_tls_or_no_tls(target, tmp_path):
    """validateWebsocketOptions: a websocket port without tls {} or no_tls: true does not start."""
    import subprocess

    from tests.harness import command_for, server_env

    conf = tmp_path / "ws.conf"
    conf.write_text(f"port: {free_port()}\nwebsocket {{ port: {free_port()} }}\n")
    p = subprocess.run(command_for(target) + ["-c", str(conf)], capture_output=True, text=True, timeout=30,
                       env=server_env())
    assert p.returncode != 0 and "websocket requires TLS configuration" in p.stderr + p.stdout


def test_lame_duck_info_reaches_websocket_clients(ws_server):
    """Lame duck mode: WebSocket clients get INFO with ldm, with the WebSocket listener's port
    (sendLDMToClients -> generateClientInfoJSON)."""
    import signal

    srv, port = ws_server()
    s, rest = ws_connect_raw(port)
    try:
        s.sendall(frame(2, b'CONNECT {"protocol":1,"verbose":false}\r\nPING\r\n'))
        ws_data(s, rest, b"PONG\r\n")  # async INFO goes to clients that said protocol 1
        srv.proc.send_signal(signal.SIGUSR2)
        payload = ws_data(s, b"", b'"ldm":true', timeout=5)
        info = json.loads(payload[payload.index(b"INFO ") + 5:].split(b"\r\n")[0])
        assert info["ldm"] is True and info["port"] == port
    finally:
        s.close()


@pytest.mark.parametrize("cookie,ok", [("tok=s3cr3t", True), ("other=1; tok=s3cr3t", True), ("tok=wrong", False),
                                       ("", False)])
def test_token_cookie(ws_server, cookie, ok):
    """token_cookie: the upgrade request's cookie stands for CONNECT's auth_token (client.go processConnect)."""
    srv, port = ws_server("authorization { token: s3cr3t }", "token_cookie: tok")
    s, rest = ws_connect_raw(port, f"Cookie: {cookie}\r\n" if cookie else "")
    try:
        s.sendall(frame(2, b'CONNECT {"verbose":false}\r\nPING\r\n'))
        want = b"PONG\r\n" if ok else b"-ERR 'Authorization Violation'\r\n"
        assert ws_data(s, rest, want).endswith(want)
    finally:
        s.close()


def test_user_and_pass_cookies(ws_server):
    srv, port = ws_server("authorization { user: u, password: p }", "user_cookie: wu", "pass_cookie: wp")
    for cookie, ok in (("wu=u; wp=p", True), ("wu=u; wp=x", False)):
        s, rest = ws_connect_raw(port, f"Cookie: {cookie}\r\n")
        try:
            s.sendall(frame(2, b'CONNECT {"verbose":false}\r\nPING\r\n'))
            want = b"PONG\r\n" if ok else b"-ERR 'Authorization Violation'\r\n"
            assert ws_data(s, rest, want).endswith(want)
        finally:
            s.close()


@pytest.mark.parametrize("sent", [b"", b"GET / HTTP/1.1\r\nHost: x\r\n"], ids=["nothing", "partial request"])
def test_handshake_timeout(ws_server, sent):
    """handshake_timeout: a socket that has not sent its whole upgrade request by then is closed, unanswered."""
    srv, port = ws_server('handshake_timeout: "300ms"')
    s = socket.create_connection(("127.0.0.1", port))
    try:
        s.sendall(sent)
        t0 = time.monotonic()
        data, closed = read_all(s, 3.0)
        assert closed and data == b"" and time.monotonic() - t0 < 2.0
    finally:
        s.close()


CLOSE_REASONS = [
    ("auth violation", ("authorization { token: s3cr3t }",), b'CONNECT {"verbose":false,"auth_token":"x"}\r\n',
     1008, "Authentication Failure"),
    ("bad protocol", (), b'CONNECT {"verbose":false,"protocol":5}\r\n', 1002, "Bad Client Protocol Version"),
    ("no responders without headers", (), b'CONNECT {"verbose":false,"no_responders":true}\r\n', 1011,
     "No Responders Requires Headers"),
    ("max payload", (), b'CONNECT {"verbose":false}\r\nPUB foo 2000000\r\n', 1009,
     "Maximum Message Payload Exceeded"),
]


@pytest.mark.parametrize("name,lines,data,status,reason", CLOSE_REASONS, ids=[c[0] for c in CLOSE_REASONS])
def test_close_frame_names_the_reason(ws_server, name, lines, data, status, reason):
    """A client the server closes gets nats-server's close status for the reason and the reason's name
    (wsEnqueueCloseMessage, ClosedState.String), after the -ERR."""
    srv, port = ws_server(*lines)
    s, rest = ws_connect_raw(port)
    try:
        ws_data(s, rest, b"\r\n")
        s.sendall(frame(2, data))
        out, closed = read_all(s, 2.0)
        assert closed
        assert [p for op, p in parse_frames(out) if op == 8] == [struct.pack("!H", status) + reason.encode()]
    finally:
        s.close()


def test_websocket_ping_interval(ws_server):
    """websocket { ping_interval } pings WebSocket clients at that interval (client.go setPingTimer); the client
    port keeps the server's (2 minutes: no PING within the test)."""
    srv, port = ws_server('ping_interval: "300ms"')
    s, rest = ws_connect_raw(port)
    tcp = socket.create_connection(("127.0.0.1", srv.port))
    try:
        s.sendall(frame(2, b'CONNECT {"verbose":false}\r\n'))
        tcp.sendall(b'CONNECT {"verbose":false}\r\n')
        t0 = time.monotonic()
        ws_data(s, rest, b"PING\r\n", timeout=2.0)
        assert time.monotonic() - t0 < 1.0
        tcp_out, _ = read_all(tcp, 0.5)
        assert b"PING" not in tcp_out
    finally:
        s.close()
        tcp.close()


@pytest.mark.parametrize("sent,answer", [(upgrade_request(), b"HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP "
                                                              b"request to an HTTPS server.\n"),
                                         (b"HELLO\r\n\r\n", b"")], ids=["http", "garbage"])
def test_plain_text_to_wss(ws_server, sent, answer):
    """Plain text where a TLS ClientHello is due: Go's net/http answers an HTTP request with its plain 400, anything
    else with nothing; the socket closes."""
    srv, port = ws_server(tls=True)
    s = socket.create_connection(("127.0.0.1", port))
    try:
        s.sendall(sent)
        assert read_all(s, 2.0) == (answer, True)
    finally:
        s.close()


async def test_wss_close_is_prompt_and_connz_shows_tls(ws_server):
    """Closing a wss:// connection takes no TLS shutdown timeout (the server answers close_notify), and connz shows
    the cipher suite of a wss client."""
    srv, port = ws_server(tls=True)
    nc = await nats.connect(f"wss://127.0.0.1:{port}", tls=client_ctx(), name="wss", allow_reconnect=False)
    await nc.flush()
    connz = json.load(urllib.request.urlopen(f"{srv.http_url}/connz"))
    [c] = [c for c in connz["connections"] if c.get("name") == "wss"]
    assert c["type"] == "websocket" and c["tls_cipher_suite"]
    t0 = time.monotonic()
    await asyncio.wait_for(nc.close(), 5)
    assert time.monotonic() - t0 < 0.5


def _deflate(data: bytes) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    return (c.compress(data) + c.flush(zlib.Z_SYNC_FLUSH))[:-4]  # RFC 7692: without the trailing 00 00 ff ff


def _inflate(payload: bytes) -> bytes:
    return zlib.decompressobj(-15).decompress(payload + b"\x00\x00\xff\xff")


def test_compressed_message_over_continuation_frames(ws_server):
    """A deflated message split over a first frame (RSV1) and a continuation frame is inflated whole; the server's
    answers under 64 bytes come uncompressed, bigger ones deflated (RSV1)."""
    srv, port = ws_server("compression: true")
    s, rest = ws_connect_raw(port, "Sec-WebSocket-Extensions: permessage-deflate\r\n")
    try:
        read_all(s, 0.3)
        z = _deflate(b'CONNECT {"verbose":false}\r\nSUB a 1\r\nPUB a 5\r\nhello\r\nPUB a 100\r\n'
                     + b"y" * 100 + b"\r\nPING\r\n")
        s.sendall(frame(2, z[:10], fin=False, rsv=0x40) + frame(0, z[10:]))
        out, _ = read_all(s, 1.0)
        raw = bytearray(out)
        got = b""
        pos = 0
        while pos < len(raw):  # frames with their RSV1 bit
            rsv1, n = raw[pos] & 0x40, raw[pos + 1] & 0x7F
            pos += 2
            if n == 126:
                n = struct.unpack_from("!H", raw, pos)[0]
                pos += 2
            payload = bytes(raw[pos:pos + n])
            pos += n
            got += _inflate(payload) if rsv1 else payload
        assert got == b"MSG a 1 5\r\nhello\r\nMSG a 1 100\r\n" + b"y" * 100 + b"\r\nPONG\r\n"
    finally:
        s.close()


def test_deflate_bomb_is_refused(ws_server):
    """A compressed message that inflates past max_payload closes the connection (nats-server: ErrMaxPayload); a
    close frame, when one comes, is 1009."""
    srv, port = ws_server("compression: true")
    s, rest = ws_connect_raw(port, "Sec-WebSocket-Extensions: permessage-deflate\r\n")
    try:
        read_all(s, 0.3)
        s.sendall(frame(2, _deflate(b'CONNECT {"verbose":false}\r\n' + b"PING\r\n" * 400_000), rsv=0x40))
        out, closed = read_all(s, 3.0)
        assert closed
        closes = [p for op, p in parse_frames(out) if op == 8]
        assert closes in ([], [struct.pack("!H", 1009) + b"Maximum Message Payload Exceeded"])
    finally:
        s.close()


@pytest.mark.parametrize("cookie,types,ok", [(True, None, True), (False, None, False),
                                             (True, ["WEBSOCKET"], True), (True, ["STANDARD"], False)],
                         ids=["cookie", "no-cookie", "websocket-type", "standard-only"])
def test_jwt_cookie(ws_server, cookie, types, ok):
    """Operator mode: jwt_cookie's cookie stands for CONNECT's jwt (here a bearer user JWT, no signature needed);
    the JWT's allowed_connection_types must allow WEBSOCKET."""
    from tests.client.test_operator import CONF, A, user

    srv, port = ws_server('jwt_cookie: "natsjwt"', config=CONF)
    kw = {"allowed_connection_types": types} if types else {}
    token, _ = user(A, bearer=True, **kw)
    s, rest = ws_connect_raw(port, f"Cookie: natsjwt={token}\r\n" if cookie else "")
    try:
        s.sendall(frame(2, b'CONNECT {"verbose":false}\r\nPING\r\n'))
        want = b"PONG\r\n" if ok else b"-ERR 'Authorization Violation'\r\n"
        assert ws_data(s, rest, want).endswith(want)
    finally:
        s.close()


async def test_connect_event_of_a_websocket_client(ws_server):
    """$SYS.ACCOUNT.<acc>.CONNECT of a WebSocket client says client_type "websocket" (clientTypeString)."""
    conf = ("accounts { SYS { users: [{user: sys, password: p}] }, A { users: [{user: a, password: p}] } }\n"
            "system_account: SYS\n")
    srv, port = ws_server(config=conf)
    sysc = await nats.connect(srv.url, user="sys", password="p", allow_reconnect=False)
    try:
        sub = await sysc.subscribe("$SYS.ACCOUNT.A.CONNECT")
        await sysc.flush()
        nc = await nats.connect(f"ws://127.0.0.1:{port}", user="a", password="p", allow_reconnect=False)
        ev = json.loads((await sub.next_msg(timeout=3)).data)
        await nc.close()
        assert (ev["client"]["kind"], ev["client"]["client_type"], ev["client"]["acc"]) == ("Client", "websocket", "A")
    finally:
        await sysc.close()


async def test_reload_applies_to_websocket_users(ws_server):
    """A configuration reload (SIGHUP) that changes the users applies to WebSocket clients as to the others."""
    import signal

    srv, port = ws_server(config="authorization { users: [{user: a, password: old}] }\n")
    url = f"ws://127.0.0.1:{port}"
    nc = await nats.connect(url, user="a", password="old", allow_reconnect=False)
    await nc.close()
    path = Path(srv._tmp) / "server.conf"
    path.write_text(path.read_text().replace("password: old", "password: new"))
    srv.proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 5
    while True:
        try:
            nc = await nats.connect(url, user="a", password="new", allow_reconnect=False, max_reconnect_attempts=0)
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)
    await nc.close()
    await connect_fails(url, user="a", password="old")


def test_reload_refuses_a_changed_websocket_block(ws_server):
    """nats-server fails a reload that changes the websocket block ("config reload not supported for Websocket")
    and keeps running with the old one."""
    import signal

    srv, port = ws_server("compression: false")
    path = Path(srv._tmp) / "server.conf"
    path.write_text(path.read_text().replace("compression: false", "compression: true"))
    srv.proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 5
    while "config reload not supported for Websocket" not in srv.log():
        assert time.monotonic() < deadline, srv.log()
        time.sleep(0.05)
    s = socket.create_connection(("127.0.0.1", port))
    try:
        s.sendall(upgrade_request("Sec-WebSocket-Extensions: permessage-deflate\r\n"))
        head = read_until(s, b"\r\n\r\n").partition(b"\r\n\r\n")[0]
    finally:
        s.close()
    assert head.startswith(b"HTTP/1.1 101 ") and b"permessage-deflate" not in head  # still without compression
