"""Everything a Skiff server can be told: ``ServerOptions``, with nats-server's names and defaults.

Theory of operation
-------------------
Options come from three places, later ones winning, as in nats-server (``ConfigureOptions`` in server/opts.go):
field defaults, then the configuration file (``options_from_config``), then command-line flags (``server/cli.py``).
Both the file and the flags produce a ``dict`` of explicitly set fields; the final model is validated once from the
merged dict, so derived defaults (``auth_timeout`` when TLS is on) see the final values.

Units: every duration is a float number of seconds (``ping_interval=120.0``), every size an int of bytes.
``port=-1`` and ``http_port=-1`` mean "pick a random port" as in nats-server; the runner binds port 0 for them.
``http_port=0`` means monitoring is off.  ``http_host=""`` means "the same as ``host``".

The options remember which fields the command line set (``cli_overrides``) so that a configuration reload (SIGHUP)
can re-read the file and apply the flags on top again, as nats-server does.
"""
from __future__ import annotations

import os
import re
from typing import Any

from skiff.protocol.record import Record
from skiff.server.conf import ConfigError

DEFAULT_PORT = 4222
DEFAULT_HOST = "0.0.0.0"
MAX_PAYLOAD_SIZE = 1024 * 1024
MAX_CONTROL_LINE_SIZE = 4096
MAX_PENDING_SIZE = 64 * 1024 * 1024
DEFAULT_MAX_CONNECTIONS = 64 * 1024
DEFAULT_PING_INTERVAL = 120.0
DEFAULT_PING_MAX_OUT = 2
DEFAULT_FLUSH_DEADLINE = 10.0
AUTH_TIMEOUT = 2.0
TLS_TIMEOUT = 2.0
DEFAULT_LAME_DUCK_DURATION = 120.0
DEFAULT_LAME_DUCK_GRACE_PERIOD = 10.0
DEFAULT_SYNC_INTERVAL = 120.0


_MISSING = object()
_SCALARS = {"str": str, "int": int, "float": float, "bool": bool}


def _converter(owner: str, name: str, annotation: str, namespace: dict) -> Any:
    """What a field accepts, from its annotation text (``from __future__ import annotations`` keeps them text):
    a function ``value -> value`` that checks (and, for floats and nested blocks, converts) or raises TypeError.

    The options are filled from values that conf/mapping.py and cli.py already decoded and checked with
    nats-server's own error texts, so this is a guard against a programming error (or an embedding test passing
    ``port="x"``), not a second validation: lists and dicts are checked as such, not element by element, except
    lists of nested blocks (``users``, ``remotes``), whose dicts become option objects.
    """
    text = annotation.replace(" ", "")
    optional = text.endswith("|None")
    base = text[: -len("|None")] if optional else text

    def fail(v: Any) -> TypeError:
        return TypeError(f"{owner}.{name}: expected {annotation}, got {v!r}")

    if base == "Any":
        return None
    if base in _SCALARS:
        tp = _SCALARS[base]

        def scalar(v: Any) -> Any:
            if isinstance(v, tp) and not (tp is int and isinstance(v, bool)):
                return v
            if v is None and optional:
                return v
            # the numeric conversions pydantic made before: 2 -> 2.0, True -> 1, 3.0 -> 3, 1 -> True
            if tp is float and isinstance(v, int):
                return float(v)
            if tp is int and (isinstance(v, bool) or (isinstance(v, float) and v.is_integer())):
                return int(v)
            if tp is bool and isinstance(v, int) and v in (0, 1):
                return bool(v)
            raise fail(v)

        return scalar
    m = re.fullmatch(r"(list|dict)\[(.*)\]", base)
    if m:
        container = list if m.group(1) == "list" else dict
        item = namespace.get(m.group(2))

        def collection(v: Any) -> Any:
            if v is None and optional:
                return v
            if not isinstance(v, container):
                raise fail(v)
            if isinstance(item, type) and issubclass(item, _Model) and container is list:
                return [x if isinstance(x, item) else item.model_validate(x) for x in v]
            return v

        return collection
    nested = namespace.get(base)
    if isinstance(nested, type) and issubclass(nested, _Model):

        def block(v: Any) -> Any:
            if v is None and optional:
                return v
            if isinstance(v, nested):
                return v
            if isinstance(v, dict):
                return nested.model_validate(v)
            raise fail(v)

        return block
    raise AssertionError(f"{owner}.{name}: no converter for {annotation!r}")


