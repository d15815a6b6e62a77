"""nats-py 2.16's ``flush()`` is not a barrier: its PING skips the queue of commands not yet written.

``Client._send_ping`` writes ``PING`` straight to the transport while SUB, UNSUB and PUB wait in ``_pending`` for the
flusher task, so the server can answer PONG before it has read them (the bug nats.py2 fixed in its PR #24, "let the
flusher loop send the ping command").  ``await nc.flush()`` then returns before the server knows of a subscription
made just before it.  Against nats-server, whose connections are read by separate goroutines, a publish from a
second connection then finds no interest about once in a hundred tries (measured: 3-20 lost messages in 400
subscribe/flush/publish rounds; 0 after this patch, and 0 against Skiff, which handles a whole read buffer in one
step).  Tests that use ``flush()`` as a barrier — almost all of them — were flaky on the oracle for that reason.

The suite puts the PING in the queue, behind what precedes it, as every other NATS client does.  The patch is
applied only while nats-py's method still has the direct write (checked by its source), so an nats-py that fixes it
runs unpatched.
"""
from __future__ import annotations

import asyncio
import inspect

from nats.aio.client import PING_PROTO, Client

_DIRECT_WRITE = "self._transport.write(PING_PROTO)"
ORIGINAL = Client._send_ping


async def _send_ping_in_order(self: Client, future: asyncio.Future | None = None) -> None:
    if future is None:
        future = asyncio.Future()
    self._pongs.append(future)
    self._pending.append(PING_PROTO)
    self._pending_data_size += len(PING_PROTO)
    await self._flush_pending()


def needs_patch() -> bool:
    return _DIRECT_WRITE in inspect.getsource(ORIGINAL)


def apply() -> bool:
    """Patch ``Client._send_ping`` when nats-py still writes the PING directly; True if it did."""
    if Client._send_ping is not ORIGINAL or not needs_patch():
        return False
    Client._send_ping = _send_ping_in_order
    return True
