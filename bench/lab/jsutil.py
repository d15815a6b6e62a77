"""JetStream helpers the campaigns share: create a stream, fill it fast, read it back exactly, pull and ack."""
from __future__ import annotations

import asyncio
import json

from bench.lab.wire import Conn, Msg, js_api, publish_acked


async def create_stream(c: Conn, name: str, subjects: list[str], **cfg) -> dict | None:
    body = {"name": name, "subjects": subjects, "storage": "file", "allow_direct": True, **cfg}
    return await js_api(c, f"STREAM.CREATE.{name}", body, timeout=15)


async def fill(c: Conn, subject: str, count: int, size: int = 16, window: int = 512, start: int = 0) -> int:
    """Publish ``count`` messages whose payload starts with their index (``start``-based); returns acks."""
    pad = b"." * max(0, size - 12)

    def payloads():
        for i in range(start, start + count):
            yield b"%011d:" % i + pad

    acked, _ = await publish_acked(c, subject, payloads(), window=window, timeout=60)
    return acked


async def direct_get(c: Conn, stream: str, seq: int, timeout: float = 5.0) -> Msg | None:
    return await c.request(f"$JS.API.DIRECT.GET.{stream}", json.dumps({"seq": seq}).encode(), timeout)


async def read_all(c: Conn, stream: str, first: int, last: int, parallel: int = 128) -> tuple[dict[int, bytes], int]:
    """Every message from ``first`` to ``last`` by DIRECT.GET: ({seq: payload}, requests without a reply).

    A 404 (deleted or never stored) is simply absent from the map; Nats-Sequence must match the asked seq."""
    out: dict[int, bytes] = {}
    noreply = 0
    sem = asyncio.Semaphore(parallel)

    async def one(seq: int) -> None:
        nonlocal noreply
        async with sem:
            m = await direct_get(c, stream, seq)
        if m is None:
            noreply += 1
        elif not m.status and m.header("Nats-Sequence") == str(seq):
            out[seq] = m.data

    step = 4096
    for lo in range(first, last + 1, step):
        await asyncio.gather(*(one(s) for s in range(lo, min(last, lo + step - 1) + 1)))
    return out, noreply


async def stream_state(c: Conn, name: str) -> dict | None:
    """The stream's ``state`` or ``{"error": ...}``; None when the server does not answer."""
    info = await js_api(c, f"STREAM.INFO.{name}", timeout=10)
    if info is None:
        return None
    if "error" in info:
        return {"error": info["error"]}
    return info.get("state", {})


def ack_seqs(reply: str) -> tuple[int, int]:
    """(stream seq, delivery count) of a ``$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<dseq>.<ts>.<pending>``
    reply subject (also the 12-token form with domain and account hash)."""
    t = reply.split(".")
    if len(t) >= 12:
        t = ["$JS", "ACK"] + t[4:]
    return int(t[5]), int(t[4])


async def pull(c: Conn, stream: str, consumer: str, batch: int, expires_s: float, inbox_sub) -> list[Msg]:
    """One MSG.NEXT request of ``batch`` with ``expires``; the messages that came before the end (status)."""
    body = json.dumps({"batch": batch, "expires": int(expires_s * 1e9)}).encode()
    c.pub(f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer}", body, inbox_sub.subject)
    got: list[Msg] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + expires_s + 1.0
    while len(got) < batch:
        left = deadline - loop.time()
        if left <= 0:
            break
        if c.closed.is_set():  # the server died: no point waiting for expires
            break
        get = asyncio.ensure_future(inbox_sub.queue.get())
        closed = asyncio.ensure_future(c.closed.wait())
        done, _ = await asyncio.wait({get, closed}, timeout=left, return_when=asyncio.FIRST_COMPLETED)
        closed.cancel()
        if get not in done:
            get.cancel()
            break
        m = get.result()
        if m.status:  # 404 / 408 / 409: the pull ended
            break
        got.append(m)
    return got
