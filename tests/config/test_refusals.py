"""Skiff never accepts and ignores: every key and flag it does not implement fails start-up, naming the key and its
line; nats-server, given the same file, accepts it (``-t``), which is the difference each row shows.

Keys no client could see the effect of are accepted with one start-up warning each (server/conf/support.py holds
the decision for every key; docs/parity.md lists them).
"""
from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from skiff.server.cli import CommandError, parse_args
from skiff.server.conf import ConfigError
from skiff.server.conf import support
from skiff.server.options import options_from_config
from tests.harness import ROOT, nats_server_binary

CERTS = ROOT / "conf" / "certs"
TLS = f'cert_file: "{CERTS}/server-cert.pem", key_file: "{CERTS}/server-key.pem"'
SHA = "a" * 64

# (line 2 of the file, the key named in the error, does `nats-server -t` accept the file)
REFUSED_KEYS = [
    ("accounts { A { mappings { a: b } } }", "accounts.A.mappings", True),
    ('accounts { A { exports: [{service: "s", latency: "lat"}] } }', "accounts.A.exports.latency", True),
    ('accounts { A { exports: [{service: "s"}] }, B { imports: [{service: {account: A, subject: "s"}, share: true}] } }',
     "accounts.B.imports.share", True),
    ('default_sentinel: "abc"', "default_sentinel", True),
    ('resolver: URL("http://127.0.0.1:9/jwt/v1/accounts/")', "resolver", True),
    ("resolver_pinned_accounts: [ADLPCGRWAO6TQZ5ZEQIXMRVCRQJ3KBPJE2XYVQD3ZJEZ7PSQDT6YNEWH]",
     "resolver_pinned_accounts", True),
    ("proxies { trusted: [] }", "proxies", True),
    ("default_js_domain { A: x }", "default_js_domain", True),
    # cluster {} is implemented (server/conf/cluster.py); what its routes do not do is refused key by key.
    ('cluster { port: 6222, permissions { import: "foo" } }', "cluster.permissions", True),
    ("cluster { port: 6222, ping_interval: \"5s\" }", "cluster.ping_interval", True),
    ("gateway { name: g, port: 7222 }", "gateway", True),
    # leafnodes {} is implemented (server/conf/leafnodes.py); what its links do not do is refused key by key.
    # leaf tls {} blocks are implemented (tests/cluster/test_leafnode_tls.py); their keys Skiff does not do are
    # refused as the client port's are.
    (f'leafnodes {{ port: 7422, tls {{ {TLS}, pinned_certs: ["{SHA}"] }} }}', "tls.pinned_certs", True),
    (f"leafnodes {{ port: 7422, tls {{ {TLS}, handshake_first: auto }} }}", "tls.handshake_first", True),
    ('leafnodes { remotes [ { url: "nats-leaf://127.0.0.1:7422", tls { cipher_suites: '
     '["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"] } } ] }', "tls.cipher_suites", True),
    ('leafnodes { remotes [ { url: "nats-leaf://127.0.0.1:7422", hub: true } ] }', "leafnodes.remotes.hub", True),
    ('leafnodes { remotes [ { url: "nats-leaf://127.0.0.1:7422", deny_imports: ["foo"] } ] }',
     "leafnodes.remotes.deny_imports", True),
    ('leafnodes { remotes [ { url: "nats-leaf://127.0.0.1:7422", proxy { url: "http://127.0.0.1:3128" } } ] }',
     "leafnodes.remotes.proxy", True),
    ("mqtt { port: 1883 }", "mqtt", True),
    ("mappings { foo: bar }", "mappings", True),
    ("server_tags: [a]", "server_tags", True),
    ("server_metadata { a: b }", "server_metadata", True),
    ("http_base_path: /mon", "http_base_path", True),
    ("max_sub_tokens: 5", "max_sub_tokens", True),
    ("max_closed_clients: 5", "max_closed_clients", True),
    ("no_header_support: true", "no_header_support", True),
    ("proxy_protocol: true", "proxy_protocol", True),
    ("ocsp: true", "ocsp", True),
    ("feature_flags { js_ack_fc_v2: true }", "feature_flags", True),
    ("prof_port: 6060", "prof_port", True),
    ("syslog: true", "syslog", True),
    ('remote_syslog: "udp://127.0.0.1:514"', "remote_syslog", True),
    ('jetstream { key: "s3cr3t" }', "jetstream.key", True),
    ("jetstream { limits { max_ack_pending: 10 } }", "jetstream.limits.max_ack_pending", True),
    ('authorization { auth_callout { issuer: "AAB", auth_users: [a] } }', "authorization.auth_callout", False),
    ("authorization { proxy_required: true }", "authorization.proxy_required", True),
    ('authorization { users: [{user: a, password: b, allowed_connection_types: ["FOO"]}] }',
     "authorization.users.allowed_connection_types", False),
    (f"tls {{ {TLS}, verify_and_map: true }}", "tls.verify_and_map", True),
    (f'tls {{ {TLS}, min_version: "1.3" }}', "tls.min_version", True),
    (f'tls {{ {TLS}, cipher_suites: ["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"] }}', "tls.cipher_suites", True),
    (f'tls {{ {TLS}, curve_preferences: ["CurveP256"] }}', "tls.curve_preferences", True),
    (f'tls {{ {TLS}, pinned_certs: ["{SHA}"] }}', "tls.pinned_certs", True),
    (f"tls {{ {TLS}, handshake_first: auto }}", "tls.handshake_first", True),
    (f'tls {{ {TLS}, handshake_first: "300ms" }}', "tls.handshake_first", True),
    (f"tls {{ {TLS}, connection_rate_limit: 5 }}", "tls.connection_rate_limit", True),
]


