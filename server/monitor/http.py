"""The monitoring HTTP endpoint (``-m PORT``): HTTP/1.x on asyncio streams, requests read with h11.

Theory of operation
-------------------
``MonitorServer(host, port, provider)`` serves nats-server's monitoring paths.  It knows HTTP, not the server: every
document comes from a duck-typed *provider* (``server/monitor/provider.py`` in Skiff, a fake in the tests):

    varz(params) -> dict                    connz(params) -> dict         subsz(params) -> dict
    healthz(params) -> (status, dict)       jsz(params) -> dict           accountz(params) -> dict
    metrics() -> bytes                      (optional) routez, gatewayz, leafz, accstatz, ipqueuesz, raftz(params)

A method may also be ``async``.  ``params`` is the query string as a ``dict`` of the *first* value of each key
(Go's ``URL.Query().Get``).  Optional documents that the provider lacks are answered with nats-server's standalone
shapes (no routes, no gateways, no leaf nodes), built from ``provider.identity()`` (``server_id``, ``server_name``)
or failing that from ``varz``.

Responses follow nats-server 2.15 (checked against the binary): JSON indented by two spaces, except ``/healthz``
which is compact; ``Content-Type: application/json`` and ``Access-Control-Allow-Origin: *``; an unknown path is
``404 page not found`` in text/plain; a provider that raises ``ValueError`` (bad ``limit=``, ``sort=``...) gives
``400`` with the message as text, as nats-server does; any other exception gives ``500`` and is logged, and the
server goes on.  ``HEAD`` gets headers only; any method is served like ``GET`` (nats-server does not check it).
A request Go's net/http cannot read gets its answer: the reason in the status line and as the body, then a close
(``400 Bad Request: missing required Host header``, ``505 HTTP Version Not Supported: ...``, ``431`` past 1 MB of
headers).  Bodies are read and dropped (chunked too); one announced over 256 KiB is not waited for and the
connection closes after the answer, as Go does.  Connections are kept alive unless the client says
``Connection: close`` or speaks HTTP/1.0 without ``Connection: keep-alive``.  ``/metrics`` (Prometheus text format) is Skiff's own; the
``callback=`` JSONP parameter is ignored, as nats-server 2.15 does.
"""
from __future__ import annotations

import asyncio
import inspect
from typing import Any, Awaitable, Callable
from urllib.parse import parse_qsl, unquote, urlsplit


from skiff.protocol.marshal import dumps, dumps_indent
from skiff.server.log import get_logger

# The server's own logger, so that monitoring errors follow -l, --log_json and the [ERR] format like every other line
# (stdlib logging went straight to stderr).
log = get_logger("skiff.monitor")

MAX_HEADER_BYTES = 1024 * 1024 + 4096  # Go's http.DefaultMaxHeaderBytes plus the 4096 its reader allows over it
MAX_DISCARD_BODY = 256 * 1024  # net/http maxPostHandlerReadBytes
VERSION_NOT_SUPPORTED = "505 HTTP Version Not Supported: unsupported protocol version"
HEADER_TIMEOUT = 30.0  # seconds to send a complete request head
IDLE_TIMEOUT = 120.0  # seconds a kept-alive connection may stay silent

JSON_TYPE = "application/json"
TEXT_TYPE = "text/plain; charset=utf-8"
HTML_TYPE = "text/html; charset=utf-8"
METRICS_TYPE = "text/plain; version=0.0.4; charset=utf-8"

REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 408: "Request Timeout",
           413: "Request Entity Too Large", 418: "I'm a teapot", 431: "Request Header Fields Too Large",
           500: "Internal Server Error", 501: "Not Implemented", 503: "Service Unavailable"}

# path -> provider method; documents nats-server always has
REQUIRED = {"/varz": "varz", "/connz": "connz", "/subsz": "subsz", "/subscriptionsz": "subsz", "/jsz": "jsz",
            "/accountz": "accountz"}
# documents with a standalone default when the provider does not implement them
OPTIONAL = {"/routez": "routez", "/gatewayz": "gatewayz", "/leafz": "leafz", "/accstatz": "accstatz",
            "/ipqueuesz": "ipqueuesz", "/raftz": "raftz"}

INDEX_PATHS = ["varz", "connz", "routez", "gatewayz", "leafz", "subsz", "accountz", "accstatz", "jsz", "healthz",
               "metrics"]


