"""Replay the protocol/jsapi observation tables against a live server.

The tables in test_jsapi_stream_config.py, test_jsapi_consumer_config.py and test_jsapi_gojson.py record what
nats-server 2.15.1 answered; the unit tests hold Skiff's pure code to them.  Here the same tables go over the wire
to the `server` fixture, so ``--target=nats-server`` proves the tables themselves, and ``--target=skiff`` proves
Skiff's API layer once it answers ``$JS.API`` requests (until then the Skiff run is skipped, not failed).
"""
from __future__ import annotations

import itertools
import json
import socket
import time

import pytest

from tests.protocol.test_jsapi_consumer_config import CONSUMER_CASES, STREAM_FOR_CONSUMERS
from tests.protocol.test_jsapi_gojson import JSON_CASES
from tests.protocol.test_jsapi_stream_config import CREATE_CASES, check_reply


class RawClient:
    """Just enough of the client protocol for request/reply over a socket."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.buf = b""
        self._line()  # INFO
        self.sock.sendall(b'CONNECT {"verbose":false,"pedantic":false,"headers":true}\r\nSUB _R.* 1\r\nPING\r\n')
        while self._line() != b"PONG":
            pass
        self.ids = itertools.count()

    def _fill(self) -> None:
        data = self.sock.recv(65536)
        if not data:
            raise EOFError("server closed the connection")
        self.buf += data

    def _line(self) -> bytes:
        while b"\r\n" not in self.buf:
            self._fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def request(self, subject: str, payload: bytes, timeout: float = 3.0) -> bytes:
        reply = f"_R.{next(self.ids)}"
        self.sock.settimeout(timeout)
        self.sock.sendall(f"PUB {subject} {reply} {len(payload)}\r\n".encode() + payload + b"\r\n")
        while True:
            line = self._line()
            if line == b"PING":
                self.sock.sendall(b"PONG\r\n")
                continue
            if line.startswith((b"MSG ", b"HMSG ")):
                parts = line.split()
                size = int(parts[-1])
                while len(self.buf) < size + 2:
                    self._fill()
                data, self.buf = self.buf[:size], self.buf[size + 2:]
                if parts[1].decode() != reply:
                    continue
                if line.startswith(b"HMSG "):
                    data = data[int(parts[-2]):]
                return data

    def json(self, subject: str, payload: bytes = b"") -> dict:
        return json.loads(self.request(subject, payload))

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def client(server, target):
    c = RawClient(server.port)
    try:
        c.json("$JS.API.INFO")
    except (OSError, ValueError, EOFError):
        c.close()
        if target == "skiff":
            pytest.skip("Skiff does not answer $JS.API yet")
        raise
    yield c
    c.close()


# The recorded tables come from nats-server 2.15.1; the server version and API level it writes into metadata are
# the only values that legitimately differ (both 2.15.1 / level 5 now, but kept apart: Skiff's are its claim, not a recording).
VERSION_KEYS = ("_nats.ver", "_nats.level")


def _unversioned(config: dict) -> dict:
    md = config.get("metadata")
    if isinstance(md, dict):
        config = dict(config, metadata={k: ("<version>" if k in VERSION_KEYS else v) for k, v in md.items()})
    return config


def _unversioned_json(text: str) -> str:
    return json.dumps(_unversioned(json.loads(text)))


def _pick(reply: dict) -> dict:
    if "error" in reply:
        return {"error": reply["error"]}
    return {"config": _unversioned(reply["config"])}


def _want(want: dict) -> dict:
    if "config" in want:
        want = dict(want, config=_unversioned_json(want["config"]))
    if "config_has" in want:
        want = dict(want, config_has=_unversioned(want["config_has"]))
    return want


def _not_in_skiff_yet(target: str, body: bytes) -> bool:
    """Mirrors and sources are not implemented in Skiff yet (README: what is missing); their rows are skipped."""
    return target == "skiff" and (b'"mirror"' in body or b'"sources"' in body)


def _create(client, target: str, subject_stream: str, body: bytes) -> dict:
    """STREAM.CREATE.  nats-server deletes a stream by renaming its directory to ``.<name>`` and removing that in a
    goroutine (filestore.go Delete); re-creating and deleting the same name at once can meet the removal still under
    way and get 10049 "error creating store for stream" (seen about once in ten CI runs).  Only there, it is asked
    again after a moment; Skiff must answer at once."""
    reply = client.json(f"$JS.API.STREAM.CREATE.{subject_stream}", body)
    for _ in range(20):
        if target != "nats-server" or reply.get("error", {}).get("err_code") != 10049:
            break
        time.sleep(0.05)
        reply = client.json(f"$JS.API.STREAM.CREATE.{subject_stream}", body)
    return reply


def test_stream_create_table(client, target):
    for subject_stream, body, want in CREATE_CASES:
        if _not_in_skiff_yet(target, body):
            continue
        reply = _create(client, target, subject_stream, body)
        try:
            check_reply(_pick(reply), _want(want))
        except AssertionError as e:
            raise AssertionError(f"{body[:200]!r}: {e}") from None
        if "error" not in reply:
            client.json(f"$JS.API.STREAM.DELETE.{reply['config']['name']}")


def test_json_error_table(client, target):
    for body, description in JSON_CASES:
        reply = _create(client, target, "S", body)
        got = reply.get("error", {}).get("description", "OK")
        assert got == description, body
        if "error" not in reply:
            client.json("$JS.API.STREAM.DELETE.S")


def test_consumer_create_table(client):
    stream = client.json("$JS.API.STREAM.CREATE.S", json.dumps(STREAM_FOR_CONSUMERS).encode())
    assert "error" not in stream, stream
    for subject, body, want in CONSUMER_CASES:
        reply = client.json(subject, body)
        if "error" in want:
            assert reply.get("error") == want["error"], (subject, body, reply)
        else:
            assert "error" not in reply, (subject, body, reply)
            cfg = json.dumps(_unversioned(reply["config"]), separators=(",", ":"))
            if "config" in want:
                assert json.loads(cfg) == json.loads(_unversioned_json(want["config"])), (body, cfg)
            for k, v in _want(want).get("config_has", {}).items():
                assert _unversioned(reply["config"]).get(k) == v, (body, k, reply["config"])
            client.json(f"$JS.API.CONSUMER.DELETE.S.{reply['name']}")
