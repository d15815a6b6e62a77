"""The subject index (nats-server sublist.go): subscriptions by subject, with wildcards and a match cache.

A trie with one level per token; each node keeps its plain subscriptions, its queue subscriptions by group name,
and children for literal tokens, ``*`` and ``>``.  ``match(subject)`` returns ``(plain, queues)`` where ``queues``
is a list of member lists, one per queue group.  Results are cached per literal subject; an insert or remove of a
literal subscription drops only its own subject's entry, so adding a reply inbox does not flush the cache of a busy
publisher.  A wildcard insert or remove empties the whole cache: nats-server walks its (1,024-entry) cache and
matches every key instead, but here that walk cost milliseconds per SUB/UNSUB and one connection churning wildcard
subscriptions starved every other client for seconds.  Emptying is O(1) amortized (each entry
freed was made by one miss), and the next publish per subject pays one trie walk.

Subjects unique per message (``$JS.ACK.`` ack replies, ``_INBOX.`` reply inboxes) are not cached by subject, but
nearly always match the same subscriptions as every other subject of their family: an ack matches the consumers'
``$JS.ACK.>`` and whatever a client has on ``$JS.>`` or ``>``; an inbox reply the requester's ``_INBOX.<id>.*``.
When no subscription looks at a token beyond the family's prefix (``$JS.ACK.<stream>.<consumer>.``,
``_INBOX.<id>.``) - every node a match can reach at the prefix's depth has no literal child and no ``*`` -, the
result depends on the prefix alone, and ``pcache`` keeps it under the prefix until a subscription that could match
such a subject comes or goes.  An inbox reply with one token after the prefix is kept apart (the prefix without its
dot), allowed a ``*`` at that depth: the ``_INBOX.<id>.*`` every client's request multiplexer subscribes, which kept
every PubAck and Direct Get reply out of the prefix cache before (a full walk per ack, ~30% of Skiff's CPU in an
async JetStream publish, profiled).  Every ack went through a full match before (~20% of a push consumer's ack path,
profiled); nats-server caches those subjects one by one instead.

``ack_only`` goes one step further for acks, the one message a push consumer's client sends per delivery: when the
only subscription any ``$JS.ACK.<a>.<b>...`` subject can match is one internal ``$JS.ACK.>`` (the engine's, or an
import's forwarder: no ``>`` or ``*`` at the root, none under ``$JS.``, nothing under ``$JS.ACK.`` but its ``>``, no
queue group), the router hands an ack without an empty token straight to that subscription, without a match
(Fanout.route).  None means not known yet: any insert or remove that could change the answer resets it, and the
next ack computes it again.

Members of a node are dicts used as ordered sets (nats-server keeps maps too), so an UNSUB is O(1) however many
subscriptions share a subject or queue group; match() returns fresh lists.
"""
from __future__ import annotations

from skiff.protocol.jsapi.subjects import ACK_PRE

from ..core.subscription import Subscription

CACHE_MAX = 4096
# Subjects that are unique per message (JetStream ack replies carry sequences and a timestamp; clients' reply inboxes,
# to which every PubAck, Direct Get answer and response goes, carry a token per request): caching them would only
# evict the entries that do repeat (measured: 90k KV gets made 116k misses, 26k of them evicted request subjects).
_UNCACHED = (ACK_PRE, "_INBOX.")
_EMPTY: tuple[list, list] = ([], [])
_ACK_LEN = len(ACK_PRE)
_INBOX_LEN = len("_INBOX.")
# The subscriptions that may match a subject of those families (over-approximated: "*" and ">" as first tokens, any
# "$JS." or "_INBOX." one); inserting or removing one empties pcache.
_PCACHE_AFFECTED = ("$JS.", "_INBOX.", "*", ">")


# Shared by every node until it gets a child, a plain subscription or a queue group (copy on first write): a stream
# with 5,000 subjects makes 10,000 nodes, and three dicts each kept the cyclic collector busy for tens of ms.
# Never written to.
_NONE: dict = {}


class _Node:
    __slots__ = ("children", "pwc", "fwc", "plain", "queues")

    def __init__(self) -> None:
        self.children: dict[str, _Node] = _NONE
        self.pwc: _Node | None = None
        self.fwc: _Node | None = None
        self.plain: dict[Subscription, None] = _NONE
        self.queues: dict[str, dict[Subscription, None]] = _NONE

    def empty(self) -> bool:
        return not (self.children or self.pwc or self.fwc or self.plain or self.queues)