class HTTPError(Exception):
    """Raised by a provider to answer with ``status`` and a plain-text ``message``."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


class _BadRequest(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


# h11 is imported with the first request, not with the server: its import is ~7 ms of every start with -m, and a
# harness that only waits for the port never sends one.
h11: Any = None


def _new_parser(data: bytes = b"") -> "h11.Connection":
    global h11
    if h11 is None:
        import h11
    conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEADER_BYTES)
    if data:
        conn.receive_data(data)
    return conn


def _next_cycle(conn: "h11.Connection") -> "h11.Connection":
    """A parser for the next request on a kept-alive connection, holding the bytes already read (pipelining).  A
    fresh one each time: h11 would refuse a second HTTP/1.0 request, which Go serves with ``keep-alive``."""
    data, _closed = conn.trailing_data
    return _new_parser(bytes(data))


def _go_error(e: "h11.RemoteProtocolError", conn: "h11.Connection") -> "_BadRequest":
    """What Go's net/http answers for the request h11 refused (server.go readRequest's errors, checked against
    nats-server 2.15.1): headers too large 431, a major version other than 1 is 505, HTTP/1.1 without Host
    has its own text, anything else 400."""
    if e.error_status_hint == 431:
        return _BadRequest(431, "431 Request Header Fields Too Large")
    data, _ = conn.trailing_data
    line = bytes(data).split(b"\r\n", 1)[0]
    parts = line.split(b" ")
    if len(parts) == 3 and parts[2].startswith(b"HTTP/") and not parts[2].startswith(b"HTTP/1."):
        return _BadRequest(505, VERSION_NOT_SUPPORTED)
    if "Host" in str(e):
        return _BadRequest(400, "400 Bad Request: missing required Host header")
    return _BadRequest(400, "400 Bad Request")


class _Response:
    __slots__ = ("status", "content_type", "body", "cors", "extra")

    def __init__(self, status: int, content_type: str, body: bytes, cors: bool = False,
                 extra: list[tuple[str, str]] | None = None):
        self.status = status
        self.content_type = content_type
        self.body = body
        self.cors = cors
        self.extra = extra or []


def _text(status: int, message: str) -> _Response:
    # As nats-server: its own errors are written as they are; only Go's NotFound adds a new line.
    return _Response(status, TEXT_TYPE, message.encode())


NOT_FOUND = "404 page not found\n"


class MonitorServer:
    """``await start()`` binds (port 0 or -1: a free port, then in ``.port``); ``await stop()`` closes."""

    def __init__(self, host: str, port: int, provider: Any, base_path: str = "/"):
        self.host = host
        self.requested_port = port
        self.port = 0 if port in (0, -1) else port
        self.provider = provider
        self.base_path = "/" + base_path.strip("/") if base_path and base_path.strip("/") else ""
        self._server: asyncio.base_events.Server | None = None
        self._conns: set[asyncio.Task] = set()

    # -- lifecycle --------------------------------------------------------------------------------------------

    async def start(self) -> None:
        port = 0 if self.requested_port in (0, -1) else self.requested_port
        from ..startup import ipv4_listen_socket

        sock = ipv4_listen_socket(self.host, port)  # an IPv4 literal needs no lookup (server/startup.py)
        if sock is not None:
            self._server = await asyncio.start_server(self._serve, sock=sock, limit=MAX_HEADER_BYTES)
        else:
            self._server = await asyncio.start_server(
                self._serve, self.host, port, limit=MAX_HEADER_BYTES, reuse_address=True
            )
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._conns):
            task.cancel()
        if self._conns:
            await asyncio.gather(*self._conns, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "", "::") else self.host
        return f"http://{host}:{self.port}"

    # -- one connection ---------------------------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._conns.add(task)
        try:
            await self._requests(reader, writer)
        except asyncio.CancelledError:
            pass
        except Exception:  # never let one connection take the monitor down
            log.exception("Monitoring connection failed")
        finally:
            if task is not None:
                self._conns.discard(task)
            try:
                writer.close()
            except (OSError, RuntimeError):  # the socket or the loop is already gone: nothing left to close
                pass

    async def _requests(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Requests are read with h11 (the sans-IO HTTP/1.1 parser); responses are written here, because Go answers
        in the request's own version (``HTTP/1.0 200 OK``) where h11 always writes HTTP/1.1."""
        conn = _new_parser()
        first = True
        while True:
            try:
                request = await self._next_event(conn, reader, HEADER_TIMEOUT if first else IDLE_TIMEOUT)
            except _BadRequest as e:
                await self._write_error(writer, e)
                return
            if request is None or isinstance(request, h11.ConnectionClosed):
                return
            first = False
            if not request.http_version.startswith(b"1."):  # h11 reads any x.y; Go serves only major version 1
                await self._write_error(writer, _BadRequest(505, VERSION_NOT_SUPPORTED))
                return
            version = "HTTP/" + request.http_version.decode()
            headers = {k.decode().lower(): v.decode("latin-1") for k, v in request.headers}
            connection = headers.get("connection", "").lower()
            keep_alive = "close" not in connection if version == "HTTP/1.1" else "keep-alive" in connection
            # Go's server reads at most 256 KiB of a body its handler ignored and closes the connection rather than
            # read more (net/http maxPostHandlerReadBytes): a body announced larger is not waited for.
            length = int(headers.get("content-length", "0") or 0)
            skip_body = length > MAX_DISCARD_BODY
            if skip_body:
                keep_alive = False
            else:
                try:
                    await self._discard_body(conn, reader)
                except _BadRequest as e:
                    await self._write_error(writer, e)
                    return
                except (asyncio.TimeoutError, ConnectionError, asyncio.IncompleteReadError):
                    return
            response = await self._respond(request.target.decode("latin-1"))
            await self._write(writer, version, response, keep_alive, request.method == b"HEAD")
            if not keep_alive:
                return
            conn = _next_cycle(conn)

    @staticmethod
    async def _event(conn: "h11.Connection", reader: asyncio.StreamReader, timeout: float):
        """The next h11 event, reading as needed: ``_BadRequest`` for what Go would refuse, ``ConnectionError`` at
        the end of the stream, ``asyncio.TimeoutError`` when the client stays silent."""
        while True:
            try:
                event = conn.next_event()
            except h11.RemoteProtocolError as e:
                raise _go_error(e, conn) from None
            if event is not h11.NEED_DATA:
                return event
            data = await asyncio.wait_for(reader.read(65536), timeout)
            conn.receive_data(data)
            if not data:
                raise ConnectionError("closed by the client")

    async def _next_event(self, conn: "h11.Connection", reader: asyncio.StreamReader, timeout: float):
        """The next request head, None when the client went away or stayed silent too long."""
        try:
            return await self._event(conn, reader, timeout)
        except (asyncio.TimeoutError, ConnectionError):
            return None

    async def _discard_body(self, conn: "h11.Connection", reader: asyncio.StreamReader) -> None:
        read = 0
        while True:
            event = await self._event(conn, reader, HEADER_TIMEOUT)
            if isinstance(event, h11.Data):
                read += len(event.data)
                if read > MAX_DISCARD_BODY:
                    raise _BadRequest(400, "400 Bad Request")
            elif isinstance(event, h11.EndOfMessage):
                return

    @staticmethod
    async def _write_error(writer: asyncio.StreamWriter, e: "_BadRequest") -> None:
        """Go's net/http answer to a request it cannot read: the text in the status line and as the body, no
        Content-Length, and the connection closed (server.go ``c.serve``)."""
        try:
            writer.write(f"HTTP/1.1 {e.message}\r\nContent-Type: {TEXT_TYPE}\r\nConnection: close\r\n\r\n"
                         f"{e.message}".encode("latin-1"))
            await writer.drain()
        except ConnectionError:
            pass

    async def _write(self, writer: asyncio.StreamWriter, version: str, r: _Response, keep_alive: bool,
                     head_only: bool) -> None:
        reason = REASONS.get(r.status, "")
        lines = [f"{version} {r.status} {reason}"]
        if r.cors:
            lines.append("Access-Control-Allow-Origin: *")
        lines.append(f"Content-Type: {r.content_type}")
        if r.status == 404:
            lines.append("X-Content-Type-Options: nosniff")
        lines.extend(f"{k}: {v}" for k, v in r.extra)
        from email.utils import formatdate  # imported when first needed, as h11

        lines.append(f"Date: {formatdate(usegmt=True)}")
        lines.append(f"Content-Length: {len(r.body)}")
        if version == "HTTP/1.1" and not keep_alive:
            lines.append("Connection: close")
        elif version == "HTTP/1.0" and keep_alive:
            lines.append("Connection: keep-alive")
        data = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        if not head_only:
            data += r.body
        try:
            writer.write(data)
            await writer.drain()
        except ConnectionError:
            pass

    # -- routing ----------------------------------------------------------------------------------------------

    async def _respond(self, target: str) -> _Response:
        try:
            split = urlsplit(target)
        except ValueError:
            return _text(400, "400 Bad Request")
        path = unquote(split.path)
        params: dict[str, str] = {}
        for k, v in parse_qsl(split.query, keep_blank_values=True):
            params.setdefault(k, v)  # Go's Query().Get: the first value
        if self.base_path:
            if path == self.base_path or path == self.base_path + "/":
                path = "/"
            elif path.startswith(self.base_path + "/"):
                path = path[len(self.base_path):]
            else:
                return _text(404, NOT_FOUND)
        try:
            return await self._route(path, params)
        except HTTPError as e:
            return _text(e.status, e.message)
        except ValueError as e:
            return _text(400, str(e))
        except Exception:
            log.exception(f"Monitoring endpoint {path} failed")
            return _text(500, "500 Internal Server Error")

    async def _route(self, path: str, params: dict[str, str]) -> _Response:
        p = self.provider
        if path == "/":
            return _Response(200, HTML_TYPE, self._index().encode())
        if path == "/healthz":
            status, doc = await _call(p.healthz, params)
            return _Response(status, JSON_TYPE, dumps(doc).encode(), cors=True)
        if path in REQUIRED:
            doc = await _call(getattr(p, REQUIRED[path]), params)
            return self._json(doc)
        if path in OPTIONAL:
            method = getattr(p, OPTIONAL[path], None)
            doc = await _call(method, params) if method is not None else await self._standalone(path)
            if doc is None:
                return _text(404, "No Raft nodes registered") if path == "/raftz" else _text(404, NOT_FOUND)
            return self._json(doc)
        if path == "/metrics" and hasattr(p, "metrics"):
            body = await _call(p.metrics)
            if isinstance(body, str):
                body = body.encode()
            return _Response(200, METRICS_TYPE, body)
        return _text(404, NOT_FOUND)

    def _json(self, doc: Any) -> _Response:
        return _Response(200, JSON_TYPE, dumps_indent(doc).encode(), cors=True)

    async def _identity(self) -> dict[str, Any]:
        ident = getattr(self.provider, "identity", None)
        if ident is not None:
            return dict(await _call(ident))
        varz = await _call(self.provider.varz, {})
        return {"server_id": varz.get("server_id", ""), "server_name": varz.get("server_name", ""),
                "now": varz.get("now", "")}

    async def _standalone(self, path: str) -> dict[str, Any] | None:
        """What a standalone nats-server answers for documents a single Skiff server has nothing to put in."""
        return standalone_doc(path, await self._identity())

    def _index(self) -> str:
        base = self.base_path
        links = "\n".join(f'    <a href="{base}/{name}">{name}</a>' for name in INDEX_PATHS)
        return (
            '<html lang="en">\n  <head>\n    <title>Skiff monitoring</title>\n  </head>\n  <body>\n'
            "    <h1>Skiff</h1>\n    <p>A NATS server with JetStream, in Python. Monitoring endpoints:</p>\n"
            f"{links}\n  </body>\n</html>\n"
        )


