"""server/core/malloc.py: the standalone server fixes glibc's mmap and trim thresholds at start."""
from __future__ import annotations

import platform

import pytest


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt's thresholds are glibc's")
def test_malloc_thresholds_are_fixed_on_glibc():
    # server/core/malloc.py: the runner fixes glibc's mmap and trim thresholds (the bench's core.pub rows measured
    # the difference); mallopt answers 1 for each value it took.
    from skiff.server.core import malloc

    assert malloc.tune() is True
