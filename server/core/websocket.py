"""WebSocket clients (nats-server server/websocket.go): the listener, the HTTP upgrade, and the adapter that runs a
normal :class:`ClientConnection` inside WebSocket frames.

Theory of operation
-------------------
``WebSocketListener`` listens on ``websocket { port }`` (TLS-first when the block has ``tls { }``: the socket is
HTTPS; TLS runs over the socket's own bytes with tls.py's ``TLSLayer``, so plain HTTP sent to it gets Go
net/http's "Client sent an HTTP request to an HTTPS server" and garbage a silent close).  Each socket gets a :class:`WSConnection` (an ``asyncio.Protocol``), which first reads one HTTP request with
``h11`` and answers it as nats-server's ``wsUpgrade`` does: the same checks in the same order, each failing with
the same status and Go ``http.Error`` body (405 for a method other than GET, 400 for a missing ``Upgrade`` /
``Connection`` / key / version 13, 403 for an origin that ``same_origin`` or ``allowed_origins`` refuses).  After a
refusal the socket stays open for another request (Go's keep-alive); a request Go's HTTP parser refuses gets Go's
``400 Bad Request`` and the socket closes.  Bytes sent after the request before the 101 answer close the socket
without an answer (nats-server: "client sent data before handshake is complete").

After ``101 Switching Protocols`` a :class:`WSClient` (a ClientConnection: the same parser, routing, auth,
permissions and accounts as on the TCP port) is given a :class:`_WSTransport` instead of the socket:
whatever it writes goes out as one binary frame (deflated when permessage-deflate was negotiated and the payload is
at least 64 bytes), and what it closes gets a close frame first, with nats-server's status for the close reason
(``wsEnqueueCloseMessage``).  Bytes from the socket go through ``protocol.websocket.FrameReader``: data frames in
any split (partial, coalesced, continuation frames) become one ``data_received`` per read; pings are answered with
pongs; a client's close is echoed and the connection closes as "Client Closed"; a frame nats-server refuses gets
close status 1002 with nats-server's words.  The TCP hot path is untouched: nothing here runs for TCP clients.

Authentication: ``websocket { authorization { user/password/token } }`` or ``no_auth_user`` replace the server's
single user, token and no_auth_user for WebSocket clients (nats-server ``wsConfigAuth`` authOverride; the users
of ``authorization { users }`` and of accounts still apply).  ``jwt_cookie``, ``user_cookie``, ``pass_cookie`` and
``token_cookie`` name cookies of the upgrade request that stand for CONNECT's ``jwt``, ``user``, ``pass`` and
``auth_token`` when CONNECT does not carry them (client.go processConnect).

Why not wsproto: its frame decoder enforces rules nats-server does not (UTF-8 in text frames, reserved close
codes with other texts) and has no unmasked mode for ``Nats-No-Masking``, and its handshake answers differ (426
for a bad version, other check order), so a client would see other answers than from nats-server.  The frame
codec follows websocket.go (protocol/websocket.py); ``h11`` (the sans-IO HTTP/1.1 parser wsproto itself builds
on) reads the upgrade request.
"""
from __future__ import annotations

import asyncio
import base64
import binascii
import copy
import email.utils
from http.cookies import CookieError, SimpleCookie
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import h11

from skiff.protocol import websocket as wsp

from .auth import Auth, AuthUser
from .tls import TLSError, TLSLayer
from .client import (AUTH_TIMEOUT, AUTH_VIOLATION, BAD_PROTOCOL_VERSION, CLIENT_CLOSED, MAX_ACCOUNT_CONNECTIONS,
                     MAX_CONNECTIONS, MAX_CONTROL_LINE, MAX_PAYLOAD, PARSE_ERROR, PROTOCOL_VIOLATION, SERVER_SHUTDOWN,
                     SLOW_CONSUMER, STALE_CONNECTION, TLS_HANDSHAKE_FAILURE, ClientConnection)

if TYPE_CHECKING:  # pragma: no cover
    from .server import Server

READ_ERROR = "Read Error"
# Go's http.Server default MaxHeaderBytes (1 MB) plus the 4096 bytes of slack it allows.
MAX_REQUEST_HEADER = (1 << 20) + 4096

