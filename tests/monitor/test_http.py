"""The monitoring HTTP layer over a real socket, with a fake provider: routing, status codes, headers, queries.

The documents themselves are the provider's business and are compared with nats-server end to end elsewhere;
here the provider returns canned documents and records what it was asked.
"""
from __future__ import annotations

import asyncio
import json
import random

import pytest

from skiff.server.monitor.http import HTTPError, MonitorServer


class FakeProvider:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict]] = []
        self.health = (200, {"status": "ok"})

    def varz(self, params=None):
        self.calls.append(("varz", params))
        return {"server_id": "NFAKE", "server_name": "fake", "now": "2024-01-01T00:00:00Z", "auth_timeout": 2.0,
                "cpu": 1.5, "tags": ["a<b"], "nested": {"empty_list": [], "empty_map": {}}}

    def connz(self, params):
        self.calls.append(("connz", params))
        if params.get("limit") == "abc":
            raise ValueError("Error decoding int for 'limit': strconv.Atoi: parsing \"abc\": invalid syntax")
        if params.get("sort") == "boom":
            raise RuntimeError("provider bug")
        if params.get("sort") == "teapot":
            raise HTTPError(418, "I'm a teapot")
        return {"num_connections": 0, "params": params}

    def subsz(self, params):
        self.calls.append(("subsz", params))
        return {"num_subscriptions": 3}

    def healthz(self, params):
        self.calls.append(("healthz", params))
        return self.health

    async def jsz(self, params):  # async methods are awaited
        await asyncio.sleep(0)
        self.calls.append(("jsz", params))
        return {"streams": 1}

    def accountz(self, params):
        self.calls.append(("accountz", params))
        return {"accounts": ["$G"]}

    def metrics(self):
        return b"# HELP x y\n# TYPE x gauge\nx 1.0\n"


class Response:
    def __init__(self, raw: bytes):
        head, _, self.body = raw.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        self.status_line = lines[0]
        self.version, status, *_ = lines[0].split(" ", 2)
        self.status = int(status)
        self.headers = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            self.headers[k.strip().lower()] = v.strip()

    def json(self):
        return json.loads(self.body)


async def exchange(port: int, raw: bytes, read_all: bool = True) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(raw)
    await writer.drain()
    data = await asyncio.wait_for(reader.read(), 5) if read_all else b""
    writer.close()
    return data


async def get(port: int, target: str, method: str = "GET", extra: str = "") -> Response:
    raw = f"{method} {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{extra}\r\n".encode()
    return Response(await exchange(port, raw))


async def read_response(reader: asyncio.StreamReader) -> Response:
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    r = Response(head)
    n = int(r.headers.get("content-length", "0"))
    r.body = await reader.readexactly(n) if n else b""
    return r


@pytest.fixture
async def mon():
    provider = FakeProvider()
    m = MonitorServer("127.0.0.1", -1, provider)
    await m.start()
    m.fake = provider
    yield m
    await m.stop()


async def test_random_port_is_exposed():
    for requested in (0, -1):
        m = MonitorServer("127.0.0.1", requested, FakeProvider())
        await m.start()
        try:
            assert m.port > 0
            assert (await get(m.port, "/varz")).status == 200
        finally:
            await m.stop()


@pytest.mark.parametrize("path,method", [("/varz", "varz"), ("/connz", "connz"), ("/subsz", "subsz"),
                                         ("/subscriptionsz", "subsz"), ("/jsz", "jsz"), ("/accountz", "accountz")])
async def test_documents_route_to_the_provider(mon, path, method):
    r = await get(mon.port, path)
    assert r.status == 200
    assert r.headers["content-type"] == "application/json"
    assert r.headers["access-control-allow-origin"] == "*"
    assert int(r.headers["content-length"]) == len(r.body)
    assert "date" in r.headers
    assert mon.fake.calls[-1][0] == method
    assert isinstance(r.json(), dict)


async def test_json_is_indented_like_go(mon):
    r = await get(mon.port, "/varz")
    text = r.body.decode()
    assert text.startswith('{\n  "server_id": "NFAKE",\n')
    assert '"auth_timeout": 2,' in text  # Go prints a whole float64 without ".0"
    assert '"cpu": 1.5,' in text
    assert '"a\\u003cb"' in text  # Go escapes <, > and &
    assert '"empty_list": [],' in text and '"empty_map": {}' in text
    assert r.json()["tags"] == ["a<b"]


