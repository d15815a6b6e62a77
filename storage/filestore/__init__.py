"""File-backed stream store: block format (block.py), per-block index (index.py), recovery (recovery.py),
compaction (compact.py), the store (store.py)."""
from skiff.storage.filestore.store import FileStreamStore

__all__ = ["FileStreamStore"]
