"""One client connection: an ``asyncio.Protocol`` around the sans-IO parser (server/client.go's client).

Theory of operation
-------------------
``data_received`` feeds the parser and handles every complete operation in order.  Messages routed to other
connections are appended to their output buffers; when the whole read has been handled the server writes each
touched connection once (nats-server's pending-client flush), so a burst of small publishes becomes one write per
subscriber.

Life cycle: INFO is sent on connect (after the TLS handshake when ``handshake_first``, or followed by a TLS upgrade
when TLS is required).  With auth configured the first operation must be a CONNECT that authenticates, within
``auth_timeout``.  A ping timer sends PING every ``ping_interval`` unless the client was active, and closes the
connection with ``-ERR 'Stale Connection'`` when ``ping_max`` PINGs are unanswered.  A connection whose unsent output
exceeds ``max_pending`` is a slow consumer and is closed (no -ERR, as nats-server 2.11+).
"""
from __future__ import annotations

import asyncio
import time
from functools import partial
from typing import TYPE_CHECKING

from skiff.protocol import encoder
from skiff.protocol.jsapi import gojson as go_json
from skiff.protocol.parser import Connect, Err, Parser, Ping, Pong, ProtocolError, Pub, Sub, Unsub
from skiff.protocol.subjects import is_valid_client_pub_subject, is_valid_client_sub_subject

from .subscription import Subscription
from .permissions import Permissions
from .tls import TLSError, TLSLayer
from .trace import trace_in, trace_out

if TYPE_CHECKING:  # pragma: no cover
    from .server import Server

# Why a connection closed, with nats-server's names (closed_connections reasons in /connz).
CLIENT_CLOSED = "Client Closed"
PROTOCOL_VIOLATION = "Protocol Violation"
AUTH_VIOLATION = "Authentication Failure"
TLS_HANDSHAKE_FAILURE = "TLS Handshake Failure"
BAD_PROTOCOL_VERSION = "Bad Client Protocol Version"
NO_RESPONDERS_HEADERS = "No Responders Requires Headers"
AUTH_TIMEOUT = "Authentication Timeout"
SLOW_CONSUMER = "Slow Consumer (Pending Bytes)"
STALE_CONNECTION = "Stale Connection"
MAX_PAYLOAD = "Maximum Message Payload Exceeded"
MAX_CONTROL_LINE = "Maximum Control Line Exceeded"
MAX_CONNECTIONS = "Maximum Connections Exceeded"
MAX_ACCOUNT_CONNECTIONS = "Maximum Account Connections Exceeded"
SERVER_SHUTDOWN = "Server Shutdown"
PARSE_ERROR = "Parse Error"

# Fairness between connections (see _work_backlog): reads bigger than READ_SLICE are parsed in slices of that size,
# for at most TURN_BUDGET seconds of one loop turn.
READ_SLICE = 8192
TURN_BUDGET = 0.0005
# Output to a client that does not read is held in our own list once the transport has WRITE_HIGH bytes unsent
# (see pause_writing): a slow consumer's backlog (up to max_pending, 64 MB) is then ours to free a slice per loop
# turn when it goes (RELEASE_SLICE bytes), instead of the transport freeing it in one call: 200 such clients
# closing together freed 2.3 GB in one loop turn and stalled every other client 100-250 ms.
WRITE_HIGH = 1024 * 1024
RELEASE_SLICE = 8 * 1024 * 1024



