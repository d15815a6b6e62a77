"""Why a connection was closed, as /connz?state=closed reports it (nats-server client.go readLoop: a parser error
closes with "Protocol Violation"; "Parse Error" is kept for a client that sends -ERR, processErr)."""
from __future__ import annotations

import json
import time
import urllib.request

import pytest


def closed_reason(srv, port: int) -> str | None:
    """The reason the connection from local ``port`` was closed for, once it shows in /connz."""
    for _ in range(50):
        with urllib.request.urlopen(srv.http_url + "/connz?state=closed", timeout=5) as r:
            for c in json.load(r)["connections"]:
                if c.get("port") == port:
                    return c.get("reason")
        time.sleep(0.05)
    return None


@pytest.mark.parametrize("line,err,reason", [
    (b"FOO\r\n", b"-ERR 'Unknown Protocol Operation'\r\n", "Protocol Violation"),
    (b"SUB\r\n", b"-ERR 'Unknown Protocol Operation'\r\n", "Protocol Violation"),
    (b"-ERR 'oops'\r\n", b"", "Parse Error"),
])
def test_close_reason(server_factory, raw, line, err, reason):
    srv = server_factory(jetstream=False)
    c = raw.connect(srv)
    port = c.sock.getsockname()[1]
    c.send(b'CONNECT {"verbose":false}\r\n' + line)
    assert c.assert_closed() == err
    assert closed_reason(srv, port) == reason
