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
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

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

class Events:
    def __init__(self, sysacc: "SystemAccount") -> None:
        self.sys = sysacc
        self.server = sysacc.server
        self._statsz_timer = None
        self._statsz_interval = STATSZ_FIRST
        self._conns_timers: dict[str, Any] = {}
        self._running = False

    def start(self) -> None:
        self._running = True
        self._statsz_timer = self.server.clock.call_later(self._statsz_interval, self._statsz_tick)

    def stop(self) -> None:
        self._running = False
        if self._statsz_timer is not None:
            self._statsz_timer.cancel()
            self._statsz_timer = None
        for t in self._conns_timers.values():
            t.cancel()
        self._conns_timers.clear()

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
        if acc is self.server.accounts.gacc:
            return
        self._send_conns(acc, f"$SYS.SERVER.ACCOUNT.{acc.name}.CONNS", f"$SYS.ACCOUNT.{acc.name}.SERVER.CONNS")

    def _send_conns(self, acc, *subjects: str) -> None:
        t = self._conns_timers.pop(acc.name, None)
        if t is not None:
            t.cancel()
        if acc.num_conns > 0 and self._running:
            self._conns_timers[acc.name] = self.server.clock.call_later(CONNS_HB, self.account_conns_changed, acc)
        for subj in subjects:
            if self.sys.has_interest(subj):
                stat = self.sys.provider.account_stat(acc)
                self.sys.send(subj, {"type": ACCOUNT_CONNS_TYPE, "id": nuid(),
                                     "timestamp": format_time(self.server.clock.time_ns()),
                                     "server": self.sys.server_info(), **stat})
            else:
                self.sys.seq += 1

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
