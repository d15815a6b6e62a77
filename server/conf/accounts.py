"""The ``accounts { }`` block, as nats-server's opts.go parseAccounts reads it.

Either a list of names (``accounts: [A, B]``) or a map of ``name: { ... }`` with ``nkey``, ``users``,
``default_permissions``, ``jetstream``, ``exports`` and ``imports``.  The result is a plain ``{name: {...}}`` dict
that ``server/core/accounts.py`` and ``auth.py`` read.  What Skiff does not implement inside an account (``mappings``,
latency tracking, ``share``) is refused with the key and its line, as the top-level keys are (support.py).  Errors
use nats-server's texts.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from skiff.protocol.subjects import is_valid_literal_subject
from skiff.server.conf.values import Token, plain

if TYPE_CHECKING:  # pragma: no cover
    from skiff.server.conf.mapping import _Mapper

_NOT_IMPLEMENTED = {
    "mappings": "subject mappings (messages would stay on the subject published)",
    "maps": "subject mappings (messages would stay on the subject published)",
}


def parse_accounts(m: "_Mapper", tok: Token) -> dict[str, dict]:
    v = tok.value
    out: dict[str, dict] = {}
    if isinstance(v, list):
        for nt in v:
            name = nt.value
            if not isinstance(name, str):
                m.err(nt, f"Expected account name to be a string, got {plain(name)}")
            elif name == "$G":
                m.err(nt, f'"{name}" is a Reserved Account')
            elif name in out:
                m.err(nt, f"Duplicate Account Entry: {name}")
            else:
                out[name] = {}
        return out
    if not isinstance(v, dict):
        m.err(tok, f"Expected map entries for accounts, got {plain(v)}")
        return out
    seen_users: set[str] = {u.get("user") or u.get("nkey") for u in m.settings.get("users") or []}
    users_tokens: list[tuple[Token, list[dict]]] = []
    for name, at in v.items():
        if at.used_variable:
            continue
        if not isinstance(at.value, dict):
            m.err(at, "Expected map entries for accounts")
            continue
        if name == "$G":
            m.err(at, f'"{name}" is a Reserved Account')
            continue
        acc: dict[str, Any] = {"users": [], "exports": [], "imports": []}
        out[name] = acc
        for k, vt in at.value.items():
            lk = k.lower()
            if lk in _NOT_IMPLEMENTED:
                if plain(vt.value) not in ({}, [], "", None):
                    m.err(vt, f'"accounts.{name}.{k}" is not implemented by Skiff: {_NOT_IMPLEMENTED[lk]}')
                continue
            try:
                if lk == "nkey":
                    from skiff.server.core.nkey import is_public_key

                    if not isinstance(vt.value, str) or not is_public_key(vt.value, "A"):
                        m.err(vt, f"Not a valid public nkey for an account: {plain(vt.value)!r}")
                    else:
                        acc["nkey"] = vt.value
                elif lk == "users":
                    acc["users"] = m.users(vt)
                    users_tokens.append((vt, acc["users"]))
                elif lk == "default_permissions":
                    acc["default_permissions"] = m.permissions(vt)
                elif lk == "limits":
                    acc["limits"] = _limits(m, vt)
                elif lk == "jetstream":
                    acc["jetstream"], limits = _jetstream(m, vt, name)
                    if limits:
                        acc["jetstream_limits"] = limits
                elif lk == "exports":
                    acc["exports"] = _list_of(m, vt, "Exports", lambda t: _export(m, t, name))
                elif lk == "imports":
                    acc["imports"] = _list_of(m, vt, "Imports", lambda t: _import(m, t, name))
                elif lk in ("msg_trace", "trace_dest"):
                    _msg_trace(m, vt, k, acc)
                else:
                    m.unknown(vt, k)
            except m.Bad:
                continue
    for ut, users in users_tokens:
        if users and m.settings.get("username"):
            m.err(ut, "Can not have a single user/pass and accounts")
        elif users and m.settings.get("authorization"):
            m.err(ut, "Can not have a token and accounts")
        for u in users:
            key = u.get("nkey") or u.get("user")
            if key in seen_users:
                kind = "nkey" if u.get("nkey") else "user"
                m.err(ut, f"Duplicate {kind} {key!r} detected".replace("'", '"'))
            seen_users.add(key)
    _check_references(m, tok, out)
    return out


def _check_references(m: "_Mapper", tok: Token, accounts: dict[str, dict]) -> None:
    """nats-server checks exports' and imports' account names once every account is known."""
    for acc in accounts.values():
        for ex in acc.get("exports") or []:
            kind = "service" if "service" in ex else "stream"
            for an in ex.get("accounts") or []:
                if an not in accounts:
                    m.err(tok, f'"{an}" account not defined for {kind} export')
        for im in acc.get("imports") or []:
            kind = "service" if "service" in im else "stream"
            an, subject = im[kind]["account"], im[kind]["subject"]
            if an not in accounts:
                m.err(tok, f'"{an}" account not defined for {kind} import')
            elif not _exported(accounts[an], kind, subject, name_of(accounts, acc)):
                m.err(tok, f'Error adding {kind} import "{subject}": {kind} import not authorized')


def name_of(accounts: dict[str, dict], acc: dict) -> str:
    return next(n for n, a in accounts.items() if a is acc)


def _exported(exporter: dict, kind: str, subject: str, importer: str) -> bool:
    """nats-server checkStreamImportAuthorized / checkServiceImportAuthorized: inside an export of that kind, and
    a private export names the importer."""
    from skiff.protocol.subjects import is_subset

    for ex in exporter.get("exports") or []:
        if kind in ex and is_subset(subject, ex[kind]):
            allowed = ex.get("accounts")
            if allowed is None or importer in allowed:
                return True
    return False


_LIMITS = {"max_connections": "max_connections", "max_conn": "max_connections",
           "max_subscriptions": "max_subscriptions", "max_subs": "max_subscriptions",
           "max_payload": "max_payload", "max_pay": "max_payload",
           "max_leafnodes": "max_leafnodes", "max_leafs": "max_leafnodes"}


def _limits(m: "_Mapper", tok: Token) -> dict[str, int]:
    """nats-server parseAccountLimits; max_leafnodes has nothing to limit while leaf nodes are refused."""
    if not isinstance(tok.value, dict):
        m.err(tok, f"Expected account limits to be a map/struct, got {plain(tok.value)}")
        raise m.Bad
    out: dict[str, int] = {}
    for k, vt in tok.value.items():
        key = _LIMITS.get(k.lower())
        if key is None:
            if not vt.used_variable:
                m.err(vt, f'Unknown field "{k}" parsing account limits')
            continue
        try:
            out[key] = m.expect(vt, int, k)
        except m.Bad:
            continue
    return out


_JS_LIMITS = {
    "max_memory": "max_memory", "max_mem": "max_memory", "mem": "max_memory", "memory": "max_memory",
    "max_store": "max_storage", "max_file": "max_storage", "max_disk": "max_storage", "store": "max_storage",
    "disk": "max_storage",
    "max_streams": "max_streams", "streams": "max_streams",
    "max_consumers": "max_consumers", "consumers": "max_consumers",
    "mem_max_stream_bytes": "memory_max_stream_bytes", "memory_max_stream_bytes": "memory_max_stream_bytes",
    "disk_max_stream_bytes": "storage_max_stream_bytes", "store_max_stream_bytes": "storage_max_stream_bytes",
    "max_ack_pending": "max_ack_pending",
}


def _jetstream(m: "_Mapper", tok: Token, account: str) -> tuple[bool, dict]:
    """(enabled, limits) as nats-server parseJetStreamForAccount reads them: a bool, "enabled"/"disabled", or a
    map of account limits (which enables JetStream)."""
    v = tok.value
    if isinstance(v, bool):
        return v, {}
    if isinstance(v, str):
        lv = v.lower()
        if lv in ("enabled", "enable"):
            return True, {}
        if lv in ("disabled", "disable"):
            return False, {}
        m.err(tok, f"Expected 'enabled' or 'disabled' for string value, got '{v}'")
        raise m.Bad
    if not isinstance(v, dict):
        m.err(tok, f"Expected map, bool or string to define JetStream, got {_go_type(v)}")
        raise m.Bad
    limits: dict = {}
    for k, vt in v.items():
        lk = k.lower()
        if lk in ("max_bytes_required", "max_stream_bytes", "max_bytes"):
            if not isinstance(vt.value, bool):
                m.err(vt, f'Expected a parseable bool for "{k}", got {plain(vt.value)}')
                raise m.Bad
            limits["max_bytes_required"] = vt.value
        elif lk in _JS_LIMITS:
            if not isinstance(vt.value, int) or isinstance(vt.value, bool):
                m.err(vt, f'Expected a parseable size for "{k}", got {plain(vt.value)}')
                raise m.Bad
            limits[_JS_LIMITS[lk]] = vt.value
        elif lk == "cluster_traffic":  # where RAFT traffic of clustered assets goes: no clustering, no effect
            if vt.value not in ("system", "owner", ""):
                m.err(vt, f"Expected 'system' or 'owner' string value for \"{k}\", got {plain(vt.value)}")
                raise m.Bad
        elif not vt.used_variable:
            m.unknown(vt, k)
    return True, limits


def _list_of(m: "_Mapper", tok: Token, what: str, item) -> list[dict]:
    if not isinstance(tok.value, list):
        m.err(tok, f"{what} should be an array, got {_go_type(tok.value)}")
        raise m.Bad
    out = []
    for it in tok.value:
        try:
            r = item(it)
        except m.Bad:
            continue
        if r is not None:
            out.append(r)
    return out


def _export(m: "_Mapper", tok: Token, account: str) -> dict | None:
    v = tok.value
    if not isinstance(v, dict):
        m.err(tok, f"Export Items should be a map with type entry, got {_go_type(v)}")
        return None
    ex: dict[str, Any] = {}
    atrc = tok
    for k, vt in v.items():
        lk = k.lower()
        if lk in ("stream", "service"):
            other = "service" if lk == "stream" else "stream"
            if other in ex:
                m.err(vt, f"Detected {lk} {plain(vt.value)!r} but already saw a {other}".replace("'", '"'))
                continue
            ex[lk] = m.expect(vt, str, k)
        elif lk in ("response", "response_type"):
            rt = m.expect(vt, str, k).lower()
            types = {"single": "singleton", "singleton": "singleton", "stream": "stream", "chunk": "chunked",
                     "chunked": "chunked"}
            if rt not in types:
                m.err(vt, f'Unknown response type: "{vt.value}"')
                continue
            ex["response_type"] = types[rt]
        elif lk in ("threshold", "response_threshold", "response_max_time", "response_time"):
            ex["threshold"] = m.duration(vt, k, allow_seconds=False)
        elif lk == "accounts":
            ex["accounts"] = m.string_list(vt, k)
        elif lk == "latency":
            m.err(vt, f'"accounts.{account}.exports.latency" is not implemented by Skiff: service latency tracking')
        elif lk == "account_token_position":
            if vt.value not in (0, None):
                m.err(vt, f'"accounts.{account}.exports.account_token_position" is not implemented by Skiff')
        elif lk == "allow_trace":
            ex["allow_trace"] = m.expect(vt, bool, k)
            atrc = vt
        else:
            m.unknown(vt, k)
    if "stream" in ex and ("response_type" in ex or "threshold" in ex):
        m.err(tok, "Detected response directive on non-service")
        return None
    if "stream" in ex and "allow_trace" in ex:  # a service export's: the requests' traces go on into this account
        m.err(atrc, "Detected allow_trace directive on non-service")
        return None
    if "stream" not in ex and "service" not in ex:
        return None
    return ex


def _import(m: "_Mapper", tok: Token, account: str) -> dict | None:
    v = tok.value
    if not isinstance(v, dict):
        m.err(tok, f"Import Items should be a map with type entry, got {_go_type(v)}")
        return None
    im: dict[str, Any] = {}
    atrc = tok
    for k, vt in v.items():
        lk = k.lower()
        if lk in ("stream", "service"):
            if not isinstance(vt.value, dict):
                m.err(vt, f"{k.capitalize()} entry should be an account map, got {_go_type(vt.value)}")
                continue
            src: dict[str, str] = {}
            for sk, st in vt.value.items():
                if sk.lower() in ("account", "subject"):
                    src[sk.lower()] = m.expect(st, str, sk)
                else:
                    m.unknown(st, sk)
            if not src.get("account") or not src.get("subject"):
                m.err(vt, "Expect an account name and a subject")
                continue
            im[lk] = src
        elif lk == "prefix":
            im["prefix"] = m.expect(vt, str, k)
        elif lk == "to":
            im["to"] = m.expect(vt, str, k)
        elif lk == "share":
            if vt.value is not False:
                m.err(vt, f'"accounts.{account}.imports.share" is not implemented by Skiff: sharing the requester\'s '
                          "client info (Nats-Request-Info) with the exporter")
        elif lk == "allow_trace":
            im["allow_trace"] = m.expect(vt, bool, k)
            atrc = vt
        else:
            m.unknown(vt, k)
    if "service" in im and "allow_trace" in im:  # a stream import's: the trace goes on into this account
        m.err(atrc, "Detected allow_trace directive on a non-stream")
        return None
    if "stream" in im and im.get("prefix") and im.get("to"):
        m.err(tok, "Stream import can not have a 'prefix' and a 'to' property")
        return None
    if "stream" not in im and "service" not in im:
        return None
    return im


def _msg_trace(m: "_Mapper", tok: Token, key: str, acc: dict) -> None:
    """opts.go parseAccountMsgTrace: ``msg_trace: "<subject>"`` or ``{dest, sampling}`` (an integer or ``"N%"`` in
    1..100, 100 when left out): where a message with a sampled ``traceparent`` header is traced
    (server/core/msgtrace.py)."""
    def dest(t: Token, k: str) -> None:
        if not isinstance(t.value, str):
            m.err(t, f'Field "{k}" should be a string, got {_go_type(plain(t.value))}')
            raise m.Bad
        if not is_valid_literal_subject(t.value):
            m.err(t, f'Trace destination "{t.value}" is not valid')
            raise m.Bad
        acc["trace_dest"] = t.value

    def sampling(t: Token, n: int) -> None:
        if n <= 0 or n > 100:  # the typo is nats-server's
            m.err(t, f"Ttrace destination sampling value {n} is invalid, needs to be [1..100]")
            raise m.Bad
        acc["trace_sampling"] = n

    v = tok.value
    if isinstance(v, str):
        dest(tok, key)
    elif isinstance(v, dict):
        for k, t in v.items():
            lk = k.lower()
            if lk == "dest":
                dest(t, k)
            elif lk == "sampling":
                sv = t.value
                if isinstance(sv, bool) or not isinstance(sv, (int, str)):
                    m.err(t, f'Trace destination sampling field "{k}" should be an integer or a percentage, got '
                             f"{_go_type(plain(sv))}")
                    raise m.Bad
                if isinstance(sv, str):
                    try:
                        sv = int(sv[:-1] if sv.endswith("%") else sv)  # strconv.Atoi after TrimSuffix "%"
                    except ValueError:
                        m.err(t, f'Invalid trace destination sampling value "{t.value}"')
                        raise m.Bad from None
                sampling(t, sv)
            elif not t.used_variable:
                m.err(t, f'Unknown field "{k}" parsing account message trace map/struct "{key}"')
                raise m.Bad
    else:
        m.err(tok, f'Expected account message trace "{key}" to be a string or a map/struct, got {_go_type(plain(v))}')
        raise m.Bad
    if acc.get("trace_dest") and not acc.get("trace_sampling"):
        acc["trace_sampling"] = 100
    elif acc.get("trace_sampling") and not acc.get("trace_dest"):
        m.warnings.append(f"{tok.location}: Trace destination sampling ignored since no destination was set")
        acc["trace_sampling"] = 0


def _go_type(v: Any) -> str:
    return {dict: "map[string]interface {}", list: "[]interface {}", str: "string", bool: "bool", int: "int64",
            float: "float64"}.get(type(v), type(v).__name__)
