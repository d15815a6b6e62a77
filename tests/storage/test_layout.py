"""Metadata files (atomic, checksummed msgpack) and the store directory layout."""
from __future__ import annotations

import os

import pytest

from skiff.storage import CorruptMetadataError, InvalidPathError, StoreConfig, StoreRoot
from skiff.storage.meta import read_meta, write_meta
from tests.harness import parse_python


def test_meta_roundtrip_and_atomic_replace(tmp_path):
    p = tmp_path / "meta.inf"
    write_meta(p, {"name": "S", "subjects": ["a.>"], "max_age": 10**9})
    write_meta(p, {"name": "S", "subjects": ["b.>"]})
    assert read_meta(p) == {"name": "S", "subjects": ["b.>"]}
    assert os.listdir(tmp_path) == ["meta.inf"]  # no temp file left behind


@pytest.mark.parametrize("damage", ["flip", "truncate", "empty", "garbage"])
def test_meta_corruption_is_detected(tmp_path, damage):
    p = tmp_path / "meta.inf"
    write_meta(p, {"name": "S", "subjects": ["a", "b", "c"]})
    raw = bytearray(p.read_bytes())
    if damage == "flip":
        raw[-3] ^= 1
    elif damage == "truncate":
        raw = raw[:-4]
    elif damage == "empty":
        raw = bytearray()
    else:
        raw = bytearray(b"{not msgpack at all")
    p.write_bytes(raw)
    with pytest.raises(CorruptMetadataError):
        read_meta(p)


def test_store_root_layout(tmp_path):
    root = StoreRoot(tmp_path)
    assert root.stream_dir("ORDERS") == tmp_path.resolve() / "jetstream" / "$G" / "streams" / "ORDERS"
    for bad in ["", ".", "..", "a/b", "../../etc", "x\\y", "a\x00b"]:
        with pytest.raises(InvalidPathError):
            root.stream_dir(bad)
    with pytest.raises(InvalidPathError):
        StoreRoot(tmp_path, account="../oops")


def test_store_root_survives_a_corrupt_stream_meta(tmp_path):
    root = StoreRoot(tmp_path)
    for name in ("A", "B", "C"):
        s = root.open_stream(name, StoreConfig())
        s.store_msg("x", b"", name.encode())
        s.write_meta({"name": name})
        s.stop()
    (root.stream_dir("B") / "meta.inf").write_bytes(b"SKM1junk")
    assert root.list_streams() == ["A", "B", "C"]
    ok, bad = root.load_stream_metas()
    assert ok == {"A": {"name": "A"}, "C": {"name": "C"}}
    assert set(bad) == {"B"} and "corrupt metadata" in bad["B"]
    # The stream's messages are untouched; the server decides what to do with it.
    s = root.open_stream("B", StoreConfig())
    assert s.load_msg(1).data == b"B"
    s.stop()
    root.delete_stream("B")
    assert root.list_streams() == ["A", "C"]


def test_storage_never_imports_the_server_or_asyncio():
    """DESIGN.md: imports point one way (server -> storage) and state changes never await."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "storage"
    for path in root.rglob("*.py"):
        tree = parse_python(path.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for n in names:
                top = n.split(".")[0]
                assert top not in ("server", "asyncio", "spark"), f"{path.name} imports {n}"
            assert not isinstance(node, (ast.AsyncFunctionDef, ast.Await)), f"{path.name} has async code"


def test_set_aside_moves_a_stream_directory_without_deleting(tmp_path):
    """A stream directory the server cannot account for is moved to lost+found, never deleted (issue #15, 3)."""
    root = StoreRoot(tmp_path)
    for n in range(2):
        root.write_stream_meta("S", {"n": n})
        s = root.open_stream("S", StoreConfig())
        s.store_msg("a", b"", b"keep %d" % n)
        s.stop()
        dst = root.set_aside("S")
        assert dst.name == f"S.{n + 1}"
        assert dst.parent == tmp_path / "jetstream" / "$G" / "lost+found"
        assert read_meta(dst / "meta.inf") == {"n": n}
        assert any(p.suffix == ".blk" for p in (dst / "msgs").iterdir())
    assert root.list_streams() == []