# wsEnqueueCloseMessage: the close status for each close reason.
_CLOSE_STATUS = {
    CLIENT_CLOSED: wsp.NORMAL_CLOSURE,
    AUTH_TIMEOUT: wsp.POLICY_VIOLATION, AUTH_VIOLATION: wsp.POLICY_VIOLATION, SLOW_CONSUMER: wsp.POLICY_VIOLATION,
    MAX_ACCOUNT_CONNECTIONS: wsp.POLICY_VIOLATION, MAX_CONNECTIONS: wsp.POLICY_VIOLATION,
    MAX_CONTROL_LINE: wsp.POLICY_VIOLATION, "Maximum Subscriptions Exceeded": wsp.POLICY_VIOLATION,
    "Missing Account": wsp.POLICY_VIOLATION, "Authentication Expired": wsp.POLICY_VIOLATION,
    "Credentials Revoked": wsp.POLICY_VIOLATION,
    TLS_HANDSHAKE_FAILURE: wsp.TLS_HANDSHAKE,
    PARSE_ERROR: wsp.PROTOCOL_ERROR, PROTOCOL_VIOLATION: wsp.PROTOCOL_ERROR,
    BAD_PROTOCOL_VERSION: wsp.PROTOCOL_ERROR,
    MAX_PAYLOAD: wsp.MESSAGE_TOO_BIG,
    "Write Error": wsp.GOING_AWAY, READ_ERROR: wsp.GOING_AWAY, STALE_CONNECTION: wsp.GOING_AWAY,
    SERVER_SHUTDOWN: wsp.GOING_AWAY,
}

_STATUS_TEXT = {400: "Bad Request", 403: "Forbidden", 405: "Method Not Allowed"}


class HandshakeRefused(Exception):
    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status


def _go_host_port(tls: bool, hostport: str) -> tuple[str, str]:
    """wsGetHostAndPort: host (lower case) and port, the scheme's default port when there is none."""
    from skiff.server.conf.mapping import split_host_port

    host, port = split_host_port(hostport)
    if port is None:
        host, port = hostport, ("443" if tls else "80")
    return host.lower(), port


def _header_contains(headers: dict[str, list[str]], name: str, value: str) -> bool:
    """wsHeaderContains: a comma-separated token of any ``name`` header equals ``value`` (case-insensitive)."""
    for h in headers.get(name.lower(), ()):
        for t in h.split(","):
            if t.strip(" \t").lower() == value.lower():
                return True
    return False


