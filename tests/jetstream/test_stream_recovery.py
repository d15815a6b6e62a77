"""Streams survive a restart (both servers); a corrupt stream is skipped without stopping Skiff."""
from __future__ import annotations

import json
import os

import nats
import pytest

from tests.jetstream.conftest import strip_dynamic


async def _api(nc, suffix, body=b""):
    if isinstance(body, dict):
        body = json.dumps(body).encode()
    return json.loads((await nc.request("$JS.API." + suffix, body, timeout=3)).data)


async def _pub(nc, subject, data=b"", headers=None):
    return json.loads((await nc.request(subject, data, headers=headers, timeout=3)).data)


@pytest.mark.parametrize("kill", [False, True], ids=["clean", "kill9"])
async def test_restart_recovers_streams(server, kill):
    nc = await nats.connect(server.url)
    f = await _api(nc, "STREAM.CREATE.F", {"name": "F", "subjects": ["f.>"], "max_msgs_per_subject": 3,
                                           "duplicate_window": 60_000_000_000, "allow_direct": True,
                                           "metadata": {"owner": "me"}})
    await _api(nc, "STREAM.CREATE.M", {"name": "M", "subjects": ["m.>"], "storage": "memory"})
    await _pub(nc, "m.a", b"gone")
    for i in range(10):
        await _pub(nc, f"f.{i % 4}", b"v%d" % i, {"Nats-Msg-Id": f"id{i}"})
    await _api(nc, "STREAM.MSG.DELETE.F", {"seq": 9})
    before = await _api(nc, "STREAM.INFO.F", {"subjects_filter": ">"})
    await nc.close()

    server.restart(kill=kill)
    nc = await nats.connect(server.url)
    names = await _api(nc, "STREAM.NAMES")
    assert names["streams"] == ["F"]  # memory streams do not survive a restart
    after = await _api(nc, "STREAM.INFO.F", {"subjects_filter": ">"})
    assert strip_dynamic(after["config"]) == strip_dynamic(before["config"])
    assert after["created"] == before["created"]
    assert after["state"] == before["state"]
    m = await nc.request("$JS.API.DIRECT.GET.F", json.dumps({"seq": 10}).encode(), timeout=3)
    assert m.data == b"v9" and m.headers["Nats-Msg-Id"] == "id9"
    # Dedupe state inside the window survives; the sequence continues.
    assert await _pub(nc, "f.0", b"x", {"Nats-Msg-Id": "id7"}) == {"stream": "F", "seq": 8, "duplicate": True}
    assert await _pub(nc, "f.0", b"x", {"Nats-Expected-Last-Msg-Id": "id9"}) == {"stream": "F", "seq": 11}
    await nc.close()


@pytest.mark.skiff_only
async def test_corrupt_stream_is_skipped(server, target):
    nc = await nats.connect(server.url)
    for name in ("A", "B"):
        await _api(nc, f"STREAM.CREATE.{name}", {"name": name, "subjects": [f"{name}.>"]})
        await _pub(nc, f"{name}.x", b"data")
    await nc.close()
    server.stop()
    meta = os.path.join(server.store_dir, "jetstream", "$G", "streams", "A", "meta.inf")
    with open(meta, "r+b") as fh:
        fh.seek(10)
        fh.write(b"\xff\xff\xff")
    server.start()
    nc = await nats.connect(server.url)
    assert (await _api(nc, "STREAM.NAMES"))["streams"] == ["B"]
    assert (await _api(nc, "STREAM.INFO.B"))["state"]["messages"] == 1
    await nc.close()
    assert "COULD NOT BE RECOVERED" in server.log()
