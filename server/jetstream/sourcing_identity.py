"""A source's view of its origin's stream identity (nats-server 2.15).

A stream's identity (``Nats-Stream-Identity``, a hash of its creation time; server/jetstream/api_consumers.py)
tells a source whether the origin it reads is still the stream it started reading, or one deleted and created
again under the same name.  The source keeps it as the sixth field of each ``Nats-Stream-Source`` header it writes
(genSourceHeader), reads it back from the newest such header on restart (startingSequenceForSources), sends it
with a consumer create at API level 5, and learns it from the create reply's header.  When the origin refuses ours
(10225, JSConsumerStreamIdentityMismatchF) or answers with another, the origin was recreated: the source takes it
again from its first message (trySetupSourceConsumer).  Mirrors do not use it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from skiff.protocol import headers
from skiff.protocol.jsapi.subjects import STREAM_IDENTITY_HDR

if TYPE_CHECKING:  # pragma: no cover
    from .sourcing import SourceInfo

RECREATED = "JetStream source stream was recreated, resetting source state"


def identity_headers(si: "SourceInfo", level: int) -> list[tuple[str, str]]:
    """What a consumer create at API ``level`` says of the origin's identity (level 5 and up)."""
    return [(STREAM_IDENTITY_HDR, si.ident)] if level >= 5 else []


def with_identity(source_header: str, si: "SourceInfo") -> str:
    """A ``Nats-Stream-Source`` value with the origin's identity as its sixth field, when known."""
    return source_header + (f" {si.ident}" if si.ident else "")


def identity_of(source_header_fields: list[str]) -> str:
    """The identity kept in a stored ``Nats-Stream-Source`` header ("" from a header written before 2.15)."""
    return source_header_fields[5] if len(source_header_fields) >= 6 else ""


class StreamIdentity:
    """The identity checks of :class:`Sourcing` (a mixin: it uses the sourcing's server, schedule and stream)."""

    def _origin_recreated(self, si: "SourceInfo") -> None:
        """The origin refused our identity (10225): start over from its beginning."""
        si.sseq = si.dseq = 0
        si.ident, si.rc = "", True
        self.server.log_warning(RECREATED, stream=self.stream.name, origin=si.name)
        self._cancel(si)
        self._schedule(si, 0)

    def _check_identity(self, si: "SourceInfo", hdr: bytes) -> None:
        """A source's create reply: an origin found recreated, or answering with another identity than the one we
        knew, is read from its start; either way its identity is now the reply's."""
        ident = headers.get_exact(hdr, STREAM_IDENTITY_HDR) or ""
        if si.rc or (ident and si.ident and si.ident != ident):
            self.server.log_warning(RECREATED, stream=self.stream.name, origin=si.name)
            si.sseq = 0
        si.ident, si.rc = ident, False
