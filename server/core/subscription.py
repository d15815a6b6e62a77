"""A subscription: a client's SUB, or an internal one whose callback the server runs in-line."""
from __future__ import annotations

from typing import Any, Callable


class Subscription:
    """``conn`` is the client connection (None for internal subscriptions, which have ``callback``).

    ``max_msgs`` / ``delivered`` implement ``UNSUB <sid> <max>``: the subscription goes after its max-th message.

    ``server_msgs`` (internal subscriptions only): whether the callback also runs for messages the server itself
    published (deliveries, PubAcks, API replies, advisories, republished messages).  Only stream ingest says yes, as
    nats-server stores advisories and republished messages; API, ack and flow-control handlers act on client
    requests alone, so that a reply subject a client chose can never make the server call its own API with the
    server's rights (the confused deputy: nats-server jetstream_api.go drops API requests without the client info
    header that only client publishes carry).

    ``msg_subject`` (internal subscriptions only): the callback gets a seventh argument, the subject a client's MSG
    line would carry when it differs from the routed one (a consumer delivery to a deliver subject: the stored
    message's subject), else None; a mirror or source needs the origin message's subject, and a stream import must
    pass it on.
    """

    __slots__ = ("conn", "subject", "queue", "sid", "sid_b", "max_msgs", "delivered", "callback", "closed",
                 "server_msgs", "sublist", "msg_subject", "route", "local")

    def __init__(
        self,
        conn: Any,
        subject: str,
        queue: str,
        sid: str,
        callback: Callable | None = None,
        server_msgs: bool = False,
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
        self.server_msgs = server_msgs
        self.msg_subject = False
        self.sublist = None  # internal subscriptions: the Sublist (account) they live in
        self.route = None  # a remote server's interest: its RouteConnection (core/route.py RouteSub)
        self.local = False  # internal: never announced to the cluster (Server.subscribe_internal)

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        q = f" queue={self.queue}" if self.queue else ""
        return f"<Subscription {self.subject}{q} sid={self.sid}>"
