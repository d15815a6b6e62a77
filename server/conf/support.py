"""What Skiff does not implement of nats-server's configuration, key by key, and what it does about each.

Theory of operation
-------------------
Skiff never accepts and ignores (docs/DESIGN.md): a configuration that asks for something Skiff does not do is an
error with the key and its ``file:line:col``, before anything listens.  The tables below hold every key nats-server
2.15 reads (server/opts.go ``processConfigFileLine``, ``parseJetStream``, ``parseAuthorization``, ``parseUsers``,
``parseTLS``) that Skiff does not implement, with one of two answers:

* ``REFUSE``: a client could see the difference (or the server would be more open than nats-server with the same
  file): start-up fails with ``"key" is not implemented by Skiff (...)``.
* ``WARN``: no client could ever see the difference (log rotation, profiling rates, internal queue sizes): the key is
  accepted and a warning naming it is printed at start-up (and listed in docs/parity.md).

``harmless`` names the values that ask for exactly what Skiff does anyway (``accounts {}``, ``prof_port: 0``,
``server_tags: []``): those are accepted silently.  It receives the plain value (``values.plain``).

Keys Skiff implements are not in these tables; unknown keys stay errors (``unknown field``), as in nats-server.
"""
from __future__ import annotations

from .unimplemented import (  # noqa: F401  (re-exported: the tables' entry type and the flags' table)
    FLAGS, REFUSE, WARN, Unimplemented, _TRACE_VERBOSE, _all_false, _empty, _entries, _false, _zero, refusal, warning,
)

_CONN_TYPES = ("STANDARD", "WEBSOCKET", "LEAFNODE", "LEAFNODE_WS", "MQTT", "MQTT_WS", "IN_PROCESS")
_JWT = "a default sentinel user JWT (clients without credentials would be refused)"
_ONE_SERVER = "Skiff is a single server"

#: top-level keys (server/opts.go processConfigFileLine)
TOP_LEVEL = _entries(
    # -- accounts and decentralised authentication: without them Skiff would be more open than nats-server.
    # accounts {} and system_account are implemented (conf/accounts.py, core/accounts.py, core/sysacc.py).
    # operator, trusted_keys, resolver (MEMORY, FULL) and resolver_preload are implemented (conf/operator.py).
    (("default_sentinel",), Unimplemented(REFUSE, _JWT, _empty)),
    (("resolver_tls",), Unimplemented(REFUSE, "TLS to a URL account resolver; the URL resolver is refused", _empty)),
    (("resolver_pinned_accounts",), Unimplemented(REFUSE, "limiting operator mode to pinned accounts", _empty)),
    (("proxies",), Unimplemented(REFUSE, "trusted proxies (proxy-signed client connections)", _empty)),
    (("default_js_domain",), Unimplemented(REFUSE, "JetStream domains per account", _empty)),
    # -- other connection kinds and topologies: their listeners would never open.
    (("gateway",), Unimplemented(REFUSE, "gateways (super-clusters)", _empty)),
    (("mqtt",), Unimplemented(REFUSE, "MQTT clients", _empty)),
    (("mappings", "maps"), Unimplemented(REFUSE, "subject mappings (messages would stay on the subject "
                                                 "published)", _empty)),
    # -- things a client sees in INFO, varz or the handshake.
    (("server_tags",), Unimplemented(REFUSE, "server tags (varz tags, stream placement tags)", _empty)),
    (("server_metadata",), Unimplemented(REFUSE, "server metadata (varz metadata)", _empty)),
    (("http_base_path",), Unimplemented(REFUSE, "a monitoring base path (Skiff serves its pages at /)",
                                        lambda v: v in ("", "/"))),
    (("max_sub_tokens", "max_subscription_tokens"),
     Unimplemented(REFUSE, "a limit on the tokens of a subscription subject")),
    (("max_closed_clients",), Unimplemented(REFUSE, "a number of closed connections kept for /connz?state=closed "
                                                    "(Skiff keeps the last 100)")),
    (("no_header_support",), Unimplemented(REFUSE, "turning headers off (INFO always says headers:true)", _false)),
    (("proxy_protocol",), Unimplemented(REFUSE, "the PROXY protocol (client addresses would be the proxy's)",
                                        _false)),
    (("ocsp",), Unimplemented(REFUSE, "OCSP stapling", _false)),
    (("feature_flags",), Unimplemented(REFUSE, "nats-server feature flags such as js_ack_fc_v2 (only false values "
                                               "are accepted)", _all_false)),
    (("prof_port",), Unimplemented(REFUSE, "the Go profiling (pprof) port", _zero)),
    # Logs meant for syslog would go to stderr, where nobody reads them (nor a warning): refused.
    (("syslog",), Unimplemented(REFUSE, "logging to syslog (the log would go to stderr)", _false)),
    (("remote_syslog",), Unimplemented(REFUSE, "logging to a remote syslog (the log would go to stderr)", _empty)),
    # -- no client can see these: a warning at start-up.
    (("prof_block_rate",), Unimplemented(WARN, "the Go block-profiling rate; Skiff has no profiler")),
    # nats-server -VV also traces its internal SYSTEM client ("SYSTEM - <<- [SUB $SYS...]", client.go initClient
    # traceSysAcc); Skiff's internal subscriptions are no client connection: tracing is on, as with trace: true.
    (("trace_verbose",), Unimplemented(WARN, _TRACE_VERBOSE, _false)),
    (("connect_error_reports", "reconnect_error_reports"),
     Unimplemented(WARN, "how often route, leaf and gateway connect errors are logged; Skiff has none of those")),
    (("logfile_max_num", "log_max_num"), Unimplemented(WARN, "the number of rotated log files kept")),
    (("ocsp_cache",), Unimplemented(WARN, "the cache of OCSP peer responses; OCSP peer checks are refused", _false)),
    (("disable_sublist_cache", "no_sublist_cache"),
     Unimplemented(WARN, "turning the subject-match cache off changes speed only", _false)),
    (("no_fast_producer_stall",), Unimplemented(WARN, "Skiff never stalls a fast producer", lambda v: v is True)),
    # Both only matter to a subscriber that stops reading: Skiff closes it when its pending output passes
    # max_pending, as nats-server does too; the deadline is a second trigger Skiff does not have.  Very common
    # in production files, so a warning rather than a refusal.
    (("write_deadline",), Unimplemented(WARN, "slow consumers are detected by max_pending only, not by a write "
                                              "deadline (routes and leaf connections use nats-server's default, "
                                              "10s)")),
    (("write_timeout",), Unimplemented(WARN, "what to do when the write deadline passes; see write_deadline",
                                       lambda v: v == "default")),
)

