"""Configuration keys to ServerOptions, and agreement with nats-server on which files are valid."""
from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from skiff.server.conf import ConfigError
from skiff.server.options import ServerOptions, options_from_config, options_from_string, reload_options
from tests.harness import free_port, nats_server_binary

CERTS = Path(__file__).resolve().parents[2] / "conf" / "certs"


def test_defaults_are_nats_servers():
    o = ServerOptions()
    assert (o.host, o.port, o.http_port, o.server_name) == ("0.0.0.0", 4222, 0, "")
    assert o.max_payload == 1024 * 1024
    assert o.max_control_line == 4096
    assert o.max_pending == 64 * 1024 * 1024
    assert o.max_connections == 64 * 1024
    assert (o.ping_interval, o.ping_max, o.write_deadline) == (120.0, 2, 10.0)
    assert o.auth_timeout == 2.0
    assert (o.lame_duck_duration, o.lame_duck_grace_period) == (120.0, 10.0)
    assert (o.jetstream, o.store_dir, o.max_memory_store, o.max_file_store) == (False, "", -1, -1)
    assert (o.sync_interval, o.sync_always) == (120.0, False)
    assert o.logtime is True and o.debug is False and o.trace is False
    assert o.tls is None and o.users == []


def test_auth_timeout_defaults_higher_with_tls():
    # nats-server getDefaultAuthTimeout: TLS timeout + 1s when TLS is on.
    assert ServerOptions(tls={"cert_file": "c", "key_file": "k"}).auth_timeout == 3.0
    assert ServerOptions(tls={"cert_file": "c", "key_file": "k", "timeout": 5}).auth_timeout == 6.0
    assert ServerOptions(tls={"cert_file": "c", "key_file": "k"}, auth_timeout=1.5).auth_timeout == 1.5


def test_options_are_plain_records_that_refuse_what_they_do_not_know(tmp_path):
    # server/options.py: no pydantic, but what the server relied on from it is kept: nested blocks built from the
    # dicts conf/mapping.py produces, ints for float fields, a path-like store_dir, unknown names refused.
    from skiff.server.options import TLSOptions, User, _finish

    o = ServerOptions(tls={"cert_file": "c", "key_file": "k", "timeout": 3}, ping_interval=5, store_dir=tmp_path,
                      users=[{"user": "a", "permissions": {"publish": {"allow": ["x"]}}}],
                      leafnodes={"remotes": [{"urls": ["nats://h:7422"]}]})
    assert isinstance(o.tls, TLSOptions) and o.tls.timeout == 3.0 and isinstance(o.tls.timeout, float)
    assert isinstance(o.ping_interval, float) and o.store_dir == str(tmp_path)
    assert isinstance(o.users[0], User) and o.users[0].permissions.publish.allow == ["x"]
    assert o.leafnodes.remotes[0].urls == ["nats://h:7422"]
    assert o == ServerOptions.model_validate(o.model_dump()) and o.model_copy(update={"port": 1}).port == 1
    with pytest.raises(TypeError, match="unknown field 'prot'"):
        ServerOptions(prot=1)
    with pytest.raises(ConfigError, match="invalid options: ServerOptions.port"):
        _finish({"port": "4222"})


