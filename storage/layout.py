"""Where stores live on disk: ``<store_dir>/jetstream/<account>/streams/<stream>/`` as in nats-server.

``StoreRoot`` turns names into directories (refusing names that would escape the store directory, even
though the server validates names first), lists the streams found at startup and opens them.  Reading a
stream's metadata may raise ``CorruptMetadataError``; ``load_stream_metas`` collects those per stream instead,
so one bad stream never stops the server from starting.  Nothing here deletes a directory the server could not
read: ``set_aside`` moves one to ``<store_dir>/jetstream/<account>/lost+found/`` instead.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skiff.log import get_logger

from skiff.storage import meta
from skiff.storage.config import StoreConfig
from skiff.storage.errors import InvalidPathError
from skiff.storage.names import check_name

if TYPE_CHECKING:  # storage/base.py (the store ABCs) loads with the first store, not at start (issue #13)
    from skiff.storage.base import Clock
    from skiff.storage.filestore.store import FileStreamStore

log = get_logger("skiff.storage")

JETSTREAM_DIR = "jetstream"
STREAMS_DIR = "streams"  # nats-server streamsDir
ASIDE_DIR = "lost+found"  # not a stream directory: never listed by list_streams
GLOBAL_ACCOUNT = "$G"


class StoreRoot:
    def __init__(self, store_dir: str | os.PathLike, account: str = GLOBAL_ACCOUNT) -> None:
        self.store_dir = Path(store_dir).resolve()
        self.account = check_name(account, "account name")
        self.streams_dir = self.store_dir / JETSTREAM_DIR / account / STREAMS_DIR

    def stream_dir(self, name: str) -> Path:
        check_name(name, "stream name")
        d = self.streams_dir / name
        if os.path.commonpath([self.store_dir, d.resolve()]) != str(self.store_dir):
            raise InvalidPathError(f"stream name {name!r} escapes the store directory")
        return d

    def list_streams(self) -> list[str]:
        try:
            return sorted(e.name for e in os.scandir(self.streams_dir) if e.is_dir())
        except FileNotFoundError:
            return []

    def open_stream(self, name: str, config: StoreConfig | None = None, clock: Clock | None = None,
                    **kw: Any) -> FileStreamStore:
        # Loaded with the first file stream: a start with an empty store never needs the file store.
        from skiff.storage.filestore.store import FileStreamStore

        return FileStreamStore(self.stream_dir(name), config, clock, **kw)

    def write_stream_meta(self, name: str, obj: Any) -> None:
        d = self.stream_dir(name)
        d.mkdir(parents=True, exist_ok=True)
        meta.write_meta(d / meta.META_FILE, obj)

    def read_stream_meta(self, name: str) -> Any:
        """The stream's metadata; FileNotFoundError / CorruptMetadataError."""
        return meta.read_meta(self.stream_dir(name) / meta.META_FILE)

    def load_stream_metas(self) -> tuple[dict[str, Any], dict[str, str]]:
        """(metadata by stream, error text by stream) for every stream directory; logs each error."""
        ok: dict[str, Any] = {}
        bad: dict[str, str] = {}
        for name in self.list_streams():
            try:
                ok[name] = self.read_stream_meta(name)
            except Exception as e:
                bad[name] = str(e)
                log.error("stream metadata unreadable, stream not loaded", stream=name, error=str(e))
        return ok, bad

    def set_aside(self, name: str) -> Path:
        """Move a stream directory out of ``streams/`` (to ``lost+found/<name>.<n>``) without deleting anything."""
        src = self.stream_dir(name)
        aside = self.store_dir / JETSTREAM_DIR / self.account / ASIDE_DIR
        aside.mkdir(parents=True, exist_ok=True)
        n = 1
        while (aside / f"{name}.{n}").exists():
            n += 1
        dst = aside / f"{name}.{n}"
        os.replace(src, dst)
        meta.fsync_dir(self.streams_dir)
        log.error("stream directory set aside", stream=name, moved_to=str(dst))
        return dst

    def delete_stream(self, name: str) -> None:
        import shutil  # imported when used: shutil brings bz2 and lzma, ~5 ms of every start

        shutil.rmtree(self.stream_dir(name), ignore_errors=True)
