"""``jetstream { limits { batch { } } }``: the server-wide batch limits, on both servers with the same file.

nats-server reads them in opts.go parseJetStreamLimitsBatch and uses a positive value instead of its default
(stream.go processJetStreamAtomicBatchMsg / processJetStreamFastBatchMsg, jetstream_batching.go getCleanupTimeout);
/varz and /jsz show them under ``limits``.
"""
from __future__ import annotations

import asyncio
import json
import urllib.request

import nats
import pytest

from tests.jetstream.conftest import JsClient
from tests.jetstream.test_batch_atomic import bh, send

CONF = "jetstream { limits { batch { max_inflight_per_stream: 2, max_inflight_total: 5, max_msgs: 3, " \
       'timeout: "1s" } } }\n'


@pytest.fixture
async def limited(server_factory):
    srv = server_factory(config=CONF)
    nc = await nats.connect(srv.url, allow_reconnect=False)
    yield JsClient(nc, srv, "L")
    await nc.close()


def _err(reply: bytes):
    e = json.loads(reply).get("error")
    return (e["err_code"], e["description"]) if e else None


def _monitor(srv, path: str) -> dict:
    with urllib.request.urlopen(f"{srv.http_url}{path}", timeout=2) as r:
        return json.loads(r.read())


async def test_the_limits_are_shown(limited):
    want = {"max_batch_inflight_per_stream": 2, "max_batch_inflight_total": 5, "max_batch_size": 3,
            "max_batch_timeout": 1_000_000_000, "default_max_consumers": 1000}
    assert _monitor(limited.server, "/varz")["jetstream"]["limits"] == want
    assert _monitor(limited.server, "/jsz")["limits"] == want


async def test_max_msgs_caps_an_atomic_batch(limited):
    s = limited.name()
    await limited.create(s, allow_atomic=True)
    for i in (1, 2, 3):
        await limited.nc.publish(f"{s}.a", b"x", headers=bh("b1", i))
    await limited.nc.flush()
    reply = await send(limited, f"{s}.a", bh("b1", 4, "1"))
    assert _err(reply) == (10199, "atomic publish batch is too large: 3")
    assert (await limited.info(s))["state"]["messages"] == 0


async def test_max_inflight_per_stream_caps_open_batches(limited):
    s = limited.name()
    await limited.create(s, allow_atomic=True)
    for b in ("a", "b"):
        await limited.nc.publish(f"{s}.a", b"x", headers=bh(b, 1))
    await limited.nc.flush()
    reply = await send(limited, f"{s}.a", bh("c", 1))
    assert _err(reply) == (10210, "atomic publish too many inflight")


async def test_the_timeout_abandons_an_idle_batch(limited):
    s = limited.name()
    await limited.create(s, allow_atomic=True)
    await limited.nc.publish(f"{s}.a", b"x", headers=bh("slow", 1))
    await limited.nc.flush()
    await asyncio.sleep(1.6)  # the configured 1 s, not the default 10 s
    reply = await send(limited, f"{s}.a", bh("slow", 2, "1"))
    assert _err(reply) == (10176, "atomic publish batch is incomplete")
