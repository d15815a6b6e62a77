"""Operator mode keys: ``operator``, ``trusted_keys``, ``resolver``, ``resolver_preload`` (nats-server opts.go
processConfigFileLine, and jwt.go validateTrustedOperators for the checks made once the whole file is read).

Settings produced (ServerOptions fields):

* ``trusted_operators``: the operator JWTs (each read from a file, or inline when it starts with ``eyJ``);
* ``trusted_keys``: operator public keys given directly;
* ``resolver``: ``{"type": "mem"}`` or ``{"type": "full", "dir", "allow_delete", "hard_delete", "limit"}``;
* ``resolver_preload``: ``{account public key: account JWT}``;
* ``system_account``: the operator JWT's ``system_account`` when the file does not name one.

What Skiff does not do is refused with the key and its line: the URL resolver (and an operator JWT's
``account_server_url``, which nats-server turns into one), the CACHE directory resolver (it fetches accounts from
other servers), ``resolver_tls`` and pinned accounts.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING

from skiff.server.conf.values import Token, parse_duration

if TYPE_CHECKING:  # pragma: no cover
    from skiff.server.conf.mapping import _Mapper

KEYS = ("operator", "operators", "roots", "root", "root_operators", "root_operator", "trusted", "trusted_keys",
        "resolver", "account_resolver", "accounts_resolver", "resolver_preload")


def parse(m: "_Mapper", k: str, tok: Token) -> None:
    s = m.settings
    if k in ("trusted", "trusted_keys"):
        _trusted_keys(m, tok)
    elif k == "resolver_preload":
        _preload(m, tok)
    elif k in ("resolver", "account_resolver", "accounts_resolver"):
        _resolver(m, tok)
    else:
        _operators(m, tok)
    s.setdefault("_operator_tok", tok)


def _operators(m: "_Mapper", tok: Token) -> None:
    from skiff.server.core.jwt import JWTError, read_operator_jwt

    v = tok.value
    files: list[str] = []
    if isinstance(v, str):
        files = [v]
    elif isinstance(v, list):
        for t in v:
            if not isinstance(t.value, str):
                m.err(tok, f"error parsing operators: unsupported type {type(t.value).__name__} where string is "
                           "expected")
                return
            files.append(t.value)
    else:
        m.err(tok, f"error parsing operators: unsupported type {type(v).__name__}")
        return
    jwts = []
    claims = []
    for f in files:
        try:
            token, opc = read_operator_jwt(f)
        except JWTError as e:
            m.err(tok, f"error parsing operator JWT: {e}")
            continue
        jwts.append(token)
        claims.append(opc)
    m.settings["trusted_operators"] = jwts
    if len(claims) == 1:
        if claims[0].nats.get("account_server_url") and "resolver" not in m.settings:
            m.settings["_account_server_url"] = (tok, claims[0].nats["account_server_url"])
        m.settings["_operator_system_account"] = str(claims[0].nats.get("system_account") or "")


def _trusted_keys(m: "_Mapper", tok: Token) -> None:
    from skiff.server.core.nkey import is_public_key

    v = tok.value
    if isinstance(v, str):
        keys = [v]
    elif isinstance(v, list):
        keys = []
        for t in v:
            if isinstance(t.value, str):
                keys.append(t.value)
            else:
                m.err(t, f"error parsing trusted: unsupported type in array {type(t.value).__name__}")
    else:
        m.err(tok, f"error parsing trusted: unsupported type {type(v).__name__}")
        return
    for key in keys:
        if not is_public_key(key, "O"):
            m.err(tok, f'trust key "{key}" required to be a valid public operator nkey')
    m.settings["trusted_keys"] = keys


def _preload(m: "_Mapper", tok: Token) -> None:
    from skiff.server.core.jwt import JWTError, decode

    if not isinstance(tok.value, dict):
        m.err(tok, "preload should be a map of account_public_key:account_jwt")
        return
    out: dict[str, str] = {}
    for key, vt in tok.value.items():
        if not isinstance(vt.value, str):
            m.err(vt, "preload map value should be a string JWT")
            continue
        try:
            decode(vt.value, "account")
        except JWTError:
            m.err(vt, "invalid account JWT")
            continue
        out[key] = vt.value
    m.settings["resolver_preload"] = out


def _resolver(m: "_Mapper", tok: Token) -> None:
    v = tok.value
    m.settings.pop("_account_server_url", None)  # "resolver" takes precedence over the operator's URL
    if isinstance(v, str):
        import re

        if re.search(r"(?i)(MEM|MEMORY)\s*", v):
            m.settings["resolver"] = {"type": "mem"}
        elif re.search(r"(?i)URL", v):
            m.err(tok, '"resolver" is not implemented by Skiff: URL(...), the URL account resolver (accounts fetched '
                       "over HTTP); use MEMORY with resolver_preload, or a FULL directory resolver")
        else:
            m.err(tok, 'error parsing account resolver, should be MEM or  URL("url") or a map containing dir and '
                       "type state=[FULL|CACHE])")
        return
    if not isinstance(v, dict):
        m.err(tok, f"error parsing operator resolver, wrong type {type(v).__name__}")
        return
    res: dict = {"type": "", "dir": "", "allow_delete": False, "hard_delete": None, "limit": 0}
    for k, vt in v.items():
        lk = k.lower()
        try:
            if lk == "dir":
                res["dir"] = m.expect(vt, str, k)
            elif lk == "type":
                res["type"] = m.expect(vt, str, k).lower()
            elif lk == "allow_delete":
                res["allow_delete"] = m.expect(vt, bool, k)
            elif lk == "hard_delete":
                res["hard_delete"] = m.expect(vt, bool, k)
            elif lk == "limit":
                res["limit"] = m.expect(vt, int, k)
            elif lk in ("interval", "timeout", "ttl"):
                # interval: how often servers of a cluster compare their stores; timeout: how long a lookup waits
                # for another server.  A single server has neither, so neither changes what a client sees.
                val = m.expect(vt, str, k)
                try:
                    parse_duration(val)
                except ValueError as e:
                    m.err(tok, str(e))
                    return
                res[lk] = val
            else:
                m.unknown(vt, k)
        except m.Bad:
            continue
    kind = res["type"].upper()
    if kind in ("FULL", "CACHE"):
        if not res["dir"]:
            m.err(tok, "dir has no value and needs to point to a directory")
        elif os.path.exists(res["dir"]) and (not os.path.isdir(res["dir"]) or not os.access(res["dir"], os.X_OK)):
            m.err(tok, "dir needs to point to an accessible directory")
    if kind == "CACHE":
        m.err(tok, '"resolver" is not implemented by Skiff: type CACHE, a resolver that fetches accounts from '
                   "other servers; use type: full")
        return
    if kind == "FULL":
        if res.get("ttl"):
            m.err(tok, "FULL does not accept ttl")
        if res["hard_delete"] is not None and not res["allow_delete"]:
            m.err(tok, "hard_delete has no effect without delete")
        res["type"] = "full"
        res["hard_delete"] = bool(res["hard_delete"])
        m.settings["resolver"] = res
    elif kind in ("MEM", "MEMORY"):
        m.settings["resolver"] = {"type": "mem"}
    else:
        m.err(tok, 'error parsing account resolver, should be MEM or  URL("url") or a map containing dir and type '
                   "state=[FULL|CACHE])")


def validate(m: "_Mapper") -> None:
    """jwt.go validateTrustedOperators, once every key is read; also fills ``system_account`` from the operator."""
    s = m.settings
    tok = s.pop("_operator_tok", None)
    op_sys = s.pop("_operator_system_account", "")
    url = s.pop("_account_server_url", None)
    ops = s.get("trusted_operators") or []
    if not ops:
        if s.get("resolver") or s.get("resolver_preload"):
            if not s.get("trusted_keys"):
                # nats-server keeps a resolver without operators and never uses it: every setting would be dead.
                m.err(tok, '"resolver" is not implemented by Skiff without "operator" or "trusted_keys": nats-server '
                           "never consults it then")
        return
    if url is not None:
        m.err(url[0], '"operator" with an account_server_url and no "resolver" is not implemented by Skiff: '
                      "nats-server would fetch accounts from that URL; configure resolver: MEMORY or a FULL "
                      "directory resolver")
        return
    if not s.get("system_account") and op_sys:
        s["system_account"] = op_sys
    if not s.get("resolver"):
        m.err(None, "operators require an account resolver to be configured")
    if s.get("accounts"):
        m.err(None, "operators do not allow Accounts to be configured directly")
    if s.get("users") or s.get("username"):
        m.err(None, "operators do not allow users to be configured directly")
    if s.get("trusted_keys"):
        m.err(None, "conflicting options for 'TrustedKeys' and 'TrustedOperators'")
    if s.get("system_account") and op_sys and s["system_account"] != op_sys:
        m.err(None, "system_account in config and operator JWT must be identical")
    if not s.get("system_account") and (s.get("resolver") or {}).get("type") == "full":
        m.err(None, "using nats based account resolver - the system account needs to be specified in configuration "
                    "or the operator jwt")
