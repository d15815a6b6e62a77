"""The cluster: the route listener, the routes this server dials, gossip and interest (nats-server route.go, server.go).

* **Listening and dialing.**  ``cluster { listen }`` (or ``--cluster``) opens the route port; every URL of
  ``routes`` (``--routes``) is dialed, again every second until it answers (route.go connectToRoute:
  DEFAULT_ROUTE_CONNECT 1s; ``connect_retries`` bounds the attempts), and again after the route closes.
* **Gossip.**  When a route is registered, its INFO (with the ``ip`` the others can reach it at) goes to every other
  route (forwardNewRouteInfoToKnownServers); a server that gets an INFO naming a server it has no route to dials it:
  an *implicit* route, so that a server told of one seed learns the whole mesh.
* **Clients.**  Client INFO carries the cluster's name and ``connect_urls``: this server's client address and those
  of the routed servers (unless ``no_advertise``); clients that can take it (CONNECT protocol >= 1, first PONG sent)
  get an asynchronous INFO whenever that list changes (sendAsyncInfoToClients).
* **Interest.**  Every local subscription (clients' and the server's own, such as the ``$SYS`` services) is counted
  per account, subject and queue group; the first plain subscription of a subject sends ``RS+ <acc> <subject>`` to
  every route and the last one ``RS-``; a queue group sends ``RS+`` with its member count (its weight) at every
  change.  So a message crosses a route only when somebody on the other side listens.
* **Reload.**  A SIGHUP that changes ``pool_size`` or ``accounts`` moves accounts between the pool and dedicated
  routes as nats-server does (reload.go reloadClusterPoolAndAccounts; a remote's such move is followed too,
  ``route_acc_add_reqid``); the other settings are refused on a reload (``reload_error``).
* **Cluster names.**  A configured name must match the remote's (``-ERR 'Rejecting connection, cluster name ...'``);
  an unnamed cluster gets a random name and takes a configured or greater remote name (processRouteConnect).

JetStream in a cluster is nats-server's RAFT-replicated JetStream, which Skiff does not implement: a cluster with
JetStream is refused at start-up (docs/clustering.md).
"""
from __future__ import annotations

import asyncio
import json
import secrets
import socket
import ssl
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from skiff.protocol import encoder

from ..ids import nuid
from ..version import GO_FIELD, VERSION
from .link import ACCEPT, NOT_SUPPORTED, S2_AUTO, LinkSet
from .route import CLUSTER_NAME_CONFLICT, MISSING_ACCOUNT, ROUTE_REMOVED, RouteConnection

if TYPE_CHECKING:  # pragma: no cover
    from .server import Server

#: nats-server const.go DEFAULT_ROUTE_CONNECT / DEFAULT_ROUTE_RECONNECT / DEFAULT_ROUTE_DIAL.
CONNECT_INTERVAL = 1.0
RECONNECT_DELAY = 1.0
DIAL_TIMEOUT = 1.0
#: const.go DEFAULT_ROUTE_POOL_SIZE, what pool_size: 0 stands for
DEFAULT_POOL_SIZE = 3
#: route proto version nats-server 2.15 announces on routes (RouteProtoV2 + message tracing: 3)
ROUTE_PROTO = 3


class ClusterError(Exception):
    """A cluster configuration nats-server or Skiff refuses at start-up."""


def _dynamic_name() -> str:
    # nats-server uses a random NUID when no name is configured.
    return nuid()


