"""Direct Get (ADR-31) against both servers: body and subject forms, batches, multi_last, status replies."""
from __future__ import annotations

import json

import nats
import pytest

from tests.jetstream.conftest import collect


async def _stream(jsc, **cfg):
    name = jsc.name()
    await jsc.create(name, storage="memory", allow_direct=True, **cfg)
    for i in range(5):
        await jsc.pub(f"{name}.{i % 2}", b"x%d" % i, {"H": "v"} if i == 3 else None)
    return name


async def dget(jsc, subject: str, body=b"") -> nats.aio.msg.Msg:
    return await jsc.request(subject, body, timeout=2)


def status(msg) -> str:
    return f"{msg.headers.get('Status')} {msg.headers.get('Description', '')}".strip() if msg.headers else ""


async def test_single_message_forms(jsc):
    name = await _stream(jsc)
    m = await dget(jsc, f"$JS.API.DIRECT.GET.{name}", {"seq": 4})
    assert m.data == b"x3" and m.reply == ""
    h = m.headers
    assert (h["H"], h["Nats-Stream"], h["Nats-Subject"], h["Nats-Sequence"]) == ("v", name, f"{name}.1", "4")
    assert h["Nats-Time-Stamp"].endswith("Z")
    assert list(h) == ["H", "Nats-Stream", "Nats-Subject", "Nats-Sequence", "Nats-Time-Stamp"]
    m = await dget(jsc, f"$JS.API.DIRECT.GET.{name}", {"seq": 4, "no_hdr": True})
    assert m.data == b"x3" and not m.headers
    m = await dget(jsc, f"$JS.API.DIRECT.GET.{name}.{name}.0")  # subject form: last on subject
    assert (m.data, m.headers["Nats-Sequence"]) == (b"x4", "5")
    m = await dget(jsc, f"$JS.API.DIRECT.GET.{name}", {"last_by_subj": f"{name}.1"})
    assert m.headers["Nats-Sequence"] == "4"
    m = await dget(jsc, f"$JS.API.DIRECT.GET.{name}", {"next_by_subj": f"{name}.0", "seq": 2})
    assert m.headers["Nats-Sequence"] == "3"


@pytest.mark.parametrize("subject_tail, body, expect", [
    ("", {"seq": 99}, "404 Message Not Found"),
    ("", b"", "408 Empty Request"),
    ("", b"{}", "408 Empty Request"),
    ("", b"{bad", "408 Malformed Request"),
    ("", {"seq": 1, "last_by_subj": "x"}, "408 Bad Request"),
    ("", {"last_by_subj": "x", "batch": 2}, "408 Bad Request"),
    (".{n}.0", {"seq": 1}, "408 Bad Request"),
    (".{n}.nope", b"", "404 Message Not Found"),
])
async def test_status_replies(jsc, subject_tail, body, expect):
    name = await _stream(jsc)
    m = await dget(jsc, f"$JS.API.DIRECT.GET.{name}" + subject_tail.replace("{n}", name), body)
    assert status(m) == expect and m.data == b""


async def test_unknown_fields_are_ignored(jsc):
    name = await _stream(jsc)
    m = await dget(jsc, f"$JS.API.DIRECT.GET.{name}", {"seq": 1, "bogus": 1})
    assert m.data == b"x0"


async def test_batch(jsc):
    name = await _stream(jsc)
    inbox = jsc.nc.new_inbox()
    sub = await jsc.nc.subscribe(inbox)
    await jsc.nc.publish(f"$JS.API.DIRECT.GET.{name}", json.dumps({"seq": 2, "batch": 3}).encode(), reply=inbox)
    got = await collect(sub, 4, timeout=2)
    assert [m.data for m in got[:3]] == [b"x1", b"x2", b"x3"]
    assert [(m.headers["Nats-Num-Pending"], m.headers["Nats-Last-Sequence"]) for m in got[:3]] == [
        ("3", "0"), ("2", "2"), ("1", "3")]
    eob = got[3]
    assert status(eob) == "204 EOB"
    assert (eob.headers["Nats-Num-Pending"], eob.headers["Nats-Last-Sequence"]) == ("1", "4")
    # A filtered batch that runs off the end stops early and still ends with EOB.
    await jsc.nc.publish(f"$JS.API.DIRECT.GET.{name}",
                         json.dumps({"next_by_subj": f"{name}.1", "batch": 10}).encode(), reply=inbox)
    got = await collect(sub, 3, timeout=2)
    assert [m.data for m in got[:2]] == [b"x1", b"x3"]
    assert status(got[2]) == "204 EOB" and got[2].headers["Nats-Num-Pending"] == "0"