# (config text, {field: expected})
MAPPING = [
    ("listen: 127.0.0.1:4333", {"host": "127.0.0.1", "port": 4333}),
    ("listen: 4333", {"host": "0.0.0.0", "port": 4333}),
    ("listen: '[::1]:4333'", {"host": "::1", "port": 4333}),
    ("host: 127.0.0.1\nport: 4333", {"host": "127.0.0.1", "port": 4333}),
    ("net: 10.0.0.1", {"host": "10.0.0.1"}),
    ("port: -1", {"port": -1}),
    ("port: 0", {"port": 4222}),
    ("server_name: hub", {"server_name": "hub"}),
    ("PORT: 4444\nport: $PORT", {"port": 4444}),
    ("max_payload: 64KB", {"max_payload": 65536}),
    ("max_payload: 1MB", {"max_payload": 1048576}),
    ("max_payload: 1M", {"max_payload": 1000000}),
    ("max_control_line: 2KB", {"max_control_line": 2048}),
    ("max_pending: 32MB", {"max_pending": 32 * 1024 * 1024}),
    ("max_connections: 100", {"max_connections": 100}),
    ("max_conn: 0", {"max_connections": -1}),
    ("max_subscriptions: 10", {"max_subscriptions": 10}),
    ("ping_interval: \"30s\"", {"ping_interval": 30.0}),
    ("ping_interval: 45", {"ping_interval": 45.0}),
    ("ping_max: 5", {"ping_max": 5}),
    ("write_deadline: \"2s\"", {"write_deadline": 2.0}),
    ("debug: true\ntrace: on\nlogtime: false", {"debug": True, "trace": True, "logtime": False}),
    ("trace_verbose: true", {"trace": True}),
    ("trace_headers: true", {"trace": True, "trace_headers": True}),
    ("log_file: /tmp/x.log\npid_file: /tmp/x.pid", {"log_file": "/tmp/x.log", "pid_file": "/tmp/x.pid"}),
    ("logfile: a\npidfile: b", {"log_file": "a", "pid_file": "b"}),
    ("log_json: true", {"log_json": True}),
    ("http_port: 8222", {"http_port": 8222, "http_host": ""}),
    ("monitor_port: 8223", {"http_port": 8223}),
    ("http: 127.0.0.1:8222", {"http_host": "127.0.0.1", "http_port": 8222}),
    ("http: 8222", {"http_port": 8222}),
    ("https_port: 8443", {"https_port": 8443}),
    ("jetstream: enabled", {"jetstream": True}),
    ("jetstream: true", {"jetstream": True}),
    ("jetstream: disabled", {"jetstream": False}),
    ("jetstream {}", {"jetstream": True}),
    ("jetstream { enabled: false }", {"jetstream": False}),
    ("jetstream { store_dir: /data, max_memory_store: 1GB, max_file_store: 10G }",
     {"jetstream": True, "store_dir": "/data", "max_memory_store": 1024**3, "max_file_store": 10 * 10**9}),
    ("jetstream { max_mem: \"512M\", max_file: \"1T\" }",
     {"max_memory_store": 512 * 1024**2, "max_file_store": 1024**4}),
    ("jetstream { sync_interval: \"10s\" }", {"sync_interval": 10.0, "sync_always": False}),
    ("jetstream { sync: always }", {"sync_always": True, "sync_interval": 120.0}),
    ("jetstream { domain: hub }", {"jetstream_domain": "hub"}),
    ("store_dir: /data\njetstream: enabled", {"store_dir": "/data", "jetstream": True}),
    ("authorization { user: a, password: b }", {"username": "a", "password": "b"}),
    ("authorization { username: a, pass: b, timeout: 3 }", {"username": "a", "password": "b", "auth_timeout": 3.0}),
    ("authorization { token: t0k, timeout: \"1.5s\" }", {"authorization": "t0k", "auth_timeout": 1.5}),
    ("no_auth_user: a\nauthorization { users: [{user: a, password: b}] }", {"no_auth_user": "a"}),
    ("lame_duck_duration: \"30s\"\nlame_duck_grace_period: \"1s\"",
     {"lame_duck_duration": 30.0, "lame_duck_grace_period": 1.0}),
    ("no_header_support: false\nhttp_base_path: /\nserver_tags: []", {"http_base_path": "/"}),
    ('jetstream { unique_tag: " AZ " }', {"jetstream_unique_tag": "az"}),  # opts.go: trimmed, lower case
    # keys no client can see the effect of: accepted, one start-up warning each (test_refusals.py has them all)
    ("prof_block_rate: 5", {"ignored_config_keys": ['<string>:1:1: "prof_block_rate" is not implemented by Skiff '
                                                   "and is ignored: the Go block-profiling rate; Skiff has no profiler"]}),
    ("allow_non_tls: true", {"allow_non_tls": True}),
]


@pytest.mark.parametrize("text,expected", MAPPING, ids=[t[:50] for t, _ in MAPPING])
def test_mapping(text, expected):
    o = options_from_string(text)
    for field, value in expected.items():
        assert getattr(o, field) == value, field


