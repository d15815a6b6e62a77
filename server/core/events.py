"""System events the server publishes in the system account (nats-server events.go).

* ``$SYS.ACCOUNT.<acc>.CONNECT`` / ``.DISCONNECT`` for every client that logs in / leaves (accountConnectEvent,
  accountDisconnectEvent); the disconnect carries the client's message counts and the close reason.
* ``$SYS.ACCOUNT.<acc>.SERVER.CONNS`` (and the old ``$SYS.SERVER.ACCOUNT.<acc>.CONNS``): the account's connection
  count and statistics when a client of the account (other than ``$G``) comes or goes, then every 30 s while it
  has connections (accConnsUpdate / sendAccConnsUpdate, eventsHBInterval).
* ``$SYS.SERVER.<id>.STATSZ``: the server's statistics, first after 250 ms, the interval then doubling up to 10 s
  (startStatszTimer / heartbeatStatsz, statsHBInterval).  A standalone nats-server sends it only when someone in
  the system account listens (sendStatsz shouldCheckInterest); so does Skiff, and it builds no event nobody would
  receive (connect and disconnect events too: without a listener the JSON is never built).

Events are published by the server (origin None): they reach client subscriptions only, never an internal
``$SYS.REQ`` handler (Server.subscribe_internal's guard).

Cluster-wide account limits
---------------------------
An account JWT's ``conn`` and ``leaf`` limits hold for the whole cluster (accounts.go, events.go).  Each server
tells the others its local counts of every account (the CONNS events above, on every change and every 30 s while
the account has connections) and keeps theirs (Account.strack): a new client is checked against its account's
clients and leafs here plus the clients the others report, a new leaf against the leafs here and there.  An update
that shows the account over a limit closes the newest connections here (updateRemoteServer: "conservative and a bit
harsh", the others do the same and clients reconnect).  The counts of a server go when it announces its shutdown or
lame duck mode (``$SYS.SERVER.<id>.SHUTDOWN`` / ``.LAMEDUCK``, which Skiff sends too), or when nothing came from it
for 150 s (the orphan sweep, every 90 s).  A server that starts tracking an account (loads it while running) asks
the others for their counts (``$SYS.REQ.ACCOUNT.<acc>.CONNS``, answers to ``$SYS._INBOX_.<id>``).  Updates for an
account this server has not loaded are dropped (remoteConnsUpdate never loads an account for them).
"""
from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

from skiff.protocol import encoder
from skiff.protocol.jsapi.timefmt import format_time

from ..ids import nuid

if TYPE_CHECKING:  # pragma: no cover
    from .sysacc import SystemAccount

CONNECT_TYPE = "io.nats.server.advisory.v1.client_connect"
DISCONNECT_TYPE = "io.nats.server.advisory.v1.client_disconnect"
ACCOUNT_CONNS_TYPE = "io.nats.server.advisory.v1.account_connections"
STATSZ_FIRST = 0.25  # startStatszTimer
STATSZ_MAX = 10.0  # statsHBInterval
CONNS_HB = 30.0  # eventsHBInterval
CHK_ORPH = 3 * CONNS_HB  # server.go sys.chkOrph: how often the orphan sweep runs
ORPH_MAX = 5 * CONNS_HB  # server.go sys.orphMax: silence after which a remote server counts as gone
ACC_CONNS_OLD = "$SYS.SERVER.ACCOUNT.{}.CONNS"  # accConnsEventSubjOld: the one servers listen on
ACC_CONNS_NEW = "$SYS.ACCOUNT.{}.SERVER.CONNS"  # accConnsEventSubjNew
CONNS_RESP = "$SYS._INBOX_.{}"  # connsRespSubj: answers to this server's $SYS.REQ.ACCOUNT.<acc>.CONNS
SHUTDOWN = "$SYS.SERVER.{}.SHUTDOWN"  # shutdownEventSubj
LAMEDUCK = "$SYS.SERVER.{}.LAMEDUCK"  # lameDuckEventSubj
MAX_ACCOUNT_CONNECTIONS = "Maximum Account Connections Exceeded"  # ClosedState MaxAccountConnectionsExceeded
STAT_EXACT = 100  # clients of an account up to which a CONNS event's message totals are summed every time
STAT_STALE = 0.1  # beyond, how old (seconds) they may be

