"""The -V trace prefix against both servers (nats-server client.go processConnect): after the first CONNECT,
``"v<version>:<lang>:<name>"`` and, when the CONNECT carried credentials, ``"<account>/<label>"`` with the label
``user:<name>``, ``nkey:<key>`` or ``token`` taken from the CONNECT (even on a server without authentication)."""
from __future__ import annotations

import re
import socket
import time

import pytest

ACCOUNTS = ("accounts { A { users = [ {user: ua, password: p} ] } }\n"
            "authorization { users = [ {user: u, password: p} ] }\n")


def _ping(port: int, connect: bytes) -> None:
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    f = s.makefile("rb")
    f.readline()
    s.sendall(connect + b"\r\nPING\r\n")
    assert f.readline() == b"PONG\r\n"
    s.close()


def _ping_prefixes(srv, n: int) -> list[str]:
    deadline = time.monotonic() + 5
    while True:
        found = [re.sub(r"^127\.0\.0\.1:\d+ - cid:\d+", "", ln.split("[TRC] ", 1)[1])
                 for ln in srv.log().splitlines() if "[TRC] " in ln and ln.endswith("<<- [PING]")]
        if len(found) >= n or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


@pytest.mark.parametrize("config, connects, expected", [
    (ACCOUNTS, [b'{"verbose":false,"user":"u","pass":"p","name":"nm","lang":"python3","version":"2.1"}',
                b'{"verbose":false,"user":"ua","pass":"p"}',
                b'{"verbose":false,"user":"u","pass":"p","lang":"go"}'],
     [' - "v2.1:python3:nm" - "$G/user:u" - <<- [PING]', ' - "A/user:ua" - <<- [PING]',
      ' - "go" - "$G/user:u" - <<- [PING]']),
    ("", [b'{"verbose":false,"user":"x","pass":"p"}', b'{"verbose":false,"auth_token":"t","name":"q\\"n"}',
          b'{"verbose":false}'],
     [' - "$G/user:x" - <<- [PING]', ' - "q\\"n" - "$G/token" - <<- [PING]', " - <<- [PING]"]),
])
def test_trace_prefix(server_factory, config, connects, expected):
    srv = server_factory("-V", jetstream=False, config=config or None)
    for c in connects:
        _ping(srv.port, b"CONNECT " + c)
    assert _ping_prefixes(srv, len(expected)) == expected


def test_prefix_fixed_at_the_first_connect(server_factory):
    srv = server_factory("-V", jetstream=False, config=ACCOUNTS)
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
    f = s.makefile("rb")
    f.readline()
    s.sendall(b'CONNECT {"verbose":false,"user":"u","pass":"p","name":"one"}\r\n'
              b'CONNECT {"user":"ua","pass":"p","name":"two"}\r\nPING\r\n')
    assert f.readline() == b"PONG\r\n"
    s.close()
    assert _ping_prefixes(srv, 1) == [' - "one" - "$G/user:u" - <<- [PING]']