class _ModelMeta(type):
    """Turns the annotated class attributes of an options class into a field table (their defaults)."""

    def __new__(mcls, name: str, bases: tuple, ns: dict) -> type:
        fields: dict[str, tuple[Any, Any]] = {}
        for b in bases:
            fields.update(getattr(b, "_fields", {}))
        for attr, annotation in ns.get("__annotations__", {}).items():
            if attr.startswith("_"):
                continue
            default = ns.pop(attr, _MISSING)
            fields[attr] = (default, annotation)
        cls = super().__new__(mcls, name, bases, ns)
        cls._fields = fields  # converters are bound on first use: a field may name a class defined after it
        cls._convert = None
        return cls


class _Model(Record, metaclass=_ModelMeta):
    """A plain options record: keyword construction with defaults, unknown keys refused, nested blocks built from
    dicts.  It replaced pydantic here (pydantic's import and model building were ~60 ms of every start;
    the values are decoded and checked by conf/mapping.py and cli.py with nats-server's texts before they get
    here).  ``model_validate``, ``model_copy``, ``model_dump`` and equality are ``protocol.record.Record``'s,
    shared with the JetStream API models."""

    _fields: dict[str, tuple[Any, Any]]
    _convert: dict[str, Any] | None

    def __init__(self, **values: Any) -> None:
        cls = type(self)
        conv = cls._convert or cls._bind()
        for key in values:
            if key not in conv:
                raise TypeError(f"{cls.__name__}: unknown field {key!r}")
        d = self.__dict__
        for attr, (default, _) in cls._fields.items():
            v = values.get(attr, _MISSING)
            if v is _MISSING:
                if default is _MISSING:
                    raise TypeError(f"{cls.__name__}: missing field {attr!r}")
                v = default.copy() if isinstance(default, (list, dict)) else default
            else:
                c = conv[attr]
                if c is not None:
                    v = c(v)
            d[attr] = v
        self._post_init()

    @classmethod
    def _bind(cls) -> dict[str, Any]:
        import sys

        namespace = vars(sys.modules[cls.__module__])
        cls._convert = {a: _converter(cls.__name__, a, ann, namespace) for a, (_, ann) in cls._fields.items()}
        return cls._convert

    def _post_init(self) -> None:
        pass

    @classmethod
    def _field_names(cls) -> dict[str, tuple[Any, Any]]:
        return cls._fields

    _repr_skip = frozenset({"cli_overrides"})

    def __str__(self) -> str:  # pydantic's str(): what the reload error prints (runner._reload)
        return " ".join(self._repr_args())


class SubjectPermission(_Model):
    """``allow`` / ``deny`` subject lists; ``None`` means "not restricted" (nats-server SubjectPermission)."""

    allow: list[str] | None = None
    deny: list[str] | None = None


class ResponsePermission(_Model):
    """``allow_responses``: the subscriber may publish ``max_msgs`` replies within ``expires`` seconds."""

    max_msgs: int = 1
    expires: float = 120.0


class Permissions(_Model):
    publish: SubjectPermission | None = None
    subscribe: SubjectPermission | None = None
    allow_responses: ResponsePermission | None = None


class User(_Model):
    """One entry of ``authorization { users: [...] }``."""

    user: str = ""
    password: str = ""
    nkey: str = ""
    permissions: Permissions | None = None
    allowed_connection_types: list[str] | None = None

    # The lead's auth code reads users either as objects or as dicts; .get keeps both working.
    def get(self, key: str, default: Any = None) -> Any:
        return getattr(self, key, default)


class TLSOptions(_Model):
    """The client port's ``tls { }`` block (or ``--tls*`` flags)."""

    cert_file: str = ""
    key_file: str = ""
    ca_file: str = ""
    verify: bool = False
    insecure: bool = False
    timeout: float = TLS_TIMEOUT
    handshake_first: bool = False
    handshake_first_fallback: float | None = None  # seconds; set for "auto" or a duration


