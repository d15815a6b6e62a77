"""A message trace's event is built from what the publisher sent; if building or sending it fails, the failure is
logged and the message was delivered all the same (server/core/msgtrace.py MsgTrace.send).  Skiff only, in the
test's own event loop, where the failure can be injected."""
from __future__ import annotations

import nats
import pytest

from skiff.server.core import msgtrace


async def test_a_failing_trace_event_costs_the_message_and_the_publisher_nothing(nats_server, monkeypatch):
    def broken(doc):
        raise RuntimeError("injected")

    monkeypatch.setattr(msgtrace, "dumps", broken)
    nc = await nats.connect(nats_server.client_url, allow_reconnect=False)
    try:
        trace = await nc.subscribe("trace.x")
        sub = await nc.subscribe("foo")
        await nc.flush()
        await nc.publish("foo", b"m", headers={"Nats-Trace-Dest": "trace.x"})
        assert (await sub.next_msg(timeout=2)).data == b"m"
        with pytest.raises(nats.errors.TimeoutError):
            await trace.next_msg(timeout=0.3)
        await nc.publish("foo", b"after")  # the publisher's connection is as it was
        assert (await sub.next_msg(timeout=2)).data == b"after"
        assert not nc.is_closed
    finally:
        await nc.close()