class Events:
    def __init__(self, sysacc: "SystemAccount") -> None:
        self.sys = sysacc
        self.server = sysacc.server
        self._statsz_timer = None
        self._statsz_interval = STATSZ_FIRST
        self._conns_timers: dict[str, Any] = {}
        self._running = False
        # The other servers heard from (events.go sys.servers): id -> [last seq, monotonic time of the last update].
        self.servers: dict[str, list] = {}
        self._own: list = []  # this server's subscriptions to the others' events (not interest in its own)
        self._stat_cache: dict[str, tuple[float, dict]] = {}  # account -> (when, AccountStat): _account_stat
        self._sweeper = None

    def start(self) -> None:
        self._running = True
        self._statsz_timer = self.server.clock.call_later(self._statsz_interval, self._statsz_tick)
        # initEventTracking: the others' account counts (the old subject only, as nats-server), the answers to this
        # server's requests for them, and the others' shutdown and lame duck announcements.
        sub = self.sys._subscribe
        sid = self.server.server_id
        self._own = [sub(ACC_CONNS_OLD.format("*"), self._remote_conns_update),
                     sub(CONNS_RESP.format(sid), self._remote_conns_update),
                     sub(SHUTDOWN.format("*"), self._remote_server_shutdown),
                     sub(LAMEDUCK.format("*"), self._remote_server_shutdown)]
        self._sweeper = self.server.clock.call_later(CHK_ORPH, self._check_remote_servers)

    def stop(self) -> None:
        if self._running:
            self._announce(SHUTDOWN)  # shutdownEventing -> sendShutdownEvent, before the routes close
        self._running = False
        for t in (self._statsz_timer, self._sweeper):
            if t is not None:
                t.cancel()
        self._statsz_timer = self._sweeper = None
        for t in self._conns_timers.values():
            t.cancel()
        self._conns_timers.clear()
        self.servers.clear()
        self._stat_cache.clear()

    def lame_duck(self) -> None:
        """lameDuckMode -> sendLDMShutdownEventLocked: the others stop counting this server's connections."""
        if self._running:
            self._announce(LAMEDUCK)

    def _announce(self, fmt: str) -> None:
        subj = fmt.format(self.server.server_id)
        if self._has_interest(subj):
            self.sys.send(subj, self.sys.server_info())  # the body is the ServerInfo itself
            self.server.flush_pending()

    def _has_interest(self, subject: str) -> bool:
        """Someone besides this server's own listeners for the others' events wants ``subject``."""
        plain, queues = self.sys.account.sublist.match(subject)
        return bool(queues) or any(s not in self._own for s in plain)

    # ------------------------------------------------------------------ clients
    def _client_info(self, c, stop_ns: int = 0) -> dict:
        d: dict = {"start": format_time(c.start_ns), "host": c.host, "id": c.cid, "acc": c.account.name}
        if c.user:
            d["user"] = c.user
        for key, val in (("name", c.name), ("lang", c.lang), ("ver", c.version)):
            if val:
                d[key] = val
        if stop_ns:
            if c.rtt_ns:
                d["rtt"] = c.rtt_ns
            d["stop"] = format_time(stop_ns)
        d["name_tag"] = c.account.name
        d["kind"] = "Client"
        d["client_type"] = c.client_type  # "nats" or "websocket" (clientTypeString)
        return d

    def client_connect(self, c) -> None:
        """After a client authenticated into its account (nats-server processConnect -> accountConnectEvent)."""
        if not self._running:
            return
        acc = c.account
        self.account_conns_changed(acc)  # nats-server sends the account's count first, then the connect event
        subj = f"$SYS.ACCOUNT.{acc.name}.CONNECT"
        if self.sys.has_interest(subj):
            now = self.server.clock.time_ns()
            self.sys.send(subj, {"type": CONNECT_TYPE, "id": nuid(), "timestamp": format_time(now),
                                 "server": self.sys.server_info(), "client": self._client_info(c)})
        else:
            self.sys.seq += 1

    def client_disconnect(self, c) -> None:
        if not self._running:
            return
        acc = c.account
        self.account_conns_changed(acc)
        subj = f"$SYS.ACCOUNT.{acc.name}.DISCONNECT"
        if not self.sys.has_interest(subj):
            self.sys.seq += 1
            return
        now = self.server.clock.time_ns()
        self.sys.send(subj, {
            "type": DISCONNECT_TYPE, "id": nuid(), "timestamp": format_time(now),
            "server": self.sys.server_info(), "client": self._client_info(c, now),
            # From the client's side: what it sent is what the server received from it.
            "sent": {"msgs": c.in_msgs, "bytes": c.in_bytes},
            "received": {"msgs": c.out_msgs, "bytes": c.out_bytes},
            "reason": c.close_reason or "Client Closed",
        })

    # ------------------------------------------------------------------ account connections
    def account_conns_changed(self, acc) -> None:
        """accConnsUpdate: never for $G."""
        if acc is self.server.accounts.gacc or not self._running:
            return
        self._send_conns(acc, f"$SYS.SERVER.ACCOUNT.{acc.name}.CONNS", f"$SYS.ACCOUNT.{acc.name}.SERVER.CONNS")

    def _send_conns(self, acc, *subjects: str) -> None:
        t = self._conns_timers.pop(acc.name, None)
        if t is not None:
            t.cancel()
        # sendAccConnsUpdate: the heartbeat runs while the account has clients or leaf connections (TotalConns).
        if acc.num_conns + self.server.leaf_count(acc) > 0 and self._running:
            self._conns_timers[acc.name] = self.server.clock.call_later(CONNS_HB, self.account_conns_changed, acc)
        stat = None
        for subj in subjects:
            if self._has_interest(subj):
                stat = stat or self._account_stat(acc)
                self.sys.send(subj, {"type": ACCOUNT_CONNS_TYPE, "id": nuid(),
                                     "timestamp": format_time(self.server.clock.time_ns()),
                                     "server": self.sys.server_info(), **stat})
            else:
                self.sys.seq += 1

    def _account_stat(self, acc) -> dict:
        """The account's AccountStat.  Its message totals are a sum over the account's clients: built for every
        connect and disconnect (which a cluster always listens to), that is quadratic in a connection storm (5000
        clients of one account took 50-70 s instead of 6-10 s).  So for an account of more than STAT_EXACT clients
        the totals are summed at most every STAT_STALE seconds and may be that old; the counts are always exact
        (nats-server keeps running totals and has no such lag)."""
        now = self.server.clock.monotonic()
        cached = self._stat_cache.get(acc.name)
        if cached is None or acc.num_conns <= STAT_EXACT or now - cached[0] >= STAT_STALE:
            stat = self.sys.provider.account_stat(acc)
            self._stat_cache[acc.name] = (now, stat)
            return stat
        leafs = self.server.leaf_count(acc)
        return {**cached[1], "conns": acc.num_conns, "leafnodes": leafs, "total_conns": acc.num_conns + leafs,
                "num_subscriptions": acc.sublist.count}

    def conns_request(self, name: str, reply: str, hdr_len: int, data: bytes) -> None:
        """``$SYS.REQ.ACCOUNT.<acc>.CONNS`` (connsRequest): the account's connection event to ``reply``, when the
        account has local connections; otherwise silence.  A body must name the same account."""
        body = data[hdr_len:]
        if body:
            import json

            try:
                m = json.loads(body)
            except ValueError:
                return
            if not isinstance(m, dict) or m.get("acc", name) != name:
                return
        acc = self.server.accounts.get(name)
        if acc is None or acc.num_conns <= 0 or not reply:
            return
        self._send_conns(acc, reply)

    # ------------------------------------------------------------------ the other servers' counts
    def enable_account_tracking(self, acc) -> None:
        """events.go enableAccountTracking: an account loaded while the server runs; the others answer with their
        counts of it (connsRequest, only those with clients of it) to ``$SYS._INBOX_.<id>``."""
        if not self._running or acc is self.server.accounts.gacc:
            return
        subj = f"$SYS.REQ.ACCOUNT.{acc.name}.CONNS"
        if not self._has_interest(subj):
            self.sys.seq += 1
            return
        from skiff.protocol.marshal import dumps

        body = dumps({"server": self.sys.server_info(), "acc": acc.name}).encode()  # accNumConnsReq
        self.server.route(None, subj, CONNS_RESP.format(self.server.server_id), 0, body,
                          sublist=self.sys.account.sublist)

    def _remote_conns_update(self, _acc, subject: str, reply: str, hdr_len: int, data: bytes, origin) -> None:
        """events.go remoteConnsUpdate: another server's counts of one account (AccountNumConns)."""
        if not self._running:
            return
        body = data[hdr_len:]
        if not body:
            self.server.log_error("No message body provided")
            return
        try:
            m = json.loads(body)
            if not isinstance(m, dict):
                raise ValueError("not an object")
            si = m.get("server") or {}
            name, sid = m.get("acc", ""), si.get("id", "")
            conns, leafs, seq = m.get("conns", 0), m.get("leafnodes", 0), si.get("seq", 0)
            if not (isinstance(name, str) and isinstance(sid, str) and all(
                    isinstance(v, int) and not isinstance(v, bool) for v in (conns, leafs, seq))):
                raise ValueError("wrong field types")
        except (ValueError, AttributeError) as e:
            self.server.log_error("Error unmarshalling account connection event message", error=str(e))
            return
        acc = self.server.accounts.get(name)  # never loads the account (Accounts.lookup would)
        if acc is None:
            return
        if sid == self.server.server_id:
            self.server.log_error("Processing our own account connection event message: ignored")
            return
        acc.update_remote_server(sid, conns, leafs)
        self._update_remote_server(sid, seq)
        self._close_over_limit(acc)

    def _update_remote_server(self, sid: str, seq: int) -> None:
        """events.go updateRemoteServer: the server's sequence must go up; its last update time feeds the
        orphan sweep."""
        now = self.server.clock.monotonic()
        su = self.servers.get(sid)
        if su is None:
            self.servers[sid] = [seq, now]
        elif seq <= su[0]:
            self.server.log_error("Received out of order remote server update", server=sid)
        else:
            su[0], su[1] = seq, now

    def _close_over_limit(self, acc) -> None:
        """accounts.go updateRemoteServer: past ``conn``, the newest clients and leafs here go, as many as the
        account is over; past ``leaf``, the newest leafs (client.go maxAccountConnExceeded)."""
        srv = self.server
        ln = srv.leafnodes
        links = [lf for lf in ln.links if lf.account is acc and not lf.closed] if ln is not None else []
        victims: list = []
        mconns = acc.limit("max_connections")
        total = acc.num_conns + len(links) + acc.nrclients
        if mconns != -1 and total > mconns:
            local = [c for c in srv.clients.values() if c.account is acc and c.registered and not c.closed]
            victims = sorted(local + links, key=lambda c: c.start_ns, reverse=True)[:total - mconns]
        mleafs = acc.limit("max_leafnodes")
        if mleafs != -1 and len(links) + acc.nrleafs > mleafs:
            over = len(links) + acc.nrleafs - mleafs
            victims += links[-over:] if over < len(links) else links
        for c in dict.fromkeys(victims):
            if c.closed:
                continue
            srv.log_error("maximum account active connections exceeded", cid=c.cid)
            c.send(encoder.err("maximum account active connections exceeded"))
            c.close(MAX_ACCOUNT_CONNECTIONS)
        if victims:
            srv.flush_pending()

    def _remote_server_shutdown(self, _acc, subject: str, reply: str, hdr_len: int, data: bytes, origin) -> None:
        """events.go remoteServerShutdown (and the lame duck event): the server's counts go, if it was tracked."""
        toks = subject.split(".")
        if len(toks) < 4 or not self._running:
            return
        body = data[hdr_len:]
        if not body:
            self.server.log_error("Remote server sent invalid (empty) shutdown message", subject=subject)
            return
        try:
            json.loads(body)
        except ValueError:
            self.server.log_debug("Received bad server info for remote server shutdown")
            return
        if toks[2] in self.servers:
            self._process_remote_server_shutdown(toks[2])

    def _process_remote_server_shutdown(self, sid: str) -> None:
        for acc in list(self.server.accounts.by_name.values()):
            acc.remove_remote_server(sid)
        self.servers.pop(sid, None)

    def _check_remote_servers(self) -> None:
        """events.go checkRemoteServers: a server not heard from for orphMax went away without a word."""
        self._sweeper = None
        if not self._running:
            return
        now = self.server.clock.monotonic()
        for sid, su in list(self.servers.items()):
            if now - su[1] > ORPH_MAX:
                self.server.log_debug("Detected orphan remote server", server=sid)
                self._process_remote_server_shutdown(sid)
        self._sweeper = self.server.clock.call_later(CHK_ORPH, self._check_remote_servers)

    # ------------------------------------------------------------------ statsz
    def _statsz_tick(self) -> None:
        self._statsz_timer = None
        if not self._running:
            return
        if self._statsz_interval < STATSZ_MAX:
            self._statsz_interval = min(self._statsz_interval * 2, STATSZ_MAX)
        self._statsz_timer = self.server.clock.call_later(self._statsz_interval, self._statsz_tick)
        subj = f"$SYS.SERVER.{self.server.server_id}.STATSZ"
        if self.sys.has_interest(subj):
            self.sys.send(subj, self.statsz_msg())

    def statsz_msg(self) -> dict:
        """ServerStatsMsg: ``{"server": ServerInfo, "statsz": ServerStats}`` (events.go sendStatsz)."""
        srv = self.server
        p = self.sys.provider
        st = srv.stats()
        accounts = srv.accounts.by_name.values()
        d: dict = {
            "start": format_time(srv.start_ns),
            "mem": p.rss(),
            "cores": os.cpu_count() or 1,
            "cpu": p.cpu(),
            "connections": len(srv.clients),
            "total_connections": srv.total_connections,
            "active_accounts": sum(1 for a in accounts if a.num_conns > 0),
            "subscriptions": sum(a.sublist.count for a in accounts),
            "sent": {"msgs": st["out_msgs"], "bytes": st["out_bytes"]},
            "sent_to_clients": {"msgs": st["out_msgs"], "bytes": st["out_bytes"]},
            "received": {"msgs": st["in_msgs"], "bytes": st["in_bytes"]},
            "received_from_clients": {"msgs": st["in_msgs"], "bytes": st["in_bytes"]},
            "slow_consumers": srv.slow_consumers,
        }
        if srv.slow_consumers:
            d["slow_consumer_stats"] = {"clients": srv.slow_consumers, "routes": 0, "gateways": 0, "leafs": 0}
        d["active_servers"] = 1 + (len(srv.cluster.routes) if srv.cluster is not None else 0)
        if srv.jetstream is not None:
            js = srv.jetstream.varz()
            js = {k: v for k, v in js.items() if k != "config"} | {"config": _statsz_js_config(js.get("config"))}
            d["jetstream"] = {"config": js["config"], "stats": js.get("stats"), "limits": js.get("limits")}
        d["gomaxprocs"] = os.cpu_count() or 1
        return {"server": self.sys.server_info(), "statsz": d}


def _statsz_js_config(cfg: Any) -> Any:
    """The statsz JetStream config leaves out the store directory (nats-server JetStreamConfig.StoreDir is
    ``json:"store_dir,omitempty"`` and sendStatsz copies the config without it)."""
    if not isinstance(cfg, dict):
        return cfg
    return {k: v for k, v in cfg.items() if k != "store_dir"}