class WebsocketOptions(_Model):
    """The ``websocket { }`` block (nats-server WebsocketOpts; conf/websocket.py, core/websocket.py)."""

    host: str = DEFAULT_HOST
    port: int = 0  # 0: no WebSocket listener; -1: a random port
    advertise: str = ""
    no_tls: bool = False
    tls: TLSOptions | None = None
    same_origin: bool = False
    allowed_origins: list[str] = []
    handshake_timeout: float = 0.0  # 0: no limit (Go http.Server ReadTimeout 0)
    compression: bool = False
    # authorization { } of the block: when username, token or no_auth_user is set they replace the server's for
    # WebSocket clients (nats-server wsConfigAuth authOverride)
    username: str = ""
    password: str = ""
    token: str = ""
    auth_timeout: float = 0.0
    no_auth_user: str = ""
    jwt_cookie: str = ""
    user_cookie: str = ""
    pass_cookie: str = ""
    token_cookie: str = ""
    headers: dict[str, str] = {}
    ping_interval: float = 0.0  # 0: the server's ping_interval


class ClusterOptions(_Model):
    """The ``cluster { }`` block and the cluster flags (nats-server ClusterOpts; conf/cluster.py, core/cluster.py)."""

    name: str = ""
    host: str = DEFAULT_HOST
    port: int = 0  # 0: no route listener (and no routes, as in nats-server); -1: a random port
    routes: list[str] = []
    username: str = ""
    password: str = ""
    auth_timeout: float = 0.0
    advertise: str = ""
    no_advertise: bool = False
    connect_retries: int = 0
    tls: TLSOptions | None = None  # cluster { tls {} }: TLS first on every route, both ends
    pool_size: int = 0  # route pooling (core/route.py): 0 is nats-server's default, 3; -1: no pooling
    accounts: list[str] = []  # accounts with a dedicated route (with pool_size >= 1)
    compression: str = "accept"  # route compression mode, normalized (conf/cluster.py compression); as nats-server
    compression_rtts: list[float] = []  # s2_auto's RTT thresholds in seconds (conf/cluster.py); [] = the default


class RemoteLeafOptions(_Model):
    """One entry of ``leafnodes { remotes [...] }`` (nats-server RemoteLeafOpts)."""

    urls: list[str] = []
    account: str = ""  # the local account the link binds; "" = the global account
    credentials: str = ""  # a .creds file: its user JWT and the nonce signed by its seed go in CONNECT
    tls: TLSOptions | None = None  # tls {}: TLS to the hub (also done without it when the hub's INFO asks for it)
    compression: str = "s2_auto"  # leaf compression mode, normalized (conf/cluster.py compression); as nats-server
    compression_rtts: list[float] = []  # s2_auto's RTT thresholds in seconds (conf/cluster.py); [] = the default


class LeafNodeOptions(_Model):
    """The ``leafnodes { }`` block (nats-server LeafNodeOpts; conf/leafnodes.py, core/leafnode.py)."""

    host: str = DEFAULT_HOST
    port: int = 0  # 0: no leaf node listener (a spoke may still dial its remotes); -1: a random port
    username: str = ""
    password: str = ""
    account: str = ""  # authorization { account }: the account of the single user (or of every leaf)
    users: list[dict[str, str]] = []  # {user, password, account}
    auth_timeout: float = 0.0
    remotes: list[RemoteLeafOptions] = []
    advertise: str = ""
    no_advertise: bool = False
    reconnect_interval: float = 0.0  # 0: nats-server's 1 s
    tls: TLSOptions | None = None  # tls {}: accepted leaf connections upgrade after INFO (or first: handshake_first)
    compression: str = "s2_auto"  # the hub's leaf compression mode (core/leafnode_conn.py); as nats-server
    compression_rtts: list[float] = []  # s2_auto's RTT thresholds in seconds (conf/cluster.py); [] = the default


