"""From a parsed configuration file to ``ServerOptions`` settings, key by key as nats-server reads them.

Theory of operation
-------------------
:func:`config_settings` walks the token tree that ``parser.py`` produced and returns a flat ``dict`` of
``ServerOptions`` field names to values (nested dicts for ``tls``, ``users``, ``permissions``), plus the warnings
nats-server would print.  It follows nats-server's ``processConfigFileLine`` (server/opts.go):

* Keys are matched case-insensitively and have the same aliases (``net`` for ``host``, ``max_conn`` for
  ``max_connections``, ``pidfile`` for ``pid_file``...).
* An unknown top-level key is an error (``unknown field "x"``), except a key that a ``$variable`` reference used;
  unknown keys inside ``authorization``, ``jetstream``, ``tls`` and user entries are errors too.
* Keys nats-server knows but Skiff does not implement (``cluster``, ``leafnodes``, ``mqtt``...) are errors that say so, or warnings in ``ignored`` when no client could see the
  difference: the decision is made key by key in ``support.py``.
* Every problem is collected (nats-server reports them all at once) and raised as one :class:`ConfigError`;
  each names ``file:line:col`` of the key it is about.

Durations: ``ping_interval`` and ``write_deadline`` take a Go duration string, or a bare integer of seconds with a
warning ("should be converted to a duration"); ``lame_duck_duration`` must be a string of at least 30s.
``jetstream { max_memory_store / max_file_store }`` take integers (``1G`` syntax) or strings ending in K/M/G/T
(powers of 1024, nats-server ``getStorageSize``).
"""
from __future__ import annotations

from typing import Any, Callable

from skiff.server.conf.errors import ConfigError
from skiff.server.conf import operator as operator_conf
from skiff.server.conf import support
from skiff.server.conf.jetstream_limits import parse_limits as jetstream_limits
from skiff.server.conf.values import Token, parse_duration, plain

MAX_INT32 = 2**31 - 1


class _Bad(Exception):
    """A value of the wrong type: recorded as a config error, processing continues with the next key."""


