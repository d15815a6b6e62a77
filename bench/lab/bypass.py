"""Permission-bypass probes: can a user make the server act, with the server's rights, on a subject that user may
not publish to?  Every probe is run on both servers; the answer is bypass yes/no (plus what the user saw).

Users (nats-server ``authorization`` syntax, the same file for both servers):

* ``lim`` may publish only ``s.>``, ``$JS.API.CONSUMER.MSG.NEXT.S.W`` and ``$JS.ACK.S.W.>``;
* ``pusher`` may only create consumers on ``S``;
* ``q`` may subscribe only in queue group ``workers`` on ``q.>`` and never to ``q.secret``;
* ``resp`` may publish nothing but responses (``allow_responses: true``, one response per request);
* ``admin`` may do anything and checks the outcome.

Probes (the "confused deputy" family: a reply subject or deliver subject the attacker chose is aimed at
``$JS.API`` or at another consumer's ``$JS.ACK``):

1. a pull by ``lim`` with reply ``$JS.API.STREAM.DELETE.OTHER`` delivers an empty message there;
2. a pull whose message is a consumer-create body, with reply ``$JS.API.CONSUMER.CREATE.SECRET.X``;
3. a publish to ``s.x`` whose PubAck goes to ``$JS.API.STREAM.DELETE.OTHER2``;
4. a push consumer whose deliver subject is ``$JS.API.STREAM.DELETE.OTHER3``;
5. a publish whose PubAck goes to ``$JS.ACK.S.V...``: an ack for consumer ``V`` that ``lim`` may not ack;
6. (control) ``lim`` publishes ``$JS.API.STREAM.DELETE.OTHER4`` itself: must be refused;
7. queue-group permissions: subscriptions outside ``workers`` and to ``q.secret`` must be refused;
8. ``allow_responses``: a second response and a non-response publish must be refused;
9. a pull by ``lim`` on an empty consumer with reply ``$JS.API.STREAM.DELETE.OTHER5``: the ``404 No Messages``
   status message lands there;
10. a push consumer made by ``pusher`` whose deliver subject is ``$JS.API.STREAM.DELETE.OTHER6``, with idle
    heartbeats and nothing to deliver, while some client (``admin`` here; any tool watching ``$JS.API.>``)
    subscribes to that subject, so the consumer is active: the ``100 Idle Heartbeat`` status message lands there.

nats-server 2.15.1 acts on 9 and 10 (docs/parity.md); Skiff refuses every probe.
"""
from __future__ import annotations

import asyncio
import json

from bench.lab.common import Budget, Result, lab_server, tracebacks
from bench.lab.wire import Conn, js_api

AUTH = """
authorization {
  users = [
    {user: admin, password: admin}
    {user: lim, password: lim, permissions: {
      publish: {allow: ["s.>", "$JS.API.CONSUMER.MSG.NEXT.S.W", "$JS.API.CONSUMER.MSG.NEXT.E.W", "$JS.ACK.S.W.>"]}
      subscribe: {allow: ["_INBOX.>", "lab.>"]}
    }}
    {user: pusher, password: pusher, permissions: {
      publish: {allow: ["$JS.API.CONSUMER.CREATE.S.>", "$JS.API.CONSUMER.DURABLE.CREATE.S.>"]}
      subscribe: {allow: ["_INBOX.>"]}
    }}
    {user: q, password: q, permissions: {
      publish: {allow: ["_INBOX.>"]}
      subscribe: {allow: ["q.> workers", "_INBOX.>"], deny: ["q.secret"]}
    }}
    {user: resp, password: resp, permissions: {
      publish: {deny: [">"]}
      subscribe: {allow: ["svc.>", "_INBOX.>"]}
      allow_responses: true
    }}
  ]
}
"""


async def _exists(admin: Conn, api: str) -> bool:
    r = await js_api(admin, api)
    return r is not None and "error" not in r


async def _settle(*conns: Conn) -> None:
    for c in conns:
        await c.flush(3)
    await asyncio.sleep(0.3)


def _created(reply: dict | None) -> str:
    """What a consumer create's reply says, for a probe's details."""
    return "refused " + str(reply.get("error", {}).get("description")) if reply and "error" in reply else "created"


async def _stored(admin: Conn, stream: str, n: int) -> None:
    """Wait until ``stream`` holds ``n`` messages: a pull that overtook the store would get a status message."""
    for _ in range(50):
        if ((await js_api(admin, f"STREAM.INFO.{stream}") or {}).get("state") or {}).get("messages", 0) >= n:
            return
        await asyncio.sleep(0.05)