class ServerOptions(_Model):
    # -- listening
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    server_name: str = ""
    client_advertise: str = ""
    http_host: str = ""
    http_port: int = 0
    https_port: int = 0
    http_base_path: str = ""  # only "" or "/" (conf/support.py): what /varz shows
    ports_file_dir: str = ""
    # -- JetStream
    jetstream: bool = False
    store_dir: str = ""
    max_memory_store: int = -1  # -1: nats-server computes a default from the machine
    max_file_store: int = -1
    sync_interval: float = DEFAULT_SYNC_INTERVAL
    sync_always: bool = False
    jetstream_domain: str = ""
    jetstream_strict: bool = True
    # jetstream { limits { batch { } } } under JSLimitOpts' JSON names (conf/jetstream_limits.py); 0 or absent:
    # nats-server's default
    jetstream_batch_limits: dict[str, int] = {}
    jetstream_unique_tag: str = ""  # /varz and /jsz config.unique_tag; a single server places nothing by it
    # -- limits
    max_payload: int = MAX_PAYLOAD_SIZE
    max_control_line: int = MAX_CONTROL_LINE_SIZE
    max_pending: int = MAX_PENDING_SIZE
    max_connections: int = DEFAULT_MAX_CONNECTIONS  # -1: no limit
    max_subscriptions: int = 0  # 0: no limit
    ping_interval: float = DEFAULT_PING_INTERVAL
    ping_max: int = DEFAULT_PING_MAX_OUT
    write_deadline: float = DEFAULT_FLUSH_DEADLINE
    # -- logging
    debug: bool = False
    trace: bool = False
    trace_headers: bool = False  # trace only the header block of messages (client.go traceMsgInternal)
    logtime: bool = True
    logtime_utc: bool = False
    log_file: str = ""
    log_size_limit: int = 0
    log_json: bool = False  # Skiff extension: structured JSON log lines
    # -- Skiff's test control (flags only, never config keys: the same file must run on nats-server;
    #    skiff/testing/control.py, docs/testing.md "Control from other languages")
    control: bool = False  # --control: the $SKIFF.> request API
    control_token: str = ""  # --control_token (or SKIFF_CONTROL_TOKEN): required in requests when set
    clock: str = "real"  # --clock=manual: time moves only through $SKIFF.CLOCK.ADVANCE / SET
    max_traced_msg_len: int = 0
    pid_file: str = ""
    # -- authentication
    username: str = ""
    password: str = ""
    authorization: str = ""  # the token
    users: list[User] = []
    no_auth_user: str = ""
    auth_timeout: float = 0.0  # 0: default, 2s, or the TLS timeout + 1s when TLS is on (nats-server)
    accounts: dict[str, Any] = {}  # raw ``accounts { }`` block, not interpreted yet
    system_account: str = ""
    # operator mode (conf/operator.py, core/operator.py): operator JWTs, trusted operator keys, account resolver
    trusted_operators: list[str] = []
    trusted_keys: list[str] = []
    resolver: dict[str, Any] | None = None
    resolver_preload: dict[str, str] = {}
    no_system_account: bool = False
    # -- TLS
    tls: TLSOptions | None = None
    allow_non_tls: bool = False  # TLS offered (INFO tls_available) but plain-text clients accepted
    # -- WebSocket clients
    websocket: WebsocketOptions | None = None
    # -- routes to the other servers of a cluster
    cluster: ClusterOptions | None = None
    # -- leaf node connections (hub and spoke)
    leafnodes: LeafNodeOptions | None = None
    # -- lifecycle
    lame_duck_duration: float = DEFAULT_LAME_DUCK_DURATION
    lame_duck_grace_period: float = DEFAULT_LAME_DUCK_GRACE_PERIOD
    # -- where the options came from
    config_file: str = ""
    config_digest: str = ""  # nats-server's sha256 digest of the parsed file
    check_config: bool = False  # -t: parse the configuration and exit
    config_warnings: list[str] = []
    # one start-up warning per key nats-server knows and Skiff ignores because no client could see the difference
    # (server/conf/support.py); keys a client could see are refused instead
    ignored_config_keys: list[str] = []
    cli_overrides: dict[str, Any] = {}

    def __init__(self, **values: Any) -> None:
        store_dir = values.get("store_dir")
        if isinstance(store_dir, os.PathLike):  # an embedding test passes pytest's tmp_path: the directory it names
            values["store_dir"] = os.fspath(store_dir)
        super().__init__(**values)

    def _post_init(self) -> None:
        if not self.auth_timeout:
            # nats-server getDefaultAuthTimeout: with TLS the client needs time for the handshake too.
            self.auth_timeout = (self.tls.timeout + 1.0) if self.tls is not None else AUTH_TIMEOUT

    # -- conveniences for the runner ------------------------------------------------------------------------

    @property
    def token(self) -> str:
        return self.authorization



