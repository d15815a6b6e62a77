"""Per-message TTL, max_age and subject delete markers (ADR-43).

The first tests run against both servers with short real durations (1 s is the smallest TTL a client can ask for).
The ``skiff_only`` tests embed Skiff with a ``ManualClock`` and move time instead of sleeping: exact boundaries,
no waiting.
"""
from __future__ import annotations

import asyncio
import base64
import json
import time

import nats
import pytest

from skiff.server.clock import ManualClock
from skiff.server.core.server import Server

SECOND = 1_000_000_000


def err_code(ack: dict) -> int | None:
    return ack.get("error", {}).get("err_code")


@pytest.mark.parametrize("value, code", [
    ("0", 10165), ("500ms", 10165), ("abc", 10165), ("-1", 10165), ("1s", None), ("2", None), ("never", None),
    ("1m", None),
])
async def test_ttl_values(jsc, value, code):
    name = jsc.name()
    await jsc.create(name, storage="memory", allow_msg_ttl=True)
    assert err_code(await jsc.pub(f"{name}.a", b"x", {"Nats-TTL": value})) == code


@pytest.mark.parametrize("value, code", [("abc", 10165), ("0", 10165), ("5", 10166), ("never", 10166)])
async def test_ttl_on_stream_without_allow_msg_ttl(jsc, value, code):
    name = jsc.name()
    await jsc.create(name, storage="memory")
    ack = await jsc.pub(f"{name}.a", b"x", {"Nats-TTL": value})
    assert err_code(ack) == code, ack


async def _wait_state(jsc, name, pred, timeout=4.0, body=None):
    deadline = time.monotonic() + timeout
    while True:
        st = (await jsc.info(name, body))["state"]
        if pred(st) or time.monotonic() > deadline:
            return st
        await asyncio.sleep(0.05)


async def test_ttl_expires_and_leaves_marker(jsc):
    name = jsc.name()
    await jsc.create(name, storage="file", allow_msg_ttl=True, subject_delete_marker_ttl=SECOND)
    await jsc.pub(f"{name}.a", b"x", {"Nats-TTL": "1s"})
    await jsc.pub(f"{name}.keep", b"x", {"Nats-TTL": "never"})
    st = await _wait_state(jsc, name, lambda s: s["last_seq"] >= 3)
    assert st["last_seq"] == 3  # the marker
    r = await jsc.api(f"STREAM.MSG.GET.{name}", {"seq": 3})
    m = r["message"]
    assert m["subject"] == f"{name}.a" and "data" not in m
    assert base64.b64decode(m["hdrs"]) == b"NATS/1.0\r\nNats-Marker-Reason: MaxAge\r\nNats-TTL: 1s\r\nNats-Rollup: sub\r\n\r\n"
    # The marker expires in turn and leaves no marker of its own; "never" stays.
    st = await _wait_state(jsc, name, lambda s: s["messages"] == 1, body={"subjects_filter": ">"})
    assert st["subjects"] == {f"{name}.keep": 1} and st["last_seq"] == 3


async def test_max_age_with_markers_and_never(jsc):
    name = jsc.name()
    await jsc.create(name, storage="file", max_age=SECOND, subject_delete_marker_ttl=SECOND)
    await jsc.pub(f"{name}.a", b"x")
    await jsc.pub(f"{name}.b", b"x", {"Nats-TTL": "never"})  # exempt from max_age
    st = await _wait_state(jsc, name, lambda s: s["last_seq"] >= 3 and s["messages"] == 1,
                           body={"subjects_filter": ">"})
    assert st["subjects"] == {f"{name}.b": 1}
    assert (st["first_seq"], st["last_seq"]) == (2, 3)


async def test_marker_ttl_raises_smaller_message_ttl(jsc):
    name = jsc.name()
    await jsc.create(name, storage="memory", subject_delete_marker_ttl=5 * SECOND)
    await jsc.pub(f"{name}.a", b"x", {"Nats-TTL": "1s"})
    r = await jsc.api(f"STREAM.MSG.GET.{name}", {"seq": 1})
    assert base64.b64decode(r["message"]["hdrs"]) == b"NATS/1.0\r\nNats-TTL: 5\r\n\r\n"


# ---------------------------------------------------------------------------------------------- driven clock
@pytest.fixture
async def clocked(tmp_path):
    clock = ManualClock()
    srv = Server(clock=clock, jetstream=True, store_dir=str(tmp_path))
    await srv.start()
    nc = await nats.connect(srv.client_url, allow_reconnect=False)

    async def api(suffix: str, body=b"") -> dict:
        if isinstance(body, dict):
            body = json.dumps(body).encode()
        return json.loads((await nc.request("$JS.API." + suffix, body, timeout=2)).data)

    async def pub(subject: str, hdrs=None) -> dict:
        return json.loads((await nc.request(subject, b"x", headers=hdrs, timeout=2)).data)

    yield clock, srv, api, pub
    await nc.close()
    await srv.shutdown()


