"""The ``websocket { }`` block, key by key as nats-server reads it (server/opts.go parseWebsocket), and the checks
nats-server makes on it before it listens (server/websocket.go validateWebsocketOptions).

Every key nats-server reads is either implemented here or refused with its ``file:line:col`` through the
``WEBSOCKET`` table of support.py (empty today).  The block becomes ``settings["websocket"]``, a dict of
``WebsocketOptions`` fields (server/options.py).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from skiff.server.conf import support
from skiff.server.conf.values import Token, parse_duration, plain

if TYPE_CHECKING:  # pragma: no cover
    from skiff.server.conf.mapping import _Mapper

_ORIGINS = ("allowed_origins", "allowed_origin", "allow_origins", "allow_origin", "origins", "origin")


def parse_websocket(m: "_Mapper", tok: Token) -> dict[str, Any]:
    def key(k: str, mk: str, mt: Token, out: dict[str, Any]) -> bool:
        if k == "advertise":
            out["advertise"] = m.expect(mt, str, mk)
        elif k == "no_tls":
            out["no_tls"] = m.expect(mt, bool, mk)
        elif k == "tls":
            out["tls"] = m.tls(mt)
        elif k == "same_origin":
            out["same_origin"] = m.expect(mt, bool, mk)
        elif k in _ORIGINS:
            out["allowed_origins"] = m.string_list(mt, mk)
        elif k == "handshake_timeout":
            hv = mt.value
            if isinstance(hv, int) and not isinstance(hv, bool):
                out["handshake_timeout"] = float(hv)
            elif isinstance(hv, str):
                try:
                    out["handshake_timeout"] = parse_duration(hv)
                except ValueError as e:
                    m.err(mt, str(e))
            else:
                m.err(mt, f"error parsing handshake timeout: unsupported type {_go_type(hv)}")
        elif k in ("compress", "compression"):
            out["compression"] = m.expect(mt, bool, mk)
        elif k in ("authorization", "authentication"):
            _simple_auth(m, mt, out)
        elif k in ("jwt_cookie", "user_cookie", "pass_cookie", "token_cookie", "no_auth_user"):
            out[k] = m.expect(mt, str, mk)
        elif k == "headers":
            out["headers"] = _headers(m, mt)
        elif k == "ping_interval":
            out["ping_interval"] = m.duration(mt, "ping_interval")
        else:
            return False
        return True

    return m.block(tok, support.WEBSOCKET, "websocket", "Expected websocket to be a map, got {type}", key)


def _headers(m: "_Mapper", mt: Token) -> dict[str, str]:
    hm = mt.value
    if not isinstance(hm, dict):
        m.err(mt, f"error parsing headers: unsupported type {_go_type(hm)}")
        raise m.Bad
    headers = {}
    for hk, ht in hm.items():
        if not isinstance(ht.value, str):
            m.err(ht, f"error parsing header key {hk}: unsupported type {_go_type(ht.value)}")
            continue
        headers[hk] = ht.value
    return headers


def _simple_auth(m: "_Mapper", tok: Token, out: dict) -> None:
    """parseSimpleAuth: user/password/token/timeout only (no users list, no permissions)."""
    am = m.expect(tok, dict, "authorization")
    for mk, mt in am.items():
        k = mk.lower()
        if m.auth_field(k, mt, mk, out):
            pass
        elif k == "token":
            out["token"] = m.expect(mt, str, mk)
        else:
            m.unknown(mt, mk)


def validate(m: "_Mapper") -> None:
    """validateWebsocketOptions, once every top-level key is read (users, operators); only when a port is set."""
    s = m.settings
    ws = s.get("websocket")
    if ws is None:
        return
    tok = ws.pop("_tok", None)
    if not ws.get("port"):
        return
    if not ws.get("tls") and not ws.get("no_tls"):
        m.err(tok, "websocket requires TLS configuration")
        return
    for ao in ws.get("allowed_origins") or []:
        u = urlsplit(ao)
        if u.scheme not in ("http", "https"):
            m.err(tok, f"unable to parse allowed origin {ao!r}: allowed origins must be absolute URLs with http or "
                       "https scheme")
        elif not u.netloc:
            m.err(tok, f"unable to parse allowed origin {ao!r}: host is required")
    nau = ws.get("no_auth_user")
    users = s.get("users") or []
    if nau:
        names = [u.get("user") or u.get("nkey") for u in users]
        for ac in (s.get("accounts") or {}).values():
            names += [u.get("user") or u.get("nkey") for u in (ac or {}).get("users") or []]
        if not names:
            m.err(tok, f'no_auth_user: "{nau}" present, but users/nkeys are not defined')
        elif nau not in names:
            m.err(tok, f'no_auth_user: "{nau}" not present as user or nkey in authorization block or account '
                       "configuration")
    has_users = bool(users) or any((ac or {}).get("users") for ac in (s.get("accounts") or {}).values())
    if has_users:
        if ws.get("username"):
            m.err(tok, "websocket authentication username not compatible with presence of users/nkeys")
        if ws.get("token"):
            m.err(tok, "websocket authentication token not compatible with presence of users/nkeys")
    if ws.get("jwt_cookie") and not (s.get("trusted_operators") or s.get("trusted_keys")):
        m.err(tok, "trusted operators or trusted keys configuration is required for JWT authentication via "
                   f'cookie "{ws["jwt_cookie"]}"')
    for key in ws.get("headers") or {}:
        lk = key.lower()
        if lk in ("host", "content-length", "connection", "upgrade", "nats-no-masking"):
            m.err(tok, f'websocket: invalid header "{key}" not allowed')
        elif lk.startswith("sec-websocket-"):
            m.err(tok, f'websocket: invalid header "{key}", "Sec-WebSocket-" prefix not allowed')


def _go_type(v: Any) -> str:
    v = plain(v)
    return {bool: "bool", int: "int64", float: "float64", str: "string", list: "[]interface {}",
            dict: "map[string]interface {}"}.get(type(v), type(v).__name__)