#: ``jetstream { }`` sub-keys (parseJetStream)
JETSTREAM = _entries(
    # Encryption at rest: the data would be on disk in plain text while the operator believes it encrypted.
    (("key", "ek", "encryption_key", "prev_key", "prev_ek", "prev_encryption_key", "cipher", "tpm"),
     Unimplemented(REFUSE, "encryption at rest (the store would be written in plain text)", _empty)),
    (("extension_hint",), Unimplemented(WARN, "a hint about extending JetStream account limits; no client sees it")),
    (("max_outstanding_catchup",), Unimplemented(WARN, f"catch-up of cluster replicas; {_ONE_SERVER}")),
    (("meta_compact", "meta_compact_size", "meta_compact_sync"),
     Unimplemented(WARN, f"compaction of the cluster meta log; {_ONE_SERVER}")),
    (("max_buffered_size", "max_buffered_msgs", "request_queue_limit", "info_queue_limit", "max_concurrent_io"),
     Unimplemented(WARN, "sizes of nats-server's internal queues and its I/O concurrency; Skiff has no such "
                         "queues")),
)

#: ``jetstream { limits { } }`` sub-keys (parseJetStreamLimits); ``batch { }`` is implemented (conf/jetstream_limits.py)
JETSTREAM_LIMITS = _entries(
    (("max_ack_pending", "max_request_batch", "duplicate_window"),
     Unimplemented(REFUSE, "server-wide JetStream consumer and stream limits (nats-server would cap or default "
                           "consumers' max_ack_pending / max_batch and streams' duplicate_window)")),
    (("max_ha_assets",), Unimplemented(WARN, f"the number of replicated JetStream assets; {_ONE_SERVER}")),
)

#: ``websocket { }`` sub-keys (parseWebsocket); the block itself is implemented (conf/websocket.py,
#: core/websocket.py).  Its ``tls { }`` goes through the TLS table below.
WEBSOCKET = _entries()  # every key of the block is implemented