async def probes(srv) -> dict[str, tuple[bool, str]]:
    out: dict[str, tuple[bool, str]] = {}
    admin = await Conn.connect(srv.port, user="admin", password="admin")
    lim = await Conn.connect(srv.port, user="lim", password="lim")
    for name, subj in (("S", "s.>"), ("OTHER", "other.>"), ("OTHER2", "other2.>"), ("OTHER3", "other3.>"),
                       ("OTHER4", "other4.>"), ("OTHER5", "other5.>"), ("OTHER6", "other6.>"),
                       ("SECRET", "secret.>"), ("E", "e.>")):
        await js_api(admin, f"STREAM.CREATE.{name}", {"name": name, "subjects": [subj], "storage": "file"})
    await js_api(admin, "CONSUMER.DURABLE.CREATE.S.W", {"stream_name": "S", "config": {
        "durable_name": "W", "ack_policy": "explicit", "deliver_policy": "new"}})

    # 1. pull delivered to a JetStream API subject
    lim.pub("s.1", b"")
    await _stored(admin, "S", 1)
    lim.pub("$JS.API.CONSUMER.MSG.NEXT.S.W", b'{"batch":1}', "$JS.API.STREAM.DELETE.OTHER")
    await _settle(lim, admin)
    gone = not await _exists(admin, "STREAM.INFO.OTHER")
    out["pull reply -> STREAM.DELETE"] = (gone, f"OTHER {'deleted' if gone else 'kept'}; lim errors {lim.errors[-1:]}")

    # 2. pull of a consumer-create body delivered to CONSUMER.CREATE of a stream lim cannot touch
    body = {"stream_name": "SECRET", "config": {"name": "X", "durable_name": "X", "ack_policy": "none"}}
    lim.pub("s.2", json.dumps(body).encode())
    await _stored(admin, "S", 2)
    lim.pub("$JS.API.CONSUMER.MSG.NEXT.S.W", b'{"batch":1}', "$JS.API.CONSUMER.CREATE.SECRET.X")
    await _settle(lim, admin)
    made = await _exists(admin, "CONSUMER.INFO.SECRET.X")
    out["pull reply -> CONSUMER.CREATE"] = (made, f"SECRET.X {'created' if made else 'absent'}")

    # 3. PubAck aimed at the API
    lim.pub("s.3", b"", "$JS.API.STREAM.DELETE.OTHER2")
    await _settle(lim, admin)
    gone = not await _exists(admin, "STREAM.INFO.OTHER2")
    out["PubAck reply -> STREAM.DELETE"] = (gone, f"OTHER2 {'deleted' if gone else 'kept'}")

    # 4. push consumer delivering into the API
    pusher = await Conn.connect(srv.port, user="pusher", password="pusher")
    r = await js_api(pusher, "CONSUMER.CREATE.S.PU", {"stream_name": "S", "config": {
        "name": "PU", "durable_name": "PU", "deliver_subject": "$JS.API.STREAM.DELETE.OTHER3",
        "ack_policy": "none", "deliver_policy": "all"}})
    lim.pub("s.4", b"")
    await _settle(lim, pusher, admin)
    gone = not await _exists(admin, "STREAM.INFO.OTHER3")
    out["push deliver_subject -> STREAM.DELETE"] = (gone, f"consumer {_created(r)}; "
                                                          f"OTHER3 {'deleted' if gone else 'kept'}")
    await pusher.close()

    # 5. PubAck aimed at another consumer's ack subject
    await js_api(admin, "CONSUMER.DURABLE.CREATE.S.V", {"stream_name": "S", "config": {
        "durable_name": "V", "ack_policy": "explicit", "deliver_policy": "all", "ack_wait": 60_000_000_000}})
    inbox = admin.sub("lab.v")
    admin.pub("$JS.API.CONSUMER.MSG.NEXT.S.V", b'{"batch":1}', "lab.v")
    m = await asyncio.wait_for(inbox.queue.get(), 5)
    before = (await js_api(admin, "CONSUMER.INFO.S.V") or {}).get("num_ack_pending")
    lim.pub("s.5", b"", m.reply)  # the PubAck ({"stream":"S","seq":N}) lands on V's ack subject
    await _settle(lim, admin)
    after = (await js_api(admin, "CONSUMER.INFO.S.V") or {}).get("num_ack_pending")
    out["PubAck reply -> other consumer's $JS.ACK"] = (before == 1 and after == 0,
                                                       f"V ack pending {before} -> {after}")

    # 6. control: the direct publish must be refused
    n = len(lim.errors)
    lim.pub("$JS.API.STREAM.DELETE.OTHER4", b"")
    await _settle(lim, admin)
    gone = not await _exists(admin, "STREAM.INFO.OTHER4")
    out["(control) direct publish to STREAM.DELETE"] = (gone, f"-ERR: {lim.errors[n:n + 1]}")

    # 7. queue-group permissions
    q = await Conn.connect(srv.port, user="q", password="q")
    plain, other, secret, ok = q.sub("q.x"), q.sub("q.x", "others"), q.sub("q.secret", "workers"), q.sub("q.x", "workers")
    await q.flush()
    admin.pub("q.x", b"1")
    admin.pub("q.secret", b"2")
    await _settle(admin, q)
    leaked = plain.queue.qsize() + other.queue.qsize() + secret.queue.qsize()
    out["queue permissions"] = (leaked > 0, f"denied subs got {leaked} msgs; allowed got {ok.queue.qsize()}; "
                                            f"-ERRs {len(q.errors)}")
    await q.close()

    # 8. allow_responses (max 1)
    resp = await Conn.connect(srv.port, user="resp", password="resp")
    svc = resp.sub("svc.a")
    spy = admin.sub("spy.x")
    await resp.flush()
    got = admin.sub("lab.answers")
    admin.pub("svc.a", b"q", "lab.answers")
    await admin.flush()
    req = await asyncio.wait_for(svc.queue.get(), 5)
    resp.pub(req.reply, b"one")
    resp.pub(req.reply, b"two")
    resp.pub("spy.x", b"not a response")
    await _settle(resp, admin)
    extra = got.queue.qsize() - 1 + spy.queue.qsize()
    out["allow_responses"] = (extra > 0, f"responses delivered {got.queue.qsize()} (1 allowed), "
                                         f"non-response delivered {spy.queue.qsize()}")
    # 9. a status message (404 No Messages) aimed at the API
    await js_api(admin, "CONSUMER.DURABLE.CREATE.E.W", {"stream_name": "E", "config": {
        "durable_name": "W", "ack_policy": "explicit"}})
    lim.pub("$JS.API.CONSUMER.MSG.NEXT.E.W", b'{"batch":1,"no_wait":true}', "$JS.API.STREAM.DELETE.OTHER5")
    await _settle(lim, admin)
    gone = not await _exists(admin, "STREAM.INFO.OTHER5")
    out["pull status (404) -> STREAM.DELETE"] = (gone, f"OTHER5 {'deleted' if gone else 'kept'}")

    # 10. an idle heartbeat aimed at the API
    watcher = admin.sub("$JS.API.STREAM.DELETE.OTHER6")
    await admin.flush()
    pusher = await Conn.connect(srv.port, user="pusher", password="pusher")
    r = await js_api(pusher, "CONSUMER.CREATE.S.HB", {"stream_name": "S", "config": {
        "name": "HB", "durable_name": "HB", "deliver_subject": "$JS.API.STREAM.DELETE.OTHER6",
        "ack_policy": "none", "deliver_policy": "new", "idle_heartbeat": 100_000_000}})
    await _settle(pusher, admin)
    await asyncio.sleep(0.3)  # two heartbeat periods
    gone = not await _exists(admin, "STREAM.INFO.OTHER6")
    out["push idle heartbeat -> STREAM.DELETE"] = (gone, f"consumer {_created(r)}; {watcher.queue.qsize()} heartbeats "
                                                         f"seen; OTHER6 {'deleted' if gone else 'kept'}")
    await pusher.close()
    for c in (resp, lim, admin):
        await c.close()
    return out


async def run(kinds: list[str], a, budget: Budget, res: Result) -> None:
    seen: dict[str, dict[str, bool]] = {}
    for kind in kinds:
        srv = lab_server(kind, conf=AUTH)
        try:
            srv.start()
            try:
                found = await asyncio.wait_for(probes(srv), max(10.0, budget.left()))
            except Exception as e:  # a probe that cannot finish is reported, the other server still runs
                res.row("probes finished", kind, f"no: {type(e).__name__}")
                continue
            for probe, (bypass, what) in found.items():
                res.row(f"bypass: {probe}", kind, bypass)
                seen.setdefault(probe, {})[kind] = bypass
                res.details.setdefault(kind, {})[probe] = what
            res.row("tracebacks", kind, tracebacks(srv))
        finally:
            srv.cleanup()
    for probe, by in seen.items():
        if len(set(by.values())) > 1:
            res.note(f"differs: {probe}: " + ", ".join(f"{k} {'bypass' if v else 'refused'}" for k, v in by.items()))