@pytest.mark.skiff_only
async def test_clock_driven_ttl_boundaries(clocked, target):
    clock, srv, api, pub = clocked
    await api("STREAM.CREATE.T", {"name": "T", "subjects": ["t.>"], "storage": "file", "allow_msg_ttl": True})
    await pub("t.a", {"Nats-TTL": "10s"})
    await pub("t.b", {"Nats-TTL": "20s"})
    # ManualClock keeps monotonic time as a float, so boundaries are checked 10 ms either side.
    clock.advance(9.99)
    assert (await api("STREAM.INFO.T"))["state"]["messages"] == 2
    clock.advance(0.02)
    st = (await api("STREAM.INFO.T"))["state"]
    assert (st["messages"], st["first_seq"]) == (1, 2)
    clock.advance(10)
    assert (await api("STREAM.INFO.T"))["state"]["messages"] == 0
    assert srv.jetstream.streams["T"]._expiry_timer is None  # nothing left to expire: no timer armed


@pytest.mark.skiff_only
async def test_clock_driven_max_age_and_markers(clocked, target):
    clock, srv, api, pub = clocked
    await api("STREAM.CREATE.M", {"name": "M", "subjects": ["m.>"], "storage": "memory", "max_age": 60 * SECOND,
                                  "subject_delete_marker_ttl": 30 * SECOND})
    await pub("m.a")
    clock.advance(30)
    await pub("m.a")
    clock.advance(30.01)  # the first m.a is gone, the second is still there: no marker
    st = (await api("STREAM.INFO.M"))["state"]
    assert (st["messages"], st["last_seq"]) == (1, 2)
    clock.advance(30)  # now the subject is empty: a marker with a 30s TTL takes its place
    st = (await api("STREAM.INFO.M"))["state"]
    assert (st["messages"], st["last_seq"]) == (1, 3)
    m = (await api("STREAM.MSG.GET.M", {"seq": 3}))["message"]
    assert b"Nats-TTL: 30s\r\n" in base64.b64decode(m["hdrs"])
    clock.advance(30)
    st = (await api("STREAM.INFO.M"))["state"]
    assert (st["messages"], st["last_seq"]) == (0, 3)


@pytest.mark.skiff_only
async def test_clock_driven_dedupe_window(clocked, target):
    clock, srv, api, pub = clocked
    await api("STREAM.CREATE.D", {"name": "D", "subjects": ["d"], "storage": "memory",
                                  "duplicate_window": 10 * SECOND})
    assert (await pub("d", {"Nats-Msg-Id": "x"}))["seq"] == 1
    clock.advance(9.99)
    assert (await pub("d", {"Nats-Msg-Id": "x"})) == {"stream": "D", "seq": 1, "duplicate": True}
    clock.advance(0.02)
    assert (await pub("d", {"Nats-Msg-Id": "x"})) == {"stream": "D", "seq": 2}


async def test_a_kv_purge_is_a_marker_only_when_read_as_nats_server_reads_it(jsc):
    """sdm.go isSubjectDeleteMarker reads KV-Operation with sliceHeader: ``PURGE`` (after spaces) is a delete marker
    and its expiry leaves no marker; ``PURGE `` (a blank after it) is not, and its expiry leaves one.  Raw client:
    nats-py strips header values."""
    from tests.wire.rawclient import RawClient

    name = jsc.name()
    await jsc.create(name, storage="file", max_age=SECOND, subject_delete_marker_ttl=SECOND)
    with RawClient("127.0.0.1", jsc.server.port).handshake(headers=True) as c:
        c.send(b"SUB _r 1\r\n")
        for subject, value in ((b"a", b"   PURGE"), (b"b", b" PURGE "), (b"c", b"\tPURGE")):
            hdr = b"NATS/1.0\r\nKV-Operation:" + value + b"\r\n\r\n"
            c.send(b"HPUB %s.%s _r %d %d\r\n%s\r\n" % (name.encode(), subject, len(hdr), len(hdr), hdr))
            assert "error" not in json.loads(c.read_msg()[1])
    st = await _wait_state(jsc, name, lambda s: s["last_seq"] >= 5 and s["first_seq"] > 3, timeout=6.0)
    assert (st["first_seq"], st["last_seq"]) == (4, 5), st  # markers for b and c only
    subjects = [(await jsc.api(f"STREAM.MSG.GET.{name}", {"seq": seq}))["message"]["subject"] for seq in (4, 5)]
    assert sorted(subjects) == [f"{name}.b", f"{name}.c"]