class Cluster(LinkSet):
    def __init__(self, server: "Server", options: Any) -> None:
        super().__init__(server, options)
        if options.name and (" " in options.name or "\n" in options.name):
            raise ClusterError("cluster name cannot contain spaces")
        self.dynamic = not options.name
        self.name = options.name or _dynamic_name()
        # remote server id -> its pool of routes (a list of the pool's size, None for a free slot; one route
        # for a server without pooling); dedicated routes are in acc_routes: account -> remote server id -> route
        self.routes: dict[str, list[RouteConnection | None]] = {}
        self.acc_routes: dict[str, dict[str, RouteConnection]] = {}
        # pool_size as nats-server reads it: 0 (unset) is its default, 3; -1: no pooling
        ps = getattr(options, "pool_size", 0)
        self.pool_size = DEFAULT_POOL_SIZE if ps == 0 else ps
        self.pooled = self.pool_size >= 1
        self.compression = getattr(options, "compression", ACCEPT) or ACCEPT  # conf/cluster.py normalized it
        self.routes_pool_size = max(self.pool_size, 1)  # server.go initRouteStructures
        self.pinned = self._pinned(options, self.pool_size)
        for acc in self.pinned:
            self.acc_routes[acc] = {}
        # Accounts a remote moved to dedicated routes by a configuration reload (route.go processRouteInfo,
        # accTransitioningToDedicatedRoute): their interest coming on a pooled route is ignored.
        self.transitioning: set[str] = set()
        self._acc_req: tuple[str, asyncio.Queue | None] = ("", None)  # a reload's route_acc_add_reqid, answers
        self.remote_urls: dict[str, list[str]] = {}  # remote server id -> its client connect URLs
        self.remote_ws_urls: dict[str, list[str]] = {}  # remote server id -> its WebSocket URLs
        self.interest: dict[tuple[str, str, str], int] = {}  # (account, subject, queue) -> local subscriptions
        # URL -> the task dialing it.  The entry goes as soon as the connection is made (dialed()), not when the
        # task ends: a route refused at once (a cluster name being settled) is closed, and dialed again, before
        # the dialing task has even resumed.
        self._dialing: dict[tuple[str, str], asyncio.Task] = {}  # (URL, dedicated account) -> its dialing task
        self.own_urls: list[str] = []
        self._tls_server: ssl.SSLContext | None = None  # cluster { tls }: both ends of every route
        self._tls_client: ssl.SSLContext | None = None

    def _pinned(self, options: Any, pool_size: int) -> list[str]:
        """The accounts with dedicated routes: ``accounts`` and the system account (opts.go setBaselineOptions),
        none without pooling."""
        if pool_size < 1:
            return []
        pinned = list(dict.fromkeys(getattr(options, "accounts", None) or []))
        sys_acc = self.server.accounts.system.name if self.server.accounts.system is not None else ""
        if sys_acc and sys_acc not in pinned:
            pinned.append(sys_acc)
        return pinned

    # ------------------------------------------------------------------ life cycle
    async def start(self) -> None:
        opts = self.options
        loop = asyncio.get_running_loop()
        port = 0 if opts.port == -1 else opts.port
        tls = opts.tls
        if tls is not None:
            self._tls_server, self._tls_client = _route_tls(tls)
        self._listener = await loop.create_server(lambda: RouteConnection(self), host=opts.host, port=port,
                                                  reuse_address=True, ssl=self._tls_server,
                                                  ssl_handshake_timeout=_tls_timeout(tls))
        self.port = self._listener.sockets[0].getsockname()[1]
        self.running = True
        self.own_urls = self._client_urls()
        self.server.log.info("Listening for route connections", host=opts.host, port=self.port)
        for url in opts.routes:
            self._dial(url, explicit=True)
            for acc in self.pinned:  # route.go solicitRoutes: a connection per pinned account too
                self._dial(url, explicit=True, account=acc)

    def all_routes(self) -> list[RouteConnection]:
        """Every registered route: the pools' and the dedicated ones (what /routez lists, varz counts)."""
        out = [r for conns in self.routes.values() for r in conns if r is not None]
        for conns in self.acc_routes.values():
            out.extend(conns.values())
        return out

    registered_links = all_routes

    # ------------------------------------------------------------------ dialing
    def _dial(self, url: str, explicit: bool, retry: bool = False, account: str = "") -> None:
        if not self.running or (url, account) in self._dialing:
            return
        self._dialing[(url, account)] = self._spawn(self._connect_loop(url, explicit, retry, account))

    async def _connect_loop(self, url: str, explicit: bool, delay: bool, account: str = "") -> None:
        """connectToRoute: dial until it answers; an explicit route forever (unless connect_retries), an
        implicit one connect_retries + 1 times."""
        try:
            parts = urlsplit(url)
            host, port = parts.hostname or "127.0.0.1", parts.port or 6222
            retries = self.options.connect_retries
            attempt = 0
            if delay:
                await asyncio.sleep(RECONNECT_DELAY)
            loop = asyncio.get_running_loop()
            while self.running:
                attempt += 1
                try:
                    tls = self._tls_client
                    await asyncio.wait_for(
                        loop.create_connection(lambda: RouteConnection(self, solicited=True, url=url,
                                                                       implicit=not explicit, account=account),
                                               host, port,
                                               ssl=tls, server_hostname=host if tls is not None else None,
                                               ssl_handshake_timeout=_tls_timeout(self.options.tls)),
                        DIAL_TIMEOUT + (_tls_timeout(self.options.tls) or 0))
                    return
                except (OSError, asyncio.TimeoutError, ssl.SSLError) as e:
                    self.server.log_debug("Error trying to connect to route", url=url, error=str(e))
                    if (not explicit or retries > 0) and attempt > retries:
                        return
                await asyncio.sleep(CONNECT_INTERVAL)
        finally:
            if self._dialing.get((url, account)) is asyncio.current_task():
                del self._dialing[(url, account)]

    def dialed(self, url: str, account: str = "") -> None:
        """A dialed route is connected: a later close may dial its URL again."""
        self._dialing.pop((url, account), None)

    # ------------------------------------------------------------------ handshake
    def info(self) -> dict:
        opts = self.options
        srv = self.server
        host = opts.host if opts.host not in ("0.0.0.0", "::", "") else "127.0.0.1"
        info: dict[str, Any] = {
            "server_id": srv.server_id,
            "server_name": srv.server_name,
            "version": VERSION,
            "proto": ROUTE_PROTO,
            "go": GO_FIELD,
            "host": host,
            "port": self.port,
            "headers": True,
            "max_payload": srv.options.max_payload,
            "cluster": self.name,
        }
        if self.dynamic:
            info["cluster_dynamic"] = True
        if opts.username:
            info["auth_required"] = True
        if opts.tls is not None:
            info["tls_required"] = True
            if opts.tls.verify:
                info["tls_verify"] = True
        if not opts.no_advertise:
            info["connect_urls"] = list(self.own_urls)
            ws = self.own_ws_urls()
            if ws:
                info["ws_connect_urls"] = ws
        if opts.advertise:
            info["ip"] = f"nats-route://{opts.advertise}/"
        if self.pooled:
            info["route_pool_size"] = self.pool_size
        if self.compression != NOT_SUPPORTED:
            info["compression"] = self.compression
        return info

    def info_compression(self, negotiated: str) -> str:
        """compressionModeForInfoProtocol: s2_auto when configured so, else the negotiated mode."""
        return S2_AUTO if self.compression == S2_AUTO else negotiated

    def info_proto(self, account: str = "", pool_idx: int = 0, compression: str = "") -> bytes:
        """The first INFO of a route (generateRouteInitialInfoJSON): the dedicated account, the pool slot, the
        compression mode chosen."""
        info = self.info()
        if compression:
            info["compression"] = compression
        if account:
            info["route_account"] = account
        if pool_idx:
            info["route_pool_idx"] = pool_idx
        return encoder.info(info)

    def connect_proto(self, url: str) -> bytes:
        parts = urlsplit(url)
        proto: dict[str, Any] = {"echo": True, "verbose": False, "pedantic": False}
        if parts.username:
            proto["user"] = parts.username
            proto["pass"] = parts.password or ""
        proto.update({"tls_required": self.options.tls is not None, "headers": True, "name": self.server.server_id,
                      "cluster": self.name})
        if self.dynamic:
            proto["cluster_dynamic"] = True
        return b"CONNECT " + json.dumps(proto, separators=(",", ":")).encode() + b"\r\n"

    def authorize(self, user: str, password: str) -> bool:
        opts = self.options
        if not opts.username:
            return True
        return secrets.compare_digest(user, opts.username) and secrets.compare_digest(password, opts.password)

    def check_name(self, route: RouteConnection, remote: str, remote_dynamic: bool) -> bool:
        """The remote's cluster name against ours (processRouteConnect / processRouteInfo)."""
        if not remote or remote == self.name:
            return True
        if self.dynamic and (not remote_dynamic or self.name < remote):
            self.name = remote
            self.dynamic = remote_dynamic
            keep = route.remote_id
            for r in self.all_routes():
                if r.remote_id != keep:
                    r.close(CLUSTER_NAME_CONFLICT)
            self.server.cluster_changed()
            return True
        if not route.solicited:
            route.send(encoder.err(f'Rejecting connection, cluster name "{remote}" does not match "{self.name}"'))
        self.server.log_error("Cluster name conflict", remote=remote, local=self.name)
        route.close(CLUSTER_NAME_CONFLICT)
        return False

    def add_route(self, route: RouteConnection) -> bool:
        """route.go addRoute: the route takes its place (a pool slot, or its account's), or is refused."""
        rid = route.remote_id
        self.pending.discard(route)
        info = route.remote_info
        rps = info.get("route_pool_size")
        rps = rps if isinstance(rps, int) and not isinstance(rps, bool) else 0
        ridx = info.get("route_pool_idx")
        ridx = ridx if isinstance(ridx, int) and not isinstance(ridx, bool) else 0
        acc = route.account
        if acc and self.server.accounts.lookup(acc) is None:
            route.refuse(f'Unable to lookup account "{acc}": account missing', MISSING_ACCOUNT)
            return True
        pool = rps > 0 and self.pooled
        err = ""
        if not pool:
            if acc:
                err = f'Not possible to have a dedicated route for account "{acc}" between those servers'
                route.no_reconnect = True
            route.no_pool = True
        elif route.solicited:
            if ridx:
                err = f"Route pool index should not be set but is set to {ridx}"
        elif ridx < 0 or ridx >= max(self.routes_pool_size, rps):
            err = f"Invalid route pool index: {ridx} - pool size is {rps}"
        if not err and acc and acc not in self.acc_routes:
            err = f'No route for account "{acc}"'
        if err:
            route.refuse(err)
            return True  # closed already
        if acc:
            conns = self.acc_routes[acc]
            if rid in conns:
                return False
            conns[rid] = route
            route.registered = True
            if route.info_delayed:
                route.send(self.info_proto(account=acc, compression=self.info_compression(route.compression)))
            self._registered(route)
            self.server.log.info("Route connection registered", remote=rid, name=route.remote_name, account=acc)
            route.send_all_interest()
            return True
        size = max(self.routes_pool_size, rps) if pool else 1
        conns = self.routes.get(rid)
        if conns is None:
            conns = self.routes[rid] = [None] * size
            idx = ridx
        elif pool and not (conns[0] is not None and conns[0].no_pool):
            conns.extend([None] * (size - len(conns)))
            if route.solicited:
                idx = next((i for i, r in enumerate(conns) if r is None), -1)
            else:
                idx = ridx
                if conns[idx] is not None:
                    return False
        else:
            # handleDuplicateRoute: keep the first, and let it reconnect should the other side keep the other.
            for r in conns:
                if r is not None:
                    r.retry = True
            return False
        if idx < 0:
            self.server.log_debug("Route pool size reached, closing extra connection", remote=rid)
            return False
        route.pool_idx = idx
        conns[idx] = route
        route.registered = True
        first = sum(r is not None for r in conns) == 1
        if route.info_delayed:  # the INFO held back until the slot (and compression) was known
            route.send(self.info_proto(pool_idx=idx, compression=self.info_compression(route.compression)))
        self._registered(route)
        if first:
            self.server.log.info("Route connection registered", remote=rid, name=route.remote_name)
        route.send_all_interest()
        if first:
            gossip = dict(route.remote_info)
            gossip.pop("nonce", None)
            gossip.pop("route_pool_idx", None)
            for orid, others in self.routes.items():
                other = next((r for r in others if r is not None), None)
                if orid != rid and other is not None:
                    other.send(encoder.info(gossip))
            if not self.options.no_advertise and self._remember_urls(rid, route.remote_info):
                self.server.cluster_changed()
        if pool and route.solicited and any(r is None for r in conns):
            # route.go: the pool's next connection once the first PONG proves the handshake (startNewRoute)
            route.pool_more = True
            route.send(encoder.PING)
        return True

    def _registered(self, route: RouteConnection) -> None:
        info = dict(route.remote_info)
        if not info.get("ip"):
            info["ip"] = f"nats-route://{_join(route.host, info.get('port', 0))}/"
        route.remote_info = info

    def fill_pool(self, route: RouteConnection) -> None:
        """The next connection of a pool this server dials (route.go startNewRoute)."""
        if self.running and not route.closed and route.solicited:
            self._dial(route.url, explicit=not route.implicit)

    def pool_idx(self, account: str) -> int:
        """computeRoutePoolIdx: FNV-1a 32 of the account name modulo this server's pool size."""
        if self.routes_pool_size <= 1:
            return 0
        h = 0x811C9DC5
        for b in account.encode():
            h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
        return h % self.routes_pool_size

    def carries(self, route: RouteConnection, account: str) -> bool:
        """Whether ``route`` carries ``account``'s interest (route.go sendSubsToRoute)."""
        if route.account:
            return account == route.account
        if route.no_pool:
            return True
        return account not in self.acc_routes and self.pool_idx(account) == route.pool_idx

    def route_for(self, account: str, rid: str) -> RouteConnection | None:
        """The route to server ``rid`` that carries ``account``, None while it is not connected."""
        conns = self.routes.get(rid)
        if account in self.acc_routes:
            r = self.acc_routes[account].get(rid)
            if r is not None:
                return r
            return conns[0] if conns and conns[0] is not None and conns[0].no_pool else None
        if not conns:
            return None
        return conns[0] if len(conns) == 1 else conns[self.pool_idx(account)]

    def _remember_urls(self, rid: str, info: dict) -> bool:
        """The client and WebSocket URLs a remote's INFO announces; whether they changed."""
        changed = False
        for key, table in (("connect_urls", self.remote_urls), ("ws_connect_urls", self.remote_ws_urls)):
            urls = info.get(key)
            if isinstance(urls, list) and urls and urls != table.get(rid):
                table[rid] = list(urls)
                changed = True
        return changed

    def async_info(self, route: RouteConnection, info: dict) -> None:
        reqid = info.get("route_acc_add_reqid")
        if reqid:
            return self._acc_add_request(route, info, str(reqid))
        rid = str(info.get("server_id") or "")
        if rid and rid != route.remote_id:
            # Gossip of another server: dial it unless we know it already (processImplicitRoute).
            if rid == self.server.server_id or not info.get("ip"):
                return
            acc = str(info.get("route_account") or "")
            if acc:
                # A dedicated route the remote has to that server: ours too, if the account is pinned here.
                if acc in self.acc_routes and rid not in self.acc_routes[acc]:
                    self._dial(str(info["ip"]), explicit=False, account=acc)
                return
            if rid in self.routes:
                return
            self._dial(str(info["ip"]), explicit=False)
            if route.no_pool:
                for a in self.pinned:  # processImplicitRoute: no per-account INFO will come through a no-pool route
                    self._dial(str(info["ip"]), explicit=False, account=a)
            return
        if info.get("ldm"):  # the remote goes into lame duck mode: its clients' URLs are no more to be used
            if self._forget_urls(rid):
                self.server.cluster_changed()
            return
        if not self.options.no_advertise and self._remember_urls(rid, info):
            self.server.cluster_changed()

    def _acc_add_request(self, route: RouteConnection, info: dict, reqid: str) -> None:
        """route.go processRouteInfo, an INFO with ``route_acc_add_reqid``: with ``route_account``, the remote
        reloaded its configuration and gives that account a dedicated route: so does this server (the account's
        interest from the pooled routes goes; what comes there meanwhile is ignored) and it answers with the same
        INFO without the account.  Without, it is a remote's answer to this server's own request."""
        an = info.get("route_account")
        if not an:
            req, answers = self._acc_req
            if reqid == req and answers is not None:
                answers.put_nowait(route)
            return
        an = str(an)
        if self.server.accounts.lookup(an) is None:
            self.server.log_error(f'Error looking up account "{an}": account missing')
            return
        if an not in self.acc_routes:
            self.acc_routes[an] = {}
            self.transitioning.add(an)
        self._drop_pooled_interest(an)
        answer = dict(info)
        answer.pop("route_account", None)
        route.send(encoder.info(answer))

    def _drop_pooled_interest(self, account: str) -> None:
        """removeRemoteSubsForAcc on every pooled route (not a "no pool" one): the account's remote interest,
        which its dedicated routes bring again."""
        for conns in self.routes.values():
            for r in conns:
                if r is not None and not r.no_pool:
                    for key in [k for k, sub in r.subs.items() if sub.account == account]:
                        r._remove_remote_sub(key)

    def reload_error(self, new: Any) -> str:
        """Why a reloaded ``cluster {}`` cannot be applied (reload.go validateClusterOpts and the clusterOption
        diff), "" when it can.  Pooling and pinned accounts change at run time; the other settings nats-server
        changes on a reload are refused by Skiff (docs/parity.md)."""
        old = self.options
        if old.host != new.host:
            return f"config reload not supported for cluster host: old={old.host}, new={new.host}"
        if old.port != new.port:
            return f"config reload not supported for cluster port: old={old.port}, new={new.port}"
        for field in type(old)._fields:
            if field not in ("pool_size", "accounts") and getattr(old, field) != getattr(new, field):
                return (f"config reload not supported by Skiff for cluster {field}: only pool_size and accounts "
                        "change at run time")
        pool = DEFAULT_POOL_SIZE if new.pool_size == 0 else new.pool_size
        for acc in self._pinned(new, pool):
            if acc not in self.pinned and self.server.accounts.lookup(acc) is None:
                return f'unable to add account "{acc}" to the list of dedicated routes: account missing'
        return ""

    def reload(self, new: Any) -> None:
        """reload.go reloadClusterPoolAndAccounts, for options reload_error() took."""
        pool = DEFAULT_POOL_SIZE if new.pool_size == 0 else new.pool_size
        pinned = self._pinned(new, pool)
        added = [a for a in pinned if a not in self.pinned]
        removed = [a for a in self.pinned if a not in pinned]
        resized = pool != self.pool_size
        self.options = new
        if added or removed or resized:
            self._spawn(self._reload_pool(pool, pinned, added, removed, resized))

    async def _reload_pool(self, pool: int, pinned: list[str], added: list[str], removed: list[str],
                           resized: bool) -> None:
        srv = self.server
        # An added account: every remote is told over the pooled route that carried it (its interest there goes),
        # and answers before the dedicated routes are dialed, so that it does not refuse them.
        sent = 0
        req, answers = nuid(), asyncio.Queue()
        self._acc_req = (req, answers)
        for an in added:
            self.acc_routes.setdefault(an, {})
            self.transitioning.discard(an)
            idx = self.pool_idx(an)
            self._drop_pooled_interest(an)
            proto = encoder.info({"route_pool_size": self.routes_pool_size, "route_account": an,
                                  "route_acc_add_reqid": req})
            for conns in self.routes.values():
                r = conns[idx] if idx < len(conns) else None
                if r is not None and not r.no_pool:
                    r.send(proto)
                    sent += 1
        srv.flush_pending()
        try:
            for _ in range(sent):
                await asyncio.wait_for(answers.get(), 2.0)
        except asyncio.TimeoutError:
            srv.log_warning("Timed out waiting for confirmation from all routes regarding per-account routes "
                            "changes")
        self._acc_req = ("", None)
        # Routes to close: the dedicated ones of removed accounts (for good), and with a new size the pool.
        closing = [r for an in removed for r in self.acc_routes.get(an, {}).values()]
        for r in closing:
            r.no_reconnect = True
        if resized:
            closing += [r for conns in self.routes.values() for r in conns if r is not None]
        for r in closing:
            r.close(ROUTE_REMOVED)
        for an in removed:
            self.acc_routes.pop(an, None)
        self.pool_size = pool
        self.pooled = pool >= 1
        self.routes_pool_size = max(pool, 1)
        self.pinned = pinned
        if not resized:
            # A removed account goes back to the pool: its interest on the pooled routes that now carry it.
            for an in removed:
                for acc, subject, queue, weight in self.local_interest():
                    if acc == an:
                        for rid in list(self.routes):
                            r = self.route_for(an, rid)
                            if r is not None:
                                r.send_interest(an, subject, queue, weight or 1)
        srv.flush_pending()
        if resized or added:  # solicitRoutes(opts.Routes, accsAdded)
            for url in self.options.routes:
                if resized:
                    self._dial(url, explicit=True)
                for an in added:
                    self._dial(url, explicit=True, account=an)

    def remote_error(self, route: RouteConnection, text: str) -> None:
        """An -ERR from the remote: a rejection (cluster name, authorization) ends an implicit route's retries."""
        if "cluster name" in text or "Authorization" in text:
            route.retry = False
        if "dedicated route" in text or "No route for account" in text:
            route.no_reconnect = True

    def route_closed(self, route: RouteConnection) -> None:
        self.pending.discard(route)
        rid = route.remote_id
        if route.registered:
            route.registered = False
            if route.account:
                conns = self.acc_routes.get(route.account, {})
                if conns.get(rid) is route:
                    del conns[rid]
            else:
                conns = self.routes.get(rid)
                if conns is not None and route in conns:
                    conns[conns.index(route)] = None
                    if all(r is None for r in conns):
                        del self.routes[rid]
                        if self._forget_urls(rid):
                            self.server.cluster_changed()
                        self.server.log.info("Route connection closed", remote=rid, reason=route.close_reason)
                        if route.no_pool:
                            self._redial_pool(route)
        if not self.running or not route.solicited or route.no_reconnect:
            return
        if route.close_reason == "Duplicate Route" and not route.retry:
            return  # a route to ourselves, or a second one to a server we have a route to
        # reConnectToRoute: a configured route is dialed again until it answers; an implicit one (learnt by
        # gossip) connect_retries + 1 more times.  A cluster name conflict is dialed again too: one side may have
        # adopted the other's name meanwhile (processRouteInfo).
        self._dial(route.url, explicit=not route.implicit, retry=True, account=route.account)

    def _redial_pool(self, route: RouteConnection) -> None:
        """route.go removeRoute: the last route to a remote was a "no pool" one (the remote did not pool, so the
        pool's other connections and the dedicated ones were never made or were refused for good).  Dial it again
        now, whichever side dialed it, the pool's first connection and one per pinned account: should the remote
        come back with pooling, the whole set is made again."""
        if not self.running:
            return
        url = route.url
        if not route.solicited:  # processRouteInfo: an accepted route's URL is the host and port of its INFO
            info = route.remote_info
            url = f"nats-route://{_join(str(info.get('host') or route.host), info.get('port') or 0)}/"
        explicit = route.solicited and not route.implicit  # an accepted route is an implicit one
        if self.routes_pool_size > 1:
            self._dial(url, explicit=explicit)
        for acc in self.pinned:
            self._dial(url, explicit=explicit, account=acc)

    # ------------------------------------------------------------------ interest
    def local_sub(self, acc: str, subject: str, queue: str, delta: int) -> None:
        """A local subscription (a client's, the server's own or a leaf connection's) came (+1) or went (-1) in
        account ``acc``: tell the routes when the account's interest changed."""
        key = (acc, subject, queue)
        n = self.interest.get(key, 0) + delta
        if n > 0:
            self.interest[key] = n
        else:
            self.interest.pop(key, None)
            n = 0
        if not self.routes:
            return
        if queue:
            weight = n
        elif n == 1 and delta > 0:
            weight = 1
        elif n == 0:
            weight = 0
        else:
            return  # a second plain subscription (or one of several going) changes nothing remote
        for rid in self.routes.keys() | self._dedicated_remotes(acc):
            r = self.route_for(acc, rid)
            if r is not None:
                r.send_interest(acc, subject, queue, weight)

    def _dedicated_remotes(self, acc: str) -> set[str]:
        conns = self.acc_routes.get(acc)
        return set(conns) if conns else set()

    def local_interest(self) -> list[tuple[str, str, str, int]]:
        return [(acc, subj, q, n if q else 0) for (acc, subj, q), n in self.interest.items()]

    # ------------------------------------------------------------------ clients
    def _client_urls(self) -> list[str]:
        srv = self.server
        if srv.options.client_advertise:
            return [srv.options.client_advertise]
        host = srv.options.host
        if host in ("0.0.0.0", "::", ""):
            # nats-server lists the machine's non-loopback addresses (server.go getNonLocalIPsIfHostIsIPAny).
            try:
                addrs = sorted({a[4][0] for a in socket.getaddrinfo(socket.gethostname(), None)
                                if not a[4][0].startswith(("127.", "::1"))})
            except OSError:
                addrs = []
            return [_join(a, srv.port) for a in addrs] or [_join("127.0.0.1", srv.port)]
        return [_join(host, srv.port)]

    def _forget_urls(self, rid: str) -> bool:
        a = self.remote_urls.pop(rid, None)
        b = self.remote_ws_urls.pop(rid, None)
        return a is not None or b is not None

    def own_ws_urls(self) -> list[str]:
        ws = self.server.websocket
        if ws is None or not ws.port:
            return []
        if ws.opts.advertise:
            return [ws.opts.advertise]
        host = ws.opts.host if ws.opts.host not in ("0.0.0.0", "::", "") else "127.0.0.1"
        return [_join(host, ws.port)]

    def connect_urls(self) -> list[str]:
        """Client URLs of this server and the routed ones (INFO ``connect_urls`` on the client port)."""
        return _merge(self.own_urls, self.remote_urls)

    def ws_connect_urls(self) -> list[str]:
        """WebSocket URLs of this server and the routed ones: what WebSocket clients get as ``connect_urls``
        (route.go ``ws_connect_urls``, client.go generateClientInfoJSON)."""
        return _merge(self.own_ws_urls(), self.remote_ws_urls)

    def varz(self) -> dict:
        opts = self.options
        urls = []
        for u in opts.routes:
            p = urlsplit(u)
            urls.append(_join(p.hostname or "", p.port or 0))
        return {"name": self.name, "addr": opts.host, "cluster_port": self.port,
                "auth_timeout": int(opts.auth_timeout or 2), "urls": urls, "tls_timeout": 2,
                "pool_size": self.pool_size}


def _route_tls(tls: Any) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """The two ends of cluster { tls }: the accepting side presents cert_file and, with ``verify``, asks the dialing
    side for a certificate signed by ca_file; the dialing side presents the same certificate and checks the
    accepting one against ca_file and the route URL's host (route.go createRoute: TLS before INFO, both ways)."""
    from .tls import make_client_context, make_server_context

    return make_server_context(tls), make_client_context(tls)


def _tls_timeout(tls: Any) -> float | None:
    return (float(tls.timeout) or 2.0) if tls is not None else None


def _merge(own: list[str], remote: dict[str, list[str]]) -> list[str]:
    out = list(own)
    for urls in remote.values():
        for u in urls:
            if u not in out:
                out.append(u)
    return out


def _join(host: str, port: Any) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
