"""The monitoring endpoint, against both servers: documents, field names and types (schemas/server/monitor)."""
import json
import socket
import urllib.request
from pathlib import Path

import jsonschema

VARZ_SCHEMA = json.loads((Path(__file__).parents[2] / "schemas/server/monitor/v1/varz.json").read_text())


def get(srv, path):
    with urllib.request.urlopen(srv.http_url + path, timeout=5) as r:
        return r.status, r.headers.get("Content-Type"), r.read()


def client(srv, name="mon-test"):
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
    f = s.makefile("rb")
    f.readline()
    s.sendall(b'CONNECT {"verbose":false,"name":"%s","lang":"python","version":"9.9"}\r\n' % name.encode())
    s.sendall(b"SUB mon.a 1\r\nSUB mon.b q 2\r\nPUB mon.a 5\r\nhello\r\nPING\r\n")
    assert f.readline().startswith(b"MSG mon.a 1 5")
    f.readline()
    assert f.readline() == b"PONG\r\n"
    return s


def test_healthz(server):
    status, ctype, body = get(server, "/healthz")
    assert status == 200 and ctype.startswith("application/json")
    assert json.loads(body) == {"status": "ok"}


def test_varz_matches_schema_and_counts(server):
    c = client(server)
    status, ctype, body = get(server, "/varz")
    assert status == 200
    varz = json.loads(body)
    jsonschema.validate(varz, VARZ_SCHEMA)
    for key in ("server_id", "version", "connections", "in_msgs", "out_msgs", "mem", "uptime", "jetstream"):
        assert key in varz, key
    assert varz["port"] == server.port and varz["http_port"] == server.http_port
    assert varz["connections"] == 1 and varz["in_msgs"] >= 1 and varz["out_msgs"] >= 1
    assert varz["max_payload"] == 1048576 and varz["ping_interval"] == 120_000_000_000
    assert varz["jetstream"]["config"]["store_dir"].endswith("jetstream")
    c.close()


def test_varz_shows_the_configured_monitor_and_jetstream_settings(server_factory):
    """Options a single server only shows: the base path ("" or "/", the values Skiff accepts), and the JetStream
    config's omitempty fields (jetstream.go JetStreamConfig: domain, unique_tag, strict)."""
    srv = server_factory(config='http_base_path: "/"\njetstream { unique_tag: " AZ ", domain: dd, strict: false }\n')
    varz = json.loads(get(srv, "/varz")[2])
    assert varz["http_base_path"] == "/"
    cfg = varz["jetstream"]["config"]
    assert (cfg["domain"], cfg["unique_tag"], "strict" in cfg) == ("dd", "az", False)  # trimmed and lower-cased
    assert json.loads(get(srv, "/jsz")[2])["config"] == cfg


def test_varz_defaults_of_those_settings(server):
    varz = json.loads(get(server, "/varz")[2])
    assert varz["http_base_path"] == ""
    cfg = varz["jetstream"]["config"]
    assert cfg["strict"] is True and "domain" not in cfg and "unique_tag" not in cfg


def test_connz_lists_client_with_subscriptions(server):
    c = client(server, "conn-a")
    _, _, body = get(server, "/connz?subs=1")
    connz = json.loads(body)
    assert connz["num_connections"] == 1 and connz["total"] == 1
    conn = connz["connections"][0]
    assert (conn["name"], conn["lang"], conn["version"]) == ("conn-a", "python", "9.9")
    assert conn["subscriptions"] == 2 and sorted(conn["subscriptions_list"]) == ["mon.a", "mon.b"]
    assert conn["in_msgs"] == 1 and conn["out_msgs"] == 1 and conn["in_bytes"] == 5
    c.close()


def test_subsz(server):
    c = client(server)
    _, _, body = get(server, "/subsz?subs=1&test=mon.a")
    subsz = json.loads(body)
    assert subsz["num_subscriptions"] >= 2
    subjects = [s["subject"] for s in subsz["subscriptions_list"]]
    assert "mon.a" in subjects and "mon.b" not in subjects
    c.close()


def test_unknown_path_is_404(server):
    try:
        urllib.request.urlopen(server.http_url + "/nope", timeout=5)
    except urllib.error.HTTPError as e:
        assert e.code == 404
    else:
        raise AssertionError("expected 404")
