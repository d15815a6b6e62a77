"""Compile the C load generators in bench/c/ into bench/bin/ (gitignored), once.

A program is rebuilt when its source or a shared header is newer than the binary.  The NATS C client comes
from the Debian package libnats-dev (pkg-config name ``libnats``); when pkg-config does not know it,
``bench/install-deps.sh`` is run once (apt-get, as root or with passwordless sudo) before giving up with a
:class:`BuildError` that says what is missing.
"""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE / "c"
BIN = HERE / "bin"
PROGRAMS = ("core", "rr", "js", "conns")
HEADERS = ("common.h", "raw.h")


class BuildError(RuntimeError):
    pass


def _pkg_flags() -> list[str] | None:
    if not shutil.which("pkg-config"):
        return None
    r = subprocess.run(["pkg-config", "--cflags", "--libs", "libnats"], capture_output=True, text=True)
    return r.stdout.split() if r.returncode == 0 else None


def _install_deps() -> None:
    script = HERE / "install-deps.sh"
    if script.exists():
        subprocess.run(["bash", str(script)], timeout=600, check=False)


def libnats_flags() -> list[str]:
    """gcc's flags for a program of the NATS C client, installing the client and gcc first when they are missing
    (also for tests/client/test_cclient.py).  Raises BuildError saying what is missing."""
    flags = _pkg_flags()
    if flags is None or not shutil.which("gcc"):
        _install_deps()
        flags = _pkg_flags()
    if flags is None:
        raise BuildError("the NATS C client is not installed (libnats-dev; run: bash bench/install-deps.sh)")
    if not shutil.which("gcc"):
        raise BuildError("gcc is not installed (run: bash bench/install-deps.sh)")
    return flags


def ensure_built(verbose: bool = False) -> dict[str, Path]:
    """Paths of the compiled programs, building what is stale.  Raises BuildError."""
    flags = libnats_flags()
    BIN.mkdir(exist_ok=True)
    newest_header = max((SRC / h).stat().st_mtime for h in HEADERS)
    out: dict[str, Path] = {}
    for name in PROGRAMS:
        src, exe = SRC / f"{name}.c", BIN / name
        if not exe.exists() or exe.stat().st_mtime < max(src.stat().st_mtime, newest_header):
            cmd = ["gcc", "-O2", "-std=gnu11", "-Wall", "-o", str(exe), str(src), *flags, "-lpthread", "-lm"]
            if verbose:
                print("  build:", " ".join(cmd))
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                raise BuildError(f"gcc failed for {src.name}:\n{r.stderr[-3000:]}")
        out[name] = exe
    return out