class WebSocketListener:
    def __init__(self, server: "Server") -> None:
        self.server = server
        self.opts = server.options.websocket
        o = self.opts
        self.tls_context = None
        if o.tls is not None:
            from .tls import make_server_context

            self.tls_context = make_server_context(o.tls)
        self.tls = self.tls_context is not None
        # wsSetOriginOptions: allowed origins by host, each with its scheme and port
        self.allowed: dict[str, list[tuple[str, str]]] = {}
        for ao in o.allowed_origins:
            u = urlsplit(ao)
            h, p = _go_host_port(u.scheme == "https", u.netloc)
            self.allowed.setdefault(h, []).append((u.scheme, p))
        self.raw_headers = "".join(f"{k}: {v}\r\n" for k, v in o.headers.items())
        self.auth_override = bool(o.username or o.token or o.no_auth_user)
        self._auth: Auth | None = None
        self._auth_of: Any = None
        self._server: asyncio.base_events.Server | None = None
        self.port = 0

    async def start(self) -> None:
        o = self.opts
        loop = asyncio.get_running_loop()
        port = 0 if o.port == -1 else o.port
        self._server = await loop.create_server(lambda: WSConnection(self), host=o.host, port=port,
                                                reuse_address=True, backlog=4096)
        self.port = self._server.sockets[0].getsockname()[1]
        scheme = "wss" if self.tls else "ws"
        self.server.log.info(f"Listening for websocket clients on {scheme}://{o.host}:{self.port}")
        if not self.tls:
            self.server.log.warning("Websocket not configured with TLS. DO NOT USE IN PRODUCTION!")

    def close(self) -> None:
        if self._server is not None:
            self._server.close()

    async def wait_closed(self) -> None:
        if self._server is not None:
            try:
                await asyncio.wait_for(self._server.wait_closed(), 2)
            except (asyncio.TimeoutError, OSError):
                pass

    @property
    def auth(self) -> Auth:
        """The server's authentication with the block's overrides (nats-server processClientOrLeafAuthentication,
        case WS); derived again whenever the server's is replaced (configuration reload)."""
        base = self.server.auth
        if self._auth is None or self._auth_of is not base:
            o = self.opts
            auth = copy.copy(base)
            if self.auth_override:
                # validateWebsocketOptions: a username or token here means there are no users/nkeys, so the users
                # map holds at most the server's single user, which the override replaces; no_auth_user alone
                # keeps the users and names one of them.
                auth.token = o.token
                if o.username or o.token:
                    auth.users = {o.username: AuthUser(o.username, password=o.password)} if o.username else {}
                auth.no_auth_user = o.no_auth_user
            if o.auth_timeout:
                auth.timeout = o.auth_timeout
            self._auth, self._auth_of = auth, base
        return self._auth

    def info_base(self) -> dict:
        """The INFO of WebSocket clients (client.go generateClientInfoJSON): the listener's host and port, TLS
        required and available when it is wss, auth required when the block overrides auth."""
        info = dict(self.server._info_base)
        info["host"], info["port"] = self.opts.host, self.port
        info.pop("tls_required", None)
        info.pop("tls_available", None)
        if self.tls:
            info["tls_required"] = info["tls_available"] = True
        if self.auth.required:
            info["auth_required"] = True
        # In a cluster, WebSocket clients are told of the WebSocket URLs, not of the client ports.
        info.pop("connect_urls", None)
        cluster = self.server.cluster
        if cluster is not None:
            urls = cluster.ws_connect_urls()
            if urls:
                info["connect_urls"] = urls
        return info

    def varz(self) -> dict:
        """varz ``websocket`` (monitor.go WebsocketOptsVarz, empty fields left out)."""
        o = self.opts
        d: dict[str, Any] = {"host": o.host, "port": self.port}
        for k in ("advertise", "no_auth_user", "jwt_cookie"):
            if getattr(o, k):
                d[k] = getattr(o, k)
        if o.handshake_timeout:
            d["handshake_timeout"] = int(o.handshake_timeout * 1e9)
        if o.auth_timeout:
            d["auth_timeout"] = o.auth_timeout
        if o.no_tls:
            d["no_tls"] = True
        if o.same_origin:
            d["same_origin"] = True
        if o.allowed_origins:
            d["allowed_origins"] = list(o.allowed_origins)
        if o.compression:
            d["compression"] = True
        return d

    def check_origin(self, headers: dict[str, list[str]], host: str) -> None:
        """srvWebsocket.checkOrigin."""
        if not self.opts.same_origin and not self.allowed:
            return
        origin = (headers.get("origin") or headers.get("sec-websocket-origin") or [""])[0]
        if not origin:
            return  # no Origin: not a browser, accepted (RFC 6455 1.6)
        u = urlsplit(origin)
        if not u.scheme or not u.netloc:
            raise HandshakeRefused(403, f'parse "{origin}": invalid URI for request')
        oh, op = _go_host_port(u.scheme == "https", u.netloc)
        if self.opts.same_origin:
            rh, rp = _go_host_port(self.tls, host)
            if oh != rh or op != rp or u.scheme.lower() != ("https" if self.tls else "http"):
                raise HandshakeRefused(403, "not same origin")
        if self.allowed:
            if not any(u.scheme == s and op == p for s, p in self.allowed.get(oh, ())):
                raise HandshakeRefused(403, "not in the allowed list")


class _WSTransport:
    """What a WSClient sees as its transport: writes become binary frames, close sends a close frame first."""

    __slots__ = ("ws",)

    def __init__(self, ws: "WSConnection") -> None:
        self.ws = ws

    def write(self, data: bytes) -> None:
        ws = self.ws
        if ws.compress or ws.tls is not None:
            ws.write(wsp.frame(data, ws.compress))
        else:
            # The frame header and the output as two buffers of one write (uvloop: one writev), rather than the
            # output copied behind its header: a copy of every flush, 1.5% of a WebSocket pub/sub's instructions.
            ws.transport.writelines((wsp.binary_header(len(data)), data))

    def close(self) -> None:
        ws = self.ws
        if not ws.close_sent and not ws.transport.is_closing():
            reason = ws.client.close_reason if ws.client is not None else CLIENT_CLOSED
            ws.send_close(_CLOSE_STATUS.get(reason, wsp.INTERNAL_SRV_ERROR), reason)
        ws.close_socket()

    def abort(self) -> None:
        self.ws.transport.abort()

    def is_closing(self) -> bool:
        return self.ws.transport.is_closing()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self.ws.transport.get_extra_info(name, default)

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self.ws.transport.set_write_buffer_limits(high=high, low=low)

    def get_write_buffer_size(self) -> int:
        return self.ws.transport.get_write_buffer_size()

    def pause_reading(self) -> None:
        self.ws.transport.pause_reading()

    def resume_reading(self) -> None:
        self.ws.transport.resume_reading()


