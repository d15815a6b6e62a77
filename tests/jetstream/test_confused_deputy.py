"""The server never acts on its own messages: a delivery, PubAck or API reply that the server addresses to a subject
the client chose reaches subscribers of that subject, but never the server's own `$JS.API`, `$JS.ACK` or `$JS.FC`
handlers (the confused deputy of issue #15, finding 1).

nats-server gets this from two places: `jsAPI` handlers drop requests without the `Nats-Request-Info` header that only
client publishes get (jetstream_api.go apiDispatch), and a consumer's deliveries, PubAcks and API replies are not
acted on there (measured: the probes below pass on it).  A restricted user may publish only to `s.>`, pull from
`S`/`W` and `S`/`E` and ack on `W`; every probe below tries to make the server perform an API call or an ack that
the user may not.

nats-server 2.15.1 has a hole here that Skiff does not copy: a consumer's status messages (404 No Messages, 408
Request Timeout, 409, 100 Idle Heartbeat) sent to an API subject are acted on, so the restricted user deletes a stream
with an empty pull (test_status_message_to_api_subject; docs/parity.md).
"""
from __future__ import annotations

import asyncio
import json

import nats
import pytest

CONF = """authorization {
  users = [
    {user: admin, password: admin}
    {user: r, password: r, permissions: {
      publish: {allow: ["s.>", "$JS.API.CONSUMER.MSG.NEXT.S.W", "$JS.API.CONSUMER.MSG.NEXT.S.E", "$JS.ACK.S.W.>"]}
      subscribe: {allow: ["_INBOX.>", "leak.>"]}
    }}
  ]
}
"""


async def api(nc, suffix: str, body: dict | None = None) -> dict:
    msg = await nc.request("$JS.API." + suffix, json.dumps(body or {}).encode(), timeout=3)
    return json.loads(msg.data)


@pytest.fixture
async def setup(server_factory):
    srv = server_factory(config=CONF)
    admin = await nats.connect(srv.url, user="admin", password="admin", allow_reconnect=False)
    r = await nats.connect(srv.url, user="r", password="r", allow_reconnect=False)
    assert "error" not in await api(admin, "STREAM.CREATE.S", {"name": "S", "subjects": ["s.>"]})
    assert "error" not in await api(admin, "STREAM.CREATE.OTHER", {"name": "OTHER", "subjects": ["other.>"]})
    assert "error" not in await api(admin, "STREAM.CREATE.SECRET", {"name": "SECRET", "subjects": ["secret.>"]})
    assert "error" not in await api(admin, "CONSUMER.CREATE.S.W", {"stream_name": "S", "config": {
        "durable_name": "W", "ack_policy": "explicit"}})
    await admin.request("secret.x", b"top secret", timeout=3)
    yield srv, admin, r
    await r.close()
    await admin.close()


async def collect(nc, subject: str) -> tuple[list, object]:
    """(messages received on ``subject``, the subscription)."""
    got: list = []

    async def cb(m):
        got.append(m)

    return got, await nc.subscribe(subject, cb=cb)


async def other_stream_still_there(admin) -> bool:
    info = await api(admin, "STREAM.INFO.OTHER")
    assert "error" not in info and info["config"]["name"] == "OTHER", info  # what the server said, if not
    return True


async def pull_to(r, reply: str, payload: bytes = b"") -> None:
    """Store ``payload`` in S, then pull it with ``reply`` as the delivery subject."""
    # Wait for the PubAck: a pull that comes before the store would be answered with a 404 status message instead of
    # the delivery, and nats-server acts on those (test_status_message_to_api_subject below).
    await r.request("s.x", payload, timeout=3)
    await r.publish("$JS.API.CONSUMER.MSG.NEXT.S.W", b'{"batch":1,"no_wait":true}', reply=reply)
    await r.flush()
    await asyncio.sleep(0.3)


async def test_direct_api_call_is_refused(setup):
    # The baseline: the user cannot call the API itself.
    _, admin, r = setup
    await r.publish("$JS.API.STREAM.DELETE.OTHER", b"")
    await r.flush()
    await asyncio.sleep(0.1)
    info = await api(admin, "STREAM.INFO.OTHER")
    assert info["config"]["name"] == "OTHER"


async def test_pull_delivery_to_api_subject_does_not_delete_a_stream(setup):
    _, admin, r = setup
    await pull_to(r, "$JS.API.STREAM.DELETE.OTHER")
    assert await other_stream_still_there(admin)


