"""Per-user publish/subscribe permissions (nats-server client.go setPermissions, pubAllowedFullCheck,
canSubscribeInternal, checkDenySub, responseAllowed).

Publish: a subject may be published when it matches an ``allow`` pattern (or there is no allow list) and no
``deny`` pattern.  Results are cached per subject as nats-server's ``pcache`` does.

Subscribe: entries may name a queue group after the subject (``"foo.> q"``, nats-server splitSubjectQueue).  The
subject of a SUB is matched against the entries as nats-server's permission Sublist matches it, token by token with
the SUB's own wildcards taken literally, so ``foo.*`` matches the entries ``foo.*``, ``foo.>`` and ``>``.
A SUB is allowed when a plain allow entry matches, or, for a queue SUB, when allow entries scoped to a queue match
and one names its queue (queue names may be wildcards: ``v1.*``); it is then refused when a plain deny entry
matches, or a queue-scoped deny entry matching the subject names its queue.  A wider subscription that merely
overlaps a deny (``>`` with ``no.>`` denied) is accepted; messages on denied subjects are filtered out when they are
delivered (``deliver_denied``), and a queue member whose delivery is denied is passed over for another member.

``allow_responses`` (ResponsePermission): a client may publish to the reply subject of a message it received, up to
``max_msgs`` times within ``expires`` seconds, even where its publish allow list says no.  The per-connection table
of such replies lives on the connection (``ClientConnection.replies``); this class holds the shared rules.
"""
from __future__ import annotations

from skiff.protocol.subjects import subject_matches

_CACHE_MAX = 1024
# nats-server replyPermLimit: prune expired response permissions once this many replies were recorded.
REPLY_PRUNE_LIMIT = 4096


class Permissions:
    __slots__ = ("pub_allow", "pub_deny", "sub_allow", "sub_deny", "resp_max", "resp_expires", "_pub_cache",
                 "_deny_cache")

    def __init__(self, perms) -> None:
        pub = _get(perms, "publish")
        sub = _get(perms, "subscribe")
        allow = _list(pub, "allow")
        self.pub_allow = None if allow is None else tuple(_split(e)[0] for e in allow)
        self.pub_deny = tuple(_split(e)[0] for e in _list(pub, "deny") or ())
        allow = _list(sub, "allow")
        self.sub_allow = None if allow is None else tuple(_split(e) for e in allow)
        self.sub_deny = tuple(_split(e) for e in _list(sub, "deny") or ())
        resp = _get(perms, "allow_responses")
        self.resp_max = int(_get(resp, "max_msgs") or 0) if resp is not None else None
        self.resp_expires = float(_get(resp, "expires") or 0) if resp is not None else 0.0
        self._pub_cache: dict[str, bool] = {}
        self._deny_cache: dict[tuple[str, str], bool] = {}

    @property
    def tracks_responses(self) -> bool:
        return self.resp_max is not None

    def can_publish(self, subject: str) -> bool:
        hit = self._pub_cache.get(subject)
        if hit is None:
            hit = (self.pub_allow is None or any(subject_matches(p, subject) for p in self.pub_allow)) and not any(
                subject_matches(p, subject) for p in self.pub_deny
            )
            if len(self._pub_cache) >= _CACHE_MAX:
                self._pub_cache.clear()
            self._pub_cache[subject] = hit
        return hit

    def can_subscribe(self, subject: str, queue: str = "") -> bool:
        allowed = True
        if self.sub_allow is not None:
            allowed, qnames = _match(self.sub_allow, subject)
            if queue and qnames:
                allowed = _queue_matches(queue, qnames)
        if allowed and self.sub_deny:
            denied, qnames = _match(self.sub_deny, subject)
            allowed = not denied
            if allowed and queue and qnames:
                allowed = not _queue_matches(queue, qnames)
        return allowed

    def deliver_denied(self, subject: str, queue: str = "") -> bool:
        """Is a message on ``subject`` kept from a subscription (of ``queue``) by a subscribe deny?"""
        key = (subject, queue)
        hit = self._deny_cache.get(key)
        if hit is None:
            hit, qnames = _match(self.sub_deny, subject)
            if not hit and queue and qnames:
                hit = _queue_matches(queue, qnames)
            if len(self._deny_cache) >= _CACHE_MAX:
                self._deny_cache.clear()
            self._deny_cache[key] = hit
        return hit

    def response_allowed(self, replies: dict[str, list], subject: str, now: float) -> bool:
        """May ``subject`` be published as a response?  ``replies`` maps a received reply subject to
        ``[received_at, responses_sent]`` (nats-server responseAllowed: the entry goes once used up or expired)."""
        entry = replies.get(subject)
        if entry is None:
            return False
        entry[1] += 1
        if (self.resp_max and entry[1] > self.resp_max) or (
                self.resp_expires and now - entry[0] > self.resp_expires):
            del replies[subject]
            return False
        return True

    def prune_responses(self, replies: dict[str, list], now: float) -> None:
        """nats-server pruneReplyPerms: drop used-up and expired entries."""
        for subject, (t, n) in list(replies.items()):
            if (self.resp_max and n >= self.resp_max) or (self.resp_expires and now - t > self.resp_expires):
                del replies[subject]


def _match(entries: tuple[tuple[str, str], ...], subject: str) -> tuple[bool, list[str]]:
    """(a plain entry matches, the queue names of matching queue-scoped entries)."""
    plain = False
    qnames: list[str] = []
    for pattern, queue in entries:
        if subject_matches(pattern, subject):
            if queue:
                qnames.append(queue)
            else:
                plain = True
    return plain, qnames


def _queue_matches(queue: str, qnames: list[str]) -> bool:
    # nats-server queueMatches: a literal name first ('*' and '>' are valid queue names), then as a pattern.
    for q in qnames:
        if queue == q or (("*" in q or ">" in q) and subject_matches(q, queue)):
            return True
    return False


def _split(entry: str) -> tuple[str, str]:
    """``"subject [queue]"`` -> (subject, queue) (nats-server splitSubjectQueue)."""
    parts = entry.split()
    if len(parts) == 2:
        return parts[0], parts[1]
    return entry.strip(), ""


def _get(obj, key: str):
    if obj is None:
        return None
    return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)


def _list(perm, key: str):
    v = _get(perm, key)
    if v is None:
        return None
    return tuple([v] if isinstance(v, str) else v)
