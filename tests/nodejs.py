"""The Node.js side of the tests that run nats.js: its pinned npm packages installed once, outside the tree.

``node_package(src, "a.mjs", ...)`` installs ``src/package.json`` with npm into a cache directory under the
temporary directory named by the hash of that file (so a new pin gets a new directory, and each version is installed
once per machine), copies the scripts beside its ``node_modules`` and returns the directory: run the scripts from
there (``node DIR/a.mjs``, ``cwd=DIR``).  It skips the test, saying why, when Node or npm is missing or the install
fails (no registry).  The tests that share a cache directory run on one pytest-xdist worker (the "nats-js" group of
tests/conftest.py), so that two installs never fill one directory at once.
"""
from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

CACHE = Path(tempfile.gettempdir()) / "skiff-nats-js"


def _installed(cache: Path, pkg: bytes) -> bool:
    deps = json.loads(pkg).get("dependencies", {})
    return all((cache / "node_modules" / name / "package.json").is_file() for name in deps)


def node_package(src: Path, *scripts: str) -> Path:
    """The cache directory with the packages of ``src/package.json`` installed and ``scripts`` (from ``src``)."""
    if not shutil.which("node") or not shutil.which("npm"):
        pytest.skip("node and npm are needed for the nats.js tests")
    pkg = (src / "package.json").read_bytes()
    cache = CACHE / hashlib.sha256(pkg).hexdigest()[:16]
    if not _installed(cache, pkg):
        cache.mkdir(parents=True, exist_ok=True)
        (cache / "package.json").write_bytes(pkg)
        p = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--loglevel=error"], cwd=cache,
                           capture_output=True, text=True, timeout=300)
        if p.returncode != 0 or not _installed(cache, pkg):
            pytest.skip(f"npm install of the nats.js packages failed: {p.stderr.strip()[-300:]}")
    for script in scripts:
        shutil.copy(src / script, cache / script)
    return cache
