"""The JetStream API handler modules load with the first request that needs them (server/jetstream/api.py ``LAZY``,
issue #13 start-up): on a fresh server, each kind of first message must be answered exactly as nats-server answers
it, whichever module it makes Skiff load (both targets; the suite's other tests mostly begin with a stream create).

- a first API request to a consumer row (api_consumers before api_streams), and to a stream row then a consumer row;
- a first pull request, ack or flow-control answer, which reach the consumers' own wildcard subscriptions
  (engine.py ``_subscribe_consumer_subjects``) before the consumer API is loaded;
- a restart with a stream and a consumer: the consumer recovers at start, and the first message after it is a
  pull request answered by that consumer.
"""
from __future__ import annotations

import json

import nats
import pytest

from tests.jetstream.conftest import _connect
from tests.jetstream.test_consumer_support import MS, add_consumer, pull, status


async def test_first_request_is_a_consumer_request(fresh_jsc):
    r = await fresh_jsc.api("CONSUMER.INFO.NOPE.C")
    assert r["error"]["err_code"] == 10059  # JSStreamNotFoundErr: the consumer API answers before any stream API
    r = await fresh_jsc.api("CONSUMER.NAMES.NOPE")
    assert r["error"]["err_code"] == 10059 and r["consumers"] == [] and r["total"] == 0


async def test_first_request_is_account_info_then_consumers(fresh_jsc):
    info = await fresh_jsc.api("INFO")
    assert info["streams"] == 0 and info["consumers"] == 0 and info["api"]["errors"] == 0
    await fresh_jsc.create("S")
    r = await fresh_jsc.api("CONSUMER.NAMES.S")
    assert r["consumers"] == [] and r["total"] == 0
    info = await fresh_jsc.api("INFO")
    assert info["streams"] == 1 and info["api"]["total"] == 3  # INFO does not count itself (api.py)


@pytest.mark.parametrize("subject", ["$JS.API.CONSUMER.MSG.NEXT.S.C", "$JS.ACK.S.C.1.1.1.1.0"], ids=["next", "ack"])
async def test_first_message_to_a_consumer_subject_has_no_responders(fresh_jsc, subject):
    with pytest.raises(nats.errors.NoRespondersError):
        await fresh_jsc.nc.request(subject, b"", timeout=1)
    # And again once the consumer API is loaded, then with a stream but no consumer of that name.
    with pytest.raises(nats.errors.NoRespondersError):
        await fresh_jsc.nc.request(subject, b"", timeout=1)
    await fresh_jsc.create("S")
    with pytest.raises(nats.errors.NoRespondersError):
        await fresh_jsc.nc.request(subject, b"", timeout=1)


async def test_first_message_is_a_flow_control_answer(fresh_jsc):
    # A flow-control answer (published, as a client answers one) with no push consumer behind it: dropped, and the
    # server goes on serving; the consumer API it loaded answers next.  (Sent as a request it gets no responders:
    # test_flow_control_subject_without_a_flow_control_consumer_has_no_responders.)
    await fresh_jsc.nc.publish("$JS.FC.S.C.1", b"")
    await fresh_jsc.nc.flush()
    r = await fresh_jsc.api("CONSUMER.INFO.S.C")
    assert r["error"]["err_code"] == 10059
    info = await fresh_jsc.api("INFO")
    assert info["consumers"] == 0 and info["api"] == {**info["api"], "total": 1, "errors": 1}


async def test_recovered_consumer_serves_the_first_message_after_a_restart(fresh_jsc):
    await fresh_jsc.create("S")
    await add_consumer(fresh_jsc, "S", "C", ack_policy="explicit")
    await fresh_jsc.pub("S.a", b"one")
    await fresh_jsc.nc.close()
    server = fresh_jsc.server.restart()
    nc = await _connect(server)
    try:
        msgs = await pull(nc, "S", "C", {"batch": 1, "expires": 500 * MS}, max_msgs=1, timeout=2)
        assert [(m.data, status(m)) for m in msgs] == [(b"one", None)]
        await msgs[0].ack_sync(timeout=2)  # the ack's confirmation comes from the recovered consumer
    finally:
        await nc.close()


async def test_pull_request_through_the_domain_prefix(server_factory):
    """With ``jetstream { domain: hub }`` pull requests also come as ``$JS.hub.API.CONSUMER.MSG.NEXT.<s>.<c>``: a
    subscription of its own (engine.py), handed over with its first message like the others."""
    srv = server_factory(config="jetstream { domain: hub }\n")
    nc = await _connect(srv)
    try:
        with pytest.raises(nats.errors.NoRespondersError):
            await nc.request("$JS.hub.API.CONSUMER.MSG.NEXT.D.C", b"", timeout=1)
        for subject, body in (
                ("STREAM.CREATE.D", {"name": "D", "subjects": ["d"], "storage": "memory"}),
                ("CONSUMER.CREATE.D.C", {"stream_name": "D", "config": {"durable_name": "C", "ack_policy": "explicit"}})):
            r = json.loads((await nc.request("$JS.hub.API." + subject, json.dumps(body).encode(), timeout=2)).data)
            assert "error" not in r, r
        await nc.request("d", b"one", timeout=2)
        sub = await nc.subscribe("_INBOX.hub")
        await nc.publish("$JS.hub.API.CONSUMER.MSG.NEXT.D.C", b'{"batch":1,"expires":500000000}', reply="_INBOX.hub")
        m = await sub.next_msg(timeout=2)
        assert (m.data, status(m)) == (b"one", None) and m.reply.startswith("$JS.ACK.D.C.1.1.1.")
    finally:
        await nc.close()