class ClientConnection(asyncio.Protocol):
    is_route = False  # core/route.py RouteConnection says True
    _fault_read_stall = False  # skiff.testing.faults stall(reads=True): reading stays paused
    client_type = "nats"  # connz "type"; "websocket" for core/websocket.py's WSClient
    info_base: dict | None = None  # INFO fields of another listener (WebSocket); None: the client port's

    @property
    def auth(self):
        """Who may connect: the server's authentication (WebSocket clients: the listener's, with its overrides)."""
        return self.server.auth

    @property
    def ping_interval(self) -> float:
        """Seconds between PINGs (WebSocket clients: websocket { ping_interval } when set)."""
        return self.server.options.ping_interval

    def __init__(self, server: "Server", tls_mode: str = "") -> None:
        opts = server.options
        self.server = server
        self.cid = server.next_cid()
        self.parser = Parser(opts.max_control_line, opts.max_payload)
        self.transport: asyncio.Transport | None = None
        self.subs: dict[str, Subscription] = {}
        self.out: list[bytes] = []
        self._backlog: list[bytes] | None = None  # the rest of a big read, parsed over the next loop turns
        self._backlog_pos = 0
        self._read_paused = False
        self._held: list[bytes] | None = None  # output waiting while the transport is above WRITE_HIGH
        self._held_bytes = 0
        self.closed = False
        self.close_reason = ""
        # CONNECT options: nats-server's defaults apply until (or when no) CONNECT arrives.
        self.verbose = True
        self.pedantic = True
        self.echo = True
        self.headers = False
        self.no_responders = False
        self.protocol = 0
        self.name = ""
        self.lang = ""
        self.version = ""
        self.user = ""
        self.perms: Permissions | None = None
        self.deny_delivery = False  # subscribe deny list to apply on delivery
        # The account the client publishes and subscribes in ($G until CONNECT says otherwise; core/accounts.py).
        self.account = server.accounts.gacc
        self.sublist = self.account.sublist
        self.registered = False  # counted in account.num_conns (account limits)
        self.max_subs = opts.max_subscriptions if opts.max_subscriptions > 0 else -1  # -1: no limit
        self.nonce = ""  # nkey auth: what the client signs (INFO nonce)
        self.connect_opts: dict = {}  # every CONNECT merged (Go decodes each into the same clientOpts)
        if self.auth.nonce_required:
            from .nkey import new_nonce

            self.nonce = new_nonce()
        self.replies: dict[str, list] | None = None  # allow_responses: reply subject -> [received at, sent]
        self.connected = False  # a CONNECT was accepted
        self.authorized = not self.auth.required
        # TLS (see tls.py): "" plain, "first" handshake before INFO, "upgrade" after INFO, "optional" either.
        self.tls_mode = tls_mode
        self.tls: TLSLayer | None = None
        self._tls_timer = None
        self.tls_cipher = ""
        # Stats (in_msgs / in_bytes are counted by the parser)
        self.out_msgs = self.out_bytes = 0
        self.start_ns = server.clock.time_ns()
        self.last_activity_ns = self.start_ns
        self.last_in = server.clock.monotonic()
        self.host = ""
        self.port = 0
        self.rtt_ns = 0
        self.pings_out = 0
        self.first_pong_sent = False
        self._ping_timer = None
        self._auth_timer = None
        self._ping_sent_at = 0.0
        self.on_pub = self._pub
        self._update_pub_path()

    @property
    def in_msgs(self) -> int:
        return self.parser.msgs

    @property
    def in_bytes(self) -> int:
        return self.parser.bytes

    # ------------------------------------------------------------------ asyncio.Protocol
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self.transport = transport
        # pause_writing fires when the transport holds WRITE_HIGH unsent bytes: later output waits in _held, and
        # a client whose unsent output passes max_pending is a slow consumer (flush).
        transport.set_write_buffer_limits(high=min(WRITE_HIGH, self.server.options.max_pending))
        peer = transport.get_extra_info("peername") or ("", 0)
        self.host, self.port = peer[0], peer[1]
        srv = self.server
        mc = srv.options.max_connections
        if srv.lame_duck or (mc > 0 and len(srv.clients) >= mc):
            # nats-server still sends INFO first, then the error.
            self.send(srv.info_for(self))
            self.send(encoder.err("maximum connections exceeded"))
            self.close(MAX_CONNECTIONS)
            return
        srv.clients[self.cid] = self
        if self.auth.required:
            self._auth_timer = srv.clock.call_later(self.auth.timeout, self._auth_timeout)
        self._ping_timer = srv.clock.call_later(srv.first_ping_delay(self.ping_interval), self._ping_tick)
        if self.tls_mode:
            self.tls = TLSLayer(srv.tls_context)
            self._tls_timer = srv.clock.call_later(srv.options_tls_timeout(), self._tls_timeout)
        if self.tls_mode != "first":
            self.send(srv.info_for(self))
            self.flush()
        srv.log_debug("Client connection created", cid=self.cid, addr=f"{self.host}:{self.port}")

    def _tls_timeout(self) -> None:
        self._tls_timer = None
        if self.tls is not None and not self.tls.established and not self.closed:
            self.server.log_debug("TLS handshake timeout", cid=self.cid)
            self.close(TLS_HANDSHAKE_FAILURE)

    def _cancel_tls_timer(self) -> None:
        if self._tls_timer is not None:
            self._tls_timer.cancel()
            self._tls_timer = None

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        tls = self.tls
        if tls is None:
            return self._process(data)
        if not tls.started and data[:1] != b"\x16":
            # Not a TLS record where a ClientHello is due: plain text is fine only when TLS is optional.
            if self.tls_mode == "optional":
                self.tls = None
                self._cancel_tls_timer()
                return self._process(data)
            self.server.log_debug("plain text on a TLS connection", cid=self.cid)
            self.close(TLS_HANDSHAKE_FAILURE)
            return
        try:
            plain, handshake_done = tls.receive(data)
        except TLSError as e:
            self.server.log_debug("TLS error", cid=self.cid, error=str(e))
            alert = tls.take_out()  # OpenSSL's alert for the failure: Go sends its own before closing too
            if alert:
                self.transport.write(alert)
            self.close(TLS_HANDSHAKE_FAILURE)
            return
        out = tls.take_out()
        if out:
            self.transport.write(out)
        if handshake_done:
            self._cancel_tls_timer()
            self.tls_cipher = tls.cipher()
            if self.tls_mode == "first":
                self.send(self.server.info_for(self))
                self.server.flush_pending()
        if plain:
            self._process(plain)
        if tls.peer_closed and not self.closed:
            # close_notify from the client: answer it and close (see tls.py), as nats-server's tls.Conn does.
            self.close(CLIENT_CLOSED)

    def _process(self, data: bytes) -> None:
        if self._backlog is not None:  # still working through an earlier big read: keep the order
            self._backlog.append(data)
            return
        self.last_in = self.server.clock.monotonic()
        if len(data) > READ_SLICE:
            self._backlog = [data]
            self._backlog_pos = 0
            self._work_backlog()
            return
        srv = self.server
        srv.begin_read()  # the output of this read is written by the flush_pending below
        try:
            self.parser.parse(data, self)  # calls on_pub / on_op in order, stops once closed
        finally:
            srv.flush_pending()  # one write per touched connection for this whole read; clears _flush_scheduled

    def _work_backlog(self) -> None:
        """Parse a big read in slices, at most TURN_BUDGET seconds per loop turn, with reading paused until it is
        done: uvloop hands over up to 32 reads of 256 KB in one turn, and one connection's SUB/UNSUB flood or
        API requests must not hold every other client for that long.  nats-server gets
        the same fairness from one goroutine per connection."""
        backlog = self._backlog
        if backlog is None:
            return
        clock = time.perf_counter
        start = clock()
        deadline = start + TURN_BUDGET
        parse = self.parser.parse
        size = READ_SLICE
        while backlog and not self.closed:
            data, pos = backlog[0], self._backlog_pos
            end = pos + size
            if end < len(data):
                self._backlog_pos = end
                parse(data[pos:end], self)
            else:
                del backlog[0]
                self._backlog_pos = 0
                parse(data[pos:] if pos else data, self)
            now = clock()
            if now >= deadline:
                break
            if now - start < TURN_BUDGET / 4:
                size *= 2  # cheap input (plain PUBs): fewer, bigger slices
        self.server.flush_pending()
        transport = self.transport
        if self.closed or transport is None:
            self._backlog = None
            return
        if not self._read_paused:
            # Even when the read is done, pause: it lets the other connections have this turn before we read more.
            self._read_paused = True
            transport.pause_reading()
        if backlog:
            asyncio.get_running_loop().call_soon(self._work_backlog)
        else:
            self._backlog = None
            asyncio.get_running_loop().call_soon(self._resume_reading)

    def _resume_reading(self) -> None:
        if self._read_paused and self._backlog is None and not self._fault_read_stall:
            self._read_paused = False
            if not self.closed and self.transport is not None:
                self.transport.resume_reading()

    def _update_pub_path(self) -> None:
        """Pick what the parser calls for each PUB: straight to routing for a plain client (the hot path), or
        through the checks (auth, headers, pedantic subject, permissions, verbose +OK, trace, an account's trace
        destination: its messages' traceparent headers are looked at)."""
        if self.authorized and self.headers and not (
            self.verbose or self.pedantic or self.perms is not None or self.server.options.trace
            or self.server.recorder is not None  # skiff.testing.recorder sees PUBs through _pub
            or self.account.trace_dest
        ):
            self.on_pub = partial(self.server.route, self)
        else:
            self.on_pub = self._pub

    def on_op(self, op) -> None:
        srv = self.server
        if srv.options.trace or srv.recorder is not None:
            self._trace(op)
        if not self.authorized and type(op) is not Connect:
            # With auth required the first operation must be CONNECT (nats-server parser authErr).
            self._auth_violation()
            return
        self._op(op)

    def _op(self, op) -> None:
        t = type(op)
        if t is Sub:
            self._sub(op)
        elif t is Unsub:
            self._unsub(op)
        elif t is Ping:
            self._ping()
        elif t is Pong:
            self.pings_out = 0
            if self._ping_sent_at:
                self.rtt_ns = int((self.server.clock.monotonic() - self._ping_sent_at) * 1e9)
                self._ping_sent_at = 0.0
        elif t is Connect:
            self._connect(op)
        elif t is ProtocolError:
            self._protocol_error(op)
        elif t is Err:
            self.server.log_error("client error", cid=self.cid, text=op.text.decode(errors="replace"))
            self.close(PARSE_ERROR)
        # INFO and +OK from a client are ignored, as nats-server does.

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed:
            self.close_reason = self.close_reason or CLIENT_CLOSED
        self._teardown()

    def pause_writing(self) -> None:
        """The transport holds WRITE_HIGH unsent bytes: hold further output here until it drains."""
        if self._held is None:
            self._held = []
        self._check_pending()

    def resume_writing(self) -> None:
        """The client read enough: hand the held output over, until the transport is full again."""
        held = self._held
        if held is None or getattr(held, "pinned", False):  # a test's stall or latency keeps it (skiff.testing.faults)
            return
        self._held = None
        self._held_bytes = 0
        transport = self.transport
        if self.closed or transport is None:
            return _release(held)
        for i, data in enumerate(held):
            transport.write(data)
            if self._held is not None:  # full again (pause_writing ran inside write): the rest waits
                rest = held[i + 1:]
                self._held[:0] = rest
                self._held_bytes += sum(map(len, rest))
                return

    def pending_bytes(self) -> int:
        """Output not yet taken by the client's socket (connz ``pending_bytes``)."""
        t = self.transport
        return self._held_bytes + (t.get_write_buffer_size() if t is not None else 0)

    def _check_pending(self) -> None:
        # A subscriber whose unsent output passes max_pending is a slow consumer: nats-server closes it rather
        # than let its pending bytes grow.
        if self.closed or self.pending_bytes() <= self.server.options.max_pending:
            return
        self.server.slow_consumers += 1
        self.server.log_warning("slow consumer detected", cid=self.cid, pending=self.pending_bytes())
        # Abort: a plain close would wait for the unread output to drain, which a slow consumer never does.
        self.close(SLOW_CONSUMER, abort=True)

    # ------------------------------------------------------------------ output
    def send(self, data: bytes) -> None:
        """Queue bytes for this client; written at the end of the current read (or on the next loop turn)."""
        if not self.out:
            self.server.mark_pending(self)
        self.out.append(data)

    def flush(self) -> None:
        out = self.out
        if not out or self.transport is None:
            return
        data = out[0] if len(out) == 1 else b"".join(out)
        out.clear()
        if self.closed and self.transport.is_closing():
            return
        srv = self.server
        if srv.options.trace:
            trace_out(self, data)  # -V: "->> [MSG foo 1 5]", "->> [OK]", ... (server/core/trace.py)
        if srv.recorder is not None:  # skiff.testing.recorder, armed by a test (None: off, this check only)
            srv.recorder.client_received(self, data)
        tls = self.tls
        if tls is not None and tls.established:
            data = tls.wrap(data)
        held = self._held
        if held is not None:  # the client is behind: keep it (pause_writing)
            held.append(data)
            self._held_bytes += len(data)
            self._check_pending()
            return
        self.transport.write(data)

    # ------------------------------------------------------------------ operations
    def _connect(self, op: Connect) -> None:
        srv = self.server
        try:
            opts = go_json.loads(op.raw)  # Go nests 10000 deep; never a RecursionError
            if not isinstance(opts, dict):
                raise ValueError("CONNECT is not an object")
        except ValueError:
            # nats-server: invalid CONNECT JSON is a protocol violation; the connection is closed.
            srv.log_error("invalid CONNECT", cid=self.cid)
            self.close(PROTOCOL_VIOLATION)
            return
        if not _connect_types_ok(opts):
            # Go's json.Unmarshal into clientOpts fails on a wrongly typed field: closed, no -ERR.
            srv.log_error("invalid CONNECT field types", cid=self.cid)
            self.close(PROTOCOL_VIOLATION)
            return
        # A CONNECT is decoded over the current options (Go json.Unmarshal into the existing struct): fields it
        # does not carry keep their value, so a second CONNECT without "verbose" does not turn +OK back on.
        # The credentials of an earlier CONNECT hold too (a second CONNECT authenticates again with them).
        merged = dict(self.connect_opts)
        merged.update({"verbose": self.verbose, "pedantic": self.pedantic, "echo": self.echo,
                       "headers": self.headers, "no_responders": self.no_responders, "protocol": self.protocol,
                       "name": self.name, "lang": self.lang, "version": self.version})
        merged.update({k: v for k, v in opts.items() if v is not None})
        self.connect_opts = merged
        self.verbose = bool(merged.get("verbose"))
        self.pedantic = bool(merged.get("pedantic"))
        self.echo = merged.get("echo", True) is not False
        self.headers = merged.get("headers") is True
        self.no_responders = merged.get("no_responders") is True
        self.name = str(merged.get("name") or "")
        self.lang = str(merged.get("lang") or "")
        self.version = str(merged.get("version") or "")
        proto = merged.get("protocol", 0)
        self.protocol = proto if isinstance(proto, int) else 0
        if self._auth_timer is not None:
            self._auth_timer.cancel()
            self._auth_timer = None
        if self.connected:
            self._reset_for_connect()
        first = not self.authorized
        if first:
            found = self.auth.check(merged, self.nonce, self)
            if found is None:
                self._auth_violation()
                return
            self.user = found.name
            self.authorized = True
            self.account = srv.accounts.get(found.account) or srv.accounts.gacc
            self.sublist = self.account.sublist
            if not self._register(self.account):
                return
            self.perms = perms = found.perms
            self.deny_delivery = bool(perms and perms.sub_deny)
            self.replies = {} if perms is not None and perms.tracks_responses else None
        if self.protocol not in (0, 1):
            self.send(encoder.err("invalid client protocol"))
            self.close(BAD_PROTOCOL_VERSION)
            return
        if self.no_responders and not self.headers:
            self.send(encoder.err("no responders requires headers support"))
            self.close(NO_RESPONDERS_HEADERS)
            return
        self.connected = True
        self._update_pub_path()
        if self.verbose:
            self.send(encoder.OK)
        if first and srv.system is not None:
            srv.system.events.client_connect(self)  # $SYS.ACCOUNT.<acc>.CONNECT (core/events.py)

    def _reset_for_connect(self) -> None:
        """A CONNECT after the first (nats-server processConnect, !firstConnect): clearAccountSubs drops every
        subscription with its sid and puts the client back in the global account, then the client is authenticated
        again with the merged options, so it may land in another account with other permissions."""
        srv = self.server
        for sub in list(self.subs.values()):
            srv.remove_subscription(sub)
        self.subs.clear()
        if self.registered:
            self.registered = False
            self.account.num_conns -= 1
        self.account = srv.accounts.gacc
        self.sublist = self.account.sublist
        if self.auth.required:
            self.authorized = False

    def _register(self, acc) -> bool:
        """Join ``acc`` under its limits (nats-server registerWithAccount / applyAccountLimits): a full account
        refuses the connection; its payload and subscription limits lower the server's for this client."""
        # accounts.go MaxTotalConnectionsReached counts Account.clients, which holds the account's leaf connections
        # too (links filling the limit refuse a client), and the clients other servers of the cluster report.
        if acc.max_total_connections_reached(self.server.leaf_count(acc)):
            self.server.log_error("maximum account active connections exceeded", cid=self.cid)
            self.send(encoder.err("maximum account active connections exceeded"))
            self.close(MAX_ACCOUNT_CONNECTIONS)
            return False
        acc.num_conns += 1
        self.registered = True
        # client.go applyAccountLimits / minLimit: any limit but -1 lowers the client's; one below -1 refuses every
        # PUB (``size > -3``) and every SUB (``count >= -5``, which is what 0 does for the SUB check).
        mpay = acc.limit("max_payload")
        if mpay != -1 and mpay < self.parser.max_payload:
            self.parser.max_payload = mpay
        msubs = acc.limit("max_subscriptions")
        if msubs < -1:
            msubs = 0
        if msubs >= 0 and (self.max_subs < 0 or msubs < self.max_subs):
            self.max_subs = msubs
        return True

    def _auth_violation(self) -> None:
        self.server.log_error("authorization violation", cid=self.cid)
        self.send(encoder.err("Authorization Violation"))
        self.close(AUTH_VIOLATION)

    def _auth_timeout(self) -> None:
        self._auth_timer = None
        if not self.authorized and not self.closed:
            self.send(encoder.err("Authentication Timeout"))
            self.close(AUTH_TIMEOUT)
            self.server.flush_pending()

    def on_traced_pub(self, subject: str, reply: str, hdr_len: int, data: bytes) -> None:
        """An HPUB whose header block asks for a trace (the parser tells it apart: protocol/parser.py): every check
        of :meth:`_pub`, then delivery by core/msgtrace.py."""
        self._pub(subject, reply, hdr_len, data, traced=True)

    def _pub(self, subject: str, reply: str, hdr_len: int, data: bytes, traced: bool = False) -> None:
        """A PUB/HPUB with every check; the parser has already counted it."""
        srv = self.server
        if hdr_len and not traced and self.account.trace_dest:
            from .msgtrace import has_parent  # a traceparent may start a trace in this account

            traced = has_parent(data, hdr_len)
        if srv.options.trace or srv.recorder is not None:
            self._trace(Pub(subject, reply, hdr_len, data))
        if not self.authorized:
            return self._auth_violation()
        if hdr_len and not self.headers:
            # HPUB without headers negotiated: nats-server closes without an -ERR.
            self.close(PROTOCOL_VIOLATION)
            return
        if self.pedantic and not is_valid_client_pub_subject(subject):
            # nats-server sends the error and still routes the message.
            self.send(encoder.err("Invalid Publish Subject"))
        perms = self.perms
        if perms is not None and not perms.can_publish(subject) and not (
                self.replies is not None
                and perms.response_allowed(self.replies, subject, self.server.clock.monotonic())):
            if traced:
                from .msgtrace_delivery import publish_denied  # the trace gets the violation as its ingress error

                if publish_denied(srv, self, subject, hdr_len, data):
                    return
            self.send(encoder.err(f'Permissions Violation for Publish to "{subject}"'))
            return
        if self.verbose:
            self.send(encoder.OK)
        if traced:
            from .msgtrace_delivery import route_traced

            if route_traced(srv, self, subject, reply, hdr_len, data) is not None:
                return
        self.server.route(self, subject, reply, hdr_len, data)

    def _sub(self, op: Sub) -> None:
        if not self.authorized:
            return self._auth_violation()
        if not is_valid_client_sub_subject(op.subject) or (op.queue and not _valid_queue(op.queue)):
            self.send(encoder.err("Invalid Subject"))
            return
        if self.perms is not None and not self.perms.can_subscribe(op.subject, op.queue):
            q = f' using queue "{op.queue}"' if op.queue else ""
            self.send(encoder.err(f'Permissions Violation for Subscription to "{op.subject}"{q}'))
            return
        limit = self.max_subs
        if limit >= 0 and len(self.subs) >= limit:
            self.send(encoder.err("maximum subscriptions exceeded"))
            return
        if op.sid in self.subs:
            # nats-server ignores a SUB that reuses a live sid.
            if self.verbose:
                self.send(encoder.OK)
            return
        sub = Subscription(self, op.subject, op.queue, op.sid)
        self.subs[op.sid] = sub
        self.server.add_subscription(sub)
        if self.verbose:
            self.send(encoder.OK)

    def _unsub(self, op: Unsub) -> None:
        if not self.authorized:
            return self._auth_violation()
        sub = self.subs.get(op.sid)
        if sub is not None:
            if op.max_msgs and op.max_msgs > sub.delivered:
                sub.max_msgs = op.max_msgs
            else:
                self.remove_sub(sub)
        if self.verbose:
            self.send(encoder.OK)

    def remove_sub(self, sub: Subscription) -> None:
        if self.subs.get(sub.sid) is sub:
            del self.subs[sub.sid]
        self.server.remove_subscription(sub)

    def _ping(self) -> None:
        self.send(encoder.PONG)
        self.last_in = self.server.clock.monotonic()
        if self.connected and not self.first_pong_sent:
            self.first_pong_sent = True
            if self.protocol >= 1:
                # The first PING of a protocol-1 client gets a second INFO with connect_info (processPing).
                self.send(self.server.info_for(self, connect_info=True))

    def _protocol_error(self, op: ProtocolError) -> None:
        if op.err:
            self.send(encoder.err(op.err))
        reason = {
            "maximum control line exceeded": MAX_CONTROL_LINE,
            "Maximum Payload Violation": MAX_PAYLOAD,
        }.get(op.err, PROTOCOL_VIOLATION)  # readLoop: any parser error closes as a protocol violation
        self.server.log_error("protocol error", cid=self.cid, error=op.err or op.detail)
        self.close(reason)

    def _trace(self, op) -> None:
        # -V: nats-server's "<<- [PUB foo 5]" lines (server/core/trace.py); and skiff.testing.recorder when armed.
        if self.server.options.trace:
            trace_in(self, op)
        if self.server.recorder is not None:
            self.server.recorder.client_sent(self, op)

    # ------------------------------------------------------------------ timers
    def _ping_tick(self) -> None:
        self._ping_timer = None
        if self.closed:
            return
        srv = self.server
        interval = self.ping_interval
        now = srv.clock.monotonic()
        if self.pings_out + 1 > srv.options.ping_max:
            self.send(encoder.err("Stale Connection"))
            self.close(STALE_CONNECTION)
            srv.flush_pending()
            return
        # nats-server skips its PING when the client was active within the interval.
        if self.first_pong_sent and now - self.last_in < interval:
            pass
        else:
            self.pings_out += 1
            self._ping_sent_at = now
            self.send(encoder.PING)
            srv.flush_pending()
        self._ping_timer = srv.clock.call_later(interval, self._ping_tick)

    # ------------------------------------------------------------------ closing
    def close(self, reason: str = CLIENT_CLOSED, abort: bool = False) -> None:
        """Flush what is queued (e.g. the -ERR) and close; state is torn down at once."""
        if self.closed:
            return
        self.closed = True
        self.close_reason = reason
        if self.transport is not None:
            if abort:
                self.out.clear()
                self.transport.abort()
                if self._held is not None:
                    _release(self._held)
                    self._held, self._held_bytes = None, 0
            else:
                self.flush()
                if self._held is not None:  # what the client has not taken yet goes first (close flushes)
                    held, self._held, self._held_bytes = self._held, None, 0
                    for data in held:
                        self.transport.write(data)
                if self.tls is not None and not self.transport.is_closing():
                    out = self.tls.shutdown()  # close_notify after the last output (tls.py)
                    if out:
                        self.transport.write(out)
                self.transport.close()
        self._teardown()

    def _teardown(self) -> None:
        self.closed = True
        for t in (self._ping_timer, self._auth_timer, self._tls_timer):
            if t is not None:
                t.cancel()
        self._ping_timer = self._auth_timer = self._tls_timer = None
        if self.subs:
            subs = list(self.subs.values())
            self.subs.clear()
            _remove_subs(self.server, subs)
        if self.registered:
            self.registered = False
            self.account.num_conns -= 1
            sysacc = self.server.system
            if sysacc is not None and self.connected:
                sysacc.events.client_disconnect(self)  # $SYS.ACCOUNT.<acc>.DISCONNECT (core/events.py)
        self.server.client_closed(self)
        # on_pub is a bound method or a partial holding this connection: drop it, so that a closed connection is
        # freed by reference counting alone instead of waiting for the cyclic collector.
        self.on_pub = _closed_pub
        self._backlog = None
        if self._held is not None:
            _release(self._held)
            self._held, self._held_bytes = None, 0


