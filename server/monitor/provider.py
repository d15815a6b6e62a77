"""The monitoring documents (nats-server monitor.go): /varz, /connz, /subsz, /healthz, /jsz, /accountz.

Field names and units follow nats-server (durations in ns where the Go struct holds a time.Duration, uptime and
idle as Go duration strings, times RFC3339 with nanoseconds), so tools written for nats-server read them unchanged.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING

from skiff.protocol.jsapi.timefmt import format_go_duration, format_time

from ..version import GO_FIELD, PROTO, VERSION
from .accountz import account_detail

if TYPE_CHECKING:  # pragma: no cover
    from ..core.server import Server


def rtt_string(ns: int) -> str:
    """monitor.go getRTT: an RTT between 1 us and 1 ms is truncated to whole microseconds, as /connz, /routez and
    /leafz show it."""
    if 1_000 < ns < 1_000_000:
        ns -= ns % 1_000
    return format_go_duration(ns)


def _rss_bytes() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _uptime(ns: int) -> str:
    """nats-server's myUptime: 1d2h3m4s style, seconds resolution."""
    s = max(ns // 1_000_000_000, 0)
    days, s = divmod(s, 86400)
    hours, s = divmod(s, 3600)
    mins, s = divmod(s, 60)
    out = ""
    if days:
        out += f"{days}d"
    if days or hours:
        out += f"{hours}h"
    if days or hours or mins:
        out += f"{mins}m"
    return out + f"{s}s"


def _int(params: dict, key: str, default: int) -> int:
    """A numeric query parameter; a bad one is a 400 with nats-server's text (the HTTP layer maps ValueError)."""
    raw = params.get(key)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except (TypeError, ValueError):
        raise ValueError(f"Error decoding int for '{key}': strconv.Atoi: parsing \"{raw}\": invalid syntax") from None


_NO_LIMIT = 18446744073709551615  # Go's uint64(-1): an account without a JetStream reservation


def _sublist_stats(sublists: list) -> dict:
    """nats-server SublistStats, summed over accounts as Subsz does (sublist.go SublistStats.add)."""
    out = {"num_subscriptions": 0, "num_cache": 0, "num_inserts": 0, "num_removes": 0, "num_matches": 0,
           "cache_hit_rate": 0.0, "max_fanout": 0, "avg_fanout": 0.0}
    hits = tot = entries = 0
    for sl in sublists:
        st = sl.stats()
        for k in ("num_subscriptions", "num_cache", "num_inserts", "num_removes", "num_matches"):
            out[k] += st[k]
        out["max_fanout"] = max(out["max_fanout"], st["max_fanout"])
        hits += st["cache_hits"]
        tot += st["total_fanout"]
        entries += st["cache_entries"]
    if tot:
        out["avg_fanout"] = tot / entries
    if out["num_matches"]:
        out["cache_hit_rate"] = hits / out["num_matches"]
    return out


def _flag(params: dict, key: str) -> bool:
    v = str(params.get(key, "")).lower()
    return v in ("1", "true", "detail", "yes")


class MonitorProvider:
    def __init__(self, server: "Server") -> None:
        self.server = server
        self.http_req_stats: dict[str, int] = {}
        self._cpu_last = (os.times(), server.clock.monotonic())

    def identity(self) -> dict:
        s = self.server
        return {"server_id": s.server_id, "server_name": s.server_name, "now": format_time(s.clock.time_ns())}

    def count(self, path: str) -> None:
        self.http_req_stats[path] = self.http_req_stats.get(path, 0) + 1

    # ------------------------------------------------------------------ /varz
    def varz(self, params: dict | None = None, *, http: bool = True) -> dict:
        if http:
            self.count("/varz")
        s = self.server
        o = s.options
        now = s.clock.time_ns()
        d = {
            "server_id": s.server_id,
            "server_name": s.server_name,
            "version": VERSION,
            "proto": PROTO,
            "go": GO_FIELD,
            "host": o.host,
            "port": s.port,
            "max_connections": o.max_connections,
            "ping_interval": int(o.ping_interval * 1e9),
            "ping_max": o.ping_max,
            "http_host": o.http_host or o.host,
            "http_port": s.http_port,
            "http_base_path": o.http_base_path,
            "https_port": 0,
            "auth_timeout": s.auth.timeout,
            "max_control_line": o.max_control_line,
            "max_payload": o.max_payload,
            "max_pending": o.max_pending,
            "cluster": s.cluster.varz() if s.cluster is not None else {},
            "gateway": {},
            "leaf": s.leafnodes.varz() if s.leafnodes is not None and s.leafnodes.port else {},
            "mqtt": {},
            "websocket": s.websocket.varz() if s.websocket is not None else {},
        }
        if s.auth.required:
            d["auth_required"] = True
        if s.tls_context is not None:
            d["tls_required"] = True
            if getattr(o.tls, "verify", False):
                d["tls_verify"] = True
        if s.jetstream is not None:
            d["jetstream"] = s.jetstream.varz()
        st = s.stats()
        d.update(
            {
                "tls_timeout": s.options_tls_timeout(),
                "write_deadline": int(o.write_deadline * 1e9),
                "start": format_time(s.start_ns),
                "now": format_time(now),
                "uptime": _uptime(now - s.start_ns),
                "mem": _rss_bytes(),
                "cores": os.cpu_count() or 1,
                "gomaxprocs": os.cpu_count() or 1,
                "cpu": self._cpu(),
                "connections": len(s.clients),
                "total_connections": s.total_connections,
                "routes": len(s.cluster.all_routes()) if s.cluster is not None else 0,
                "remotes": len(s.cluster.routes) if s.cluster is not None else 0,
                "leafnodes": len(s.leafnodes.links) if s.leafnodes is not None else 0,
                "in_msgs": st["in_msgs"],
                "in_bytes": st["in_bytes"],
                "in_client_msgs": st["in_msgs"],
                "in_client_bytes": st["in_bytes"],
                "out_msgs": st["out_msgs"],
                "out_bytes": st["out_bytes"],
                "out_client_msgs": st["out_msgs"],
                "out_client_bytes": st["out_bytes"],
                "slow_consumers": s.slow_consumers,
                "stale_connections": 0,
                "stalled_clients": 0,
                "subscriptions": sum(a.sublist.count for a in s.accounts.by_name.values()),  # every account
                "http_req_stats": dict(self.http_req_stats),
                "config_load_time": format_time(s.start_ns),
                "config_digest": "",
                **({"system_account": s.accounts.system.name} if s.accounts.system is not None else {}),
                "slow_consumer_stats": {"clients": s.slow_consumers, "routes": 0, "gateways": 0, "leafs": 0},
                "stale_connection_stats": {"clients": 0, "routes": 0, "gateways": 0, "leafs": 0},
            }
        )
        return d

    def _cpu(self) -> float:
        t0, m0 = self._cpu_last
        t1, m1 = os.times(), self.server.clock.monotonic()
        self._cpu_last = (t1, m1)
        elapsed = m1 - m0
        if elapsed <= 0:
            return 0.0
        used = (t1.user + t1.system) - (t0.user + t0.system)
        return round(100.0 * used / elapsed, 2)

    # ------------------------------------------------------------------ /connz
    def leafz(self, params: dict, *, http: bool = True) -> dict:
        """/leafz (monitor.go Leafz)."""
        s = self.server
        leafs = []
        if s.leafnodes is not None:
            for link in s.leafnodes.links:
                d = {"id": link.cid, "name": link.remote_name, "is_spoke": link.solicited,
                     "account": link.account.name, "ip": link.host, "port": link.port,
                     "rtt": rtt_string(link.rtt_ns), "in_msgs": link.in_msgs, "out_msgs": link.out_msgs,
                     "in_bytes": link.in_bytes, "out_bytes": link.out_bytes, "subscriptions": len(link.subs),
                     "compression": link.compression}
                if _flag(params, "subs"):
                    d["subscriptions_list"] = sorted(f"{k[0]} {k[1]}".strip() for k in link.subs)
                leafs.append(d)
        return {"server_id": s.server_id, "now": format_time(s.clock.time_ns()), "leafnodes": len(leafs),
                "leafs": leafs}

    def routez(self, params: dict, *, http: bool = True) -> dict:
        """/routez (monitor.go Routez): one entry per route connection (every connection of a pool, and the dedicated ones)."""
        s = self.server
        now = s.clock.time_ns()
        routes = []
        if s.cluster is not None:
            for r in s.cluster.all_routes():
                d = {
                    "rid": r.cid, "remote_id": r.remote_id, "remote_name": r.remote_name,
                    "did_solicit": r.solicited, "is_configured": r.solicited and not r.implicit,
                    "ip": r.host, "port": r.port,
                    "start": format_time(r.start_ns), "last_activity": format_time(r.last_activity_ns),
                    "rtt": rtt_string(r.rtt_ns), "uptime": _uptime(now - r.start_ns),
                    "idle": _uptime(now - r.last_activity_ns), "pending_size": r.pending_bytes(),
                    "in_msgs": r.in_msgs, "out_msgs": r.out_msgs, "in_bytes": r.in_bytes, "out_bytes": r.out_bytes,
                    "subscriptions": len(r.subs), "compression": r.compression,
                }
                if r.account:
                    d["account"] = r.account  # a dedicated route (monitor.go RouteInfo.Account)
                if _flag(params, "subs"):
                    d["subscriptions_list"] = sorted(f"{k[1]} {k[2]}".strip() for k in r.subs)
                routes.append(d)
        return {"server_id": s.server_id, "server_name": s.server_name, "now": format_time(now),
                "num_routes": len(routes), "routes": routes}

    def connz(self, params: dict, *, http: bool = True) -> dict:
        if http:
            self.count("/connz")
        s = self.server
        now = s.clock.time_ns()
        offset = max(_int(params, "offset", 0), 0)
        limit = _int(params, "limit", 1024)
        if limit <= 0:
            limit = 1024
        subs = _flag(params, "subs")
        detail = str(params.get("subs", "")).lower() == "detail"
        cid = _int(params, "cid", 0)
        state = str(params.get("state", "open")).lower()
        sort = str(params.get("sort", "cid"))
        auth = _flag(params, "auth")
        # ?acc= keeps one account's connections (nats-server Connz with ConnzOptions.Account); an account the
        # server does not have gives nats-server's empty document, server_id "" and connections null.
        acc_name = str(params.get("acc") or "")
        if acc_name and s.accounts.get(acc_name) is None:
            return {"server_id": "", "now": format_time(now), "num_connections": 0, "total": 0, "offset": offset,
                    "limit": limit, "connections": None}
        conns: list[dict] = []
        if state in ("open", "any"):
            for c in s.clients.values():
                if cid and c.cid != cid:
                    continue
                if acc_name and c.account.name != acc_name:
                    continue
                conns.append(self._conn_info(c, now, subs, detail, auth))
        if state in ("closed", "any"):
            for c in s.closed_clients:
                if cid and c["cid"] != cid:
                    continue
                if acc_name and c.get("account", "") != acc_name:
                    continue
                conns.append(self._closed_info(c, auth))
        keyf = {
            "cid": lambda c: c["cid"],
            "start": lambda c: c["start"],
            "subs": lambda c: -c["subscriptions"],
            "pending": lambda c: -c.get("pending_bytes", 0),
            "msgs_to": lambda c: -c["out_msgs"],
            "msgs_from": lambda c: -c["in_msgs"],
            "bytes_to": lambda c: -c["out_bytes"],
            "bytes_from": lambda c: -c["in_bytes"],
        }.get(sort, lambda c: c["cid"])
        conns.sort(key=keyf)
        total = len(conns)
        page = conns[offset : offset + limit]
        return {
            "server_id": s.server_id,
            "now": format_time(now),
            "num_connections": len(page),
            "total": total,
            "offset": offset,
            "limit": limit,
            "connections": page,
        }

    def _conn_info(self, c, now: int, subs: bool, detail: bool, auth: bool = False) -> dict:
        pending = c.pending_bytes()
        d = {
            "cid": c.cid,
            "kind": "Client",
            "type": c.client_type,
            "ip": c.host,
            "port": c.port,
            "start": format_time(c.start_ns),
            "last_activity": format_time(c.last_activity_ns),
            "rtt": rtt_string(c.rtt_ns),
            "uptime": _uptime(now - c.start_ns),
            "idle": _uptime(now - c.last_activity_ns),
            "pending_bytes": pending,
            "in_msgs": c.in_msgs,
            "out_msgs": c.out_msgs,
            "in_bytes": c.in_bytes,
            "out_bytes": c.out_bytes,
            "subscriptions": len(c.subs),
        }
        if c.name:
            d["name"] = c.name
        if c.lang:
            d["lang"] = c.lang
        if c.version:
            d["version"] = c.version
        if c.tls_cipher:
            d["tls_cipher_suite"] = c.tls_cipher
        if auth:
            # nats-server fills these in only with ?auth=true (ConnzOptions.Username).
            if c.user:
                d["authorized_user"] = c.user
            d["account"] = c.account.name
            d["name_tag"] = c.account.name
        if subs and c.subs:
            if detail:
                d["subscriptions_list_detail"] = [
                    {"subject": x.subject, **({"qgroup": x.queue} if x.queue else {}), "sid": x.sid,
                     "msgs": x.delivered, "cid": c.cid}
                    for x in c.subs.values()
                ]
            else:
                d["subscriptions_list"] = [x.subject for x in c.subs.values()]
        return d

    def _closed_info(self, c: dict, auth: bool = False) -> dict:
        d = {
            "cid": c["cid"],
            "kind": "Client",
            "type": c.get("type", "nats"),
            "ip": c["ip"],
            "port": c["port"],
            "start": format_time(c["start"]),
            "stop": format_time(c["stop"]),
            "reason": c["reason"],
            "uptime": _uptime(c["stop"] - c["start"]),
            "in_msgs": c["in_msgs"],
            "out_msgs": c["out_msgs"],
            "in_bytes": c["in_bytes"],
            "out_bytes": c["out_bytes"],
            "subscriptions": 0,
        }
        for k in ("name", "lang", "version"):
            if c.get(k):
                d[k] = c[k]
        if auth:
            if c.get("user"):
                d["authorized_user"] = c["user"]
            if c.get("account"):
                d["account"] = d["name_tag"] = c["account"]
        return d

    # ------------------------------------------------------------------ /subsz
    def subsz(self, params: dict, *, http: bool = True) -> dict:
        """Subscriptions of every account (nats-server Subsz), or of ``?acc=`` alone; each listed subscription
        names its account."""
        if http:
            self.count("/subsz")
        s = self.server
        d = {"server_id": s.server_id, "now": format_time(s.clock.time_ns())}
        acc_name = str(params.get("acc") or "")
        if acc_name:
            acc = s.accounts.get(acc_name)
            accounts = [acc] if acc is not None else []
        else:
            accounts = list(s.accounts.by_name.values())
        d.update(_sublist_stats([a.sublist for a in accounts]))
        subs = [(a.name, x) for a in accounts for x in a.sublist.all_subscriptions()]
        test = params.get("test")
        if test:
            from skiff.protocol.subjects import subject_matches

            subs = [(n, x) for n, x in subs if subject_matches(x.subject, test)]
        offset = max(_int(params, "offset", 0), 0)
        limit = _int(params, "limit", 1024) or 1024
        d["total"] = len(subs)
        d["offset"] = offset
        d["limit"] = limit
        if _flag(params, "subs") and subs:
            page = sorted(subs, key=lambda t: (t[1].subject, t[0]))[offset : offset + limit]
            d["subscriptions_list"] = [
                {
                    "account": name,
                    "account_tag": name,
                    "subject": x.subject,
                    **({"qgroup": x.queue} if x.queue else {}),
                    "sid": x.sid,
                    "msgs": x.delivered,
                    "cid": x.conn.cid if x.conn is not None else 0,
                }
                for name, x in page
            ]
        return d

    # ------------------------------------------------------------------ /healthz, /jsz, /accountz, /accstatz
    def healthz(self, params: dict, *, http: bool = True) -> tuple[int, dict]:
        if http:
            self.count("/healthz")
        s = self.server
        if not s.running:
            return 503, {"status": "unavailable", "status_code": 503, "error": "server is not running"}
        if s.jetstream is not None and not s.jetstream.healthy():
            return 503, {"status": "unavailable", "status_code": 503, "error": "JetStream is not current"}
        return 200, {"status": "ok"}

    def jsz(self, params: dict, *, http: bool = True) -> dict:
        if http:
            self.count("/jsz")
        s = self.server
        if s.jetstream is None:
            return {"server_id": s.server_id, "now": format_time(s.clock.time_ns()), "disabled": True, "config": {},
                    "memory": 0, "storage": 0, "reserved_memory": 0, "reserved_storage": 0, "accounts": 0,
                    "ha_assets": 0, "api": {"total": 0, "errors": 0}, "streams": 0, "consumers": 0, "messages": 0,
                    "bytes": 0}
        d = s.jetstream.jsz(params)
        acc_name = str(params.get("acc") or "")
        if _flag(params, "accounts") or acc_name:
            # nats-server Jsz: account_details for every JetStream account, or for ?acc= alone (sorted by name).
            engines = getattr(s, "jetstreams", None) or {s.js_account.name: s.jetstream}
            names = sorted(n for n in engines if not acc_name or n == acc_name)
            details = [self._account_jsz(n, engines[n]) for n in names]
            if details:
                total = d.pop("total", None)
                d["account_details"] = details
                if total is not None:
                    d["total"] = total
        return d

    def _account_jsz(self, name: str, engine) -> dict:
        """One account's JetStream usage (nats-server AccountDetail without streams)."""
        t = engine.totals()
        return {"name": name, "id": name, "memory": t["memory"], "storage": t["storage"],
                "reserved_memory": _NO_LIMIT, "reserved_storage": _NO_LIMIT, "accounts": 0, "ha_assets": 0,
                "api": {"level": 0, "total": getattr(engine, "api_total", 0), "errors": getattr(engine, "api_errors", 0)}}

    def jsz_account(self, name: str) -> dict:
        """``$SYS.REQ.ACCOUNT.<acc>.JSZ`` (nats-server JszAccount): the account's detail, or an error."""
        s = self.server
        engines = getattr(s, "jetstreams", None) or ({s.js_account.name: s.jetstream} if s.jetstream else {})
        engine = engines.get(name)
        if s.jetstream is None:
            raise LookupError("jetstream not enabled")
        if engine is None:
            raise LookupError(f"account {name!r} not found")
        return self._account_jsz(name, engine)

    def accountz(self, params: dict, *, http: bool = True) -> dict:
        if http:
            self.count("/accountz")
        s = self.server
        d: dict = {"server_id": s.server_id, "now": format_time(s.clock.time_ns())}
        if s.accounts.system is not None:
            d["system_account"] = s.accounts.system.name
        acc_name = str(params.get("acc") or "")
        if acc_name:
            acc = s.accounts.get(acc_name)
            if acc is None:
                raise ValueError(f"Account {acc_name} does not exist")
            d["account_detail"] = self.account_info(acc)
            return d
        d["accounts"] = list(s.accounts.by_name)
        return d

    def account_info(self, acc) -> dict:
        """nats-server AccountInfo (accountz?acc=, $SYS.REQ.ACCOUNT.<acc>.INFO): the account's detail
        (server/monitor/accountz.py) and its Sublist's figures as /subsz counts them."""
        d = account_detail(self.server, acc)
        d["sublist_stats"] = _sublist_stats([acc.sublist])
        return d

    def account_stat(self, acc) -> dict:
        """nats-server AccountStat (accstatz, account CONNS events): connections, subscriptions and the messages
        the account's clients sent and received."""
        s = self.server
        live = [c for c in s.clients.values() if c.account is acc]
        closed = getattr(acc, "closed_totals", None) or (0, 0, 0, 0)
        in_msgs = closed[0] + sum(c.in_msgs for c in live)
        in_bytes = closed[1] + sum(c.in_bytes for c in live)
        out_msgs = closed[2] + sum(c.out_msgs for c in live)
        out_bytes = closed[3] + sum(c.out_bytes for c in live)
        zero = {"msgs": 0, "bytes": 0}
        leafs = s.leaf_count(acc)  # events.go statz: TotalConns is the local connections plus the leaf ones
        return {"acc": acc.name, "name": acc.name, "conns": acc.num_conns, "leafnodes": leafs,
                "total_conns": acc.num_conns + leafs, "num_subscriptions": acc.sublist.count,
                "sent": {"msgs": out_msgs, "bytes": out_bytes, "gateways": dict(zero), "routes": dict(zero),
                         "leafs": dict(zero)},
                "received": {"msgs": in_msgs, "bytes": in_bytes, "gateways": dict(zero), "routes": dict(zero),
                             "leafs": dict(zero)},
                "slow_consumers": 0}

    def accstatz(self, params: dict, *, http: bool = True) -> dict:
        """/accstatz (nats-server AccountStatz): accounts with connections, or all with ``?unused=1``;
        ``?accs=A,B`` picks accounts."""
        if http:
            self.count("/accstatz")
        s = self.server
        unused = _flag(params, "unused")
        names = [n for n in str(params.get("accs") or "").split(",") if n]
        accounts = [s.accounts.get(n) for n in names] if names else list(s.accounts.by_name.values())
        stats = [self.account_stat(a) for a in accounts if a is not None and (unused or a.num_conns > 0)]
        return {"server_id": s.server_id, "now": format_time(s.clock.time_ns()), "account_statz": stats}

    def rss(self) -> int:
        return _rss_bytes()

    def cpu(self) -> float:
        return self._cpu()

    def metrics(self) -> bytes:
        from .metrics import render

        return render(self.server)
