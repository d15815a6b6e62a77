"""The optional compiled helpers of the hot path (protocol/_speedups.c), or None.

``speedups`` is the extension module when it was built (an install with a C compiler: setup.py declares it
optional) and the environment does not turn it off: ``SKIFF_PURE_PYTHON=1`` forces the pure-Python path, which is
always complete on its own and takes exactly the same inputs (docs/architecture.md, "The optional accelerator").
protocol/parser.py and protocol/encoder.py pick their implementation from it at import.
"""
from __future__ import annotations

import os

PURE_FORCED = os.environ.get("SKIFF_PURE_PYTHON", "") not in ("", "0")

if PURE_FORCED:
    speedups = None
else:
    try:
        from skiff.protocol import _speedups as speedups
    except ImportError:  # built without a compiler: the pure path
        speedups = None