#: keys of ``leafnodes { }`` and of its ``remotes`` entries (server/opts.go parseLeafNodes, parseRemoteLeafNodes)
#: Skiff does not implement (conf/leafnodes.py reads the rest).  Their ``tls { }`` blocks go through the TLS table.
LEAFNODES = _entries(
    (("min_version", "minimum_version"), Unimplemented(REFUSE, "a minimum version for leaf nodes", _empty)),
    (("isolate_leafnode_interest", "isolate"), Unimplemented(REFUSE, "leaf interest isolation", _false)),
    (("write_deadline", "write_timeout"), Unimplemented(REFUSE, "leaf write deadlines", _empty)),
    (("dial_timeout",), Unimplemented(REFUSE, "a leaf dial timeout (Skiff dials with 1 s)", _empty)),
)
LEAF_REMOTE = _entries(
    (("nkey", "seed"), Unimplemented(REFUSE, "nkey authentication of a leaf remote (use credentials)", _empty)),
    (("hub",), Unimplemented(REFUSE, "a remote that is a hub (hub: true)", _false)),
    (("deny_imports", "deny_import", "deny_exports", "deny_export"),
     Unimplemented(REFUSE, "leaf import/export deny lists (more would cross the link)", _empty)),
    (("ws_compress", "ws_compression", "websocket_compress", "websocket_compression", "ws_no_masking",
      "websocket_no_masking"), Unimplemented(REFUSE, "leaf connections over WebSocket", _false)),
    (("jetstream_cluster_migrate", "js_cluster_migrate"), Unimplemented(REFUSE, "JetStream over leaf nodes",
                                                                        _false)),
    (("isolate_leafnode_interest", "isolate", "request_isolation"),
     Unimplemented(REFUSE, "leaf interest isolation", _false)),
    (("first_info_timeout", "dial_timeout"), Unimplemented(REFUSE, "leaf dial and INFO timeouts", _empty)),
    (("disabled",), Unimplemented(REFUSE, "a disabled remote", _false)),
    (("proxy",), Unimplemented(REFUSE, "dialing a hub through an HTTP proxy", _empty)),
)

#: keys of ``cluster { }`` (server/opts.go parseCluster) Skiff does not implement (conf/cluster.py reads the rest).
CLUSTER = _entries(
    (("permissions",), Unimplemented(REFUSE, "route import/export permissions", _empty)),
    (("ping_interval",), Unimplemented(REFUSE, "a ping interval of its own for routes (Skiff's routes ping at "
                                               "the server's ping_interval)", _empty)),
    (("ping_max",), Unimplemented(REFUSE, "a ping_max of its own for routes", _empty)),
    (("write_deadline", "write_timeout"), Unimplemented(REFUSE, "route write deadlines", _empty)),
    (("connect_backoff",), Unimplemented(REFUSE, "backing off route reconnect attempts", _false)),
)

#: ``authorization { }`` sub-keys (parseAuthorization)
AUTHORIZATION = _entries(
    (("auth_callout",), Unimplemented(REFUSE, "auth callout (Skiff would let in clients the callout refuses)",
                                      _empty)),
    (("proxy_required",), Unimplemented(REFUSE, "trusted proxies", _false)),
)

#: keys of one entry of ``authorization { users: [...] }`` (parseUsers)
USER = _entries(
    (("proxy_required",), Unimplemented(REFUSE, "trusted proxies", _false)),
    # Skiff's clients are STANDARD (client port) or WEBSOCKET connections, and core/auth.py lets a user in only
    # through the types it lists; the other types nats-server knows have no listener in Skiff (nor a way in).
    # An unknown name is refused (nats-server: "invalid connection types").
    (("allowed_connection_types", "connection_types", "clients"),
     Unimplemented(REFUSE, "connection types nats-server does not know",
                   lambda v: all(isinstance(t, str) and t.upper() in _CONN_TYPES
                                 for t in (v if isinstance(v, list) else [v])))),
)

#: keys of a ``permissions { }`` map (parseUserPermissions)
PERMISSIONS = _entries()  # allow_responses is implemented (core/permissions.py)

#: ``tls { }`` sub-keys of the client port (parseTLS).  ``insecure`` is accepted: a server-side tls.Config never
#: reads InsecureSkipVerify, so it has no effect in nats-server either.
TLS = _entries(
    (("verify_and_map",), Unimplemented(REFUSE, "mapping client certificates to users", _false)),
    (("min_version",), Unimplemented(REFUSE, "a minimum TLS version other than 1.2",
                                     lambda v: v in ("1.2", "", None))),
    (("cipher_suites", "curve_preferences", "allow_insecure_cipher_suites"),
     Unimplemented(REFUSE, "choosing TLS cipher suites and curves", lambda v: v in ([], "", None, False))),
    (("pinned_certs",), Unimplemented(REFUSE, "pinned client certificates (any certificate from the CA would be let "
                                              "in)", _empty)),
    (("verify_cert_and_check_known_urls",), Unimplemented(REFUSE, "checking certificates against known URLs",
                                                          _false)),
    (("cert_store", "cert_match_by", "cert_match", "ca_certs_match", "cert_match_skip_invalid"),
     Unimplemented(REFUSE, "the operating system's certificate store", _empty)),
    (("ocsp_peer",), Unimplemented(REFUSE, "OCSP checks of client certificates", _false)),
    (("certs", "certificates"), Unimplemented(REFUSE, "several certificates chosen by SNI", _empty)),
    (("connection_rate_limit",), Unimplemented(REFUSE, "a TLS handshake rate limit", _zero)),
)

#: The command-line flags' table (``FLAGS``) is in unimplemented.py: a start without a file imports only that.
