"""What the kill -9 tests share: raw API requests, a publisher that counts acknowledged publishes and stops at the
kill, and a read of everything a stream holds after the restart."""
from __future__ import annotations

import asyncio
import json

import nats


async def api(nc, subject: str, body: dict | bytes = b"") -> dict:
    data = json.dumps(body).encode() if isinstance(body, dict) else body
    return json.loads((await nc.request(subject, data, timeout=5)).data)


async def create_stream(url: str, config: dict) -> None:
    """Create a stream on its own connection (the kill tests then open the connections they kill under)."""
    nc = await nats.connect(url)
    r = await api(nc, f"$JS.API.STREAM.CREATE.{config['name']}", config)
    assert "error" not in r, r
    await nc.close()


async def direct_get_all(nc, name: str, last: int) -> list:
    """Every message of stream ``name`` up to sequence ``last``, in order, read by batched DIRECT.GET."""
    out = []
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    seq = 1
    while seq <= last:
        await nc.publish(f"$JS.API.DIRECT.GET.{name}", json.dumps({"seq": seq, "batch": 1000}).encode(), reply=inbox)
        got = 0
        while True:
            m = await sub.next_msg(timeout=5)
            if not m.data and m.headers and m.headers.get("Status"):
                break  # end of this direct-get batch (204 / 404)
            got += 1
            out.append(m)
            seq = int(m.headers["Nats-Sequence"]) + 1
        # Nothing at or after seq: the sequences up to last_seq are gone (a partial batch removed at recovery
        # leaves last_seq past the last message); asking again would loop forever.
        if not got:
            break
    await sub.unsubscribe()
    return out


async def state(nc, name: str) -> dict:
    return (await api(nc, f"$JS.API.STREAM.INFO.{name}"))["state"]


class Publisher:
    """Publishes ``prefix<i>`` to ``o.<i % spread>`` in rounds of 100 requests in flight; ``acked`` counts the
    PubAcks received, and a round stops at the first failure (the kill) or once ``killed`` is set."""

    def __init__(self, spread: int) -> None:
        self.spread = spread
        self.acked = 0
        self.killed = asyncio.Event()

    async def publish(self, conn, n: int, prefix: bytes) -> None:
        for start in range(0, n, 100):
            futs = [asyncio.ensure_future(conn.request(f"o.{i % self.spread}", prefix + b"%d" % i, timeout=10))
                    for i in range(start, min(start + 100, n))]
            for f in futs:
                try:
                    json.loads((await f).data)
                except Exception:
                    return  # the kill
                self.acked += 1
            if self.killed.is_set():
                return


async def close_dead(*conns) -> None:
    """Close nats.py connections whose server was killed under them. Their close may fail, or end in the
    transport's cancelled close waiter (seen on nats-server in CI); only a cancellation of the test itself goes on."""
    for c in conns:
        try:
            await c.close()
        except Exception:
            pass
        except asyncio.CancelledError:
            if asyncio.current_task().cancelling():
                raise


async def kill_and_restart(server, pub: Publisher, task, *conns):
    """SIGKILL ``server`` under ``pub``'s load, let the publisher stop, drop the old connections, start the server
    again on the same store and port; a new connection to it."""
    import nats

    server.kill()
    pub.killed.set()
    await asyncio.gather(task, return_exceptions=True)
    await close_dead(*conns)
    server.start()
    return await nats.connect(server.url)


async def sourced_origin_seqs(nc, stream: str, count: int) -> list[int]:
    """The origin sequence in the Nats-Stream-Source header of each of the first ``count`` messages of ``stream``
    (read by a headers-only push consumer)."""
    seen: list[int] = []
    subject = f"chk.{stream}"
    sub = await nc.subscribe(subject)
    r = await api(nc, f"$JS.API.CONSUMER.CREATE.{stream}", {"stream_name": stream, "config": {
        "deliver_subject": subject, "ack_policy": "none", "headers_only": True}})
    assert "error" not in r, r
    while len(seen) < count:
        msg = await sub.next_msg(timeout=5)
        seen.append(int(msg.headers["Nats-Stream-Source"].split(" ")[1]))
    await sub.unsubscribe()
    return seen