def _write(tmp_path, line: str):
    f = tmp_path / "c.conf"
    f.write_text(f"port: 4222\n{line}\n")
    return f


def _nats_server_check(path) -> subprocess.CompletedProcess:
    return subprocess.run([nats_server_binary(), "-c", str(path), "-t"], capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize("line,key,nats_server_accepts", REFUSED_KEYS, ids=[k for _, k, _ in REFUSED_KEYS])
def test_refused_key_names_key_and_line(line, key, nats_server_accepts, tmp_path):
    f = _write(tmp_path, line)
    with pytest.raises(ConfigError) as ei:
        options_from_config(str(f))
    msg = str(ei.value)
    assert msg.startswith(f"{f}:2:"), msg
    assert f'"{key}" is not implemented by Skiff: ' in msg, msg
    # the same file, as nats-server sees it: the difference this row is about
    assert (_nats_server_check(f).returncode == 0) == nats_server_accepts


def test_every_table_key_is_refused_or_warned():
    """Every alias in the tables is recognised by the mapper: refused keys fail, warned keys warn."""
    samples = [("{ a: 1 }", {"a": 1}), ('"close"', "close"), ("true", True), ("7", 7)]
    for name, entry in support.TOP_LEVEL.items():
        for text, value in samples:
            if entry.accepts(value):
                continue
            try:
                o = _options(f"{name}: {text}")
            except ConfigError as e:
                if entry.level == support.REFUSE and f'"{name}" is not implemented by Skiff' in str(e):
                    break
                continue  # a type error for this sample; try another type
            if entry.level == support.WARN:
                assert any(f'"{name}" is not implemented by Skiff and is ignored' in w
                           for w in o.ignored_config_keys), name
                break
        else:
            pytest.fail(f"no sample value made {name!r} refused or warned")


def _options(text: str):
    from skiff.server.options import options_from_string

    return options_from_string(text)


def test_all_refusals_are_reported_at_once(tmp_path):
    f = tmp_path / "c.conf"
    f.write_text("gateway { port: 7222 }\nport: 4222\nserver_tags: [a]\nmqtt { port: 1883 }\n")
    with pytest.raises(ConfigError) as ei:
        options_from_config(str(f))
    assert [(e.line, e.reason.split('"')[1]) for e in ei.value.errors] == [
        (1, "gateway"), (3, "server_tags"), (4, "mqtt")]


# Values that ask for exactly what Skiff does are accepted without a word.
HARMLESS = [
    "accounts {}",
    "mappings {}",
    "cluster {}",
    "server_tags: []",
    "http_base_path: /",
    "no_header_support: false",
    "proxy_protocol: false",
    "prof_port: 0",
    "syslog: false",
    "feature_flags { js_ack_fc_v2: false }",
    "no_fast_producer_stall: true",
    "write_timeout: default",
    "authorization { users: [{user: a, password: b, allowed_connection_types: [STANDARD, WEBSOCKET]}] }",
    "authorization { users: [{user: a, password: b, permissions: {allow_responses: false}}] }",
    f'tls {{ {TLS}, min_version: "1.2", insecure: true, verify_and_map: false }}',
]


@pytest.mark.parametrize("line", HARMLESS)
def test_values_that_change_nothing_are_accepted(line, tmp_path):
    f = _write(tmp_path, line)
    o = options_from_config(str(f))
    assert o.ignored_config_keys == [] and o.config_warnings == []
    assert _nats_server_check(f).returncode == 0


WARNED = [
    ("prof_block_rate: 5", "prof_block_rate"),
    ("connect_error_reports: 10", "connect_error_reports"),
    ("logfile_max_num: 3", "logfile_max_num"),
    ("ocsp_cache: true", "ocsp_cache"),
    ("disable_sublist_cache: true", "disable_sublist_cache"),
    ("trace_verbose: true", "trace_verbose"),
    ('write_deadline: "2s"', "write_deadline"),
    ("write_timeout: close", "write_timeout"),
    ("jetstream { request_queue_limit: 100 }", "jetstream.request_queue_limit"),
    ("jetstream { limits { max_ha_assets: 2 } }", "jetstream.limits.max_ha_assets"),
]


@pytest.mark.parametrize("line,key", WARNED, ids=[k for _, k in WARNED])
def test_keys_no_client_can_see_are_warned_about(line, key, tmp_path):
    f = _write(tmp_path, line)
    o = options_from_config(str(f))
    assert len(o.ignored_config_keys) == 1
    assert o.ignored_config_keys[0].startswith(f"{f}:2:")
    assert f'"{key}" is not implemented by Skiff and is ignored: ' in o.ignored_config_keys[0]
    assert _nats_server_check(f).returncode == 0


def test_start_up_refusal_exits_1_and_warning_is_printed(tmp_path):
    f = _write(tmp_path, "gateway { name: g, port: 7222 }")
    p = subprocess.run([sys.executable, "-m", "skiff.server", "-c", str(f)], capture_output=True, text=True, timeout=30,
                       cwd=ROOT)
    assert p.returncode == 1
    assert f'{f}:2:1: "gateway" is not implemented by Skiff' in p.stderr
    # -t (check the file) refuses too: Skiff cannot run this file
    p = subprocess.run([sys.executable, "-m", "skiff.server", "-c", str(f), "-t"], capture_output=True, text=True,
                       timeout=30, cwd=ROOT)
    assert p.returncode == 1 and '"gateway" is not implemented by Skiff' in p.stderr


def test_warning_is_printed_at_start(tmp_path):
    f = _write(tmp_path, "prof_block_rate: 5")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "skiff.server", "-c", str(f), "-a", "127.0.0.1", "-p", str(port)],
                            stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        line = proc.stderr.readline()
        assert f'{f}:2:1: "prof_block_rate" is not implemented by Skiff and is ignored' in line
    finally:
        proc.kill()
        proc.wait()


