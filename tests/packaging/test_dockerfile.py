"""The Docker image builds from what the Dockerfile copies: every folder pyproject.toml's build needs (the build
backend's path and each package directory) and the files it reads are copied, and none is kept out by
.dockerignore.  (Building the image itself needs a Docker daemon, which CI does not have; this is the part of the
build that broke once: the build backend moved into spark/_packaging and the image had no copy of it.)"""
from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _copied() -> list[str]:
    out = []
    for line in (ROOT / "Dockerfile").read_text().splitlines():
        parts = line.split()
        if parts[:1] == ["COPY"]:
            out += [p.rstrip("/") for p in parts[1:-1] if not p.startswith("--")]
    return out


def _covered(path: str, copied: list[str]) -> bool:
    return any(path == c or path.startswith(c + "/") for c in copied)


def test_the_image_copies_what_the_build_needs():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    copied = _copied()
    # setup.py declares the optional C accelerator: without it the image would build the pure path even where a
    # compiler is (python:3.11-slim has none, so the image runs the pure path; the build warns and goes on)
    needed = ["pyproject.toml", "setup.py", meta["project"]["readme"]]
    needed += list(meta["build-system"].get("backend-path", []))
    needed += list(meta["tool"]["setuptools"]["package-dir"].values())
    missing = [p for p in needed if not _covered(p.rstrip("/"), copied)]
    assert not missing, f"the Dockerfile does not copy {missing}"
    ignored = [ln.strip().rstrip("/") for ln in (ROOT / ".dockerignore").read_text().splitlines()
               if ln.strip() and not ln.startswith("#")]
    kept_out = [p for p in needed if any(p == i or p.startswith(i + "/") for i in ignored)]
    assert not kept_out, f".dockerignore keeps out {kept_out}"
    for p in needed:
        assert (ROOT / p).exists(), p
