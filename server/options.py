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
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from skiff.server.conf import ConfigError, parse_file_tokens, parse_tokens, plain
from skiff.server.conf.digest import config_digest
from skiff.server.conf.mapping import config_settings

DEFAULT_PORT = 4222
DEFAULT_HOST = "0.0.0.0"
DEFAULT_HTTP_PORT = 8222
RANDOM_PORT = -1
MAX_PAYLOAD_SIZE = 1024 * 1024
MAX_PAYLOAD_MAX_SIZE = 8 * 1024 * 1024  # nats-server warns above this
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
DEFAULT_MAX_CLOSED_CLIENTS = 10000


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=False)


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
    verify_and_map: bool = False
    insecure: bool = False
    timeout: float = TLS_TIMEOUT
    handshake_first: bool = False
    handshake_first_fallback: float | None = None  # seconds; set for "auto" or a duration
    min_version: str = ""
    cipher_suites: list[str] | None = None
    curve_preferences: list[str] | None = None
    pinned_certs: list[str] | None = None


class WebsocketOptions(_Model):
    """The ``websocket { }`` block (nats-server WebsocketOpts; conf/websocket.py, core/websocket.py)."""

    host: str = DEFAULT_HOST
    port: int = 0  # 0: no WebSocket listener; -1: a random port
    advertise: str = ""
    no_tls: bool = False
    tls: TLSOptions | None = None
    same_origin: bool = False
    allowed_origins: list[str] = Field(default_factory=list)
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
    headers: dict[str, str] = Field(default_factory=dict)
    ping_interval: float = 0.0  # 0: the server's ping_interval


class ClusterOptions(_Model):
    """The ``cluster { }`` block and the cluster flags (nats-server ClusterOpts; conf/cluster.py, core/cluster.py)."""

    name: str = ""
    host: str = DEFAULT_HOST
    port: int = 0  # 0: no route listener (and no routes, as in nats-server); -1: a random port
    routes: list[str] = Field(default_factory=list)
    username: str = ""
    password: str = ""
    auth_timeout: float = 0.0
    advertise: str = ""
    no_advertise: bool = False
    connect_retries: int = 0
    tls: TLSOptions | None = None  # cluster { tls {} }: TLS first on every route, both ends


class RemoteLeafOptions(_Model):
    """One entry of ``leafnodes { remotes [...] }`` (nats-server RemoteLeafOpts)."""

    urls: list[str] = Field(default_factory=list)
    account: str = ""  # the local account the link binds; "" = the global account
    credentials: str = ""  # a .creds file: its user JWT and the nonce signed by its seed go in CONNECT
    tls: TLSOptions | None = None  # tls {}: TLS to the hub (also done without it when the hub's INFO asks for it)


class LeafNodeOptions(_Model):
    """The ``leafnodes { }`` block (nats-server LeafNodeOpts; conf/leafnodes.py, core/leafnode.py)."""

    host: str = DEFAULT_HOST
    port: int = 0  # 0: no leaf node listener (a spoke may still dial its remotes); -1: a random port
    username: str = ""
    password: str = ""
    account: str = ""  # authorization { account }: the account of the single user (or of every leaf)
    users: list[dict[str, str]] = Field(default_factory=list)  # {user, password, account}
    auth_timeout: float = 0.0
    remotes: list[RemoteLeafOptions] = Field(default_factory=list)
    advertise: str = ""
    no_advertise: bool = False
    reconnect_interval: float = 0.0  # 0: nats-server's 1 s
    tls: TLSOptions | None = None  # tls {}: accepted leaf connections upgrade after INFO (or first: handshake_first)


