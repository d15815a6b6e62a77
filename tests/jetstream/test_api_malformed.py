"""Malformed JetStream API requests get nats-server's exact answers, and no client input makes Skiff log a traceback.

``test_replies_match_nats_server`` sends one seeded stream of generated requests (tests/jetstream/api_fuzz.py: bad
JSON, wrong types, boundaries, unknown fields, truncations, deep nesting over 33 endpoints) to a Skiff and a
nats-server side by side and compares every answer after normalising what two servers legitimately differ in.  The
only differences allowed are the ones docs/parity.md lists (a *valid* snapshot, restore or consumer reset, which
Skiff refuses).  ``SKIFF_FUZZ_SEED`` / ``SKIFF_FUZZ_CASES`` / ``SKIFF_FUZZ_SECONDS`` pick another corpus or budget;
a failure names the seed and the index of each differing case.

The other tests pin single behaviours on both targets: nesting at and past Go's 10000-level limit on every decoder
(API bodies, json.Unmarshal bodies, pull requests, Direct Get, CONNECT), snapshot/restore answers, message delete
outside the stream, consumer names too long for a file name.
"""
from __future__ import annotations

import json
import os
import socket
import time

import pytest

from tests.conftest import selected_targets
from tests.harness import ServerProcess
from tests.jetstream import api_fuzz as F

SEED = int(os.environ.get("SKIFF_FUZZ_SEED", "16"))
CASES = int(os.environ.get("SKIFF_FUZZ_CASES", "1200"))
SECONDS = float(os.environ.get("SKIFF_FUZZ_SECONDS", "90"))

DEEP = 100_000  # far past Go's maxNestingDepth (10000)
MID = 5_000  # past Python's C scanner (~1000), within Go's limit


# ------------------------------------------------------------------------------------------------ fixtures

@pytest.fixture
def both(pytestconfig):
    if set(selected_targets(pytestconfig)) != {"skiff", "nats-server"}:
        pytest.skip("compares Skiff with nats-server: needs --target=both")
    servers = [ServerProcess(kind=k).start() for k in ("nats-server", "skiff")]
    yield servers
    for s in servers:
        s.cleanup()


@pytest.fixture
def wire(server):
    c = F.WireClient(server.port)
    F.seed_state(c)
    yield c
    c.close()


def _skiff_log_clean(srv: ServerProcess) -> None:
    log = srv.log()
    assert "Traceback" not in log, log[-4000:]
    assert "handler failed" not in log, log[-4000:]


# -------------------------------------------------------------------------------------- differential run

def _deliberate(subject: str, go: tuple, sk: tuple) -> bool:
    """docs/parity.md: a request nats-server would start a snapshot/restore/reset for is refused by Skiff."""
    if go[0] != "json" or sk[0] != "json" or "error" in go[1]:
        return False
    code = (sk[1].get("error") or {}).get("err_code")
    return ((".SNAPSHOT." in f".{subject}" and code == 10064) or (".RESTORE." in f".{subject}" and code == 10062)
            or (".RESET." in f".{subject}" and code == 10204))


def test_replies_match_nats_server(both):
    clients = [F.WireClient(s.port) for s in both]
    for c in clients:
        F.seed_state(c)
    diffs = []
    deadline = time.monotonic() + SECONDS
    done = 0
    for i, (subject, body) in enumerate(F.generate(SEED, CASES)):
        if time.monotonic() > deadline:
            break
        hdr = F.header_for(SEED, i)
        go = F.normalise(clients[0].request("$JS.API." + subject, body, hdr=hdr, wait=0.3))
        sk = F.normalise(clients[1].request("$JS.API." + subject, body, hdr=hdr,
                                            wait=0.3 if go == ("none",) else 2.0))
        if go != sk and not _deliberate(subject, go, sk):
            diffs.append(f"seed {SEED} #{i} {subject} {body[:100]!r}\n  nats-server: {json.dumps(go)[:400]}\n"
                         f"  skiff:       {json.dumps(sk)[:400]}")
        for c in clients:
            F.restore_state(c, subject)
        done += 1
    assert done >= min(CASES, 200), f"only {done} cases in {SECONDS}s"
    assert not diffs, f"{len(diffs)} of {done} answers differ:\n" + "\n".join(diffs[:20])
    _skiff_log_clean(both[1])