def standalone_doc(path: str, ident: dict[str, Any]) -> dict[str, Any] | None:
    """/routez, /gatewayz, /leafz, /accstatz, /ipqueuesz of a server without routes, gateways or leaf nodes (also
    what ``$SYS.REQ.SERVER.<id>.ROUTEZ``... answer, server/core/sysacc.py); None for /raftz (no Raft nodes)."""
    sid, now = ident.get("server_id", ""), ident.get("now") or _now()
    if path == "/routez":
        return {"server_id": sid, "server_name": ident.get("server_name", ""), "now": now, "num_routes": 0,
                "routes": []}
    if path == "/gatewayz":
        return {"server_id": sid, "now": now, "outbound_gateways": {}, "inbound_gateways": {}}
    if path == "/leafz":
        return {"server_id": sid, "now": now, "leafnodes": 0, "leafs": []}
    if path == "/accstatz":
        return {"server_id": sid, "now": now, "account_statz": []}
    if path == "/ipqueuesz":
        return {}
    return None


async def _call(fn: Callable[..., Any] | Callable[..., Awaitable[Any]], *args: Any) -> Any:
    """Call a provider method that may or may not take ``params`` and may or may not be async."""
    if args:
        try:
            sig = inspect.signature(fn)
            positional = [
                prm for prm in sig.parameters.values()
                if prm.kind in (prm.POSITIONAL_ONLY, prm.POSITIONAL_OR_KEYWORD, prm.VAR_POSITIONAL)
            ]
            if not positional:
                args = ()
        except (TypeError, ValueError):  # pragma: no cover - builtins without a signature
            pass
    result = fn(*args)
    if inspect.isawaitable(result):
        result = await result
    return result


def _now() -> str:
    import datetime

    return datetime.datetime.now(datetime.timezone.utc).isoformat().replace("+00:00", "Z")
