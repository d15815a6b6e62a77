"""The monitoring port's HTTP behaviour, the same on Skiff and on nats-server (documents' fields are tested elsewhere)."""
from __future__ import annotations

import json
import socket

import pytest


def _exchange(port: int, raw: bytes) -> bytes:
    """Send ``raw`` and read until the server closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(raw)
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return data
            data += chunk


def http(port: int, raw: bytes) -> tuple[str, dict[str, str], bytes]:
    data = _exchange(port, raw)
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    if headers.get("transfer-encoding") == "chunked":
        body = _dechunk(body)
    return lines[0], headers, body


def _dechunk(body: bytes) -> bytes:
    out = b""
    while body:
        size_line, _, rest = body.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            break
        out += rest[:size]
        body = rest[size + 2:]
    return out


def get(port: int, path: str, method: str = "GET") -> tuple[str, dict[str, str], bytes]:
    return http(port, f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())


@pytest.fixture
def srv(server_factory):
    return server_factory(jetstream=False)


def test_json_document_headers(srv):
    status, headers, body = get(srv.http_port, "/varz")
    assert status == "HTTP/1.1 200 OK"
    assert headers["content-type"] == "application/json"
    assert headers["access-control-allow-origin"] == "*"
    assert body.startswith(b'{\n  "server_id": "')  # indented by two spaces
    json.loads(body)


def test_healthz_is_compact(srv):
    status, headers, body = get(srv.http_port, "/healthz")
    assert status == "HTTP/1.1 200 OK" and headers["content-type"] == "application/json"
    assert body == b'{"status":"ok"}'


@pytest.mark.parametrize("path", ["/nope", "/varz/", "/VARZ"])
def test_unknown_path(srv, path):
    status, headers, body = get(srv.http_port, path)
    assert status == "HTTP/1.1 404 Not Found"
    assert body == b"404 page not found\n"
    assert headers["content-type"] == "text/plain; charset=utf-8"


def test_missing_host_header(srv):
    status, headers, body = http(srv.http_port, b"GET /varz HTTP/1.1\r\nConnection: close\r\n\r\n")
    assert status == "HTTP/1.1 400 Bad Request: missing required Host header"
    assert body == b"400 Bad Request: missing required Host header"
    assert headers["connection"] == "close" and headers["content-type"] == "text/plain; charset=utf-8"


@pytest.mark.parametrize("raw,status,body", [
    # Go's net/http answers what it cannot read with the reason in the status line and as the body.
    (b"GET /varz HTTP/2.0\r\nHost: x\r\n\r\n", "HTTP/1.1 505 HTTP Version Not Supported: unsupported protocol version",
     b"505 HTTP Version Not Supported: unsupported protocol version"),
    (b"GET /varz HTTP/1.1\r\nHost: x\r\nbad header line\r\n\r\n", "HTTP/1.1 400 Bad Request", b"400 Bad Request"),
    (b"GET /varz HTTP/1.1\r\nHost: x\r\nContent-Length: nope\r\n\r\n", "HTTP/1.1 400 Bad Request",
     b"400 Bad Request"),
    (b"GET /varz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (1100 * 1024) + b"\r\n\r\n",
     "HTTP/1.1 431 Request Header Fields Too Large", b"431 Request Header Fields Too Large"),
])
def test_unreadable_requests(srv, raw, status, body):
    got_status, headers, got_body = http(srv.http_port, raw)
    assert (got_status, got_body) == (status, body)
    assert headers["connection"] == "close"


def test_request_bodies_are_read_or_skipped(srv):
    """A chunked body is read and the request served; a body announced over 256 KiB is not waited for: the
    answer comes at once, and the connection closes (net/http maxPostHandlerReadBytes)."""
    status, headers, body = http(srv.http_port, b"POST /varz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                                 b"Connection: close\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
    assert status == "HTTP/1.1 200 OK" and json.loads(body)["server_id"]
    status, headers, body = http(srv.http_port, b"GET /varz HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999\r\n\r\n")
    assert status == "HTTP/1.1 200 OK" and headers["connection"] == "close" and json.loads(body)["server_id"]


def test_garbage_request(srv):
    status, _, _ = http(srv.http_port, b"GARBAGE\r\n\r\n")
    assert status.startswith("HTTP/1.1 400 Bad Request")


def test_head_and_http10(srv):
    status, headers, body = get(srv.http_port, "/varz", method="HEAD")
    assert status == "HTTP/1.1 200 OK" and body == b"" and int(headers["content-length"]) > 0
    status, _, body = http(srv.http_port, b"GET /varz HTTP/1.0\r\n\r\n")
    assert status == "HTTP/1.0 200 OK" and json.loads(body)["server_id"]


@pytest.mark.parametrize("path,keys", [
    ("/routez", {"server_id", "server_name", "now", "num_routes", "routes"}),
    ("/gatewayz", {"server_id", "now", "outbound_gateways", "inbound_gateways"}),
    ("/leafz", {"server_id", "now", "leafnodes", "leafs"}),
    ("/accstatz", {"server_id", "now", "account_statz"}),
])
def test_standalone_documents(srv, path, keys):
    status, _, body = get(srv.http_port, path)
    assert status == "HTTP/1.1 200 OK"
    doc = json.loads(body)
    assert set(doc) == keys
    if path != "/accstatz":  # accstatz lists accounts with live connections: the harness's probe may still be one
        assert all(not doc[k] for k in keys - {"server_id", "server_name", "now"})


def test_raftz_without_raft(srv):
    status, _, body = get(srv.http_port, "/raftz")
    assert status == "HTTP/1.1 404 Not Found" and body == b"No Raft nodes registered"


def test_http10_keep_alive(srv):
    """An HTTP/1.0 client that asks for keep-alive gets it, and its second request on the same connection is
    served (h11 alone would refuse it; server/monitor/http.py starts a parser per request)."""
    data = _exchange(srv.http_port, b"GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"
                                    b"GET /healthz HTTP/1.0\r\n\r\n")
    first, _, rest = data.partition(b"\r\n\r\n")
    assert first.startswith(b"HTTP/1.0 200 OK") and b"Connection: keep-alive" in first
    assert rest.count(b"HTTP/1.0 200 OK") == 1 and rest.endswith(b'{"status":"ok"}')


async def test_subsz_counts_matches_cache_hits_and_fanout(srv):
    """/subsz statistics are measured, not constants (sublist.go Stats): matches and cache hits are counted, and
    the fan-out figures walk the cache (plain subscribers plus queue groups per subject)."""
    import nats

    def stats() -> dict:
        return json.loads(get(srv.http_port, "/subsz")[2])

    before = stats()
    nc = await nats.connect(srv.url)
    try:
        for i in range(3):
            await nc.subscribe("fan.a")
        await nc.subscribe("fan.a", queue="q")
        await nc.subscribe("fan.b")
        await nc.flush()
        for _ in range(20):
            await nc.publish("fan.a", b"x")
            await nc.publish("fan.b", b"y")
        await nc.flush()
        after = stats()
    finally:
        await nc.close()
    # nats-server's connections keep their own result caches, so its Sublist sees a publisher's repeats of a
    # subject once (here 40 publishes made 3 matches); Skiff's Sublist answers every publish (docs/parity.md).
    assert after["num_matches"] - before["num_matches"] >= 2
    assert 0.0 <= after["cache_hit_rate"] <= 1.0
    assert after["max_fanout"] == 4  # three plain subscribers and one queue group on fan.a
    assert 0.0 < after["avg_fanout"] <= 4.0
