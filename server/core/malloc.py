"""glibc malloc's thresholds for a running server: fixed, so that a socket read never costs an mmap.

Every read of a client socket becomes a ``bytes`` object of up to 256 KiB (uvloop's read buffer), freed once parsed.
glibc serves a block over ``M_MMAP_THRESHOLD`` (128 KiB at first) with mmap, and gives the heap's free top back
over ``M_TRIM_THRESHOLD``; both thresholds then move with the blocks the process happens to free (glibc's dynamic
threshold).  Where they end up depended on what start-up freed: the same checkout published 1,024-byte messages at
780k msg/s when its bytecode was cached and at 1.16M msg/s when the modules were compiled at start (which frees large
blocks and so raised the thresholds), 16 KiB messages at 59k against 84k.  Fixed at 1 MiB (mmap) and 4 MiB (trim),
every start gets the fast case: a read's block is reused from the heap instead of being mapped, faulted in and
unmapped again (bench ``core.pub.*``, the figures in the commit that added this module).

Standalone server only (the runner calls :func:`tune`); an embedded server leaves the host process's allocator alone,
as it leaves its garbage collector (gcpolicy.py).
"""
from __future__ import annotations

import sys

M_TRIM_THRESHOLD = -1  # glibc malloc.h
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 1 << 20
TRIM_THRESHOLD = 4 << 20


def tune() -> bool:
    """Fix the thresholds; False where there is no glibc (musl, macOS) and nothing was changed."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes  # ~2 ms, after the listener is up; only here

    try:
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # no mallopt in this C library
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
