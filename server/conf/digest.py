"""nats-server's configuration digest: ``sha256:<hex>`` of the parsed file encoded as Go's encoding/json does.

nats-server logs it at start (``Using configuration file: x (sha256:...)``) and prints it for ``-t``; reproducing
it lets a person compare the two servers' view of one file.  Go's encoder sorts map keys, writes compact JSON,
escapes ``< > &`` and U+2028/U+2029, formats floats without a needless ``.0`` (all of it
:mod:`skiff.protocol.marshal`) and ends with a new line.
"""
from __future__ import annotations

from skiff.protocol.marshal import dumps


def config_digest(mapping: dict) -> str:
    import hashlib

    return "sha256:" + hashlib.sha256((dumps(mapping, sort_keys=True) + "\n").encode()).hexdigest()
