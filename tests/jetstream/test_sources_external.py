"""Mirrors and sources of a stream in another account (``external``: API prefix + deliver prefix), on both servers.

Account A owns the origin and exports its JetStream API, flow-control replies and a deliver subject space; account B
imports them (the API under ``JS.A.API``) and mirrors / sources the origin through them, as the NATS docs describe
for cross-account sourcing.  The same configuration with a JetStream domain is how ``domain`` sources reach another
domain (clients turn ``domain: D`` into ``external.api: $JS.D.API``).
"""
from __future__ import annotations

import json

import nats

from .test_mirror import wait_state
from .test_sources import source_header

CONF = """
accounts {
  A {
    jetstream: enabled
    users = [{user: a, password: a}]
    exports = [{service: "$JS.API.>"}, {service: "$JS.FC.>"}, {stream: "deliver.b.>"}]
  }
  B {
    jetstream: enabled
    users = [{user: b, password: b}]
    imports = [
      {service: {account: A, subject: "$JS.API.>"}, to: "JS.A.API.>"}
      {service: {account: A, subject: "$JS.FC.>"}}
      {stream: {account: A, subject: "deliver.b.>"}}
    ]
  }
}
"""


class _Js:
    def __init__(self, nc) -> None:
        self.nc = nc

    async def api(self, suffix: str, body: dict | bytes = b"") -> dict:
        data = json.dumps(body).encode() if isinstance(body, dict) else body
        return json.loads((await self.nc.request("$JS.API." + suffix, data, timeout=3)).data)

    async def info(self, name: str) -> dict:
        return await self.api(f"STREAM.INFO.{name}")


async def test_mirror_and_source_in_another_account(server_factory):
    server = server_factory(config=CONF)
    host = server.url.split("//", 1)[1]
    a = await nats.connect(f"nats://a:a@{host}")
    b = await nats.connect(f"nats://b:b@{host}")
    ja, jb = _Js(a), _Js(b)
    r = await ja.api("STREAM.CREATE.ORIG", {"name": "ORIG", "subjects": ["orig.>"]})
    assert "error" not in r, r
    for i in range(4):
        await a.request(f"orig.{i}", b"%d" % i, timeout=2)
    ext = {"api": "JS.A.API", "deliver": "deliver.b"}
    r = await jb.api("STREAM.CREATE.M", {"name": "M", "mirror": {"name": "ORIG", "external": ext}})
    assert "error" not in r, r
    assert r["mirror"] == {"name": "ORIG", "external": ext, "lag": 0, "active": -1}
    r = await jb.api("STREAM.CREATE.S", {"name": "S", "sources": [
        {"name": "ORIG", "external": ext, "filter_subject": "orig.1"}]})
    assert "error" not in r, r
    info = await wait_state(jb, "M", lambda i: i["state"]["messages"] == 4)
    assert info["mirror"]["external"] == ext and info["mirror"]["lag"] == 0
    m = (await jb.api("STREAM.MSG.GET.M", {"seq": 3}))["message"]
    assert m["subject"] == "orig.2"
    info = await wait_state(jb, "S", lambda i: i["state"]["messages"] == 1)
    assert info["sources"][0]["external"] == ext and info["sources"][0]["seq"] == 2
    m = (await jb.api("STREAM.MSG.GET.S", {"seq": 1}))["message"]
    hdr = source_header(m)
    # The origin name carries a hash of the API prefix (composeIName), so two accounts' ORIG stay apart.
    assert hdr[0].startswith("ORIG:") and len(hdr[0]) == len("ORIG:") + 8 and hdr[1:] == ["2", "orig.1", ">", "orig.1"]
    await a.request("orig.1", b"more", timeout=2)
    await wait_state(jb, "S", lambda i: i["state"]["messages"] == 2)
    await wait_state(jb, "M", lambda i: i["state"]["messages"] == 5)
    await a.close()
    await b.close()


async def test_push_delivery_through_stream_import_keeps_message_subject(server_factory):
    """A consumer in A delivering to a subject B imports: B's client sees the stored message's subject in the MSG
    line, as a subscriber in A does (nats-server keeps it across the import; Skiff showed the deliver subject)."""
    server = server_factory(config=CONF)
    host = server.url.split("//", 1)[1]
    a = await nats.connect(f"nats://a:a@{host}")
    b = await nats.connect(f"nats://b:b@{host}")
    ja = _Js(a)
    r = await ja.api("STREAM.CREATE.ORIG", {"name": "ORIG", "subjects": ["orig.>"]})
    assert "error" not in r, r
    await a.request("orig.7", b"seven", timeout=2)
    sub = await b.subscribe("deliver.b.push")
    await b.flush()  # the import gives A interest at once: B's own SUB must be in before the consumer delivers
    r = await ja.api("CONSUMER.CREATE.ORIG", {"stream_name": "ORIG", "config": {
        "deliver_subject": "deliver.b.push", "ack_policy": "none"}})
    assert "error" not in r, r
    msg = await sub.next_msg(timeout=3)
    assert msg.subject == "orig.7" and msg.data == b"seven" and msg.reply.startswith("$JS.ACK.ORIG.")
    await a.close()
    await b.close()