class _CookieAuth:
    """The listener's auth, with the upgrade request's cookies standing for missing CONNECT credentials."""

    def __init__(self, auth: Auth, cookies: dict[str, str]) -> None:
        self._auth = auth
        self._cookies = cookies

    def __getattr__(self, name: str) -> Any:
        return getattr(self._auth, name)

    def check(self, connect: dict, nonce: str = "", conn=None):
        c = dict(connect)
        for key, value in self._cookies.items():
            if not c.get(key):
                c[key] = value
        return self._auth.check(c, nonce, conn)


class WSClient(ClientConnection):
    """A client connection over WebSocket: connz type "websocket", its INFO and auth from the listener."""

    client_type = "websocket"

    def __init__(self, server: "Server", listener: WebSocketListener, cookies: dict[str, str]) -> None:
        self._ws_listener = listener
        self._ws_auth = _CookieAuth(listener.auth, cookies) if cookies else listener.auth
        super().__init__(server, "")

    @property
    def auth(self):  # type: ignore[override]
        return self._ws_auth

    @property
    def info_base(self) -> dict:  # type: ignore[override]
        return self._ws_listener.info_base()

    @property
    def ping_interval(self) -> float:  # type: ignore[override]
        return self._ws_listener.opts.ping_interval or self.server.options.ping_interval