async def test_query_parameters_reach_the_provider(mon):
    r = await get(mon.port, "/connz?subs=detail&limit=2&offset=1&sort=bytes_to&cid=7&state=closed&auth=1&x=&"
                            "acc=%24G&limit=9")
    assert r.status == 200
    assert mon.fake.calls[-1] == ("connz", {"subs": "detail", "limit": "2", "offset": "1", "sort": "bytes_to",
                                            "cid": "7", "state": "closed", "auth": "1", "x": "", "acc": "$G"})
    await get(mon.port, "/subsz?subs=1&test=foo.bar&offset=0&limit=5")
    assert mon.fake.calls[-1] == ("subsz", {"subs": "1", "test": "foo.bar", "offset": "0", "limit": "5"})
    await get(mon.port, "/varz")
    assert mon.fake.calls[-1] == ("varz", {})


async def test_healthz_status_and_compact_json(mon):
    r = await get(mon.port, "/healthz?js-enabled-only=true")
    assert r.status == 200 and r.body == b'{"status":"ok"}'
    assert mon.fake.calls[-1] == ("healthz", {"js-enabled-only": "true"})
    mon.fake.health = (503, {"status": "unavailable", "status_code": 503, "error": "JetStream is not current"})
    r = await get(mon.port, "/healthz")
    assert r.status == 503 and r.status_line == "HTTP/1.1 503 Service Unavailable"
    assert r.json()["error"] == "JetStream is not current"


async def test_provider_errors(mon):
    r = await get(mon.port, "/connz?limit=abc")
    assert r.status == 400 and r.headers["content-type"] == "text/plain; charset=utf-8"
    assert r.body.decode().startswith("Error decoding int for 'limit'")
    r = await get(mon.port, "/connz?sort=teapot")
    assert r.status == 418 and r.body == b"I'm a teapot"
    r = await get(mon.port, "/connz?sort=boom")
    assert r.status == 500
    # and the server keeps serving
    assert (await get(mon.port, "/varz")).status == 200


async def test_standalone_documents_without_provider_support(mon):
    r = await get(mon.port, "/routez")
    assert r.status == 200
    assert r.json() == {"server_id": "NFAKE", "server_name": "fake", "now": "2024-01-01T00:00:00Z", "num_routes": 0,
                        "routes": []}
    assert (await get(mon.port, "/gatewayz")).json()["outbound_gateways"] == {}
    assert (await get(mon.port, "/leafz")).json()["leafs"] == []
    assert (await get(mon.port, "/accstatz")).json()["account_statz"] == []
    assert (await get(mon.port, "/ipqueuesz")).json() == {}
    r = await get(mon.port, "/raftz")
    assert r.status == 404 and r.body == b"No Raft nodes registered"


async def test_provider_may_supply_optional_documents():
    p = FakeProvider()
    p.routez = lambda params: {"num_routes": 5, "params": params}
    p.identity = lambda: {"server_id": "NID", "server_name": "id"}
    m = MonitorServer("127.0.0.1", 0, p)
    await m.start()
    try:
        assert (await get(m.port, "/routez?subs=1")).json() == {"num_routes": 5, "params": {"subs": "1"}}
        assert (await get(m.port, "/leafz")).json()["server_id"] == "NID"
        assert not any(c[0] == "varz" for c in p.calls)  # identity() spares a /varz computation
    finally:
        await m.stop()


async def test_metrics(mon):
    r = await get(mon.port, "/metrics")
    assert r.status == 200
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
    assert r.body == b"# HELP x y\n# TYPE x gauge\nx 1.0\n"


async def test_index_page(mon):
    r = await get(mon.port, "/")
    assert r.status == 200 and r.headers["content-type"].startswith("text/html")
    assert b'href="/varz"' in r.body


@pytest.mark.parametrize("path", ["/nope", "/varz/", "/VARZ", "/varz/extra", "//varz"])
async def test_unknown_paths_are_404_like_go(mon, path):
    r = await get(mon.port, path)
    assert r.status == 404
    assert r.body == b"404 page not found\n"
    assert r.headers["content-type"] == "text/plain; charset=utf-8"
    assert r.headers["x-content-type-options"] == "nosniff"


