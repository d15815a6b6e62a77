"""The $SKIFF.> control API of a Skiff process (--control, --clock=manual, --control_token): the clock, inspection,
the recorder and faults through plain NATS requests, as a test in any language would use them."""
from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import nats
import pytest
from nats.errors import NoRespondersError

from tests.harness import command_for, server_env

pytestmark = pytest.mark.skiff_only


async def call(nc, cmd: str, body: dict | None = None, headers: dict | None = None) -> dict:
    msg = await nc.request("$SKIFF." + cmd, json.dumps(body or {}).encode(), timeout=2, headers=headers)
    return json.loads(msg.data)


async def test_manual_clock_redelivers_and_inspection(server_factory, target):
    srv = server_factory("--control", "--clock=manual")
    nc = await nats.connect(srv.url, name="t")
    js = nc.jetstream()
    now = await call(nc, "CLOCK.NOW")
    assert now["manual"] is True
    await js.add_stream(name="S", subjects=["s"])
    await js.publish("s", b"one")
    psub = await js.pull_subscribe("s", durable="C", config=nats.js.api.ConsumerConfig(ack_wait=30))
    (m,) = await psub.fetch(1, timeout=1)
    assert m.metadata.num_delivered == 1
    # Real time passes, the server's clock does not: nothing is redelivered.
    with pytest.raises(nats.errors.TimeoutError):
        await psub.fetch(1, timeout=0.3)
    r = await call(nc, "CLOCK.ADVANCE", {"seconds": 31})
    assert r["time_ns"] == now["time_ns"] + 31_000_000_000 and r["timers_ran"] >= 1
    (m2,) = await psub.fetch(1, timeout=1)
    assert (m2.data, m2.metadata.num_delivered) == (b"one", 2)
    c = (await call(nc, "INSPECT.CONSUMER", {"stream": "S", "name": "C"}))["consumer"]
    assert c["redelivered"] == {"1": 1} and c["num_ack_pending"] == 1 and c["ack_floor"]["stream_seq"] == 0
    await m2.ack()
    await nc.flush()
    c = (await call(nc, "INSPECT.CONSUMER", {"stream": "S", "name": "C"}))["consumer"]
    assert c["ack_floor"] == {"consumer_seq": 2, "stream_seq": 1} and c["num_ack_pending"] == 0
    (st,) = (await call(nc, "INSPECT.STREAMS"))["streams"]
    assert (st["name"], st["messages"], st["consumers"]) == ("S", 1, ["C"])
    (msg,) = (await call(nc, "INSPECT.MESSAGES", {"stream": "S"}))["messages"]
    assert (msg["seq"], msg["subject"], msg["data"]) == (1, "s", "b25l")
    (conn,) = [x for x in (await call(nc, "INSPECT.CONNECTIONS"))["connections"] if x["name"] == "t"]
    assert (await call(nc, "INSPECT.CONNECTION", {"cid": conn["cid"]}))["connection"]["account"] == "$G"
    t = (await call(nc, "CLOCK.NOW"))["time_ns"]
    assert (await call(nc, "CLOCK.SET", {"time_ns": t + 5}))["time_ns"] == t + 5
    await nc.close()


async def test_errors_are_json(server_factory, target):
    srv = server_factory("--control", "--clock=manual")
    nc = await nats.connect(srv.url)
    bad = [
        ("NOPE", {}, 404), ("FAULTS.NOPE", {}, 404), ("CLOCK.ADVANCE", {"seconds": -1}, 400),
        ("CLOCK.ADVANCE", {}, 400), ("CLOCK.ADVANCE", {"seconds": "1"}, 400), ("CLOCK.SET", {"time_ns": 0}, 400),
        ("INSPECT.STREAM", {"name": "NOPE"}, 404), ("INSPECT.CONSUMERS", {}, 400),
        ("RECORDER.READ", {}, 409), ("FAULTS.DROP", {}, 400), ("FAULTS.DROP", {"cid": 99999}, 404),
    ]
    for cmd, body, code in bad:
        r = await call(nc, cmd, body)
        assert r["error"]["code"] == code and r["error"]["description"], (cmd, r)
    for raw in (b"{", b"[1]"):
        r = json.loads((await nc.request("$SKIFF.CLOCK.NOW", raw, timeout=2)).data)
        assert r["error"]["code"] == 400
    await nc.close()


async def test_real_clock_cannot_be_moved(server_factory, target):
    srv = server_factory("--control")
    nc = await nats.connect(srv.url)
    assert (await call(nc, "CLOCK.NOW"))["manual"] is False
    assert (await call(nc, "CLOCK.ADVANCE", {"seconds": 1}))["error"]["code"] == 409
    await nc.close()