class WSConnection(asyncio.Protocol):
    """One socket of the WebSocket listener: the HTTP upgrade, then frames around a WSClient."""

    def __init__(self, listener: WebSocketListener) -> None:
        self.listener = listener
        self.transport: asyncio.Transport | None = None
        self.client: WSClient | None = None
        self.reader: wsp.FrameReader | None = None
        self.compress = False
        self.close_sent = False
        self._h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_REQUEST_HEADER)
        self._timer: asyncio.TimerHandle | None = None
        # wss: TLS over the socket's own bytes (tls.py), so that plain HTTP sent to it gets Go's answer
        self.tls: TLSLayer | None = TLSLayer(listener.tls_context) if listener.tls_context is not None else None

    # ------------------------------------------------------------------ asyncio.Protocol
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self.transport = transport
        ht = self.listener.opts.handshake_timeout
        if ht > 0:
            # Go http.Server ReadTimeout: the request must be read within the handshake timeout.
            self._timer = asyncio.get_running_loop().call_later(ht, self._handshake_timeout)

    def _handshake_timeout(self) -> None:
        self._timer = None
        if self.client is None and self.transport is not None:
            self.close_socket()

    def write(self, data: bytes) -> None:
        tls = self.tls
        self.transport.write(tls.wrap(data) if tls is not None else data)

    def close_socket(self) -> None:
        transport = self.transport
        if self.tls is not None and not transport.is_closing():
            out = self.tls.shutdown()  # close_notify after the last output, as Go's tls.Conn.Close
            if out:
                transport.write(out)
        transport.close()

    def data_received(self, data: bytes) -> None:
        tls = self.tls
        if tls is not None:
            if not tls.started and data[:1] != b"\x16":
                # Go net/http (server.go serve): a first record that looks like HTTP gets this plain answer.
                if data[:5] in (b"GET /", b"HEAD ", b"POST ", b"PUT /", b"OPTIO"):
                    self.transport.write(b"HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS "
                                         b"server.\n")
                self.transport.close()
                return
            try:
                data, _ = tls.receive(data)
            except TLSError as e:
                self.server_log("websocket TLS handshake error", error=str(e))
                alert = tls.take_out()
                if alert:
                    self.transport.write(alert)
                self.transport.close()
                return
            out = tls.take_out()
            if out:
                self.transport.write(out)
            if tls.peer_closed:
                if data:
                    self._received(data)
                if self.client is not None and not self.client.closed:
                    self.client.close(CLIENT_CLOSED)
                elif not self.transport.is_closing():
                    self.close_socket()
                return
            if not data:
                return
        self._received(data)

    def _received(self, data: bytes) -> None:
        if self.reader is None:
            self._handshake(data)
            return
        client = self.client
        if client.closed:
            return
        try:
            events = self.reader.feed(data)
        except wsp.WSProtocolError as e:
            self.server_log("websocket protocol error", error=str(e))
            self.send_close(wsp.PROTOCOL_ERROR, str(e))
            client.close(READ_ERROR)
            return
        except wsp.WSMaxPayload:
            client.close(MAX_PAYLOAD)
            return
        if len(events) == 1 and events[0][0] == wsp.DATA:  # the common case: one data frame or part of one
            client.data_received(events[0][1])
            return
        chunks: list[bytes] = []
        for ev in events:
            kind = ev[0]
            if kind == wsp.DATA:
                chunks.append(ev[1])
            elif kind == wsp.PING:
                self.write(wsp.control(wsp.OP_PONG, ev[1]))
            else:  # CLOSE: what came before it is handled, the close is echoed, the client closes
                if chunks:
                    client.data_received(b"".join(chunks))
                    chunks = []
                status, body = ev[1], ev[2]
                if not client.closed:
                    self.close_sent = True
                    payload = b"" if status == wsp.NO_STATUS_RECEIVED else wsp.close_payload(status, body)
                    client.flush()
                    self.write(wsp.control(wsp.OP_CLOSE, payload))
                    client.close(CLIENT_CLOSED)
                return
        if chunks:
            client.data_received(chunks[0] if len(chunks) == 1 else b"".join(chunks))

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self.client is not None:
            self.client.connection_lost(exc)

    def pause_writing(self) -> None:
        if self.client is not None:
            self.client.pause_writing()

    def resume_writing(self) -> None:
        if self.client is not None:
            self.client.resume_writing()

    # ------------------------------------------------------------------ frames
    def send_close(self, status: int, body: str) -> None:
        if not self.close_sent:
            self.close_sent = True
            self.write(wsp.control(wsp.OP_CLOSE, wsp.close_payload(status, body)))

    def server_log(self, event: str, **kw) -> None:
        self.listener.server.log_debug(event, **kw)

    # ------------------------------------------------------------------ HTTP upgrade
    def _handshake(self, data: bytes) -> None:
        conn = self._h11
        try:
            conn.receive_data(data)
            while True:
                ev = conn.next_event()
                if ev is h11.NEED_DATA:
                    return
                if isinstance(ev, h11.Request):
                    request = ev
                elif isinstance(ev, h11.EndOfMessage) or ev is h11.PAUSED:
                    break
                elif isinstance(ev, h11.ConnectionClosed):
                    self.close_socket()
                    return
        except h11.RemoteProtocolError as e:
            self._go_parse_error(e)
            return
        trailing = conn.trailing_data[0]
        try:
            result = self._check(request)
        except HandshakeRefused as e:
            self.server_log("websocket handshake error", status=e.status, reason=str(e))
            self._http_error(e.status)
            # Go keeps the connection for another request (keep-alive) unless the client asked to close.
            if request.http_version == b"1.0" or _header_contains(_headers(request), "connection", "close"):
                self.close_socket()
                return
            self._h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_REQUEST_HEADER)
            if trailing:
                self._handshake(trailing)
            return
        if trailing:
            # nats-server: "client sent data before handshake is complete"; the socket is closed, no answer.
            self.server_log("websocket handshake error", reason="client sent data before handshake is complete")
            self.close_socket()
            return
        self._upgrade(request, *result)

    def _check(self, request: h11.Request) -> tuple[str, bool, bool]:
        """wsUpgrade's checks, in its order: (key, compress, no masking), or HandshakeRefused."""
        headers = _headers(request)
        if request.method != b"GET":
            raise HandshakeRefused(405, "request method must be GET")
        host = (headers.get("host") or [""])[0]
        if not host:
            raise HandshakeRefused(400, "'Host' missing in request")
        if not _header_contains(headers, "upgrade", "websocket"):
            raise HandshakeRefused(400, "invalid value for header 'Upgrade'")
        if not _header_contains(headers, "connection", "Upgrade"):
            raise HandshakeRefused(400, "invalid value for header 'Connection'")
        key = (headers.get("sec-websocket-key") or [""])[0]
        if not key:
            raise HandshakeRefused(400, "key missing")
        try:
            ok = len(base64.b64decode(key, validate=True)) == 16
        except (binascii.Error, ValueError):
            ok = False
        if not ok:
            raise HandshakeRefused(400, "invalid websocket key")
        if not _header_contains(headers, "sec-websocket-version", "13"):
            raise HandshakeRefused(400, "invalid version")
        self.listener.check_origin(headers, host)
        compress = self.listener.opts.compression and _pmc_offered(headers)
        no_masking = (headers.get("nats-no-masking") or [""])[0] == "true"
        return key, compress, no_masking

    def _upgrade(self, request: h11.Request, key: str, compress: bool, no_masking: bool) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        lines = ["HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                 f"Sec-WebSocket-Accept: {wsp.accept_key(key)}\r\n"]
        if compress:
            lines.append("Sec-WebSocket-Extensions: permessage-deflate; server_no_context_takeover; "
                         "client_no_context_takeover\r\n")
        if no_masking:
            lines.append("Nats-No-Masking: true\r\n")
        lines.append(self.listener.raw_headers)
        lines.append("\r\n")
        self.write("".join(lines).encode("latin-1", "replace"))
        self.compress = compress
        srv = self.listener.server
        self.reader = wsp.FrameReader(mask=not no_masking, compress=compress, max_payload=srv.options.max_payload)
        client = WSClient(srv, self.listener, self._cookies(request))
        self.client = client
        client.connection_made(_WSTransport(self))  # type: ignore[arg-type]
        if self.tls is not None:
            client.tls_cipher = self.tls.cipher()

    def _cookies(self, request: h11.Request) -> dict[str, str]:
        o = self.listener.opts
        names = {o.jwt_cookie: "jwt", o.user_cookie: "user", o.pass_cookie: "pass", o.token_cookie: "auth_token"}
        names.pop("", None)
        if not names:
            return {}
        out: dict[str, str] = {}
        for raw in _headers(request).get("cookie", ()):
            jar = SimpleCookie()
            try:
                jar.load(raw)
            except CookieError:
                continue
            for name, morsel in jar.items():
                if name in names:
                    out[names[name]] = morsel.value
        return out

    def _http_error(self, status: int) -> None:
        """Go http.Error after wsReturnHTTPError set Sec-Websocket-Version: 13."""
        text = _STATUS_TEXT.get(status, "Bad Request")
        body = text + "\n"
        date = email.utils.formatdate(usegmt=True)
        self.write(
            (f"HTTP/1.1 {status} {text}\r\nContent-Type: text/plain; charset=utf-8\r\nSec-Websocket-Version: 13\r\n"
             f"X-Content-Type-Options: nosniff\r\nDate: {date}\r\nContent-Length: {len(body)}\r\n\r\n{body}").encode())

    def _go_parse_error(self, e: h11.RemoteProtocolError) -> None:
        """A request Go's HTTP server cannot read: its plain-text answer, then the socket closes."""
        if e.error_status_hint == 431:
            text = "431 Request Header Fields Too Large"
        elif "Host" in str(e):
            text = "400 Bad Request: missing required Host header"
        else:
            text = "400 Bad Request"
        self.server_log("websocket bad request", error=str(e))
        self.write(f"HTTP/1.1 {text}\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close"
                             f"\r\n\r\n{text}".encode())
        self.close_socket()


def _headers(request: h11.Request) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for name, value in request.headers:
        out.setdefault(name.decode("latin-1").lower(), []).append(value.decode("latin-1"))
    return out


def _pmc_offered(headers: dict[str, list[str]]) -> bool:
    """wsPMCExtensionSupport(checkPMCOnly): the client offered permessage-deflate."""
    for ext_list in headers.get("sec-websocket-extensions", ()):
        for ext in ext_list.split(","):
            for p in ext.strip(" \t").split(";"):
                if p.strip(" \t").lower() == "permessage-deflate":
                    return True
    return False