class _Mapper:
    Bad = _Bad  # for the block parsers in sibling modules (accounts.py)
    def __init__(self) -> None:
        self.settings: dict[str, Any] = {}
        self.errors: list[ConfigError] = []
        self.warnings: list[str] = []
        self.ignored: list[str] = []

    # -- helpers ----------------------------------------------------------------------------------------------

    def err(self, tok: Token | None, reason: str) -> None:
        if tok is None:
            self.errors.append(ConfigError(reason))
        else:
            self.errors.append(ConfigError(reason, tok.file or "<string>", tok.line, tok.col))

    def warn(self, tok: Token, field: str, reason: str) -> None:
        self.warnings.append(f"{tok.location}: invalid use of field {field!r}: {reason}")

    def not_implemented(self, table: dict[str, support.Unimplemented], k: str, tok: Token, name: str) -> bool:
        """Apply ``support``'s decision for key ``k`` (``name`` as reported); True when the key must be skipped."""
        entry = table.get(k)
        if entry is None or entry.accepts(plain(tok.value)):
            return False
        if entry.level == support.REFUSE:
            self.err(tok, support.refusal(name, entry))
            return True
        self.ignored.append(f"{tok.location}: {support.warning(name, entry)}")
        return False  # still type-checked by its branch, if it has one

    def unknown(self, tok: Token, key: str) -> None:
        if not tok.used_variable:
            self.err(tok, f'unknown field "{key}"')

    def expect(self, tok: Token, kind: type | tuple[type, ...], key: str) -> Any:
        v = tok.value
        kinds = kind if isinstance(kind, tuple) else (kind,)
        # bool is an int in Python; the file's types are distinct.
        ok = isinstance(v, kinds) and not (isinstance(v, bool) and bool not in kinds)
        if not ok:
            names = {str: "a string", int: "an integer", bool: "a boolean", float: "a number", dict: "a map",
                     list: "an array"}
            want = " or ".join(names.get(k, k.__name__) for k in kinds)
            self.err(tok, f"{key}: expected {want}, got {_type_name(v)}")
            raise _Bad
        return v

    def duration(self, tok: Token, key: str, allow_seconds: bool = True) -> float:
        v = tok.value
        if isinstance(v, str):
            try:
                return parse_duration(v)
            except ValueError as e:
                self.err(tok, f"error parsing {key}: {e}")
                raise _Bad from None
        if allow_seconds and isinstance(v, int) and not isinstance(v, bool):
            self.warn(tok, key, f"{key} should be converted to a duration")
            return float(v)
        self.err(tok, f"{key}: expected a duration string like \"2m\" or \"30s\", got {_type_name(v)}")
        raise _Bad

    def storage_size(self, tok: Token, key: str) -> int:
        v = tok.value
        if isinstance(v, int) and not isinstance(v, bool):
            return v
        if not isinstance(v, str):
            self.err(tok, f"{key} must be int64 or string")
            raise _Bad
        if v == "":
            return 0
        mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}.get(v[-1])
        try:
            num = int(v[:-1])
        except ValueError:
            self.err(tok, f'{key} strconv.ParseInt: parsing "{v[:-1]}": invalid syntax')
            raise _Bad from None
        if mult is None:
            self.err(tok, f"{key} sizes defined as strings must end in K, M, G, T")
            raise _Bad
        return num * mult

    def string_list(self, tok: Token, key: str) -> list[str]:
        v = tok.value
        if isinstance(v, str):
            return [v]
        if isinstance(v, list):
            out = []
            for item in v:
                out.append(self.expect(item, str, key))
            return out
        self.err(tok, f"{key}: expected a string or an array of strings, got {_type_name(v)}")
        raise _Bad

    def block(self, tok: Token, table: dict, prefix: str, not_a_map: str,
              handle: Callable[[str, str, Token, dict[str, Any]], bool]) -> dict[str, Any]:
        """A listener block (``websocket``, ``cluster``, ``leafnodes``) as nats-server reads one: a map whose keys
        are ``listen``/``port``/``host``, or implemented by ``handle(key_lower, key, token, out)`` (False: a key it
        does not know), or refused or warned about through ``table`` (support.py), or unknown.  A value of the
        wrong kind is reported and the next key read, so that every error of the block is listed at once."""
        v = tok.value
        if not isinstance(v, dict):
            self.err(tok, not_a_map.format(type=_go_kind(v)))
            raise _Bad
        out: dict[str, Any] = {"_tok": tok}
        for mk, mt in v.items():
            k = mk.lower()
            if self.not_implemented(table, k, mt, f"{prefix}.{mk}"):
                continue
            try:
                if not (self.listen_key(k, mt, mk, out) or handle(k, mk, mt, out) or k in table):
                    self.unknown(mt, mk)
            except _Bad:
                continue
        return out

    def auth_field(self, k: str, tok: Token, key: str, out: dict[str, Any]) -> bool:
        """``user``/``password``/``timeout`` of a listener's ``authorization`` block (opts.go parseSimpleAuth,
        parseAuthorization) into ``username``/``password``/``auth_timeout``; False for any other key.  Go reads an
        int64 or float64 timeout as seconds and anything else as 1 second."""
        if k in ("user", "username"):
            out["username"] = self.expect(tok, str, key)
        elif k in ("pass", "password"):
            out["password"] = self.expect(tok, str, key)
        elif k == "timeout":
            tv = tok.value
            out["auth_timeout"] = float(tv) if isinstance(tv, (int, float)) and not isinstance(tv, bool) else 1.0
        else:
            return False
        return True

    def listen_key(self, k: str, tok: Token, key: str, out: dict[str, Any]) -> bool:
        """``listen`` / ``port`` / ``host`` (``net``) of a listener block into ``out["host"]`` and ``out["port"]``;
        False for any other key.  The client port and the websocket block read them alike (opts.go)."""
        if k == "listen":
            host, port = self.listen(tok, k)
            if host is not None:
                out["host"] = host
            out["port"] = port
        elif k == "port":
            out["port"] = self.expect(tok, int, key)
        elif k in ("host", "net"):
            out["host"] = self.expect(tok, str, key)
        else:
            return False
        return True

    def listen(self, tok: Token, key: str) -> tuple[str | None, int]:
        v = tok.value
        if isinstance(v, int) and not isinstance(v, bool):
            return None, v
        if isinstance(v, str):
            host, port = split_host_port(v)
            if port is None:
                self.err(tok, f"could not parse address string {v!r}")
                raise _Bad
            try:
                return host, int(port)
            except ValueError:
                self.err(tok, f"could not parse port {port!r}")
                raise _Bad from None
        self.err(tok, f"expected port or host:port, got {_type_name(v)}")
        raise _Bad

    # -- top level ----------------------------------------------------------------------------------------------

    def top(self, tokens: dict[str, Token]) -> None:
        s = self.settings
        for key, tok in tokens.items():
            k = key.lower()
            if self.not_implemented(support.TOP_LEVEL, k, tok, key):
                continue
            try:
                if self.listen_key(k, tok, k, s):
                    pass
                elif k == "server_name":
                    name = self.expect(tok, str, k)
                    if " " in name:
                        self.err(tok, "server name cannot contain spaces")
                    else:
                        s["server_name"] = name
                elif k == "client_advertise":
                    s["client_advertise"] = self.expect(tok, str, k)
                elif k in ("debug", "trace", "logtime", "logtime_utc"):
                    s[k] = self.expect(tok, bool, k)
                elif k == "trace_verbose":  # warned about (support.py): tracing on, system client untraced
                    s["trace"] = self.expect(tok, bool, k)
                elif k == "trace_headers":
                    s[k] = s["trace"] = self.expect(tok, bool, k)
                elif k in ("disable_sublist_cache", "no_sublist_cache"):
                    self.expect(tok, bool, k)  # warned about (support.py); the cache stays on
                elif k == "authorization":
                    self.authorization(tok)
                elif k == "accounts":
                    from skiff.server.conf.accounts import parse_accounts

                    s["accounts"] = parse_accounts(self, tok)
                elif k in ("http", "https"):
                    host, port = self.listen(tok, k)
                    if host is not None:
                        s["http_host"] = host
                    s["http_port" if k == "http" else "https_port"] = port
                elif k in ("http_port", "monitor_port"):
                    s["http_port"] = self.expect(tok, int, k)
                elif k == "https_port":
                    s["https_port"] = self.expect(tok, int, k)
                elif k == "http_base_path":
                    s["http_base_path"] = self.expect(tok, str, k)
                elif k in ("store_dir", "storedir"):
                    if s.get("store_dir"):
                        self.err(tok, "Duplicate 'store_dir' configuration")
                    else:
                        s["store_dir"] = self.expect(tok, str, k)
                elif k == "jetstream":
                    self.jetstream(tok)
                elif k in ("leafnodes", "leaf"):
                    from skiff.server.conf.leafnodes import parse_leafnodes

                    s["leafnodes"] = parse_leafnodes(self, tok)
                elif k == "cluster":
                    from skiff.server.conf.cluster import parse_cluster

                    s["cluster"] = parse_cluster(self, tok)
                elif k in ("websocket", "ws"):
                    from skiff.server.conf.websocket import parse_websocket

                    s["websocket"] = parse_websocket(self, tok)
                elif k in ("logfile", "log_file"):
                    s["log_file"] = self.expect(tok, str, k)
                elif k in ("logfile_size_limit", "log_size_limit"):
                    s["log_size_limit"] = self.expect(tok, int, k)
                elif k in ("log_json",):  # Skiff extension
                    s["log_json"] = self.expect(tok, bool, k)
                elif k in ("pidfile", "pid_file"):
                    s["pid_file"] = self.expect(tok, str, k)
                elif k == "ports_file_dir":
                    s["ports_file_dir"] = self.expect(tok, str, k)
                elif k == "prof_port":
                    self.expect(tok, int, k)  # only 0 gets here (support.py)
                elif k in ("max_control_line", "max_payload"):
                    n = self.expect(tok, int, k)
                    if n > MAX_INT32:
                        self.err(tok, f"{key} value is too big")
                    else:
                        s[k] = n
                elif k == "max_pending":
                    s["max_pending"] = self.expect(tok, int, k)
                elif k in ("max_connections", "max_conn"):
                    # nats-server: 0 in the file means "no limit" (-1), not the default.
                    s["max_connections"] = self.expect(tok, int, k) or -1
                elif k == "max_traced_msg_len":
                    s["max_traced_msg_len"] = self.expect(tok, int, k)
                elif k in ("max_subscriptions", "max_subs"):
                    s["max_subscriptions"] = self.expect(tok, int, k)
                elif k == "ping_interval":
                    s["ping_interval"] = self.duration(tok, k)
                elif k == "ping_max":
                    s["ping_max"] = self.expect(tok, int, k)
                elif k == "write_deadline":
                    s["write_deadline"] = self.duration(tok, k)
                elif k == "write_timeout":  # warned about unless "default" (support.py)
                    policy = self.expect(tok, str, k)
                    if policy not in ("default", "close", "retry"):
                        self.err(tok, "write_timeout must be 'default', 'close' or 'retry'")
                elif k == "tls":
                    s["tls"] = self.tls(tok)
                elif k in ("lame_duck_duration", "lame_duck_grace_period"):
                    self.lame_duck(tok, k)
                elif k == "no_auth_user":
                    s["no_auth_user"] = self.expect(tok, str, k)
                elif k in operator_conf.KEYS:
                    operator_conf.parse(self, k, tok)
                elif k in ("system_account", "system"):
                    s["system_account"] = self.expect(tok, str, k)
                elif k in ("no_system_account", "no_system", "no_sys_acc"):
                    s["no_system_account"] = self.expect(tok, bool, k)
                elif k == "allow_non_tls":
                    s[k] = self.expect(tok, bool, k)
                # Keys support.py refuses unless their value asks for what Skiff does anyway: only that value
                # gets here, type-checked as nats-server does, and there is nothing to keep.
                elif k in ("proxy_protocol", "no_header_support"):
                    self.expect(tok, bool, k)
                elif k == "server_tags":
                    self.string_list(tok, k)
                elif k == "server_metadata":
                    for mk, mv in self.expect(tok, dict, k).items():
                        self.expect(mv, str, mk)
                elif k in support.TOP_LEVEL:
                    pass  # not implemented: refused or warned about above, or a value that changes nothing
                else:
                    self.unknown(tok, key)
            except _Bad:
                continue
        operator_conf.validate(self)
        from skiff.server.conf import websocket as websocket_conf

        websocket_conf.validate(self)
        from skiff.server.conf import cluster as cluster_conf

        cluster_conf.validate(self)
        from skiff.server.conf import leafnodes as leafnodes_conf

        leafnodes_conf.validate(self)

    def lame_duck(self, tok: Token, k: str) -> None:
        v = self.expect(tok, str, k)
        try:
            dur = parse_duration(v)
        except ValueError as e:
            self.err(tok, f"error parsing {k}: {e}")
            return
        if k == "lame_duck_duration" and dur < 30:
            self.err(tok, f"invalid lame_duck_duration of {v}, minimum is 30 seconds")
        elif k == "lame_duck_grace_period" and dur < 0:
            self.err(tok, "invalid lame_duck_grace_period, needs to be positive")
        else:
            self.settings[k] = dur

    # -- jetstream ----------------------------------------------------------------------------------------------

    def jetstream(self, tok: Token) -> None:
        s = self.settings
        v = tok.value
        if isinstance(v, bool):
            s["jetstream"] = v
            return
        if isinstance(v, str):
            if v.lower() in ("enabled", "enable"):
                s["jetstream"] = True
            elif v.lower() in ("disabled", "disable"):
                s["jetstream"] = False
            else:
                self.err(tok, f"Expected 'enabled' or 'disabled' for string value, got '{v}'")
            return
        if not isinstance(v, dict):
            self.err(tok, f"jetstream: expected a boolean, 'enabled'/'disabled' or a map, got {_type_name(v)}")
            return
        enable = True
        for mk, mt in v.items():
            k = mk.lower()
            if self.not_implemented(support.JETSTREAM, k, mt, f"jetstream.{mk}"):
                continue
            try:
                if k in ("store", "store_dir", "storedir"):
                    if s.get("store_dir"):
                        self.err(mt, "Duplicate 'store_dir' configuration")
                        continue
                    s["store_dir"] = self.expect(mt, str, mk)
                elif k in ("sync", "sync_interval"):
                    if isinstance(mt.value, str) and mt.value.lower() == "always":
                        s["sync_always"] = True
                        s["sync_interval"] = 120.0
                    else:
                        s["sync_interval"] = self.duration(mt, mk)
                elif k in ("max_memory_store", "max_mem_store", "max_mem"):
                    s["max_memory_store"] = self.storage_size(mt, "max_mem_store")
                elif k in ("max_file_store", "max_file"):
                    s["max_file_store"] = self.storage_size(mt, "max_file_store")
                elif k == "domain":
                    s["jetstream_domain"] = self.expect(mt, str, mk)
                elif k in ("enable", "enabled"):
                    enable = self.expect(mt, bool, mk)
                elif k == "strict":
                    s["jetstream_strict"] = self.expect(mt, bool, mk)
                elif k == "unique_tag":
                    s["jetstream_unique_tag"] = self.expect(mt, str, mk).strip().lower()
                elif k == "limits":
                    s["jetstream_batch_limits"] = jetstream_limits(self, mt, _go_kind)
                elif k in ("max_buffered_msgs", "request_queue_limit", "info_queue_limit", "max_concurrent_io",
                           "meta_compact"):
                    self.expect(mt, int, mk)
                elif k in support.JETSTREAM:
                    pass  # not implemented: refused or warned about above
                else:
                    self.unknown(mt, mk)
            except _Bad:
                continue
        s["jetstream"] = enable

    # -- authorization ------------------------------------------------------------------------------------------

    def authorization(self, tok: Token) -> None:
        am = self.expect(tok, dict, "authorization")
        user = password = token = None
        users: list[dict] | None = None
        default_perms = None
        for mk, mt in am.items():
            k = mk.lower()
            if self.not_implemented(support.AUTHORIZATION, k, mt, f"authorization.{mk}"):
                continue
            try:
                if k in ("user", "username"):
                    user = self.expect(mt, str, mk)
                elif k in ("pass", "password"):
                    password = self.expect(mt, str, mk)
                elif k == "token":
                    token = self.expect(mt, str, mk)
                elif k == "timeout":
                    self.settings["auth_timeout"] = self.timeout(mt, "authorization")
                elif k == "users":
                    users = self.users(mt)
                elif k in ("default_permission", "default_permissions", "permissions"):
                    default_perms = self.permissions(mt)
                elif k in support.AUTHORIZATION:
                    pass  # not implemented: refused above, or a value that changes nothing
                else:
                    self.unknown(mt, mk)
            except _Bad:
                continue
        if (user or password) and token:
            self.err(tok, "Cannot have a user/pass and token")
            return
        if users is not None:
            if user:
                self.err(tok, "Can not have a single user/pass and a users array")
                return
            if token:
                self.err(tok, "Can not have a token and a users array")
                return
            seen: set[str] = set()
            for u in users:
                key = u.get("nkey") or u["user"]
                if key in seen:
                    kind = "nkey" if u.get("nkey") else "user"
                    self.err(tok, f'Duplicate {kind} "{key}" detected')
                    return
                seen.add(key)
                if default_perms is not None and u.get("permissions") is None:
                    u["permissions"] = default_perms
            self.settings["users"] = users
        if user is not None:
            self.settings["username"] = user
        if password is not None:
            self.settings["password"] = password
        if token is not None:
            self.settings["authorization"] = token

    def timeout(self, tok: Token, where: str) -> float:
        v = tok.value
        if isinstance(v, bool):
            self.err(tok, f"error parsing {where} config, 'timeout' wrong type")
            raise _Bad
        if isinstance(v, (int, float)):
            at = float(v)
        elif isinstance(v, str):
            try:
                at = parse_duration(v)
            except ValueError as e:
                self.err(tok, f"error parsing {where} config, 'timeout' {e}")
                raise _Bad from None
        else:
            self.err(tok, f"error parsing {where} config, 'timeout' wrong type")
            raise _Bad
        if where == "authorization" and at > 60:
            self.warn(tok, "timeout", f"timeout of {v} ({at:f} seconds) is high, consider keeping it under 60 "
                                      "seconds. possibly caused by unquoted duration; use '1m' instead of 1m, for example")
        return at

    def users(self, tok: Token) -> list[dict]:
        arr = tok.value
        if not isinstance(arr, list):
            self.err(tok, f"Expected users field to be an array, got {plain(arr)}")
            raise _Bad
        users = []
        for ut in arr:
            if not isinstance(ut.value, dict):
                self.err(ut, f"Expected user entry to be a map/struct, got {plain(ut.value)}")
                continue
            u: dict[str, Any] = {}
            for k, vt in ut.value.items():
                lk = k.lower()
                if self.not_implemented(support.USER, lk, vt, f"authorization.users.{k}"):
                    continue
                try:
                    if lk == "nkey":
                        u["nkey"] = self.expect(vt, str, k)
                    elif lk in ("user", "username"):
                        u["user"] = self.expect(vt, str, k)
                    elif lk in ("pass", "password"):
                        u["password"] = self.expect(vt, str, k)
                    elif lk in ("permission", "permissions", "authorization"):
                        u["permissions"] = self.permissions(vt)
                    elif lk in ("allowed_connection_types", "connection_types", "clients"):
                        u["allowed_connection_types"] = self.string_list(vt, k)
                    elif lk == "proxy_required":
                        self.expect(vt, bool, k)
                    else:
                        self.unknown(vt, k)
                except _Bad:
                    continue
            if u.get("nkey"):
                from skiff.server.core.nkey import is_public_key

                # nats-server parseUsers: an nkey user is its key, and only a user key.
                if not is_public_key(u["nkey"], "U"):
                    self.err(ut, "Not a valid public nkey for a user")
                    raise _Bad
                if u.get("user") or u.get("password"):
                    self.err(ut, "Nkey users do not take usernames or passwords")
                    raise _Bad
            elif not u.get("user"):
                self.err(ut, "User entry requires a user")
                raise _Bad
            users.append(u)
        return users

    def permissions(self, tok: Token) -> dict:
        pm = tok.value
        if not isinstance(pm, dict):
            self.err(tok, f"Expected permissions to be a map/struct, got {plain(pm)}")
            raise _Bad
        out: dict[str, Any] = {}
        for k, vt in pm.items():
            lk = k.lower()
            if self.not_implemented(support.PERMISSIONS, lk, vt, f"permissions.{k}"):
                continue
            try:
                if lk in ("pub", "publish", "import"):
                    out["publish"] = self.subject_permission(vt)
                elif lk in ("sub", "subscribe", "export"):
                    out["subscribe"] = self.subject_permission(vt)
                elif lk in ("publish_allow_responses", "allow_responses"):
                    resp = self.allow_responses(vt)
                    if resp is not None:
                        out["allow_responses"] = resp
                        # nats-server: allowing responses turns off the blanket publish allow.
                        pub = out.setdefault("publish", {"allow": None, "deny": None})
                        if pub.get("allow") is None:
                            pub["allow"] = []
                elif not vt.used_variable:
                    self.err(vt, f"Unknown field {k!r} parsing permissions")
            except _Bad:
                continue
        return out

    def subject_permission(self, tok: Token) -> dict:
        v = tok.value
        if isinstance(v, dict):
            out: dict[str, Any] = {"allow": None, "deny": None}
            for k, vt in v.items():
                lk = k.lower()
                if lk in ("allow", "deny"):
                    out[lk] = self.string_list(vt, k)
                elif not vt.used_variable:
                    self.err(vt, f"Unknown field name {k!r} parsing subject permissions, only 'allow' or 'deny' "
                                 "are permitted")
            return out
        return {"allow": self.string_list(tok, "permissions"), "deny": None}

    def allow_responses(self, tok: Token) -> dict | None:
        v = tok.value
        if isinstance(v, bool):
            return {"max_msgs": 1, "expires": 120.0} if v else None
        if not isinstance(v, dict):
            self.err(tok, "error parsing response permissions, expected a boolean or a map")
            raise _Bad
        out = {"max_msgs": 1, "expires": 120.0}
        for k, vt in v.items():
            lk = k.lower()
            if lk in ("max", "max_msgs", "max_messages", "max_responses"):
                n = self.expect(vt, int, k)
                if n != 0:
                    out["max_msgs"] = n
            elif lk in ("expires", "expiration", "ttl"):
                d = self.duration(vt, "expires")
                if d != 0:
                    out["expires"] = d
            else:
                self.err(vt, f"Unknown field {k!r} parsing permissions")
        return out

    # -- tls ----------------------------------------------------------------------------------------------------

    def tls(self, tok: Token, check: Callable[[dict[str, Any]], str | None] | None = None,
            remote: bool = False) -> dict:
        """A ``tls { }`` block (parseTLS); ``check`` says what GenTLSConfig would say about its files (tls_problem
        unless the block's owner checks them its own way: conf/leafnodes.py)."""
        tm = self.expect(tok, dict, "tls")
        out: dict[str, Any] = {}
        for mk, mt in tm.items():
            k = mk.lower()
            if self.not_implemented(support.TLS, k, mt, f"tls.{mk}"):
                continue
            try:
                if k in ("cert_file", "key_file", "ca_file"):
                    v = mt.value
                    if not isinstance(v, str):
                        self.err(mt, f"error parsing tls config, expected '{k}' to be filename")
                        continue
                    out[k] = v
                elif k in ("verify", "insecure", "verify_and_map"):
                    v = mt.value
                    if not isinstance(v, bool):
                        self.err(mt, f"error parsing tls config, expected '{k}' to be a boolean")
                        continue
                    if k != "verify_and_map":  # only false gets here (support.TLS)
                        out[k] = v
                elif k == "timeout":
                    out["timeout"] = self.timeout(mt, "tls")
                elif k in ("handshake_first", "first", "immediate"):
                    self.handshake_first(mt, mk, out, remote)
                # only values that ask for what Skiff does get here (support.TLS): type-checked, not kept
                elif k == "min_version":
                    self.expect(mt, str, mk)
                elif k in ("cipher_suites", "curve_preferences", "pinned_certs"):
                    self.string_list(mt, mk)
                elif k in support.TLS:
                    pass  # not implemented: refused above, or a value that changes nothing
                else:
                    self.err(mt, f"error parsing tls config, unknown field {mk!r}")
            except _Bad:
                continue
        problem = (check or tls_problem)(out)
        if problem:
            self.err(tok, problem)
        return out

    def handshake_first_fallback(self, tok: Token, key: str) -> None:
        # nats-server "auto" or a duration: wait that long for a ClientHello, then fall back to sending INFO first
        # (server/client.go tlsHandshakeFirst fallback).  Skiff would wait for the ClientHello for ever, so a client
        # that waits for INFO would hang: refused.
        entry = support.Unimplemented(support.REFUSE, f"{tok.value!r}: the fallback to sending INFO first after a "
                                                      "delay is not implemented; use true or false")
        self.err(tok, support.refusal(f"tls.{key}", entry))

    def handshake_first(self, tok: Token, key: str, out: dict, remote: bool = False) -> None:
        """``remote``: a leaf remote's block, where nats-server keeps only the boolean (opts.go parseRemoteLeafNodes:
        remote.TLSHandshakeFirst = tc.HandshakeFirst): ``auto`` or a delay there is ``true``."""
        v = tok.value
        if isinstance(v, bool):
            out["handshake_first"] = v
        elif isinstance(v, str):
            lv = v.lower()
            if lv in ("true", "on"):
                out["handshake_first"] = True
            elif lv in ("false", "off"):
                out["handshake_first"] = False
            elif lv in ("auto", "auto_fallback"):
                if remote:
                    out["handshake_first"] = True
                else:
                    self.handshake_first_fallback(tok, key)
            else:
                try:
                    parse_duration(v)
                except ValueError:
                    self.err(tok, f"field {key!r}'s value {v!r} is invalid")
                else:
                    if remote:
                        out["handshake_first"] = True
                    else:
                        self.handshake_first_fallback(tok, key)
        else:
            self.err(tok, f"field {key!r} should be a boolean or a string, got {_type_name(v)}")