async def test_pull_delivery_to_api_subject_does_not_create_a_consumer(setup):
    _, admin, r = setup
    leaked, sub = await collect(r, "leak.>")
    body = json.dumps({"stream_name": "SECRET", "config": {"deliver_subject": "leak.x"}}).encode()
    await pull_to(r, "$JS.API.CONSUMER.CREATE.SECRET", body)
    await asyncio.sleep(0.3)
    names = await api(admin, "CONSUMER.NAMES.SECRET")
    assert names["consumers"] in ([], None) and names["total"] == 0
    assert leaked == []
    await sub.unsubscribe()


async def test_delivery_addressed_to_an_ack_subject_acks_nothing(setup):
    # A pull whose reply subject is another consumer's ack subject must not ack that consumer's message.
    _, admin, r = setup
    assert "error" not in await api(admin, "CONSUMER.CREATE.SECRET.C", {"stream_name": "SECRET", "config": {
        "durable_name": "C", "ack_policy": "explicit"}})
    msgs = await (await admin.jetstream().pull_subscribe_bind("C", "SECRET")).fetch(1, timeout=3)
    ack_subject = msgs[0].reply
    assert ack_subject.startswith("$JS.ACK.SECRET.C.")
    await pull_to(r, ack_subject)
    info = await api(admin, "CONSUMER.INFO.SECRET.C")
    assert info["num_ack_pending"] == 1 and info["ack_floor"]["stream_seq"] == 0


async def test_pub_ack_to_api_subject_does_not_delete_a_stream(setup):
    # A stored publish is acknowledged to the reply subject the publisher chose.
    _, admin, r = setup
    await r.publish("s.y", b"", reply="$JS.API.STREAM.DELETE.OTHER")
    await r.flush()
    await asyncio.sleep(0.3)
    assert await other_stream_still_there(admin)


async def test_push_delivery_to_api_subject_does_nothing(setup):
    # An admin-made push consumer whose deliver subject is an API subject: deliveries reach subscribers only.
    _, admin, r = setup
    got, watcher = await collect(admin, "$JS.API.STREAM.DELETE.OTHER")
    assert "error" not in await api(admin, "CONSUMER.CREATE.S", {"stream_name": "S", "config": {
        "deliver_subject": "$JS.API.STREAM.DELETE.OTHER", "ack_policy": "none"}})
    await r.publish("s.z", b"")
    await r.flush()
    for _ in range(30):
        if got:
            break
        await asyncio.sleep(0.1)
    assert got, "the push delivery still reaches an ordinary subscriber of its subject"
    assert await other_stream_still_there(admin)
    await watcher.unsubscribe()


STATUS_PULLS = {
    "404": b'{"batch":1,"no_wait":true}',
    "408": b'{"batch":1,"expires":200000000}',
    "409": b'{"batch":5}',  # over the consumer's max_batch of 1
    "100": b'{"batch":1,"expires":2000000000,"idle_heartbeat":100000000}',
}


@pytest.mark.parametrize("status", sorted(STATUS_PULLS))
async def test_status_message_to_api_subject(setup, target, status):
    # The consumer has nothing to deliver, so the pull is answered with a status message (no reply subject, a
    # header block, no body) on the reply subject the user chose.  nats-server 2.15.1 passes the internal client's
    # message through the account's $JS.API service import, which stamps it with Nats-Request-Info, and the API
    # handler deletes the stream for a user who may not (found as a 1-in-6 flake of the pull test above, when the
    # pull overtook the store).  Skiff never lets its own messages reach the API: a deliberate difference.
    _, admin, r = setup
    assert "error" not in await api(admin, "CONSUMER.CREATE.S.E", {"stream_name": "S", "config": {
        "durable_name": "E", "ack_policy": "explicit", "deliver_policy": "new", "max_batch": 1}})
    seen, watcher = await collect(admin, "$JS.API.STREAM.DELETE.OTHER")
    await admin.flush()
    await r.publish("$JS.API.CONSUMER.MSG.NEXT.S.E", STATUS_PULLS[status], reply="$JS.API.STREAM.DELETE.OTHER")
    for _ in range(50):
        if seen:
            break
        await asyncio.sleep(0.1)
    assert seen and seen[0].headers.get("Status") == status, "the status message reaches an ordinary subscriber"
    await asyncio.sleep(0.3)
    info = await api(admin, "STREAM.INFO.OTHER")
    if target == "nats-server":
        assert info.get("error", {}).get("err_code") == 10059, info  # deleted by the status message
    else:
        assert info["config"]["name"] == "OTHER", info
    await watcher.unsubscribe()
