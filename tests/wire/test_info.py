"""INFO: the first line a server writes, its fields, and the second INFO after the client's first PING.

Values that legitimately differ between servers (server_id, version, go, git_commit, xkey) are checked for type
and presence only.  Ref: jetstream-notes.md 1.2; nats-server server.go (Info struct, omitempty fields).
"""
from __future__ import annotations

import json
import socket
import ssl

from tests.wire.rawclient import RawClient


def parse_info(line: bytes) -> dict:
    assert line.startswith(b"INFO "), line
    assert line.endswith(b"\r\n"), line
    return json.loads(line[5:-2])


def test_info_is_first_line(shared_server):
    # Read raw bytes: the very first bytes on a fresh connection are "INFO {".
    with socket.create_connection(("127.0.0.1", shared_server.port), timeout=2) as s:
        data = b""
        while b"\r\n" not in data:
            chunk = s.recv(4096)
            assert chunk, "closed before INFO"
            data += chunk
    assert data.startswith(b"INFO {")
    line = data[: data.index(b"\r\n") + 2]
    # nats-server writes the JSON object followed by one space, then CRLF.
    assert line.endswith(b"} \r\n"), line
    parse_info(line)


def test_info_fields(shared_server, raw):
    c = raw.connect(shared_server)
    info = c.info
    for key, typ in [("server_id", str), ("server_name", str), ("version", str), ("go", str), ("host", str)]:
        assert isinstance(info.get(key), typ), (key, info)
        assert info[key], key
    assert info["proto"] == 1
    assert info["host"] == "127.0.0.1"
    assert info["port"] == shared_server.port
    assert info["headers"] is True
    assert info["max_payload"] == 1048576
    assert isinstance(info["client_id"], int) and not isinstance(info["client_id"], bool)
    assert info["client_ip"] == "127.0.0.1"
    # nats.py parses version as semver and wants a 2.x with minor >= 9 for modern JetStream features.
    major, minor, *_ = info["version"].split(".")
    assert major == "2" and int(minor) >= 9
    # Not asked for: no auth, no TLS.
    for key in ("auth_required", "tls_required", "tls_available", "connect_info"):
        assert not info.get(key), key


def test_info_client_ids_differ(shared_server, raw):
    a = raw.connect(shared_server)
    b = raw.connect(shared_server)
    assert a.info["client_id"] != b.info["client_id"]
    assert a.info["server_id"] == b.info["server_id"]


def test_info_jetstream_flag(shared_server, raw):
    # shared_server runs with -js.
    assert raw.connect(shared_server).info.get("jetstream") is True


def test_info_without_jetstream(server_factory, raw):
    srv = server_factory(jetstream=False)
    assert not raw.connect(srv).info.get("jetstream")


def test_info_max_payload_from_config(server_factory, raw):
    srv = server_factory(jetstream=False, config="max_payload: 2048\n")
    assert raw.connect(srv).info["max_payload"] == 2048


def test_info_auth_required_user_pass(server_factory, raw):
    srv = server_factory("--user", "u", "--pass", "p", jetstream=False)
    assert raw.connect(srv).info["auth_required"] is True


def test_info_auth_required_token(server_factory, raw):
    srv = server_factory("--auth", "tok", jetstream=False)
    assert raw.connect(srv).info["auth_required"] is True


def test_second_info_after_first_ping(shared_server, raw):
    c = raw.connect(shared_server)
    c.send(b'CONNECT {"verbose":false,"protocol":1}\r\nPING\r\n')
    c.expect(b"PONG\r\n")
    info2 = parse_info(c.read_line())
    assert info2["connect_info"] is True
    assert info2["remote_account"] == "$G"
    assert info2["server_id"] == c.info["server_id"]
    assert info2["client_id"] == c.info["client_id"]
    # Only after the first PING.
    c.send(b"PING\r\n")
    c.expect(b"PONG\r\n")
    c.expect_nothing(0.1)


def test_no_second_info_with_protocol_zero(shared_server, raw):
    # The async INFO is only for clients that declared protocol >= 1 (nats-server client.go processPing).
    for connect in (b'CONNECT {"verbose":false}\r\n', b'CONNECT {"verbose":false,"protocol":0}\r\n', b""):
        c = raw.connect(shared_server)
        c.send(connect + b"PING\r\n")
        c.expect(b"PONG\r\n")
        c.expect_nothing(0.1)


def test_tls_required_info_and_handshake(server_factory, tls_cert):
    cert, key = tls_cert
    srv = server_factory("--tls", "--tlscert", cert, "--tlskey", key, jetstream=False)
    c = RawClient("127.0.0.1", srv.port).connect()
    try:
        assert c.info["tls_required"] is True
        # INFO goes out in plain text; then the client starts TLS on the same socket.
        assert c.buf == b""
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        c.sock = ctx.wrap_socket(c.sock, server_hostname="127.0.0.1")
        c.send(b'CONNECT {"verbose":false,"tls_required":true}\r\nPING\r\n')
        c.expect(b"PONG\r\n")
    finally:
        c.close()


def test_tls_required_rejects_plain_text(server_factory, tls_cert):
    cert, key = tls_cert
    srv = server_factory("--tls", "--tlscert", cert, "--tlskey", key, jetstream=False)
    c = RawClient("127.0.0.1", srv.port).connect()
    try:
        c.send(b'CONNECT {"verbose":false}\r\nPING\r\n')
        # Plain bytes where a TLS ClientHello is due: closed, no PONG.
        assert b"PONG" not in c.assert_closed(3)
    finally:
        c.close()


def test_tls_available_allows_plain_text(server_factory, tls_cert):
    cert, key = tls_cert
    conf = f'tls {{ cert_file: "{cert}"\n key_file: "{key}" }}\nallow_non_tls: true\n'
    srv = server_factory(jetstream=False, config=conf)
    c = RawClient("127.0.0.1", srv.port).connect()
    try:
        assert c.info["tls_available"] is True
        assert not c.info.get("tls_required")
        c.send(b'CONNECT {"verbose":false}\r\nPING\r\n')
        c.expect(b"PONG\r\n")
    finally:
        c.close()