def _remove_subs(server: "Server", subs: list[Subscription], start: int = 0) -> None:
    """Take a closed connection's subscriptions out of the subject index, at most TURN_BUDGET seconds per loop
    turn: a client with 100,000 subscriptions held every other client for 250 ms when it closed (nats-server:
    35 ms, from its own goroutine).  Until its subscription is gone a closed connection gets nothing: route()
    skips closed connections, and a queue group passes over them."""
    deadline = time.perf_counter() + TURN_BUDGET
    remove = server.remove_subscription
    n = len(subs)
    i = start
    while i < n:
        end = min(i + 256, n)
        for sub in subs[i:end]:
            remove(sub)
        i = end
        if i < n and time.perf_counter() >= deadline:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # closed outside the loop (embedding code): finish here
                continue
            loop.call_soon(_remove_subs, server, subs, i)
            return


def _closed_pub(subject: str, reply: str, hdr_len: int, data: bytes) -> None:
    """on_pub of a closed connection (the parser stops at close; nothing is routed after it)."""


_BOOL_FIELDS = ("verbose", "pedantic", "tls_required", "echo", "headers", "no_responders", "new_account")
_STR_FIELDS = ("auth_token", "user", "pass", "name", "lang", "version", "sig", "jwt", "nkey", "account")