# ------------------------------------------------------------------------------------------ deep nesting

NESTED = [
    # (subject, body, expected normalised answer) - observed on nats-server 2.15.1
    ("STREAM.CREATE.X", b"[" * DEEP + b"]" * DEEP,
     ("error", 10025, "invalid JSON: exceeded max depth at offset 10001")),
    ("STREAM.CREATE.X", b'{"subjects":' + b"[" * MID + b"]" * MID + b"}",
     ("error", 10025, "invalid JSON: json: cannot unmarshal array into StreamConfigRequest.subjects.0 of type string")),
    ("STREAM.INFO.S", b'{"x":' + b"[" * MID + b"]" * MID + b"}", ("error", 10025, 'invalid JSON: json: unknown field "x"')),
    ("STREAM.INFO.S", b"[" * DEEP, ("error", 10025, "invalid JSON: exceeded max depth at offset 10001")),
    ("CONSUMER.CREATE.S", b"[" * 10001, ("error", 10025, "invalid JSON: exceeded max depth at offset 10001")),
    ("CONSUMER.UNPIN.S.C", b"[" * DEEP + b"]" * DEEP, ("error", 10025, "invalid JSON: exceeded max depth")),
    ("CONSUMER.UNPIN.S.C", b'{"x":' + b"[" * MID + b"]" * MID + b"}",
     ("error", 10025, "invalid JSON: consumer group not specified")),
    ("CONSUMER.RESET.S.C", b"[" * DEEP, ("error", 10025, "invalid JSON: exceeded max depth")),
    ("CONSUMER.MSG.NEXT.S.C", b'{"x":' + b"[" * DEEP + b"]" * DEEP + b"}",
     ("status", "400", "Bad Request - exceeded max depth")),
    ("DIRECT.GET.S", b'{"x":' + b"[" * DEEP + b"]" * DEEP + b"}", ("status", "408", "Malformed Request")),
    ("DIRECT.GET.S.s.a", b"[" * DEEP, ("status", "408", "Malformed Request")),
]


def _short(answer: tuple) -> tuple:
    if answer[0] == "json" and "error" in answer[1]:
        e = answer[1]["error"]
        return ("error", e["err_code"], e["description"])
    return answer


@pytest.mark.parametrize("subject,body,want", NESTED, ids=[f"{s}-{len(b)}" for s, b, _ in NESTED])
def test_nesting_depth(server, wire, target, subject, body, want):
    assert _short(F.normalise(wire.request("$JS.API." + subject, body, wait=3))) == want
    if target == "skiff":
        _skiff_log_clean(server)


def _connect(port: int, connect: bytes) -> bytes:
    s = socket.create_connection(("127.0.0.1", port), timeout=3)
    try:
        s.recv(65536)  # INFO
        s.sendall(b"CONNECT " + connect + b"\r\nPING\r\n")
        out = b""
        while b"PONG" not in out:
            try:
                data = s.recv(65536)
            except (ConnectionResetError, socket.timeout):
                break
            if not data:
                break
            out += data
        return out
    finally:
        s.close()


def test_connect_nesting(server, target):
    """CONNECT is plain json.Unmarshal into clientOpts: an unknown field nested 1500 deep is fine (the control line
    limit, 4096 bytes, bounds the depth), a wrongly typed or unclosed one closes the connection without -ERR."""
    ok = _connect(server.port, b'{"verbose":false,"x":' + b"[" * 1500 + b"]" * 1500 + b"}")
    assert b"PONG" in ok
    for bad in (b"[" * 1500 + b"]" * 1500, b'{"verbose":false,"name":' + b"[" * 1500 + b"]" * 1500 + b"}",
                b'{"verbose":false,"x":' + b"[" * 2000):
        assert _connect(server.port, bad) == b""
    if target == "skiff":
        _skiff_log_clean(server)