async def test_multi_last(jsc):
    name = await _stream(jsc)
    inbox = jsc.nc.new_inbox()
    sub = await jsc.nc.subscribe(inbox)
    await jsc.nc.publish(f"$JS.API.DIRECT.GET.{name}", json.dumps({"multi_last": [f"{name}.*"]}).encode(),
                         reply=inbox)
    got = await collect(sub, 3, timeout=2)
    assert [(m.data, m.headers["Nats-Num-Pending"], m.headers["Nats-Last-Sequence"]) for m in got[:2]] == [
        (b"x3", "1", "0"), (b"x4", "0", "4")]
    eob = got[2]
    assert status(eob) == "204 EOB"
    assert [eob.headers[k] for k in ("Nats-Num-Pending", "Nats-Last-Sequence", "Nats-UpTo-Sequence")] == ["0", "5", "5"]
    # up_to_seq: the last per subject at or below 3.
    await jsc.nc.publish(f"$JS.API.DIRECT.GET.{name}",
                         json.dumps({"multi_last": [f"{name}.*"], "up_to_seq": 3}).encode(), reply=inbox)
    got = await collect(sub, 3, timeout=2)
    assert [m.headers["Nats-Sequence"] for m in got[:2]] == ["2", "3"]
    assert got[2].headers["Nats-UpTo-Sequence"] == "3"
    m = await dget(jsc, f"$JS.API.DIRECT.GET.{name}", {"multi_last": ["nothing.*"]})
    assert status(m) == "404 No Results"


async def test_no_direct_no_responders(jsc):
    name = jsc.name()
    await jsc.create(name, storage="memory")
    await jsc.pub(f"{name}.a", b"x")
    with pytest.raises(nats.errors.NoRespondersError):
        await dget(jsc, f"$JS.API.DIRECT.GET.{name}", {"seq": 1})
    # Turning allow_direct on by update starts answering.
    await jsc.api(f"STREAM.UPDATE.{name}", {"name": name, "subjects": [f"{name}.>"], "storage": "memory",
                                             "allow_direct": True})
    assert (await dget(jsc, f"$JS.API.DIRECT.GET.{name}", {"seq": 1})).data == b"x"



async def _replies(jsc, name: str, body: dict) -> list[tuple]:
    """Every reply of one Direct Get request up to its status: (status, Nats-Sequence, Nats-Num-Pending,
    Nats-Last-Sequence, Nats-UpTo-Sequence)."""
    inbox = jsc.nc.new_inbox()
    sub = await jsc.nc.subscribe(inbox)
    await jsc.nc.publish(f"$JS.API.DIRECT.GET.{name}", json.dumps(body).encode(), reply=inbox)
    out = []
    for m in await collect(sub, timeout=0.3):
        h = m.headers or {}
        st = f"{h['Status']} {h.get('Description', '')}".strip() if "Status" in h else ""
        out.append((st, h.get("Nats-Sequence"), h.get("Nats-Num-Pending"), h.get("Nats-Last-Sequence"),
                    h.get("Nats-UpTo-Sequence")))
        if st:
            break
    await sub.unsubscribe()
    return out


@pytest.mark.parametrize("storage", ["file", "memory"])
async def test_negative_batch_is_an_empty_batch(jsc, storage):
    """getDirectRequest: any non-zero batch is a batch request; a negative one runs no loop turn and sends only the
    EOB with the pending count from the start sequence (was: 404 Message Not Found / a single message)."""
    name = await _stream(jsc) if storage == "memory" else None
    if name is None:
        name = jsc.name()
        await jsc.create(name, storage="file", allow_direct=True)
        for i in range(5):
            await jsc.pub(f"{name}.{i % 2}", b"x%d" % i)
    assert await _replies(jsc, name, {"next_by_subj": f"{name}.1", "batch": -1}) == [("204 EOB", None, "2", "0", None)]
    assert await _replies(jsc, name, {"next_by_subj": f"{name}.0", "batch": -1, "seq": 2}) == [
        ("204 EOB", None, "2", "0", None)]
    assert await _replies(jsc, name, {"seq": 2, "batch": -1}) == [("204 EOB", None, "4", "0", None)]
    assert await _replies(jsc, name, {"next_by_subj": f"{name}.9", "batch": -1}) == [("204 EOB", None, "0", "0", None)]


@pytest.mark.parametrize("storage", ["file", "memory"])
async def test_multi_last_up_to_seq_outside_the_stream(jsc, storage):
    """The file store answers multi_last only for an up_to_seq inside [first, last] (filestore.go
    multiLastSeqsLocked: selectMsgBlockWithIndex finds no block, so no sequences: 404 No Results); the memory store
    caps nothing and echoes the up_to_seq in the EOB."""
    name = jsc.name()
    await jsc.create(name, storage=storage, allow_direct=True)
    for i in range(6):
        await jsc.pub(f"{name}.{i % 3}", b"x")
    all3 = [("", "4", "2", "0", None), ("", "5", "1", "4", None), ("", "6", "0", "5", None)]
    assert await _replies(jsc, name, {"multi_last": [f"{name}.>"], "up_to_seq": 6}) == all3 + [
        ("204 EOB", None, "0", "6", "6")]
    for up_to in (7, 10**15):
        got = await _replies(jsc, name, {"multi_last": [f"{name}.>"], "up_to_seq": up_to})
        if storage == "file":
            assert got == [("404 No Results", None, None, None, None)]
        else:
            assert got == all3 + [("204 EOB", None, "0", "6", str(up_to))]
    await jsc.api(f"STREAM.PURGE.{name}", {"keep": 2})
    assert await _replies(jsc, name, {"multi_last": [f"{name}.>"], "up_to_seq": 2}) == [
        ("404 No Results", None, None, None, None)]
    assert await _replies(jsc, name, {"multi_last": [f"{name}.>"], "up_to_seq": 5}) == [
        ("", "5", "0", "0", None), ("204 EOB", None, "0", "5", "5")]
