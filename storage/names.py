"""The backstop check of a name that becomes a directory: its own module so that the store's layout can be loaded
without the file store (a start with an empty store needs neither; issue #13's start-up time)."""
from __future__ import annotations

from skiff.storage.errors import InvalidPathError


def check_name(name: str, what: str = "name") -> str:
    """Refuse names that would leave their directory (the server validates names first; this is a backstop)."""
    if not name or name in (".", "..") or any(c in name for c in "/\\\x00") or name != name.strip():
        raise InvalidPathError(f"invalid {what} {name!r}")
    return name