def test_users_and_permissions():
    o = options_from_string("""
        authorization {
          DEFAULT = { subscribe: "public.>" }
          default_permissions: $DEFAULT
          users: [
            {user: alice, password: a, permissions: {publish: {allow: ["a.>"], deny: "a.secret"}, subscribe: ">"}}
            {user: bob, password: b}
          ]
        }
    """)
    alice, bob = o.users
    assert alice.user == "alice" and alice.password == "a"
    assert alice.permissions.publish.allow == ["a.>"] and alice.permissions.publish.deny == ["a.secret"]
    assert alice.permissions.subscribe.allow == [">"]
    assert bob.permissions.subscribe.allow == ["public.>"]  # default_permissions apply to users without any


def test_tls_block():
    o = options_from_string(f"""
        tls {{
          cert_file: "{CERTS}/server-cert.pem"
          key_file: "{CERTS}/server-key.pem"
          ca_file: "{CERTS}/ca.pem"
          verify: true
          timeout: 3
          handshake_first: true
        }}
    """)
    assert o.tls.cert_file.endswith("server-cert.pem") and o.tls.verify and o.tls.handshake_first
    assert o.tls.timeout == 3.0
    assert o.auth_timeout == 4.0


def test_warnings_are_kept_not_raised():
    o = options_from_string("ping_interval: 60\nauthorization { token: x, timeout: 120 }")
    assert any("ping_interval should be converted to a duration" in w for w in o.config_warnings)
    assert any("is high" in w for w in o.config_warnings)


# (text, words in the error)
ERRORS = [
    ("bogus_key: 1", 'unknown field "bogus_key"'),
    ("port: abc", "port: expected an integer"),
    ("port: 1.5", "port: expected an integer"),
    ("debug: 1", "debug: expected a boolean"),
    ("server_name: 'a b'", "server name cannot contain spaces"),
    ("listen: nohostport", "could not parse address"),
    ("ping_interval: \"10x\"", "error parsing ping_interval"),
    ("lame_duck_duration: \"10s\"", "minimum is 30 seconds"),
    ("max_payload: 3GB", "value is too big"),
    ("jetstream: maybe", "Expected 'enabled' or 'disabled'"),
    ("jetstream { bogus: 1 }", 'unknown field "bogus"'),
    ("jetstream { max_mem: \"12Q\" }", "must end in K, M, G, T"),
    ("store_dir: /a; jetstream { store_dir: /b }", "Duplicate 'store_dir'"),
    ("jetstream { limits: 5 }", "Expected a map to define JetStreamLimits, got int64"),
    ("jetstream { limits { batch: [] } }", "Expected a map to define batch limits, got []interface {}"),
    ("jetstream { limits { batch { max_msgs: \"5\" } } }", "max_msgs: expected an integer"),
    ("jetstream { limits { batch { timeout: \"5x\" } } }", 'time: unknown unit "x" in duration "5x"'),
    ("jetstream { limits { batch { nope: 1 } } }", 'unknown field "nope"'),
    ("jetstream { limits { nope: 1 } }", 'unknown field "nope"'),
    ("authorization { user: a, token: b }", "Cannot have a user/pass and token"),
    ("authorization { user: a, users: [] }", "single user/pass and a users array"),
    ("authorization { users: [{password: x}] }", "User entry requires a user"),
    ("authorization { users: [{user: a}, {user: a}] }", "Duplicate user"),
    ("authorization { nope: 1 }", 'unknown field "nope"'),
    ("tls { cert_file: /nonexistent/c.pem, key_file: /nonexistent/k.pem }", "no such file"),
    ("tls { key_file: k.pem }", "missing 'cert_file'"),
    ("tls { bogus: 1 }", "unknown field"),
]


@pytest.mark.parametrize("text,words", ERRORS, ids=[t[:40] for t, _ in ERRORS])
def test_errors_name_the_line(text, words, tmp_path):
    f = tmp_path / "bad.conf"
    f.write_text("# first line\n" + text + "\n")
    with pytest.raises(ConfigError) as ei:
        options_from_config(str(f))
    assert words in str(ei.value)
    assert ei.value.file == str(f) and ei.value.line == 2