class Sublist:
    __slots__ = ("_root", "cache", "pcache", "ack_only", "count", "inserts", "removes", "hits", "misses")

    def __init__(self) -> None:
        self._root = _Node()
        self.cache: dict[str, tuple[list, list]] = {}
        self.pcache: dict[str, tuple[list, list]] = {}  # by family prefix (see the module's docstring)
        # The only subscription every ack subject matches, False when there is none such, None: not known yet
        self.ack_only: Subscription | bool | None = None
        self.count = 0
        # Matches answered from the cache (``hits``) and by walking the tree (``misses``): /subsz num_matches and
        # cache_hit_rate (sublist.go matches, cacheHits).  Server.route reads the cache itself and counts its hits.
        self.inserts = self.removes = self.hits = self.misses = 0

    def insert(self, sub: Subscription) -> None:
        node = self._root
        for tok in sub.subject.split("."):
            if tok == "*":
                if node.pwc is None:
                    node.pwc = _Node()
                node = node.pwc
            elif tok == ">":
                if node.fwc is None:
                    node.fwc = _Node()
                node = node.fwc
            else:
                nxt = node.children.get(tok)
                if nxt is None:
                    if node.children is _NONE:
                        node.children = {}
                    nxt = node.children[tok] = _Node()
                node = nxt
        if sub.queue:
            members = node.queues.get(sub.queue)
            if members is None:
                if node.queues is _NONE:
                    node.queues = {}
                members = node.queues[sub.queue] = {}
            members[sub] = None
        else:
            if node.plain is _NONE:
                node.plain = {}
            node.plain[sub] = None
        self.count += 1
        self.inserts += 1
        self._invalidate(sub.subject)

    def remove(self, sub: Subscription) -> bool:
        path: list[tuple[_Node, str]] = []
        node = self._root
        for tok in sub.subject.split("."):
            path.append((node, tok))
            nxt = node.pwc if tok == "*" else node.fwc if tok == ">" else node.children.get(tok)
            if nxt is None:
                return False
            node = nxt
        if sub.queue:
            members = node.queues.get(sub.queue)
            if not members or sub not in members:
                return False
            del members[sub]
            if not members:
                del node.queues[sub.queue]
        else:
            if sub not in node.plain:
                return False
            del node.plain[sub]
        # Prune empty nodes so long-running servers with churning inboxes do not grow.
        for parent, tok in reversed(path):
            if not node.empty():
                break
            if tok == "*":
                parent.pwc = None
            elif tok == ">":
                parent.fwc = None
            else:
                del parent.children[tok]
            node = parent
        self.count -= 1
        self.removes += 1
        self._invalidate(sub.subject)
        return True

    def _invalidate(self, subject: str) -> None:
        if subject.startswith(_PCACHE_AFFECTED):
            if self.pcache:
                self.pcache = {}
            self.ack_only = None
        cache = self.cache
        if not cache:
            return
        if "*" not in subject and ">" not in subject:
            cache.pop(subject, None)
            return
        # In place: the server's hot path holds this very dict.
        cache.clear()

    def match(self, subject: str) -> tuple[list[Subscription], list[list[Subscription]]]:
        """Subscriptions interested in literal ``subject``: (plain subs, [members of each queue group])."""
        prefix = None
        if not subject.startswith(_UNCACHED):  # those subjects never enter ``cache``: no lookup for them
            hit = self.cache.get(subject)
            if hit is not None:
                self.hits += 1
                return hit
        else:
            # The family prefix: "$JS.ACK.<stream>.<consumer>." or "_INBOX.<id>.", of a subject with more tokens
            # than that and no empty one (which matches nothing: the long way finds that).  An inbox reply of one
            # token after the prefix, the clients' request form ("_INBOX.<id>.<token>" to their "_INBOX.<id>.*":
            # nats-py, nats.c, nats.go), is kept under the prefix without its final dot: its match may also
            # depend on a "*" at the prefix's depth (that very subscription), which the dotted key excludes.
            one = False
            if subject[0] == "$":
                i = subject.find(".", _ACK_LEN)
                if i > 0:
                    i = subject.find(".", i + 1)
            else:
                i = subject.find(".", _INBOX_LEN)
                one = i > 0 and subject.find(".", i + 1) < 0
            if i > 0 and subject[-1] != "." and ".." not in subject:
                prefix = subject[:i] if one else subject[:i + 1]
                hit = self.pcache.get(prefix)
                if hit is not None:
                    self.hits += 1
                    return hit
        self.misses += 1
        tokens = subject.split(".")
        if "" in tokens:
            return _EMPTY  # nats-server matches nothing for a subject with an empty token ("foo..bar")
        plain: list[Subscription] = []
        qmap: dict[str, list[Subscription]] = {}
        _collect(self._root, tokens, 0, plain, qmap)
        result = (plain, list(qmap.values())) if (plain or qmap) else _EMPTY
        if subject.startswith(_UNCACHED):
            if prefix is not None and _flat_below(self._root, tokens, len(tokens) - 1 if one else prefix.count("."),
                                                  one):
                pcache = self.pcache
                if len(pcache) >= CACHE_MAX:
                    pcache.clear()
                pcache[prefix] = result
            return result
        cache = self.cache
        if len(cache) >= CACHE_MAX:
            # Drop an arbitrary quarter, as nats-server prunes its cache in bulk.
            for key in list(cache)[: CACHE_MAX // 4]:
                del cache[key]
        cache[subject] = result
        return result

    def find_ack_only(self) -> Subscription | bool:
        """Compute ``ack_only`` (see the module's docstring): the subscription a subject ``$JS.ACK.<a>.<b>...``
        without an empty token always matches, alone, or False."""
        root = self._root
        ack = False
        js = root.children.get("$JS")
        if root.fwc is None and root.pwc is None and js is not None and js.fwc is None and js.pwc is None:
            node = js.children.get("ACK")
            fwc = node.fwc if node is not None else None
            if (fwc is not None and not node.children and node.pwc is None and not fwc.queues
                    and len(fwc.plain) == 1):
                sub = next(iter(fwc.plain))
                # an internal subscription that takes client messages as they are (Fanout.route's own case)
                if sub.conn is None and sub.route is None and not sub.msg_subject and sub.callback is not None:
                    ack = sub
        self.ack_only = ack
        return ack

    def has_interest(self, subject: str) -> bool:
        plain, queues = self.match(subject)
        return bool(plain or queues)

    def all_subscriptions(self) -> list[Subscription]:
        out: list[Subscription] = []
        stack = [self._root]
        while stack:
            n = stack.pop()
            out.extend(n.plain)
            for members in n.queues.values():
                out.extend(members)
            stack.extend(n.children.values())
            if n.pwc:
                stack.append(n.pwc)
            if n.fwc:
                stack.append(n.fwc)
        return out

    def stats(self) -> dict:
        """sublist.go Stats: the fan-out figures walk the cache (plain subscribers plus queue groups per entry);
        ``total_fanout``/``cache_entries`` let a sum over accounts average as SublistStats.add does."""
        matches = self.hits + self.misses
        tot = top = 0
        for plain, queues in self.cache.values():
            n = len(plain) + len(queues)
            tot += n
            if n > top:
                top = n
        return {
            "num_subscriptions": self.count,
            "num_cache": len(self.cache),
            "num_inserts": self.inserts,
            "num_removes": self.removes,
            "num_matches": matches,
            "cache_hit_rate": self.hits / matches if matches else 0.0,
            "max_fanout": top,
            "avg_fanout": tot / len(self.cache) if tot else 0.0,
            "total_fanout": tot,
            "cache_entries": len(self.cache),
            "cache_hits": self.hits,
        }


def _flat_below(root: _Node, tokens: list[str], k: int, one: bool = False) -> bool:
    """Whether a match of a subject with more than ``k`` tokens depends on its first ``k`` tokens alone: every node
    a match can reach at depth ``k`` (through literal children and ``*``) has no literal child and no ``*`` (its
    ``>`` takes any tail; _collect adds a node's own subscriptions only at the subject's last token).  With ``one``
    the subject has exactly ``k + 1`` tokens, so a ``*`` there matches whatever its last token is: only a literal
    child depends on it."""
    nodes = [root]
    for tok in tokens[:k]:
        nxt = []
        for n in nodes:
            if n.pwc is not None:
                nxt.append(n.pwc)
            c = n.children.get(tok)
            if c is not None:
                nxt.append(c)
        if not nxt:
            return True
        nodes = nxt
    if one:
        return all(not n.children for n in nodes)
    return all(not n.children and n.pwc is None for n in nodes)


def _collect(node: _Node, tokens: list[str], i: int, plain: list, qmap: dict) -> None:
    n = len(tokens)
    while True:
        if node.fwc is not None and i < n:
            _add(node.fwc, plain, qmap)
        if i == n:
            _add(node, plain, qmap)
            return
        if node.pwc is not None:
            _collect(node.pwc, tokens, i + 1, plain, qmap)
        nxt = node.children.get(tokens[i])
        if nxt is None:
            return
        node = nxt
        i += 1


def _add(node: _Node, plain: list, qmap: dict) -> None:
    if node.plain:
        plain.extend(node.plain)
    for name, members in node.queues.items():
        # nats-server merges queue members by group name across all matching nodes (addNodeToResults),
        # so `q` on `foo.*` and `q` on `foo.bar` form one group.
        qmap.setdefault(name, []).extend(members)
