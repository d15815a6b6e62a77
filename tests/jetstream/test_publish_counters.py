"""Message counters (allow_msg_counter, Nats-Incr) against both servers."""
from __future__ import annotations

import base64

import pytest


async def test_counter_values_and_errors(jsc):
    name = jsc.name()
    await jsc.create(name, storage="memory", allow_msg_counter=True)
    s = f"{name}.c"

    async def incr(v: str, body: bytes = b"", **extra):
        return await jsc.pub(s, body, {"Nats-Incr": v, **extra})

    assert await incr("5") == {"stream": name, "seq": 1, "val": "5"}
    assert await incr("-2") == {"stream": name, "seq": 2, "val": "3"}
    assert await incr("+10") == {"stream": name, "seq": 3, "val": "13"}
    big = await incr("99999999999999999999999999")  # arbitrary precision
    assert big["val"] == "100000000000000000000000012"
    for bad in ("x", "1_0", "1.5"):
        assert (await incr(bad))["error"]["err_code"] == 10171
    assert (await incr("1", b"payload"))["error"]["err_code"] == 10170
    assert (await incr("1", **{"Nats-Expected-Last-Sequence": "4"}))["error"]["err_code"] == 10171
    assert (await jsc.pub(s, b""))["error"] == {"code": 400, "err_code": 10169,
                                                  "description": "message counter increment is missing"}
    assert await incr("1", **{"Nats-Msg-Id": "once"}) == {"stream": name, "seq": 5,
                                                          "val": "100000000000000000000000013"}
    assert await incr("1", **{"Nats-Msg-Id": "once"}) == {"stream": name, "seq": 5, "duplicate": True}
    m = (await jsc.api(f"STREAM.MSG.GET.{name}", {"last_by_subj": s}))["message"]
    assert base64.b64decode(m["data"]) == b'{"val":"100000000000000000000000013"}'
    assert base64.b64decode(m["hdrs"]) == b"NATS/1.0\r\nNats-Incr: 1\r\nNats-Msg-Id: once\r\n\r\n"


async def test_incr_on_stream_without_counters(jsc):
    name = jsc.name()
    await jsc.create(name, storage="memory")
    ack = await jsc.pub(f"{name}.c", b"", {"Nats-Incr": "1"})
    assert ack["error"] == {"code": 400, "err_code": 10168, "description": "message counters is disabled"}
