"""The server: its life cycle, listeners, the client table and subscriptions (nats-server server.go).

Messages are routed by ``Fanout`` (fanout.py), a part of ``Server``: server-side handlers (the JetStream API, acks,
flow control) are reached through the same subject routing as clients.

``Server`` is also the embedding API::

    async with Server(port=0, jetstream=True, store_dir=tmp) as srv:
        nc = await nats.connect(srv.client_url)

It runs in the caller's event loop; ``clock=ManualClock()`` lets a test drive every timer.
"""
from __future__ import annotations

import asyncio
import random
import ssl
from typing import Any, Callable

from skiff.protocol import encoder
from skiff.protocol.subjects import subject_matches

from ..clock import Clock, LoopClock
from ..ids import server_id
from ..log import get_logger
from ..version import API_LEVEL, GO_FIELD, PROTO, VERSION
from .auth import Auth
from .client import SERVER_SHUTDOWN, ClientConnection
from .fanout import Fanout
from .accounts import Accounts
from .subscription import Subscription


class Server(Fanout):
    # skiff.testing.recorder.Recorder while one is armed: connections check this one attribute (client.py).
    recorder = None

    def __init__(self, options: Any = None, *, clock: Clock | None = None, **overrides: Any) -> None:
        from ..options import ServerOptions

        if options is None:
            overrides.setdefault("port", 0)
            overrides.setdefault("host", "127.0.0.1")
            options = ServerOptions(**overrides)
        elif overrides:
            options = options.model_copy(update=overrides)
        self.options = options
        self.clock: Clock = clock or LoopClock()
        self.server_id = server_id()
        self.server_name = options.server_name or self.server_id
        self.log = get_logger("skiff.server")
        # Accounts first: a configuration nats-server refuses (an import of an undefined account...) raises
        # AccountError here, before anything listens.
        self.accounts = Accounts(self, options)
        # The system account ($SYS unless system_account names another; none with no_system_account) and its
        # $SYS.REQ services and events (core/sysacc.py, core/events.py).
        from .sysacc import SystemAccount

        self.system = SystemAccount.configure(self)
        # JetStream, the server's internal publishes and internal subscriptions without an account live in one
        # account: $G, or the one account whose `jetstream` is enabled (see jetstream_account()).
        self.js_account = self.jetstream_account()
        self.sublist = self.js_account.sublist
        self.clients: dict[int, ClientConnection] = {}
        self.closed_clients: list[dict] = []
        self.auth = Auth(options, self.accounts)
        self.tls_context: ssl.SSLContext | None = None
        self._cid = 0
        self._pending: list[ClientConnection] = []
        self._flush_scheduled = False
        self._listener: asyncio.base_events.Server | None = None
        self.monitor = None
        self.jetstream = None  # the engine of js_account (the first JetStream account)
        self.jetstreams: dict[str, Any] = {}  # every account's engine, by account name
        self._other_engines: list = []
        self.lame_duck = False
        self.running = False
        self.start_ns = self.clock.time_ns()
        self.port = 0
        self.http_port = 0
        # Totals of closed connections; live connections keep their own counters (see stats()).
        self.closed_in_msgs = self.closed_out_msgs = self.closed_in_bytes = self.closed_out_bytes = 0
        self.slow_consumers = 0
        self.total_connections = 0
        # Push consumers follow interest in their deliver subject: per Sublist (account), subject -> callbacks.
        self._interest_watch: dict[Any, dict[str, list[Callable[[str, bool], None]]]] = {}
        self._sl_names: dict[int, str] = {}  # id(Sublist) -> account name (account_name)
        self._internal_sid = 0
        self._stopped: asyncio.Event | None = None  # created in start(), inside the running loop
        self._info_base: dict = {}
        self.tls_mode = ""
        self.websocket = None  # the WebSocket listener, when websocket { port } is set
        # The route listener and routes, when cluster { listen } is set (core/cluster.py); created before any
        # subscription so that it counts every one of them.
        self.cluster = None
        # Leaf node connections, hub and spoke sides (core/leafnode.py), likewise before any subscription.
        self.leafnodes = None
        lopts = getattr(options, "leafnodes", None)
        if lopts is not None and (lopts.port or lopts.remotes):
            from .leafnode import LeafNodes

            from ..conf import ConfigError

            if options.jetstream:
                from ..conf.leafnodes import JETSTREAM_REFUSED

                raise ConfigError(JETSTREAM_REFUSED)

            self.leafnodes = LeafNodes(self, lopts)
        copts = getattr(options, "cluster", None)
        if copts is not None and copts.port:
            from .cluster import Cluster

            if options.jetstream:
                from ..conf import ConfigError
                from ..conf.cluster import JETSTREAM_REFUSED

                raise ConfigError(JETSTREAM_REFUSED)

            self.cluster = Cluster(self, copts)

    # ------------------------------------------------------------------ life cycle
    async def start(self) -> "Server":
        opts = self.options
        loop = asyncio.get_running_loop()
        self._stopped = asyncio.Event()
        if isinstance(self.clock, LoopClock):
            self.clock._loop = loop
        self.start_ns = self.clock.time_ns()
        tls = getattr(opts, "tls", None)
        if tls is not None and getattr(tls, "cert_file", None):
            from .tls import make_server_context

            self.tls_context = make_server_context(tls)
        self.accounts.start()
        if self.system is not None:
            self.system.start()
        if opts.jetstream:
            from ..jetstream import JetStream
            from .account_server import AccountServer

            self.jetstream = JetStream(self)
            self.jetstreams = {self.js_account.name: self.jetstream}
            for acc in self.accounts.jetstream_accounts:
                if acc is not self.js_account:
                    view = AccountServer(self, acc)
                    view.jetstream = self.jetstreams[acc.name] = JetStream(view)
            self._other_engines = [js for js in self.jetstreams.values() if js is not self.jetstream]
            for js in self.jetstreams.values():
                js.start()
        # Monitoring first: harnesses poll /varz to learn that the server is ready (issue 2).
        if opts.http_port:
            from ..monitor.http import MonitorServer
            from ..monitor.provider import MonitorProvider

            self.monitor = MonitorServer(opts.http_host or opts.host, opts.http_port, MonitorProvider(self))
            await self.monitor.start()
            self.http_port = self.monitor.port
        tls_mode = ""
        if self.tls_context is not None:
            if getattr(tls, "handshake_first", False):
                tls_mode = "first"
            elif getattr(opts, "allow_non_tls", False):
                tls_mode = "optional"
            else:
                tls_mode = "upgrade"
        self.tls_mode = tls_mode
        port = 0 if opts.port == -1 else opts.port
        from ..startup import ipv4_listen_socket

        sock = ipv4_listen_socket(opts.host, port)
        if sock is not None:  # no address lookup (and no lookup threads) for an IPv4 literal
            self._listener = await loop.create_server(lambda: ClientConnection(self, tls_mode), sock=sock,
                                                      backlog=4096)
        else:
            self._listener = await loop.create_server(
                lambda: ClientConnection(self, tls_mode), host=opts.host, port=port, reuse_address=True,
                backlog=4096)
        sock = self._listener.sockets[0]
        self.port = sock.getsockname()[1]
        self._build_info()
        if opts.websocket is not None and opts.websocket.port:
            from .websocket import WebSocketListener  # WebSocket clients (core/websocket.py)

            self.websocket = WebSocketListener(self)
            await self.websocket.start()
        # Routes and leaf connections after every client listener: their INFO names the client and WebSocket URLs.
        if self.cluster is not None:
            await self.cluster.start()
            self._build_info()  # connect_urls and the cluster name
        if self.leafnodes is not None:
            await self.leafnodes.start()
        self.running = True
        self.log_debug("listening", host=opts.host, port=self.port, version=VERSION, server_id=self.server_id)
        return self

    async def __aenter__(self) -> "Server":
        return await self.start()

    async def __aexit__(self, *exc) -> None:
        await self.shutdown()

    async def shutdown(self) -> None:
        if self.system is not None:
            self.system.stop()  # no events from a server going away (nats-server shutdownEventing)
        if not self.running:
            return
        self.running = False
        if self.spinner is not None:
            self.spinner.stop()
        self.log.info("Initiating Shutdown...")  # nats-server Shutdown's words
        if self._listener is not None:
            self._listener.close()
        if self.websocket is not None:
            self.websocket.close()
        if self.cluster is not None:  # routes first: the others need no RS- for every client leaving
            await self.cluster.stop()
        if self.leafnodes is not None:
            await self.leafnodes.stop()
        for c in list(self.clients.values()):
            c.close(SERVER_SHUTDOWN)
        self.flush_pending()
        for js in self.jetstreams.values():
            await js.stop()
        if self.monitor is not None:
            await self.monitor.stop()
        if self.websocket is not None:
            await self.websocket.wait_closed()
        if self._listener is not None:
            try:
                await asyncio.wait_for(self._listener.wait_closed(), 2)
            except (asyncio.TimeoutError, OSError) as e:  # a listener that will not close must not stop shutdown
                self.log_debug("listener close", error=repr(e))
        self.log.info("Server Exiting..")
        if self._stopped is not None:
            self._stopped.set()

    async def wait_stopped(self) -> None:
        await self._stopped.wait()

    async def lame_duck_mode(self) -> None:
        """SIGUSR2: stop accepting, tell clients (INFO ldm:true), then close them over the lame-duck duration."""
        if self.lame_duck or not self.running:
            return
        self.lame_duck = True
        self.log.info("entering lame duck mode, stop accepting new clients")
        if self.system is not None:
            self.system.events.lame_duck()  # $SYS.SERVER.<id>.LAMEDUCK: the cluster stops counting our connections
        if self._listener is not None:
            self._listener.close()
        if self.websocket is not None:
            self.websocket.close()
        info = dict(self._info_base)
        info["ldm"] = True
        for c in list(self.clients.values()):
            if c.info_base is not None:  # a WebSocket client: its listener's host and port (generateClientInfoJSON)
                c.send(encoder.info({**c.info_base, "ldm": True}))
                continue
            c.send(encoder.info(info))
        self.flush_pending()
        opts = self.options
        await asyncio.sleep(opts.lame_duck_grace_period)
        clients = list(self.clients.values())
        if clients:
            spread = max(opts.lame_duck_duration - opts.lame_duck_grace_period, 0) / len(clients)
            for c in clients:
                c.close(SERVER_SHUTDOWN)
                self.flush_pending()
                if spread:
                    await asyncio.sleep(min(spread, 1.0))
        await self.shutdown()

    @property
    def client_url(self) -> str:
        host = self.options.host
        if host in ("0.0.0.0", "::", ""):
            host = "127.0.0.1"
        return f"nats://{host}:{self.port}"

    # ------------------------------------------------------------------ INFO
    def _build_info(self) -> None:
        opts = self.options
        host, port = opts.host, self.port
        if opts.client_advertise:
            # nats-server setInfoHostPort / parseHostPort: the advertised host[:port] replaces the listen address
            # in INFO; a missing, 0 or -1 port is the listen port.
            from skiff.server.conf.mapping import split_host_port

            host, sport = split_host_port(opts.client_advertise)
            if sport is None:
                sport = str(self.port)
            port = int(sport.strip())  # ValueError: nats-server refuses to start too ("Error setting server INFO")
            host = host.strip()
            if port in (0, -1):
                port = self.port
        info: dict[str, Any] = {
            "server_id": self.server_id,
            "server_name": self.server_name,
            "version": VERSION,
            "proto": PROTO,
            "go": GO_FIELD,
            "host": host,
            "port": port,
            "headers": True,
            "max_payload": opts.max_payload,
        }
        if self.auth.required:
            info["auth_required"] = True
        if self.tls_context is not None:
            if self.tls_mode == "optional":
                info["tls_available"] = True
            else:
                info["tls_required"] = True
            if getattr(opts.tls, "verify", False):
                info["tls_verify"] = True
        if opts.jetstream:
            info["jetstream"] = True
        if self.cluster is not None:
            info["cluster"] = self.cluster.name
            urls = self.cluster.connect_urls()
            if urls:
                info["connect_urls"] = urls
        self._info_base = info

    def cluster_changed(self) -> None:
        """The cluster's name or its client URLs changed: new INFO for clients that can take an asynchronous one
        (route.go sendAsyncInfoToClients: CONNECT protocol >= 1 and the first PONG sent)."""
        if not self.running:
            return
        self._build_info()
        for c in list(self.clients.values()):
            if c.protocol >= 1 and c.first_pong_sent and not c.closed:
                c.send(self.info_for(c))  # a WebSocket client's carries the WebSocket URLs (core/websocket.py)

    def info_for(self, conn: ClientConnection, connect_info: bool = False) -> bytes:
        base = conn.info_base
        info = dict(self._info_base if base is None else base)
        info["client_id"] = conn.cid
        info["client_ip"] = conn.host
        info["api_lvl"] = API_LEVEL
        if self.lame_duck:
            info["ldm"] = True
        if conn.nonce:
            info["nonce"] = conn.nonce
        if connect_info:
            info["max_payload"] = conn.parser.max_payload  # the account's limit may be lower (applyAccountLimits)
            info["connect_info"] = True
            info["remote_account"] = conn.account.name
        return encoder.info(info)

    def first_ping_delay(self, interval: float | None = None) -> float:
        # nats-server sends its first PING ~2s after the connection (+ up to 20% jitter), then every ping_interval.
        if interval is None:
            interval = self.options.ping_interval
        return min(2.0, interval) * (1 + random.random() * 0.2)

    def options_tls_timeout(self) -> float:
        tls = getattr(self.options, "tls", None)
        return float(getattr(tls, "timeout", None) or 2.0)

    def jetstream_account(self):
        """The account of the first JetStream engine, the one that is this Server itself: $G without an
        ``accounts {}`` block, else the first account with ``jetstream`` enabled (or $G, with JetStream then
        answering 10039 everywhere, when none is).  Every further JetStream account gets an engine of its own
        behind an AccountServer (account_server.py), as nats-server runs one JetStream per account."""
        enabled = self.accounts.jetstream_accounts
        return enabled[0] if enabled else self.accounts.gacc

    def leaf_count(self, acc: Any) -> int:
        """The account's leaf connections here (0 without a leafnodes block)."""
        return 0 if self.leafnodes is None else self.leafnodes.count(acc)

    def next_cid(self) -> int:
        self._cid += 1
        self.total_connections += 1
        return self._cid

    # ------------------------------------------------------------------ subscriptions
    def add_subscription(self, sub: Subscription) -> None:
        sl = sub.conn.sublist if sub.conn is not None else sub.sublist
        sl.insert(sub)
        if not sub.local and (self.cluster is not None or self.leafnodes is not None):
            self._interest_changed(sl, sub, 1)
        if self._interest_watch:
            self._notify_interest(sl, sub.subject)

    def remove_subscription(self, sub: Subscription) -> None:
        if sub.closed:
            return
        sub.closed = True
        sl = sub.conn.sublist if sub.conn is not None else sub.sublist
        sl.remove(sub)
        if not sub.local and (self.cluster is not None or self.leafnodes is not None):
            self._interest_changed(sl, sub, -1)
        if self._interest_watch:
            self._notify_interest(sl, sub.subject)

    def _interest_changed(self, sl: Any, sub: Subscription, delta: int) -> None:
        """Tell the routes (interest of this server's clients and leaf connections) and the leaf connections
        (everybody's interest but their own) that a subscription came or went."""
        acc = self.account_name(sl)
        if acc is None:
            return
        if self.cluster is not None and (sub.route is None or not sub.route.is_route):
            self.cluster.local_sub(acc, sub.subject, sub.queue, delta)
        if self.leafnodes is not None:
            self.leafnodes.sub_changed(acc, sub, delta)

    def account_name(self, sl: Any) -> str | None:
        """The name of the account whose Sublist ``sl`` is."""
        names = self._sl_names
        name = names.get(id(sl))
        if name is None:
            for acc in self.accounts.by_name.values():
                names[id(acc.sublist)] = acc.name
            name = names.get(id(sl))
        return name

    def _notify_interest(self, sl: Any, pattern: str) -> None:
        watch = self._interest_watch.get(sl)
        if not watch:
            return
        if "*" not in pattern and ">" not in pattern:
            # A literal subscription can only match the watch on that very subject: a dict lookup, not a walk over
            # every watched deliver subject per SUB/UNSUB (0.4 ms each with 1,000 push consumers).
            cbs = watch.get(pattern)
            items = [(pattern, cbs)] if cbs else []
        else:
            items = [(subject, cbs) for subject, cbs in watch.items() if subject_matches(pattern, subject)
                     or pattern == subject]
        for subject, cbs in items:
            has = sl.has_interest(subject)
            for cb in list(cbs):
                cb(subject, has)

    def watch_interest(self, subject: str, cb: Callable[[str, bool], None], sublist: Any = None) -> Callable[[], None]:
        """Call ``cb(subject, has_interest)`` whenever a subscription that matches ``subject`` comes or goes in
        ``sublist``'s account (the JetStream account's by default; push consumers follow their deliver subject
        this way).  Returns a function that stops watching."""
        sl = sublist if sublist is not None else self.sublist
        self._interest_watch.setdefault(sl, {}).setdefault(subject, []).append(cb)

        def stop() -> None:
            watched = self._interest_watch.get(sl, {})
            cbs = watched.get(subject)
            if cbs and cb in cbs:
                cbs.remove(cb)
                if not cbs:
                    del watched[subject]
                    if not watched:
                        del self._interest_watch[sl]

        return stop

    def subscribe_internal(self, subject: str, callback: Callable, queue: str = "",
                           server_msgs: bool = False, account: Any = None, msg_subject: bool = False,
                           local: bool = False) -> Subscription:
        """An internal subscription: ``callback(sub, subject, reply, hdr_len, data, origin)`` runs in-line when a
        message is routed to ``subject``.  ``origin`` is the publishing ClientConnection, or None for a message the
        server published, which reaches the callback only with ``server_msgs`` (see Subscription).  It lives in
        ``account``'s subject space, by default the JetStream account's.  A ``local`` one is not announced to the
        other servers of a cluster: an import's forwarder, which every server has of its own."""
        self._internal_sid += 1
        sub = Subscription(None, subject, queue, f"_int_{self._internal_sid}", callback, server_msgs)
        sub.sublist = account.sublist if account is not None else self.sublist
        sub.msg_subject = msg_subject
        sub.local = local
        self.add_subscription(sub)
        return sub

    def unsubscribe_internal(self, sub: Subscription) -> None:
        self.remove_subscription(sub)

    def stats(self) -> dict:
        """Message totals (nats-server varz in/out msgs and bytes), summed when asked rather than per message."""
        live = self.clients.values()
        return {
            "in_msgs": self.closed_in_msgs + sum(c.in_msgs for c in live),
            "out_msgs": self.closed_out_msgs + sum(c.out_msgs for c in live),
            "in_bytes": self.closed_in_bytes + sum(c.in_bytes for c in live),
            "out_bytes": self.closed_out_bytes + sum(c.out_bytes for c in live),
        }

    def client_closed(self, conn: ClientConnection) -> None:
        if self.clients.pop(conn.cid, None) is not None:
            self.closed_in_msgs += conn.in_msgs
            self.closed_out_msgs += conn.out_msgs
            self.closed_in_bytes += conn.in_bytes
            self.closed_out_bytes += conn.out_bytes
            self.closed_clients.append(
                {
                    "cid": conn.cid,
                    "type": conn.client_type,
                    "reason": conn.close_reason,
                    "name": conn.name,
                    "ip": conn.host,
                    "port": conn.port,
                    "start": conn.start_ns,
                    "stop": self.clock.time_ns(),
                    "in_msgs": conn.in_msgs,
                    "out_msgs": conn.out_msgs,
                    "in_bytes": conn.in_bytes,
                    "out_bytes": conn.out_bytes,
                    "lang": conn.lang,
                    "version": conn.version,
                    "user": conn.user,
                    "account": conn.account.name,
                }
            )
            acc = conn.account  # the account's message totals outlive its connections (accstatz, CONNS events)
            t = getattr(acc, "closed_totals", None) or (0, 0, 0, 0)
            acc.closed_totals = (t[0] + conn.in_msgs, t[1] + conn.in_bytes, t[2] + conn.out_msgs,
                                 t[3] + conn.out_bytes)
            del self.closed_clients[:-100]
            self.log_debug("client closed", cid=conn.cid, reason=conn.close_reason)

    # ------------------------------------------------------------------ logging helpers
    def log_debug(self, event: str, **kw) -> None:
        if self.options.debug or self.options.trace:
            self.log.debug(event, **kw)

    def log_error(self, event: str, **kw) -> None:
        self.log.error(event, **kw)

    def log_warning(self, event: str, **kw) -> None:
        self.log.warning(event, **kw)
