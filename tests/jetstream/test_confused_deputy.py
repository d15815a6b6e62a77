"""The server never acts on its own messages: a delivery, PubAck or API reply that the server addresses to a subject
the client chose reaches subscribers of that subject, but never the server's own `$JS.API`, `$JS.ACK` or `$JS.FC`
handlers (the confused deputy of issue #15, finding 1).

nats-server gets this from two places: `jsAPI` handlers drop requests without the `Nats-Request-Info` header that only
client publishes get (jetstream_api.go apiDispatch), and messages of the JetStream internal client are not
re-dispatched to JetStream internal subscriptions.  A restricted user may publish only to `s.>`, pull from `S`/`W`
and ack on `W`; every probe below tries to make the server perform an API call or an ack that the user may not.
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
      publish: {allow: ["s.>", "$JS.API.CONSUMER.MSG.NEXT.S.W", "$JS.ACK.S.W.>"]}
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
    await r.publish("s.x", payload)
    await r.flush()
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
