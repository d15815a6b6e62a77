"""A subscription: a client's SUB, or an internal one whose callback the server runs in-line."""
from __future__ import annotations

from typing import Any, Callable


class Subscription:
    """``conn`` is the client connection (None for internal subscriptions, which have ``callback``).

    ``max_msgs`` / ``delivered`` implement ``UNSUB <sid> <max>``: the subscription goes after its max-th message.
    """

    __slots__ = ("conn", "subject", "queue", "sid", "sid_b", "max_msgs", "delivered", "callback", "closed")

    def __init__(
        self,
        conn: Any,
        subject: str,
        queue: str,
        sid: str,
        callback: Callable | None = None,
    ) -> None:
        self.conn = conn
        self.subject = subject
        self.queue = queue
        self.sid = sid
        self.sid_b = sid.encode("utf-8", "surrogateescape")
        self.max_msgs = 0
        self.delivered = 0
        self.callback = callback
        self.closed = False

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        q = f" queue={self.queue}" if self.queue else ""
        return f"<Subscription {self.subject}{q} sid={self.sid}>"