def _connect_types_ok(opts: dict) -> bool:
    for k in _BOOL_FIELDS:
        v = opts.get(k)
        if v is not None and not isinstance(v, bool):
            return False
    for k in _STR_FIELDS:
        v = opts.get(k)
        if v is not None and not isinstance(v, str):
            return False
    p = opts.get("protocol")
    return p is None or (isinstance(p, int) and not isinstance(p, bool))




def _valid_queue(q: str) -> bool:
    return bool(q) and not any(c in q for c in " \t\r\n")


_dropped: list[list[bytes]] = []  # backlogs of closed clients, freed by _free_dropped


def _release(chunks: list[bytes]) -> None:
    """Free a dropped backlog a slice per loop turn (see WRITE_HIGH): freeing is the cost (64 MB take several
    milliseconds), and one queue for all clients bounds a turn's share however many close in that turn."""
    if not chunks:
        return
    _dropped.append(chunks)
    if len(_dropped) == 1:
        try:
            asyncio.get_running_loop().call_soon(_free_dropped)
        except RuntimeError:  # no loop any more (the server is gone): free it now
            _dropped.clear()


def _free_dropped() -> None:
    freed = 0
    while _dropped and freed < RELEASE_SLICE:
        chunks = _dropped[-1]
        while chunks and freed < RELEASE_SLICE:
            freed += len(chunks.pop())
        if not chunks:
            _dropped.pop()
    if _dropped:
        try:
            asyncio.get_running_loop().call_soon(_free_dropped)
        except RuntimeError:
            _dropped.clear()