def test_all_errors_are_reported_at_once(tmp_path):
    f = tmp_path / "bad.conf"
    f.write_text("port: x\ndebug: 3\nnope: 1\n")
    with pytest.raises(ConfigError) as ei:
        options_from_config(str(f))
    assert [e.line for e in ei.value.errors] == [1, 2, 3]
    assert str(ei.value).count("\n") == 2


def test_variable_definitions_are_not_unknown_fields():
    assert options_from_string("MY_PORT: 4555\nport: $MY_PORT").port == 4555
    with pytest.raises(ConfigError, match='unknown field "MY_UNUSED"'):
        options_from_string("MY_UNUSED: 4555\nport: 1")


def test_overrides_win_and_reload_keeps_them(tmp_path):
    f = tmp_path / "s.conf"
    f.write_text("port: 4333\ndebug: true\n")
    o = options_from_config(str(f), port=5555)
    assert (o.port, o.debug, o.config_file) == (5555, True, str(f))
    f.write_text("port: 4334\ndebug: false\n")
    r = reload_options(o)
    assert (r.port, r.debug) == (5555, False)
    assert o.config_digest and r.config_digest and o.config_digest != r.config_digest


# ---------------------------------------------------------------------------------------------------------------
# Agreement with the real nats-server: `nats-server -c FILE -t` accepts exactly the files Skiff accepts, except
# files with keys Skiff refuses because it does not implement them (tests/config/test_refusals.py).

AGREEMENT = [
    "port: 4222",
    "listen: 127.0.0.1:4222\nhttp: 127.0.0.1:8222",
    "max_payload: 64KB\nmax_pending: 1GB",
    "jetstream { store_dir: /tmp/skiff-x, max_mem: 1G, max_file: \"10G\", sync_interval: always }",
    "jetstream: enabled",
    "authorization { users: [{user: a, password: b, permissions: {publish: \"x\"}}] }",
    "authorization { token: abc, timeout: 2 }",
    "V: 4223\nport: $V",
    "lame_duck_duration: \"1m\"\nlame_duck_grace_period: \"5s\"",
    "bogus: 1",
    "port: abc",
    "server_name: 'a b'",
    "authorization { user: a, token: b }",
    "jetstream { bogus: 1 }",
    "lame_duck_duration: \"5s\"",
    "max_payload: 3GB",
    "a: [1 2]",
    "m { a: 1",
]


@pytest.mark.parametrize("text", AGREEMENT)
def test_agrees_with_nats_server_on_validity(text, tmp_path):
    f = tmp_path / "c.conf"
    f.write_text(text + "\n")
    proc = subprocess.run([nats_server_binary(), "-c", str(f), "-t"], capture_output=True, text=True, timeout=30)
    try:
        options_from_config(str(f))
        skiff_ok = True
    except ConfigError:
        skiff_ok = False
    assert skiff_ok == (proc.returncode == 0), proc.stderr


def _varz_max_payload_from_nats_server(conf: Path) -> int:
    port, http_port = free_port(), free_port()
    proc = subprocess.Popen([nats_server_binary(), "-c", str(conf), "-a", "127.0.0.1", "-p", str(port), "-m",
                             str(http_port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/varz", timeout=1) as r:
                    return json.load(r)["max_payload"]
            except (OSError, socket.timeout):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
    finally:
        proc.kill()
        proc.wait()


def test_size_suffixes_match_nats_server(tmp_path):
    values = ["64KB", "1M", "1MB", "2mib", "1k", "1Ki", "100000"]
    for v in values:
        f = tmp_path / f"s{v}.conf"
        f.write_text(f"max_payload: {v}\n")
        assert options_from_config(str(f)).max_payload == _varz_max_payload_from_nats_server(f), v


def test_jetstream_batch_limits_are_read_under_nats_servers_json_names():
    o = options_from_string('jetstream { limits { batch { max_inflight_per_stream: 2, max_inflight_total: 5, '
                            'max_msgs: 3, timeout: "1.5s" } } }')
    assert o.jetstream_batch_limits == {"max_batch_inflight_per_stream": 2, "max_batch_inflight_total": 5,
                                        "max_batch_size": 3, "max_batch_timeout": 1_500_000_000}
