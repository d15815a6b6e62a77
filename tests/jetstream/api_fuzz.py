"""A seeded generator of malformed JetStream API requests, and a raw client that records every kind of answer.

The differential test (test_api_malformed.py) sends the same generated requests, in the same order, to Skiff and to
nats-server and compares the answers.  The generator is plain ``random.Random(seed)``: a failing case is reproduced
by its seed and index, with no extra dependency.

An answer is normalised to one of::

    ("none",)                              no reply within the wait
    ("status", code, description)          a header-only status message (400 Bad Request, 408, 503 ...)
    ("json", obj)                          a JSON body (normalised: times, server names, versions)
    ("raw", bytes)                         anything else

Normalisation hides only what legitimately differs between two servers: timestamps, server name/id, the version
and API level Skiff reports on purpose (docs/parity.md), generated consumer names, byte counts of the stores.
"""
from __future__ import annotations

import itertools
import json
import random
import re
import socket
import time

# ---------------------------------------------------------------------------------------------------------- client


class WireClient:
    """Request/reply over a raw socket, headers and no-responders on, so status answers are seen as they are."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.buf = b""
        self._line()  # INFO
        self.sock.sendall(b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"no_responders":true,'
                          b'"protocol":1}\r\nSUB _R.> 1\r\nPING\r\n')
        while self._line() != b"PONG":
            pass
        self.ids = itertools.count()

    def _fill(self, deadline: float) -> None:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        self.sock.settimeout(left)
        try:
            data = self.sock.recv(1 << 20)
        except socket.timeout:
            raise TimeoutError from None
        if not data:
            raise EOFError("server closed the connection")
        self.buf += data

    def _line(self, deadline: float | None = None) -> bytes:
        deadline = deadline or time.monotonic() + 5
        while b"\r\n" not in self.buf:
            self._fill(deadline)
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def request(self, subject: str, payload: bytes, hdr: bytes = b"", wait: float = 1.0):
        """Send and return the first reply as ``(hdr, body)``, or None after ``wait`` seconds."""
        reply = f"_R.{next(self.ids)}"
        if hdr:
            cmd = f"HPUB {subject} {reply} {len(hdr)} {len(hdr) + len(payload)}\r\n".encode() + hdr + payload
        else:
            cmd = f"PUB {subject} {reply} {len(payload)}\r\n".encode() + payload
        self.sock.sendall(cmd + b"\r\n")
        deadline = time.monotonic() + wait
        while True:
            try:
                line = self._line(deadline)
            except TimeoutError:
                return None
            if line == b"PING":
                self.sock.sendall(b"PONG\r\n")
                continue
            if line.startswith(b"-ERR"):
                raise AssertionError(f"server error: {line!r}")
            if line.startswith((b"MSG ", b"HMSG ")):
                parts = line.split()
                size = int(parts[-1])
                while len(self.buf) < size + 2:
                    self._fill(deadline + 5)
                data, self.buf = self.buf[:size], self.buf[size + 2:]
                if parts[1].decode() != reply:
                    continue  # a late answer to an earlier request
                if line.startswith(b"HMSG "):
                    hl = int(parts[-2])
                    return data[:hl], data[hl:]
                return b"", data

    def close(self) -> None:
        self.sock.close()


# ------------------------------------------------------------------------------------------------ normalisation

# Keys whose values differ between any two servers (times, identities) or on purpose (docs/parity.md).
_VOLATILE = {"created", "ts", "first_ts", "last_ts", "last_active", "time", "leader", "server_id", "server_name",
             "leader_since", "_nats.ver", "_nats.level", "_nats.req.level", "domain", "pause_remaining"}
_BYTES = {"bytes", "memory", "storage", "reserved_memory", "reserved_storage", "max_bytes_required"}


def _norm(v, key: str = ""):
    if isinstance(v, dict):
        return {k: ("<v>" if k in _VOLATILE else "<n>" if k in _BYTES and isinstance(x, int) else _norm(x, k))
                for k, x in v.items()}
    if isinstance(v, list):
        return [_norm(x, key) for x in v]
    return v


def normalise(answer) -> tuple:
    if answer is None:
        return ("none",)
    hdr, body = answer
    if hdr and not body:
        first = hdr.split(b"\r\n", 1)[0].decode(errors="replace")
        parts = first.split(" ", 2)
        return ("status", parts[1] if len(parts) > 1 else "", parts[2] if len(parts) > 2 else "")
    try:
        obj = json.loads(body)
    except ValueError:
        text = re.sub(r"(Nats-Time-Stamp): [^\r]*", r"\1: <v>", hdr.decode(errors="replace"))
        return ("raw", text, body[:200].decode(errors="replace"))
    if isinstance(obj, dict):
        if obj.get("type", "").endswith(("consumer_create_response",)) and "name" in obj and "error" not in obj:
            cfg = obj.get("config") or {}
            if not cfg.get("durable_name") and not cfg.get("name"):
                obj = dict(obj, name="<generated>")
        ds = obj.get("deliver_subject")
        if isinstance(ds, str) and ds.startswith("$JS.SNAPSHOT.RESTORE."):  # ends in a random id
            obj = dict(obj, deliver_subject=ds.rsplit(".", 1)[0] + ".<id>")
        if obj.get("type", "").endswith("account_info_response") and "api" in obj:
            obj = dict(obj, api="<v>")  # request counters and API level (parity.md)
    return ("json", _norm(obj))


# --------------------------------------------------------------------------------------------------- generator

STREAM = "S"
CONSUMER = "C"
STREAM_CFG = {"name": STREAM, "subjects": ["s.>"], "storage": "file", "allow_direct": True}
CONSUMER_CFG = {"durable_name": CONSUMER, "ack_policy": "explicit", "filter_subject": "s.a"}

# Replacement values for one field: every JSON type, boundaries, Go-only edge cases.
VALUES: list[bytes] = [
    b"null", b"true", b"false", b'""', b'"x"', b'"s.>"', b"0", b"1", b"-1", b"1.5", b"1e3", b"-0",
    b"18446744073709551615", b"18446744073709551616", b"9223372036854775807", b"-9223372036854775809",
    b"[]", b"[1]", b'["a"]', b"{}", b'{"a":1}', b'"1s"', b'"2099-01-01T00:00:00Z"', b'"\\u0000"', b'"' + b"a" * 300 + b'"',
]

# Whole-body replacements.
BODIES: list[bytes] = [
    b"", b" ", b"\r\n", b"null", b"[]", b"{}", b"[{}]", b"1", b"-1", b'"x"', b"true", b"{", b"}", b"{]", b"[",
    b'{"a"}', b'{"a":}', b'{"a":1,}', b"{}{}", b"{} x", b"{}[]", b'{"\\x"}', b'{"\\u12"}', b'{"\xff":1}', b"\xff",
    b"nul", b"tru", b"01", b"1.", b"-", b"1e", b"x", b"{\"a\":1}garbage", b"\x00", b"{'a':1}", b"NaN",
    b"[" * 100 + b"]" * 100, b'{"a":' * 100 + b"1" + b"}" * 100,
]


def _fields_of(body: dict) -> list[str]:
    return list(body)


# Endpoints: (subject template, base body or None for bodies not JSON-object based, destructive?)
def endpoints() -> list[tuple[str, dict | None, bool]]:
    s, c = STREAM, CONSUMER
    return [
        ("INFO", None, False),
        (f"STREAM.CREATE.{s}", dict(STREAM_CFG), False),
        ("STREAM.CREATE.N1", {"name": "N1", "subjects": ["n1.>"], "max_msgs": 10, "retention": "limits",
                              "discard": "old", "max_age": 0, "duplicate_window": 1000000000,
                              "num_replicas": 1, "storage": "memory"}, True),
        (f"STREAM.UPDATE.{s}", dict(STREAM_CFG, max_msgs=100, description="d"), False),
        ("STREAM.NAMES", {"offset": 0, "subject": "s.>"}, False),
        ("STREAM.LIST", {"offset": 0, "subject": "s.>"}, False),
        (f"STREAM.INFO.{s}", {"deleted_details": True, "subjects_filter": ">", "offset": 0}, False),
        ("STREAM.INFO.NOPE", {"deleted_details": True}, False),
        ("STREAM.DELETE.N1", {}, True),
        ("STREAM.PURGE.N1", {"filter": "n1.a", "seq": 2, "keep": 0}, True),
        (f"STREAM.MSG.GET.{s}", {"seq": 1, "last_by_subj": "", "next_by_subj": "s.a", "no_hdr": False}, False),
        ("STREAM.MSG.GET.NOPE", {"seq": 1}, False),
        ("STREAM.MSG.DELETE.N1", {"seq": 1, "no_erase": True}, True),
        (f"STREAM.SNAPSHOT.{s}", {"deliver_subject": "snap.x", "chunk_size": 1024, "no_consumers": True}, False),
        ("STREAM.SNAPSHOT.NOPE", {"deliver_subject": "snap.x"}, False),
        ("STREAM.RESTORE.R1", {"config": {"name": "R1"}, "state": {}}, False),
        (f"STREAM.RESTORE.{s}", {"config": {"name": s}}, False),
        (f"STREAM.LEADER.STEPDOWN.{s}", {}, False),
        (f"STREAM.PEER.REMOVE.{s}", {"peer": "x"}, False),
        (f"CONSUMER.CREATE.{s}", {"stream_name": s, "config": {"ack_policy": "none", "filter_subject": "s.b"}}, False),
        (f"CONSUMER.CREATE.{s}.D1", {"stream_name": s, "config": {"name": "D1", "ack_policy": "explicit"},
                                     "action": "create"}, True),
        (f"CONSUMER.CREATE.{s}.D2.s.c", {"stream_name": s, "config": {"name": "D2", "filter_subject": "s.c"}}, True),
        (f"CONSUMER.DURABLE.CREATE.{s}.D3", {"stream_name": s, "config": {"durable_name": "D3",
                                                                           "deliver_subject": "dl.x"}}, True),
        (f"CONSUMER.INFO.{s}.{c}", {}, False),
        (f"CONSUMER.DELETE.{s}.D1", {}, True),
        (f"CONSUMER.NAMES.{s}", {"offset": 0}, False),
        (f"CONSUMER.LIST.{s}", {"offset": 0}, False),
        (f"CONSUMER.PAUSE.{s}.{c}", {"pause_until": "2099-01-01T00:00:00Z"}, False),
        (f"CONSUMER.UNPIN.{s}.{c}", {"group": "g"}, False),
        (f"CONSUMER.LEADER.STEPDOWN.{s}.{c}", {}, False),
        (f"DIRECT.GET.{s}", {"seq": 1, "next_by_subj": "s.a", "batch": 2}, False),
        (f"DIRECT.GET.{s}.s.a", None, False),
        (f"DIRECT.GET.{s}", {"multi_last": ["s.a", "s.b"], "batch": 2, "up_to_seq": 3}, False),
        (f"DIRECT.GET.{s}", {"start_time": "2000-01-01T00:00:00Z", "batch": 1, "max_bytes": 10}, False),
        (f"STREAM.MSG.GET.{s}", {"last_by_subj": "s.b", "no_hdr": True}, False),
        (f"CONSUMER.CREATE.{s}.D4", {"stream_name": s, "config": {
            "name": "D4", "deliver_policy": "by_start_sequence", "opt_start_seq": 2, "ack_policy": "all",
            "max_ack_pending": 10, "backoff": [1000000000], "max_deliver": 3, "filter_subjects": ["s.a", "s.b"],
            "priority_groups": ["g"], "priority_policy": "overflow", "inactive_threshold": 1000000000}}, True),
        (f"CONSUMER.CREATE.{s}.D5", {"stream_name": s, "config": {
            "name": "D5", "deliver_subject": "push.x", "flow_control": True, "idle_heartbeat": 1000000000,
            "rate_limit_bps": 100, "headers_only": True, "replay_policy": "original"}, "pedantic": True}, True),
        (f"CONSUMER.MSG.NEXT.{s}.{c}", {"batch": 1, "no_wait": True, "expires": 0}, False),
    ]


def _nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def generate(seed: int, n: int) -> list[tuple[str, bytes]]:
    """``n`` (subject suffix, body) pairs; the same seed gives the same list."""
    rnd = random.Random(seed)
    eps = endpoints()
    out: list[tuple[str, bytes]] = []
    while len(out) < n:
        subj, base, _ = rnd.choice(eps)
        kind = rnd.random()
        if base is None or kind < 0.3:
            body = rnd.choice(BODIES)
        elif kind < 0.45:
            raw = json.dumps(base).encode()
            body = raw[: rnd.randrange(len(raw) + 1)]
        elif kind < 0.9 and base:
            body = _mutate_field(rnd, base)
        elif kind < 0.95:
            d = dict(base)
            d[rnd.choice(["bogus", "Name", "CONFIG", "x-y"])] = 1
            body = json.dumps(d).encode()
        else:
            body = json.dumps(base).encode()
        out.append((subj, body))
    return out


API_LEVEL_HEADERS = [b"NATS/1.0\r\nNats-Required-Api-Level: 99\r\n\r\n",
                     b"NATS/1.0\r\nNats-Required-Api-Level: x\r\n\r\n",
                     b"NATS/1.0\r\nNats-Required-Api-Level: 0\r\n\r\n"]


def header_for(seed: int, index: int) -> bytes:
    """Every 10th request carries a Nats-Required-Api-Level header (ADR-44), the same on both servers."""
    rnd = random.Random(seed * 1_000_003 + index)
    return rnd.choice(API_LEVEL_HEADERS) if rnd.random() < 0.1 else b""


def _mutate_field(rnd: random.Random, base: dict) -> bytes:
    """Replace one field (possibly one inside ``config``) with a value of another type or a boundary."""
    d = json.loads(json.dumps(base))
    target = d
    if "config" in d and isinstance(d["config"], dict) and rnd.random() < 0.7:
        target = d["config"]
        extra = ["max_deliver", "ack_wait", "deliver_policy", "opt_start_seq", "replay_policy", "max_waiting",
                 "inactive_threshold", "backoff", "filter_subjects", "metadata", "num_replicas", "mem_storage",
                 "headers_only", "max_batch", "max_expires", "priority_groups", "priority_policy", "sample_freq"]
    else:
        extra = ["max_msgs", "max_bytes", "max_age", "max_msg_size", "discard", "retention", "storage",
                 "num_replicas", "duplicate_window", "sealed", "deny_delete", "allow_rollup_hdrs", "mirror",
                 "sources", "republish", "subject_transform", "metadata", "compression", "first_seq",
                 "allow_msg_ttl", "subject_delete_marker_ttl", "consumer_limits", "placement"]
    key = rnd.choice(list(target) + extra[: max(1, len(target))] if target else extra)
    marker = "\x00MARK\x00"
    target[key] = marker
    raw = json.dumps(d).encode()
    return raw.replace(json.dumps(marker).encode(), rnd.choice(VALUES), 1)


def restore_state(c: WireClient, subject: str = "") -> None:
    """Put back what destructive cases may have removed: stream S (with messages) and its durable C; remove the
    consumers a case created (ephemerals expire on their own clock, which two servers never share)."""
    if subject.startswith(("CONSUMER.CREATE.", "CONSUMER.DURABLE.")):
        names = c.request(f"$JS.API.CONSUMER.NAMES.{STREAM}", b"")
        for name in (json.loads(names[1]).get("consumers") or []) if names else []:
            if name != CONSUMER:
                c.request(f"$JS.API.CONSUMER.DELETE.{STREAM}.{name}", b"")
    c.request(f"$JS.API.STREAM.CREATE.{STREAM}", json.dumps(STREAM_CFG).encode())
    c.request(f"$JS.API.CONSUMER.CREATE.{STREAM}.{CONSUMER}",
              json.dumps({"stream_name": STREAM, "config": CONSUMER_CFG}).encode())
    c.request("$JS.API.STREAM.CREATE.N1", json.dumps({"name": "N1", "subjects": ["n1.>"], "storage": "memory"}).encode())


def seed_state(c: WireClient) -> None:
    restore_state(c)
    for i in range(5):
        c.request(f"s.{'abc'[i % 3]}", b"m%d" % i, hdr=b"NATS/1.0\r\nH: %d\r\n\r\n" % i)
        c.request("n1.a", b"n%d" % i)
