"""Fixtures for the store tests: one factory that builds a memory or a file store with a driven clock."""
from __future__ import annotations

import pytest

from skiff.storage import FileStreamStore, MemoryStreamStore, StoreConfig


class FakeClock:
    """Nanosecond clock the test moves by hand."""

    def __init__(self, start: int = 1_700_000_000 * 10**9) -> None:
        self.now = start

    def __call__(self) -> int:
        return self.now

    def advance(self, ns: int) -> None:
        self.now += ns


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(params=["memory", "file"])
def kind(request) -> str:
    return request.param


@pytest.fixture
def make_store(kind, tmp_path, clock):
    """``make_store(**config)`` -> a store of the parametrized kind; ``reopen(store)`` restarts a file store."""
    made = []

    def make(**cfg):
        config = StoreConfig(**cfg)
        if kind == "memory":
            s = MemoryStreamStore(config, clock)
        else:
            s = FileStreamStore(tmp_path / "stream", config, clock)
        made.append(s)
        return s

    yield make
    for s in made:
        s.stop()


def reopen(store, clock=None):
    """Stop a file store and open it again from disk; memory stores are returned unchanged."""
    if isinstance(store, MemoryStreamStore):
        return store
    store.stop()
    return FileStreamStore(store.dir, store.config, clock or store._clock)