async def test_head_has_headers_only(mon):
    data = await exchange(mon.port, b"HEAD /varz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    r = Response(data)
    assert r.status == 200 and int(r.headers["content-length"]) > 0 and r.body == b""


async def test_post_with_a_body_is_served(mon):
    raw = b"POST /varz HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello"
    r = Response(await exchange(mon.port, raw))
    assert r.status == 200 and r.json()["server_id"] == "NFAKE"


async def test_http_10_needs_no_host_and_closes(mon):
    r = Response(await exchange(mon.port, b"GET /varz HTTP/1.0\r\n\r\n"))
    assert r.version == "HTTP/1.0" and r.status == 200 and "connection" not in r.headers


@pytest.mark.parametrize("raw,status", [
    (b"GET /varz HTTP/1.1\r\n\r\n", 400),  # HTTP/1.1 without Host, as Go's net/http
    (b"GARBAGE\r\n\r\n", 400),
    (b"GET /varz HTTP/2.0\r\nHost: x\r\n\r\n", 505),
    (b"GET /varz HTTP/1.1\r\nHost: x\r\nbad header line\r\n\r\n", 400),
    (b"GET /varz HTTP/1.1\r\nHost: x\r\nContent-Length: nope\r\n\r\n", 400),
    (b"GET /varz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400),
])
async def test_bad_requests_get_an_error_and_a_close(mon, raw, status):
    r = Response(await exchange(mon.port, raw))
    assert r.status == status
    assert r.headers.get("connection") == "close"
    assert (await get(mon.port, "/varz")).status == 200


async def test_oversized_head_is_431(mon):
    raw = b"GET /varz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (1100 * 1024) + b"\r\n\r\n"
    r = Response(await exchange(mon.port, raw))
    assert r.status == 431


async def test_keep_alive_and_pipelining(mon):
    reader, writer = await asyncio.open_connection("127.0.0.1", mon.port)
    try:
        writer.write(b"GET /varz HTTP/1.1\r\nHost: x\r\n\r\n")
        r1 = await read_response(reader)
        assert r1.status == 200 and "connection" not in r1.headers
        # two requests in one write
        writer.write(b"GET /subsz HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        r2, r3 = await read_response(reader), await read_response(reader)
        assert r2.json() == {"num_subscriptions": 3} and r3.json() == {"status": "ok"}
        writer.write(b"GET /jsz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        r4 = await read_response(reader)
        assert r4.json() == {"streams": 1} and r4.headers["connection"] == "close"
        assert await asyncio.wait_for(reader.read(), 5) == b""  # closed by the server
    finally:
        writer.close()


async def test_base_path():
    m = MonitorServer("127.0.0.1", 0, FakeProvider(), base_path="/mon")
    await m.start()
    try:
        assert (await get(m.port, "/mon/varz")).status == 200
        assert (await get(m.port, "/varz")).status == 404
        assert b'href="/mon/varz"' in (await get(m.port, "/mon/")).body
    finally:
        await m.stop()


async def test_stop_closes_idle_keep_alive_connections():
    m = MonitorServer("127.0.0.1", 0, FakeProvider())
    await m.start()
    reader, writer = await asyncio.open_connection("127.0.0.1", m.port)
    writer.write(b"GET /varz HTTP/1.1\r\nHost: x\r\n\r\n")
    await read_response(reader)
    await asyncio.wait_for(m.stop(), 5)
    assert await asyncio.wait_for(reader.read(), 5) == b""
    writer.close()
    with pytest.raises(OSError):
        await asyncio.open_connection("127.0.0.1", m.port)


async def test_clients_that_vanish_mid_request_do_no_harm(mon):
    for raw in (b"GET /varz HT", b"GET /varz HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc", b""):
        reader, writer = await asyncio.open_connection("127.0.0.1", mon.port)
        writer.write(raw)
        await writer.drain()
        writer.close()
    assert (await get(mon.port, "/varz")).status == 200


async def test_random_bytes_never_take_it_down(mon):
    rng = random.Random(1234)
    for _ in range(50):
        blob = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300)))
        if rng.random() < 0.5:
            blob = b"GET /" + blob + b"\r\n\r\n"
        reader, writer = await asyncio.open_connection("127.0.0.1", mon.port)
        writer.write(blob + b"\r\n\r\n")
        await writer.drain()
        try:
            await asyncio.wait_for(reader.read(65536), 2)
        except asyncio.TimeoutError:
            pass
        writer.close()
    assert (await get(mon.port, "/varz")).status == 200