def tls_problem(tls: dict[str, Any]) -> str | None:
    """What nats-server's GenTLSConfig would say about the files of a TLS block, or None when they load."""
    import ssl

    cert, key, ca = tls.get("cert_file") or "", tls.get("key_file") or "", tls.get("ca_file") or ""
    if not cert:
        return "missing 'cert_file' in TLS configuration"
    if not key:
        return "missing 'key_file' in TLS configuration"
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        ctx.load_cert_chain(cert, key)
    except ssl.SSLError as e:
        return f"error parsing X509 certificate/key pair: {e.reason or e}"
    except OSError as e:
        return f"error parsing X509 certificate/key pair: open {e.filename or cert}: {_os_reason(e)}"
    if ca:
        try:
            ctx.load_verify_locations(ca)
        except ssl.SSLError:
            return f"failed to parse root certificate from {ca!r}"
        except OSError as e:
            return f"open {ca}: {_os_reason(e)}"
    return None


def _os_reason(e: OSError) -> str:
    return (e.strerror or str(e)).lower()


def _type_name(v: Any) -> str:
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int64"
    if isinstance(v, float):
        return "float64"
    if isinstance(v, str):
        return "string"
    if isinstance(v, dict):
        return "map"
    if isinstance(v, list):
        return "array"
    return type(v).__name__


