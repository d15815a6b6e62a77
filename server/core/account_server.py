"""The server as one account's JetStream sees it (nats-server runs a JetStream per account).

A JetStream engine talks to "its server": it publishes advisories, replies and deliveries, subscribes to API,
ack and stream subjects, and follows interest on deliver subjects.  For the first JetStream account that is the
:class:`~server.core.server.Server` itself; for every further account it is an :class:`AccountServer`, which
does the same in that account's subject space and hands everything else to the server.  The engine code is the
same either way.
"""
from __future__ import annotations

from typing import Any, Callable


class AccountServer:
    is_account_view = True  # the API router registers the "not enabled" answers once, from the real server

    def __init__(self, server: Any, account: Any) -> None:
        self._server = server
        self.js_account = account
        self.sublist = account.sublist
        self.jetstream = None  # set by Server.start to this account's engine

    def __getattr__(self, name: str) -> Any:
        return getattr(self._server, name)

    def publish(self, subject: str, data: bytes = b"", reply: str = "", hdr: bytes = b"") -> bool:
        return self._server.route(None, subject, reply, len(hdr), hdr + data if hdr else data,
                                  sublist=self.sublist)

    def route(self, origin: Any, subject: str, reply: str, hdr_len: int, data: bytes,
              msg_subject: str | None = None, sublist: Any = None) -> bool:
        if sublist is None and origin is None:
            sublist = self.sublist
        return self._server.route(origin, subject, reply, hdr_len, data, msg_subject, sublist)

    def subscribe_internal(self, subject: str, callback: Callable, queue: str = "", server_msgs: bool = False,
                           account: Any = None, msg_subject: bool = False):
        return self._server.subscribe_internal(subject, callback, queue, server_msgs, account or self.js_account,
                                               msg_subject)

    def watch_interest(self, subject: str, cb: Callable[[str, bool], None]) -> Callable[[], None]:
        return self._server.watch_interest(subject, cb, sublist=self.sublist)
