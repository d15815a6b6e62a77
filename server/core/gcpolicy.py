"""The garbage collector's settings for a running server (no event-loop stall over 50 ms).

Theory of operation
-------------------
CPython (3.11) collects in three generations and stops the whole process for a pass over every object of the
generations it collects.  Skiff's heap is mostly long-lived: modules, configuration, recovered stores, and about 18
tracked objects per consumer (10,000 consumers: 180,000 objects).  Cyclic garbage is rare: closed connections,
stopped consumers (``Consumer._unlink_parts``) and stopped or deleted streams (``Stream._unlink_parts``)
are freed by reference counting, with the collector off (tests/server/test_memory.py,
tests/jetstream/test_consumer_memory.py, tests/jetstream/test_stream_memory.py).  Measured with a gc.callbacks probe in
the bench server while it created 10,000 consumers (bench scale.admin_stalls; none of these passes found garbage):

=========================================  ================================  ================================
pass                                       before (50,000 / 50 / 100)        this policy
=========================================  ================================  ================================
young, load 3                              8-33 ms, 4 passes                 (10,000 objects at most)
young, load 11                             79-150 ms, 4 passes               max 59 ms, 24 passes, 170 ms total
middle (forced, after the creations)       2,190 ms over 180,000 objects     22 ms over 8,900 objects
full (forced, after the creations)         700-880 ms over 180,000 objects   18 ms over 8,900 objects
=========================================  ================================  ================================

So the runner (``install``, once the server is up) does three things:

* Everything start-up and recovery allocated is frozen (``gc.freeze``: moved to the permanent generation, never
  traversed again).
* The youngest generation is collected every :data:`YOUNG` net allocations, a pass over at most that many objects
  (it was 50,000).  A middle pass follows 50 young ones, a full pass 500 middle ones: a full pass comes after as
  many allocations as before (250 million), the middle ones five times as often over a fifth of the objects.
* Bulk creations are frozen as well: once :data:`FREEZE_AFTER` consumers were created since the last freeze, the end
  of the next collector pass that found no cyclic garbage freezes what survived it.  The older generations then hold
  only what was allocated since, and their passes stay short however many consumers there are.

What a freeze keeps is never examined by the collector again: an object frozen and later left in a reference cycle
is never freed.  Consumers, connections and streams have none once stopped: a stream deleted after a freeze,
recovered at start-up or created since, is freed with its store and consumers.  A young pass that found cyclic
garbage postpones the freeze so that a workload making such garbage keeps the normal collector.

An embedded server (``skiff.testing``, tests) never calls ``install``: the collector of the host process is its own.
"""
from __future__ import annotations

import gc

#: Net allocations of tracked objects between two young passes (CPython's default is 700).
YOUNG = 10_000
#: Young passes per middle pass, middle passes per full pass.
OLDER = (50, 500)
#: Consumers created since the last freeze that make the next clean young pass freeze its survivors.
FREEZE_AFTER = 500


class GcPolicy:
    """``created``: long-lived objects (consumers) made since the last freeze; ``freezes``: freezes done since
    ``install``."""

    def __init__(self) -> None:
        self.created = 0
        self.freezes = 0
        self.installed = False

    def install(self) -> None:
        """The running server's settings (server/runner.py, once the server is up)."""
        gc.freeze()
        gc.set_threshold(YOUNG, *OLDER)
        if not self.installed:
            gc.callbacks.append(self._collected)
            self.installed = True
        self.created = 0
        gc.enable()  # python -m skiff.server starts with it off (server/__main__.py)

    def uninstall(self) -> None:
        if self.installed:
            gc.callbacks.remove(self._collected)
            self.installed = False

    def _collected(self, phase: str, info: dict) -> None:
        # Runs inside the collection that just ended (any allocation can trigger one): list moves only.
        if phase != "stop" or self.created < FREEZE_AFTER or info["collected"]:
            return
        self.created = 0
        self.freezes += 1
        gc.freeze()


POLICY = GcPolicy()


def created(n: int = 1) -> None:
    """``n`` long-lived objects were made (a consumer: server/jetstream/stream_consumers.py)."""
    POLICY.created += n
