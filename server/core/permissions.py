"""Per-user publish/subscribe permissions (nats-server client.go pubAllowed / canSubscribe / deliverMsg).

A subject may be published when it matches an ``allow`` pattern (or there is no allow list) and no ``deny``
pattern.  A subscription is accepted when its subject lies inside an allowed pattern and inside no denied one; a
wider subscription that merely overlaps a deny (``>`` with ``no.>`` denied) is accepted, and messages on denied
subjects are filtered out when they are delivered.  Results are cached per subject as nats-server does.
"""
from __future__ import annotations

from protocol.subjects import is_subset, subject_matches

_CACHE_MAX = 1024


class Permissions:
    __slots__ = ("pub_allow", "pub_deny", "sub_allow", "sub_deny", "_pub_cache")

    def __init__(self, perms) -> None:
        pub = getattr(perms, "publish", None)
        sub = getattr(perms, "subscribe", None)
        self.pub_allow = _list(pub, "allow")
        self.pub_deny = _list(pub, "deny") or ()
        self.sub_allow = _list(sub, "allow")
        self.sub_deny = _list(sub, "deny") or ()
        self._pub_cache: dict[str, bool] = {}

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

    def can_subscribe(self, subject: str) -> bool:
        if self.sub_allow is not None and not any(is_subset(subject, p) for p in self.sub_allow):
            return False
        return not any(is_subset(subject, p) for p in self.sub_deny)

    def deliver_denied(self, subject: str) -> bool:
        return any(subject_matches(p, subject) for p in self.sub_deny)


def _list(perm, key: str):
    if perm is None:
        return None
    v = getattr(perm, key, None) if not isinstance(perm, dict) else perm.get(key)
    if v is None:
        return None
    return tuple([v] if isinstance(v, str) else v)
