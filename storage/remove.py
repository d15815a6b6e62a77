"""Removing files without stalling the event loop.

Theory of operation
-------------------
One ``unlink`` can block for hundreds of milliseconds when other processes keep the file system journal busy with
fsyncs (measured: a 670 ms probe stall with a stream's removal sliced on the loop), and a purge of a million
messages or the deletion of a stream with 1,000 consumers is dozens to thousands of them.  So the unlinks run in a
daemon thread.  Not a plain ``shutil.rmtree`` thread: that runs Python code between its syscalls and takes the GIL
back at once after each, so every GIL hand-back of the loop thread waits for the switch interval (the convoy
effect; measured: 95 ms probe stalls).  Sleeping :data:`REMOVE_PAUSE` after each step leaves the GIL to the loop;
1,000 consumer directories still go in about a second.

Callers make removal safe to interrupt: a stream is renamed aside before its tree is removed (what a crash leaves
is removed at the next start), and a block file is unlinked only after the state that no longer names it was
written, so a ``kill -9`` before the thread is done leaves files that recovery ignores or removes.
"""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Callable, Iterable, Iterator

REMOVE_PAUSE = 0.0002  # seconds a removal thread sleeps after each unlink/rmdir


def _run(steps: Iterator[None], done: Callable[[], None] | None, name: str) -> threading.Thread:
    def run() -> None:
        try:
            for _ in steps:
                time.sleep(REMOVE_PAUSE)
        finally:
            if done is not None:
                done()

    t = threading.Thread(target=run, name=name, daemon=True)
    t.start()
    return t


def remove_tree_in_background(path: Path) -> threading.Thread:
    """Remove a directory tree (set aside by its owner) in a daemon thread."""
    return _run(_tree_steps(path), None, "skiff-remove")


def unlink_in_background(paths: Iterable[str], done: Callable[[], None] | None = None) -> threading.Thread:
    """Unlink ``paths`` in a daemon thread (missing ones are skipped); then call ``done`` in that thread."""
    return _run(_unlink_steps(list(paths)), done, "skiff-unlink")


def unlink_quietly(path: str, on_error: Callable[[str, OSError], None] | None = None) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as e:
        if on_error is not None:
            on_error(path, e)


def _unlink_steps(paths: list[str]) -> Iterator[None]:
    for p in paths:
        unlink_quietly(p)
        yield


def _tree_steps(path: Path) -> Iterator[None]:
    """Remove a directory tree bottom-up, one step (unlink or rmdir) per ``next``; errors skip the entry."""
    for dirpath, dirnames, filenames in os.walk(path, topdown=False):
        for name in filenames:
            try:
                os.unlink(os.path.join(dirpath, name))
            except OSError:
                pass
            yield
        for name in dirnames:
            p = os.path.join(dirpath, name)
            try:
                if os.path.islink(p):
                    os.unlink(p)
                else:
                    os.rmdir(p)
            except OSError:
                pass
            yield
    try:
        os.rmdir(path)
    except OSError:
        import shutil  # imported when used: shutil brings bz2 and lzma, ~5 ms of every start

        shutil.rmtree(path, ignore_errors=True)  # something appeared meanwhile (a late state write)