@pytest.mark.skiff_only
def test_fuzz_corpus_logs_no_traceback(server, wire):
    """Every generated request, plus deep nesting on every endpoint: Skiff answers, keeps serving, logs no
    traceback (the issue's 10-minute fuzz run wrote 9,315)."""
    for subject, body in F.generate(SEED + 1, 600):
        wire.request("$JS.API." + subject, body, wait=0.05)
        F.restore_state(wire, subject)
    for subject, _, _ in F.endpoints():
        for body in (b"[" * DEEP, b'{"x":' + b"[" * MID + b"]" * MID + b"}", b'{"config":' + b"{" * MID):
            wire.request("$JS.API." + subject, body, wait=0.05)
    assert wire.request("$JS.API.INFO", b"") is not None
    _skiff_log_clean(server)


# ----------------------------------------------------------------------------------- single behaviours

def _err(answer: tuple) -> tuple:
    assert answer[0] == "json", answer
    e = answer[1].get("error")
    return (e["err_code"], e["description"]) if e else ("ok",)


def test_snapshot_and_restore_answers(wire):
    """Invalid snapshot/restore requests get nats-server's errors in its order; a valid one starts the work
    (the transfers themselves: tests/jetstream/test_snapshot.py)."""
    ask = lambda subject, body: _err(F.normalise(wire.request("$JS.API." + subject, body, wait=3)))  # noqa: E731
    assert ask("STREAM.SNAPSHOT.S", b"") == (10003, "bad request")
    assert ask("STREAM.SNAPSHOT.NOPE", b'{"deliver_subject":"x"}') == (10059, "stream not found")
    assert ask("STREAM.SNAPSHOT.S", b'{"deliver_subject":"x"') == (10025, "invalid JSON: unexpected EOF")
    assert ask("STREAM.SNAPSHOT.S", b'{"deliver_subject":"a.*"}') == (10015, "deliver subject not valid")
    assert ask("STREAM.RESTORE.R", b"{}") == (10003, "bad request")
    assert ask("STREAM.RESTORE.R", b'{"config":{"name":"Q"}}') == (
        10056, "stream name in subject does not match request")
    assert ask("STREAM.RESTORE.R", b'{"state":{"messages":-1}}') == (
        10025, "invalid JSON: json: cannot unmarshal number -1 into Go struct field "
               "JSApiStreamRestoreRequest.state.messages of type uint64")
    assert ask("STREAM.RESTORE.S", b'{"config":{"name":"S"}}') == (10130, "stream name already in use, cannot restore")
    snap = ask("STREAM.SNAPSHOT.S", b'{"deliver_subject":"snap.inbox"}')
    restore = ask("STREAM.RESTORE.R", b'{"config":{"name":"R"}}')
    assert snap == ("ok",) and restore == ("ok",)


def test_cluster_only_subjects(wire):
    for subject, rtype in (("STREAM.PEER.EVACUATE.S", "stream_evacuate_peer_response"),
                           ("STREAM.CANCEL_MOVE.S", "stream_cancel_move_response"),
                           ("STREAM.PEER.REMOVE.S", "stream_remove_peer_response"),
                           ("STREAM.LEADER.STEPDOWN.S", "stream_leader_stepdown_response"),
                           ("CONSUMER.LEADER.STEPDOWN.S.C", "consumer_leader_stepdown_response")):
        ans = F.normalise(wire.request("$JS.API." + subject, b"{"))
        assert ans[1]["type"].endswith(rtype) and _err(ans) == (10010, "JetStream clustering support required")
    # meta/server/account operations live in the system account: a client of $G gets no answer at all
    for subject in ("META.LEADER.STEPDOWN", "SERVER.REMOVE", "ACCOUNT.PURGE.A", "ACCOUNT.STREAM.MOVE.A.S"):
        assert F.normalise(wire.request("$JS.API." + subject, b"{}", wait=0.3)) == ("none",)