def split_host_port(text: str) -> tuple[str, str | None]:
    """Go's ``net.SplitHostPort``: ``"h:p"``, ``"[::1]:p"``; ``(text, None)`` when there is no port."""
    if text.startswith("["):
        end = text.find("]")
        if end < 0 or not text[end + 1 : end + 2] == ":":
            return text, None
        return text[1:end], text[end + 2 :]
    if text.count(":") != 1:
        return text, None
    host, port = text.split(":")
    return host, port


def config_settings(
    tokens: dict[str, Token], preset: dict[str, Any] | None = None
) -> tuple[dict[str, Any], list[str], list[str]]:
    """(settings, warnings, ignored keys) for a parsed file; raises ConfigError listing every error.

    ``preset`` holds values set before the file is read.  nats-server parses its flags once before the file, so
    ``-sd DIR`` with a file that also sets ``store_dir`` is "Duplicate 'store_dir' configuration"; the preset
    ``store_dir`` reproduces that.  Preset values are not part of the returned settings.
    """
    m = _Mapper()
    preset = dict(preset or {})
    m.settings.update(preset)
    m.top(tokens)
    for k, v in preset.items():
        if m.settings.get(k) is v:
            del m.settings[k]
    if m.errors:
        raise ConfigError.combine(m.errors)
    return m.settings, m.warnings, m.ignored


def _go_kind(v: Any) -> str:
    """The Go type nats-server names in "Expected map ..." errors (%T of the decoded value)."""
    v = plain(v)
    return {bool: "bool", int: "int64", float: "float64", str: "string", list: "[]interface {}",
            dict: "map[string]interface {}"}.get(type(v), type(v).__name__)
