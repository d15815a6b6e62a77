"""Helpers shared by the consumer tests (no tests here): raw consumer API calls, pulls and status messages.

Everything goes over the wire with nats-py's core client, so the same helper runs against Skiff and nats-server;
replies are schema-checked by ``jsc.api`` (tests/jetstream/conftest.py).
"""
from __future__ import annotations

import asyncio
import json

import jsonschema
import nats

from tests.conftest import load_schema

MS = 1_000_000
SECOND = 1_000_000_000


async def add_consumer(jsc, stream: str, name: str | None = None, *, durable: bool = True, check: bool = True,
                       **cfg) -> dict:
    """CONSUMER.CREATE.<stream>.<name> (durable by default) or CONSUMER.CREATE.<stream> without a name."""
    if name is not None:
        cfg.setdefault("durable_name" if durable else "name", name)
        subject = f"CONSUMER.CREATE.{stream}.{name}"
    else:
        subject = f"CONSUMER.CREATE.{stream}"
    r = await jsc.api(subject, {"stream_name": stream, "config": cfg})
    if check:
        assert "error" not in r, r
    return r


async def cinfo(jsc, stream: str, name: str) -> dict:
    r = await jsc.api(f"CONSUMER.INFO.{stream}.{name}")
    assert "error" not in r, r
    return r


def status(msg) -> tuple[int, str] | None:
    """(code, description) of a status message, None for a normal message."""
    h = msg.headers or {}
    code = h.get("Status")
    if not code:
        return None
    desc = h.get("Description") or ""
    if not isinstance(desc, str):
        desc = str(desc)
    for k, v in h.items():
        if str(k).endswith("DESCRIPTION") or k == "Description":
            desc = v
    return int(code), desc


async def pull(nc, stream: str, consumer: str, body: bytes | dict | str = b"", *, max_msgs: int = 1000,
               timeout: float = 0.5, until_status: bool = True, inbox: str | None = None) -> list:
    """Send one MSG.NEXT request and collect what comes back on its inbox: messages and status messages, until a
    status (if ``until_status``), ``max_msgs`` items, or ``timeout`` seconds without anything."""
    if isinstance(body, dict):
        body = json.dumps(body).encode()
    elif isinstance(body, str):
        body = body.encode()
    inbox = inbox or nc.new_inbox()
    sub = await nc.subscribe(inbox)
    await nc.publish(f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer}", body, reply=inbox)
    out = []
    try:
        while len(out) < max_msgs:
            try:
                m = await sub.next_msg(timeout=timeout)
            except (nats.errors.TimeoutError, asyncio.TimeoutError):
                break
            out.append(m)
            if until_status and status(m) is not None and status(m)[0] != 100:
                break
    finally:
        await sub.unsubscribe()
    return out


def ack_info(reply: str) -> dict:
    """The fields of a v1 ack reply subject."""
    t = reply.split(".")
    assert len(t) == 9 and t[:2] == ["$JS", "ACK"], reply
    return {"stream": t[2], "consumer": t[3], "delivered": int(t[4]), "stream_seq": int(t[5]),
            "consumer_seq": int(t[6]), "ts": int(t[7]), "pending": int(t[8])}


def validate_event(ev: dict) -> None:
    schema = load_schema(ev["type"])
    if ev["type"].endswith((".nak", ".terminated")):
        # The published schemas type consumer_seq as a string; nats-server 2.15 sends a number (Go uint64).
        schema["properties"]["consumer_seq"] = {"type": "integer", "minimum": 1}
    jsonschema.validate(ev, schema)


async def next_json(sub, timeout: float = 2.0) -> dict:
    m = await sub.next_msg(timeout=timeout)
    return json.loads(m.data)
