"""The suite's mending of nats-py's flush (tests/natspy_flush.py): what the client writes, read off a fake server.

A flush must reach the server behind the commands issued before it, or ``await nc.flush()`` proves nothing about
them.  The fake server records the bytes in the order they arrive and answers PING with PONG.
"""
from __future__ import annotations

import asyncio

import nats

from tests import natspy_flush


async def _wire_of(actions) -> bytes:
    """The bytes a nats-py client writes after its connect handshake while ``actions(nc)`` runs."""
    seen = bytearray()
    handshake_done = asyncio.Event()

    async def serve(reader, writer):
        writer.write(b'INFO {"server_id":"fake","version":"2.15.1","proto":1,"max_payload":1048576,"headers":true}\r\n')
        await writer.drain()
        pings = 0
        while line := await reader.readline():
            if handshake_done.is_set():
                seen.extend(line)
            if line.startswith(b"PING"):
                pings += 1
                writer.write(b"PONG\r\n")
                await writer.drain()
                if pings == 1:
                    handshake_done.set()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    nc = await nats.connect(f"nats://127.0.0.1:{port}", allow_reconnect=False, connect_timeout=2)
    try:
        await handshake_done.wait()
        await actions(nc)
    finally:
        await nc.close()
        server.close()
    return bytes(seen)


async def test_flush_follows_the_commands_before_it():
    assert natspy_flush.apply() is False  # conftest applied it already (or this nats-py needs none)

    async def actions(nc):
        await nc.subscribe("a")
        await nc.publish("a", b"x")
        await nc.flush(timeout=2)
    wire = await _wire_of(actions)
    assert wire.index(b"SUB a") < wire.index(b"PUB a") < wire.index(b"PING"), wire


async def test_the_mending_is_applied_exactly_while_nats_py_needs_it(monkeypatch):
    from nats.aio.client import Client
    assert (Client._send_ping is natspy_flush._send_ping_in_order) == natspy_flush.needs_patch()
    if not natspy_flush.needs_patch():
        return
    # nats-py as published: the PING overtakes the SUB still queued, so the PONG can come before the server has it.
    monkeypatch.setattr(Client, "_send_ping", natspy_flush.ORIGINAL)

    async def actions(nc):
        await nc.subscribe("a")
        await nc.flush(timeout=2)
    wire = await _wire_of(actions)
    assert wire.index(b"PING") < wire.index(b"SUB a"), wire