async def test_recorder_over_control(server_factory, target):
    srv = server_factory("--control")
    nc = await nats.connect(srv.url, name="acker")
    js = nc.jetstream()
    await js.add_stream(name="S", subjects=["s"])
    await js.publish("s", b"x")
    psub = await js.pull_subscribe("s", durable="C")
    assert (await call(nc, "RECORDER.START"))["recording"] is True
    assert (await call(nc, "RECORDER.START"))["error"]["code"] == 409
    (m,) = await psub.fetch(1, timeout=1)
    await m.nak()
    (m,) = await psub.fetch(1, timeout=1)
    await m.ack()
    await nc.flush()
    acks = (await call(nc, "RECORDER.ACKS", {"name": "acker", "stream": "S"}))["acks"]
    assert [(a["kind"], a["stream_seq"], a["delivered"]) for a in acks] == [("-NAK", 1, 1), ("+ACK", 1, 2)]
    subs = (await call(nc, "RECORDER.READ", {"name": "acker", "op": "MSG", "direction": "received"}))["ops"]
    assert [o["data"] for o in subs if o["subject"] == "s"] == ["eA==", "eA=="]
    assert (await call(nc, "RECORDER.STOP"))["recording"] is False
    assert (await call(nc, "RECORDER.CLEAR"))["cleared"] is True
    assert (await call(nc, "RECORDER.READ"))["ops"] == []
    await nc.close()


async def test_drop_connection_and_reconnect(server_factory, target):
    srv = server_factory("--control")
    disconnected, reconnected = asyncio.Event(), asyncio.Event()

    async def on_disc():
        disconnected.set()

    async def on_rec():
        reconnected.set()

    victim = await nats.connect(srv.url, name="victim", disconnected_cb=on_disc, reconnected_cb=on_rec,
                                reconnect_time_wait=0.05)
    nc = await nats.connect(srv.url)
    r = await call(nc, "FAULTS.DROP", {"name": "victim"})
    assert len(r["dropped"]) == 1
    await asyncio.wait_for(disconnected.wait(), 5)
    await asyncio.wait_for(reconnected.wait(), 5)
    assert (await victim.request("$SKIFF.CLOCK.NOW", b"", timeout=2)).data  # usable again
    await victim.close()
    await nc.close()


async def test_token_required_with_auth(server_factory, target):
    with pytest.raises(RuntimeError, match="needs --control_token"):
        server_factory("--control", "--user", "u", "--pass", "p")
    srv = server_factory("--control", "--control_token", "s3cret", "--user", "u", "--pass", "p")
    nc = await nats.connect(srv.url, user="u", password="p")
    assert (await call(nc, "CLOCK.NOW"))["error"]["code"] == 401
    assert (await call(nc, "CLOCK.NOW", headers={"Skiff-Control-Token": "wrong"}))["error"]["code"] == 401
    assert (await call(nc, "CLOCK.NOW", headers={"Skiff-Control-Token": "s3cret"}))["manual"] is False
    await nc.close()


@pytest.mark.parametrize("args, error", [
    (["--clock=manual"], "--clock=manual needs --control"),
    (["--control", "--clock=fast"], 'invalid value "fast" for flag -clock'),
    (["--control_token", "x"], "--control_token without --control"),
])
def test_flags_that_cannot_work_are_refused(args, error, target):
    p = subprocess.run(command_for("skiff") + ["-p", "-1"] + args, capture_output=True, text=True, timeout=30,
                       env=server_env())
    assert p.returncode == 1 and error in p.stderr


class _StandInFaults:
    """What control.py forwards to: skiff.testing.faults.Faults's shape (public methods, an undo handle)."""

    def __init__(self):
        self.calls = []

    def refuse_connections(self, seconds=None):
        self.calls.append(("refuse_connections", seconds))
        faults = self

        class Undo:
            def undo(self):
                faults.calls.append(("undo",))

        return Undo()

    def count(self):
        return len(self.calls)


async def test_faults_methods_are_forwarded_embedded(tmp_path):
    from skiff.server.core.server import Server
    from skiff.testing.control import Control

    async with Server(port=0) as srv:
        srv.faults = _StandInFaults()  # as a running server that has its Faults
        control = Control(srv).start()
        nc = await nats.connect(srv.client_url)
        r = await call(nc, "FAULTS.REFUSE_CONNECTIONS", {"seconds": 2})
        assert srv.faults.calls == [("refuse_connections", 2)] and r["handle"] == 1
        assert (await call(nc, "FAULTS.COUNT"))["result"] == 1
        assert (await call(nc, "FAULTS.UNDO", {"handle": 1}))["undone"] == 1
        assert srv.faults.calls[-1] == ("undo",)
        assert (await call(nc, "FAULTS.UNDO", {"handle": 1}))["error"]["code"] == 404
        assert (await call(nc, "FAULTS.REFUSE_CONNECTIONS", {"bogus": 1}))["error"]["code"] == 400
        assert (await call(nc, "FAULTS._COUNT"))["error"]["code"] == 404
        control.stop()
        with pytest.raises(NoRespondersError):
            await nc.request("$SKIFF.CLOCK.NOW", b"", timeout=1)
        await nc.close()
