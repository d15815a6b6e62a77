"""The monitoring documents (nats-server monitor.go): /varz, /connz, /subsz, /healthz, /jsz, /accountz.

Field names and units follow nats-server (durations in ns where the Go struct holds a time.Duration, uptime and
idle as Go duration strings, times RFC3339 with nanoseconds), so tools written for nats-server read them unchanged.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING

from protocol.jsapi.timefmt import format_go_duration, format_time

from ..version import GO_FIELD, PROTO, VERSION

if TYPE_CHECKING:  # pragma: no cover
    from ..core.server import Server


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
    def varz(self, params: dict | None = None) -> dict:
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
            "http_base_path": "",
            "https_port": 0,
            "auth_timeout": s.auth.timeout,
            "max_control_line": o.max_control_line,
            "max_payload": o.max_payload,
            "max_pending": o.max_pending,
            "cluster": {},
            "gateway": {},
            "leaf": {},
            "mqtt": {},
            "websocket": {},
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
                "routes": 0,
                "remotes": 0,
                "leafnodes": 0,
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
                "subscriptions": s.sublist.count,
                "http_req_stats": dict(self.http_req_stats),
                "config_load_time": format_time(s.start_ns),
                "config_digest": "",
                "system_account": "$SYS",
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
    def connz(self, params: dict) -> dict:
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
        conns: list[dict] = []
        if state in ("open", "any"):
            for c in s.clients.values():
                if cid and c.cid != cid:
                    continue
                conns.append(self._conn_info(c, now, subs, detail))
        if state in ("closed", "any"):
            for c in s.closed_clients:
                if cid and c["cid"] != cid:
                    continue
                conns.append(self._closed_info(c))
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

    def _conn_info(self, c, now: int, subs: bool, detail: bool) -> dict:
        pending = c.transport.get_write_buffer_size() if c.transport is not None else 0
        d = {
            "cid": c.cid,
            "kind": "Client",
            "type": "nats",
            "ip": c.host,
            "port": c.port,
            "start": format_time(c.start_ns),
            "last_activity": format_time(c.last_activity_ns),
            "rtt": format_go_duration(c.rtt_ns),
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
        if c.user:
            d["authorized_user"] = c.user
        if subs and c.subs:
            if detail:
                d["subscriptions_list_detail"] = [
                    {"account": "$G", "subject": x.subject, "qgroup": x.queue or None, "sid": x.sid, "msgs": x.delivered,
                     "cid": c.cid}
                    for x in c.subs.values()
                ]
            else:
                d["subscriptions_list"] = [x.subject for x in c.subs.values()]
        return d

    def _closed_info(self, c: dict) -> dict:
        d = {
            "cid": c["cid"],
            "kind": "Client",
            "type": "nats",
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
        return d

    # ------------------------------------------------------------------ /subsz
    def subsz(self, params: dict) -> dict:
        self.count("/subsz")
        s = self.server
        d = {"server_id": s.server_id, "now": format_time(s.clock.time_ns())}
        d.update(s.sublist.stats())
        subs = [x for x in s.sublist.all_subscriptions()]
        test = params.get("test")
        if test:
            from protocol.subjects import subject_matches

            subs = [x for x in subs if subject_matches(x.subject, test)]
        offset = max(_int(params, "offset", 0), 0)
        limit = _int(params, "limit", 1024) or 1024
        d["total"] = len(subs)
        d["offset"] = offset
        d["limit"] = limit
        if _flag(params, "subs"):
            page = sorted(subs, key=lambda x: x.subject)[offset : offset + limit]
            d["subscriptions_list"] = [
                {
                    "account": "$G",
                    "account_tag": "$G",
                    "subject": x.subject,
                    **({"qgroup": x.queue} if x.queue else {}),
                    "sid": x.sid,
                    "msgs": x.delivered,
                    "cid": x.conn.cid if x.conn is not None else 0,
                }
                for x in page
            ]
        return d

    # ------------------------------------------------------------------ /healthz, /jsz, /accountz
    def healthz(self, params: dict) -> tuple[int, dict]:
        self.count("/healthz")
        s = self.server
        if not s.running:
            return 503, {"status": "unavailable", "status_code": 503, "error": "server is not running"}
        if s.jetstream is not None and not s.jetstream.healthy():
            return 503, {"status": "unavailable", "status_code": 503, "error": "JetStream is not current"}
        return 200, {"status": "ok"}

    def jsz(self, params: dict) -> dict:
        self.count("/jsz")
        s = self.server
        if s.jetstream is None:
            return {"server_id": s.server_id, "now": format_time(s.clock.time_ns()), "disabled": True, "config": {},
                    "memory": 0, "storage": 0, "reserved_memory": 0, "reserved_storage": 0, "accounts": 0,
                    "ha_assets": 0, "api": {"total": 0, "errors": 0}, "streams": 0, "consumers": 0, "messages": 0,
                    "bytes": 0}
        return s.jetstream.jsz(params)

    def accountz(self, params: dict) -> dict:
        self.count("/accountz")
        s = self.server
        return {"server_id": s.server_id, "now": format_time(s.clock.time_ns()), "system_account": "$SYS",
                "accounts": ["$G", "$SYS"]}

    def metrics(self) -> bytes:
        from .metrics import render

        return render(self.server)