class ServerOptions(_Model):
    # -- listening
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    server_name: str = ""
    client_advertise: str = ""
    http_host: str = ""
    http_port: int = 0
    https_port: int = 0
    http_base_path: str = "/"
    ports_file_dir: str = ""
    prof_port: int = 0
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
    jetstream_batch_limits: dict[str, int] = Field(default_factory=dict)
    jetstream_unique_tag: str = ""
    # -- limits
    max_payload: int = MAX_PAYLOAD_SIZE
    max_control_line: int = MAX_CONTROL_LINE_SIZE
    max_pending: int = MAX_PENDING_SIZE
    max_connections: int = DEFAULT_MAX_CONNECTIONS  # -1: no limit
    max_subscriptions: int = 0  # 0: no limit
    max_sub_tokens: int = 0
    max_closed_clients: int = DEFAULT_MAX_CLOSED_CLIENTS
    ping_interval: float = DEFAULT_PING_INTERVAL
    ping_max: int = DEFAULT_PING_MAX_OUT
    write_deadline: float = DEFAULT_FLUSH_DEADLINE
    write_timeout: str = "default"
    no_header_support: bool = False
    disable_sublist_cache: bool = False
    # -- logging
    debug: bool = False
    trace: bool = False
    trace_verbose: bool = False
    trace_headers: bool = False
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
    users: list[User] = Field(default_factory=list)
    no_auth_user: str = ""
    auth_timeout: float = 0.0  # 0: default, 2s, or the TLS timeout + 1s when TLS is on (nats-server)
    accounts: dict[str, Any] = Field(default_factory=dict)  # raw ``accounts { }`` block, not interpreted yet
    system_account: str = ""
    # operator mode (conf/operator.py, core/operator.py): operator JWTs, trusted operator keys, account resolver
    trusted_operators: list[str] = Field(default_factory=list)
    trusted_keys: list[str] = Field(default_factory=list)
    resolver: dict[str, Any] | None = None
    resolver_preload: dict[str, str] = Field(default_factory=dict)
    no_system_account: bool = False
    # -- TLS
    tls: TLSOptions | None = None
    allow_non_tls: bool = False  # TLS offered (INFO tls_available) but plain-text clients accepted
    proxy_protocol: bool = False
    # -- WebSocket clients
    websocket: WebsocketOptions | None = None
    # -- routes to the other servers of a cluster
    cluster: ClusterOptions | None = None
    # -- leaf node connections (hub and spoke)
    leafnodes: LeafNodeOptions | None = None
    # -- lifecycle
    lame_duck_duration: float = DEFAULT_LAME_DUCK_DURATION
    lame_duck_grace_period: float = DEFAULT_LAME_DUCK_GRACE_PERIOD
    # -- identity
    server_tags: list[str] = Field(default_factory=list)
    server_metadata: dict[str, str] = Field(default_factory=dict)
    # -- where the options came from
    config_file: str = ""
    config_digest: str = ""  # nats-server's sha256 digest of the parsed file
    check_config: bool = False  # -t: parse the configuration and exit
    config_warnings: list[str] = Field(default_factory=list)
    # one start-up warning per key nats-server knows and Skiff ignores because no client could see the difference
    # (server/conf/support.py); keys a client could see are refused instead
    ignored_config_keys: list[str] = Field(default_factory=list)
    cli_overrides: dict[str, Any] = Field(default_factory=dict, repr=False)

    @field_validator("store_dir", mode="before")
    @classmethod
    def _path_as_text(cls, v: Any) -> Any:
        """An embedding test passes pytest's ``tmp_path``: any path-like is the directory it names."""
        return os.fspath(v) if isinstance(v, os.PathLike) else v

    @model_validator(mode="after")
    def _derived_defaults(self) -> "ServerOptions":
        if not self.auth_timeout:
            # nats-server getDefaultAuthTimeout: with TLS the client needs time for the handshake too.
            self.auth_timeout = (self.tls.timeout + 1.0) if self.tls is not None else AUTH_TIMEOUT
        return self

    # -- conveniences for the runner ------------------------------------------------------------------------

    @property
    def token(self) -> str:
        return self.authorization

    @property
    def bind_port(self) -> int:
        """The port to pass to bind(): -1 (random) becomes 0."""
        return 0 if self.port == RANDOM_PORT else self.port

    @property
    def monitor_host(self) -> str:
        return self.http_host or self.host

    @property
    def monitor_port(self) -> int:
        """The monitoring port to bind (0 = random), or None when monitoring is off."""
        if not self.http_port:
            return None  # type: ignore[return-value]
        return 0 if self.http_port == RANDOM_PORT else self.http_port

    @property
    def auth_required(self) -> bool:
        return bool(self.authorization or self.username or self.users)


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
    except Exception as e:  # pydantic.ValidationError: a value of the wrong type from a flag
        raise ConfigError(f"invalid options: {e}") from None


def settings_from_tokens(tokens: dict, file: str = "", preset: dict[str, Any] | None = None) -> dict[str, Any]:
    settings, warnings, ignored = config_settings(tokens, preset)
    if file:
        settings["config_file"] = file
        settings["config_digest"] = config_digest(plain(tokens))
    settings["config_warnings"] = warnings
    settings["ignored_config_keys"] = ignored
    return settings


def settings_from_config(path: str, preset: dict[str, Any] | None = None) -> dict[str, Any]:
    """The fields a configuration file sets (before flags are applied); see ``config_settings`` for ``preset``."""
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
    settings = settings_from_tokens(parse_tokens(text))
    settings.update(overrides)
    return _finish(settings)


def reload_options(current: ServerOptions) -> ServerOptions:
    """Re-read ``current.config_file`` and apply the command-line flags on top again (SIGHUP)."""
    if not current.config_file:
        return current
    return options_from_config(current.config_file, **current.cli_overrides)