def test_consumer_reset(wire):
    ask = lambda subject, body: F.normalise(wire.request("$JS.API." + subject, body, wait=0.5))  # noqa: E731
    assert ask("CONSUMER.RESET.S.NOPE", b"") == ("none",)
    bad = ask("CONSUMER.RESET.S.C", b"{}{}")
    assert _err(bad) == (10025, "invalid JSON: invalid character '{' after top-level value")
    assert bad[1]["reset_seq"] == 0
    ok = ask("CONSUMER.RESET.S.C", b'{"seq":2}')
    assert _err(ok) == ("ok",) and ok[1]["reset_seq"] == 2


def test_msg_delete_outside_the_stream(wire):
    """filestore.removeMsg: sequence 0 or below the first is 'no message found', past the last 'stream store EOF'
    (10057); inside the range a missing message is 10043; the memory store always says 10043."""
    ask = lambda subject, body: _err(F.normalise(wire.request("$JS.API." + subject, body)))  # noqa: E731
    assert ask("STREAM.MSG.DELETE.S", b'{"seq":99}') == (10057, "stream store EOF")
    assert ask("STREAM.MSG.DELETE.S", b'{"seq":0}') == (10057, "no message found")
    assert ask("STREAM.MSG.DELETE.S", b'{"seq":2}') == ("ok",)
    assert ask("STREAM.MSG.DELETE.S", b'{"seq":2}') == (10043, "sequence 2 not found")
    assert ask("STREAM.MSG.DELETE.S", b'{"seq":1}') == ("ok",)
    assert ask("STREAM.MSG.DELETE.S", b'{"seq":1}') == (10057, "no message found")
    assert ask("STREAM.MSG.DELETE.N1", b'{"seq":99}') == (10043, "sequence 99 not found")
    assert ask("STREAM.MSG.DELETE.N1", b'{"seq":0}') == (10043, "sequence 0 not found")


def test_consumer_name_too_long_for_a_file(wire):
    """A consumer name over 255 bytes cannot be a directory: nats-server answers 10012 without the OS error."""
    for name in ("A" * 256, "\u00e9" * 128):
        ans = F.normalise(wire.request(f"$JS.API.CONSUMER.CREATE.S.{name}",
                                       json.dumps({"stream_name": "S", "config": {"name": name}}).encode()))
        assert _err(ans) == (10012, "error creating store for consumer")
    ans = F.normalise(wire.request(f"$JS.API.CONSUMER.DURABLE.CREATE.S.{'B' * 300}",
                                   json.dumps({"stream_name": "S", "config": {"durable_name": "B" * 300}}).encode()))
    assert _err(ans) == (10102, "consumer name is too long, maximum allowed is 255")
    ok = F.normalise(wire.request(f"$JS.API.CONSUMER.CREATE.S.{'C' * 255}",
                                  json.dumps({"stream_name": "S", "config": {"name": "C" * 255}}).encode()))
    assert _err(ok) == ("ok",)


def test_go_texts_for_odd_values(wire):
    """Found by the differential run: time errors quote like Go's time.quote, a negative pull expiry is a
    deadline already past (408), not 'no expiry'."""
    for value, shown in (("\u0000", "\\x00"), ("\u00e9", "\\xc3\\xa9")):
        ans = F.normalise(wire.request("$JS.API.CONSUMER.PAUSE.S.C", json.dumps({"pause_until": value}).encode()))
        assert _err(ans) == (10025, f'invalid JSON: parsing time "{shown}" as "2006-01-02T15:04:05Z07:00": '
                                    f'cannot parse "{shown}" as "2006"')
    ans = F.normalise(wire.request("$JS.API.CONSUMER.MSG.NEXT.S.C", b'{"batch":1,"no_wait":true,"expires":-1}'))
    assert ans == ("status", "408", "Request Timeout")