def _finish(settings: dict[str, Any]) -> ServerOptions:
    """Validate merged settings into options, applying nats-server's baseline fix-ups."""
    s = dict(settings)
    if s.get("port") == 0:
        s["port"] = DEFAULT_PORT  # nats-server setBaselineOptions: port 0 means the default port
    tls = s.get("tls")
    if isinstance(tls, dict) and not tls.get("timeout"):
        tls = dict(tls)
        tls.pop("timeout", None)
        s["tls"] = tls
    cl = s.get("cluster")
    if isinstance(cl, dict) and isinstance(cl.get("tls"), dict) and not cl["tls"].get("timeout"):
        cl = dict(cl)
        cl["tls"] = {k: v for k, v in cl["tls"].items() if k != "timeout"}
        s["cluster"] = cl
    ws = s.get("websocket")
    if isinstance(ws, dict) and isinstance(ws.get("tls"), dict) and not ws["tls"].get("timeout"):
        ws = dict(ws)
        ws["tls"] = {k: v for k, v in ws["tls"].items() if k != "timeout"}
        s["websocket"] = ws
    cl = s.get("cluster")
    if isinstance(cl, dict) and cl.get("port") and s.get("jetstream"):
        from .conf.cluster import JETSTREAM_REFUSED

        raise ConfigError(JETSTREAM_REFUSED)  # -js with --cluster (a file's cluster {} says where, conf/cluster.py)
    ln = s.get("leafnodes")
    if isinstance(ln, dict) and (ln.get("port") or ln.get("remotes")) and s.get("jetstream"):
        from .conf.leafnodes import JETSTREAM_REFUSED as LEAF_JS

        raise ConfigError(LEAF_JS)  # -js with a file's leafnodes {} (conf/leafnodes.py names the line)
    try:
        return ServerOptions.model_validate(s)
    except TypeError as e:  # a value of the wrong type (an embedding caller; files and flags are checked before)
        raise ConfigError(f"invalid options: {e}") from None


def settings_from_tokens(tokens: dict, file: str = "", preset: dict[str, Any] | None = None) -> dict[str, Any]:
    # The configuration machinery is imported with the first configuration (flags alone never need it).
    from skiff.server.conf.mapping import config_settings
    from skiff.server.conf.values import plain

    settings, warnings, ignored = config_settings(tokens, preset)
    if file:
        settings["config_file"] = file
        from skiff.server.conf.digest import config_digest  # hashlib and decimal: only with a configuration file

        settings["config_digest"] = config_digest(plain(tokens))
    settings["config_warnings"] = warnings
    settings["ignored_config_keys"] = ignored
    return settings


def settings_from_config(path: str, preset: dict[str, Any] | None = None) -> dict[str, Any]:
    """The fields a configuration file sets (before flags are applied); see ``config_settings`` for ``preset``."""
    from skiff.server.conf.parser import parse_file_tokens

    return settings_from_tokens(parse_file_tokens(path), path, preset)


def options_from_config(path: str, **overrides: Any) -> ServerOptions:
    """Options from a configuration file in nats-server's syntax; ``overrides`` (field=value) win over the file."""
    settings = settings_from_config(path)
    settings.update(overrides)
    if overrides:
        settings["cli_overrides"] = dict(overrides)
    return _finish(settings)


def options_from_string(text: str, **overrides: Any) -> ServerOptions:
    """Options from configuration text (tests, embedding)."""
    from skiff.server.conf.parser import parse_tokens

    settings = settings_from_tokens(parse_tokens(text))
    settings.update(overrides)
    return _finish(settings)


def reload_options(current: ServerOptions) -> ServerOptions:
    """Re-read ``current.config_file`` and apply the command-line flags on top again (SIGHUP)."""
    if not current.config_file:
        return current
    return options_from_config(current.config_file, **current.cli_overrides)