# Flags: (argv, the flag named).  nats-server accepts each of them (checked with -t on an empty file).
REFUSED_FLAGS = [
    (["--profile", "6060"], "--profile"),
    (["-s"], "--syslog"),
    (["--syslog"], "--syslog"),
    (["-r", "udp://127.0.0.1:514"], "--remote_syslog"),
]


@pytest.mark.parametrize("argv,flag", REFUSED_FLAGS, ids=[" ".join(a) for a, _ in REFUSED_FLAGS])
def test_refused_flags(argv, flag, tmp_path):
    with pytest.raises(CommandError, match=f'"{flag}" is not implemented by Skiff: '):
        parse_args(argv)
    f = tmp_path / "empty.conf"
    f.write_text("port: 4222\n")
    p = subprocess.run([nats_server_binary(), "-c", str(f), "-t", *argv], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr


@pytest.mark.parametrize("argv", [
    ["--profile", "0"], ["--syslog=false"], ["--cluster_advertise", "x:1"], ["--no_advertise"],
    ["--connect_retries", "5"],
])
def test_flags_that_change_nothing_are_accepted(argv):
    o = parse_args(argv)
    assert o.ignored_config_keys == []


def test_routes_without_cluster_is_nats_servers_error():
    with pytest.raises(CommandError, match="solicited routes require cluster capabilities, e.g. --cluster"):
        parse_args(["--routes", "nats://127.0.0.1:6223"])


def test_refused_flag_exits_1():
    p = subprocess.run([sys.executable, "-m", "skiff.server", "--profile", "6060"], capture_output=True, text=True,
                       timeout=30, cwd=ROOT)
    assert p.returncode == 1
    assert 'skiff: "--profile" is not implemented by Skiff' in p.stderr


# client_advertise used to be accepted and ignored; it is implemented now (INFO host and port), as nats-server does.
@pytest.mark.parametrize("advertise,expected", [("1.2.3.4:999", ("1.2.3.4", 999)), ("example.com", ("example.com", None))])
def test_client_advertise_sets_info_host_and_port(server_factory, advertise, expected):
    import json

    srv = server_factory(jetstream=False, config=f'client_advertise: "{advertise}"\n')
    with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as s:
        line = s.makefile("rb").readline()
    info = json.loads(line.split(b" ", 1)[1])
    assert (info["host"], info["port"]) == (expected[0], expected[1] or srv.port)


def test_cluster_with_jetstream_is_refused_at_start(tmp_path):
    """nats-server runs a cluster with JetStream as clustered (RAFT-replicated) JetStream, which Skiff does not
    implement: the file, the flags and the embedding API all refuse it, naming the cluster block's line
    (docs/parity.md, docs/clustering.md)."""
    f = _write(tmp_path, 'cluster { name: c1, listen: "127.0.0.1:6222" }\njetstream: enabled')
    with pytest.raises(ConfigError) as ei:
        options_from_config(str(f))
    assert str(ei.value).startswith(f"{f}:2:") and "clustered JetStream" in str(ei.value)
    with pytest.raises(ConfigError, match="clustered JetStream"):
        parse_args(["-js", "--cluster", "nats://127.0.0.1:6222"])
    from skiff.server.core.server import Server
    from skiff.server.options import ClusterOptions

    with pytest.raises(ConfigError, match="clustered JetStream"):
        Server(jetstream=True, cluster=ClusterOptions(port=-1))
    # A cluster without JetStream, and JetStream without a listening cluster, are fine.
    assert parse_args(["--cluster", "nats://127.0.0.1:6222"]).cluster.port == 6222
    assert parse_args(["-js", "--cluster_name", "c1"]).jetstream


def test_cluster_block_is_read_as_nats_server_reads_it(tmp_path):
    f = _write(tmp_path, 'cluster { name: c1, listen: "127.0.0.1:-1", authorization { user: ru, password: rp, '
                         'timeout: 3 }, routes: ["nats-route://ru:rp@127.0.0.1:6223"], no_advertise: true, '
                         'connect_retries: 4, advertise: "10.0.0.1:6222", pool_size: -1, compression: off }')
    c = options_from_config(str(f)).cluster
    assert (c.name, c.host, c.port, c.username, c.password, c.auth_timeout) == ("c1", "127.0.0.1", -1, "ru", "rp", 3)
    assert (c.routes, c.no_advertise, c.connect_retries, c.advertise) == (
        ["nats-route://ru:rp@127.0.0.1:6223"], True, 4, "10.0.0.1:6222")
    assert _nats_server_check(f).returncode == 0
    for bad, err in (("cluster { name: \"a b\", port: 6222 }", "cluster name cannot contain spaces"),
                     ("cluster { port: 6222, authorization { users: [{user: a, password: b}] } }",
                      "Cluster authorization does not allow multiple users"),
                     ("cluster { port: 6222, authorization { token: t } }",
                      "Cluster authorization does not support tokens")):
        f = _write(tmp_path, bad)
        with pytest.raises(ConfigError, match=err):
            options_from_config(str(f))
        assert err in _nats_server_check(f).stderr + _nats_server_check(f).stdout


def test_leafnodes_with_jetstream_are_refused_and_the_block_is_read(tmp_path):
    """Leaf connections with JetStream would extend or split JetStream domains in nats-server (refused, as a
    cluster with JetStream is); the rest of the block is read as nats-server reads it."""
    f = _write(tmp_path, 'leafnodes { port: 7422 }\njetstream: enabled')
    with pytest.raises(ConfigError) as ei:
        options_from_config(str(f))
    assert str(ei.value).startswith(f"{f}:2:") and "leaf node connections together with JetStream" in str(ei.value)
    f = _write(tmp_path, 'accounts { A {} }\nleafnodes { listen: "127.0.0.1:-1", reconnect: "3s", no_advertise: true, '
                         'authorization { users [ { user: l, password: p, account: A } ], timeout: 2 }, '
                         'remotes [ { urls: ["nats-leaf://u:p@127.0.0.1:7422"], account: A, no_randomize: true } ] }')
    ln = options_from_config(str(f)).leafnodes
    assert (ln.host, ln.port, ln.reconnect_interval, ln.no_advertise, ln.auth_timeout) == ("127.0.0.1", -1, 3, True, 2)
    assert ln.users == [{"user": "l", "password": "p", "account": "A"}]
    assert [(r.urls, r.account) for r in ln.remotes] == [(["nats-leaf://u:p@127.0.0.1:7422"], "A")]
    assert _nats_server_check(f).returncode == 0

