"""What the pytest plugin's ``nats_server`` fixture costs a test: ``python -m bench.plugin [--tests N] [--runs N]``.

Issue #14 asks for under 5 ms to start and stop ``nats_server`` per test.  Two figures, medians over ``--runs``:

* ``fixture, in pytest``: a generated test file of N tests that each take ``nats_server`` and do nothing, against
  the same N tests without it, both run by pytest in a fresh process; (time with - time without) / N.  This is what
  a user's suite pays, with pytest's and pytest-asyncio's own fixture machinery included (the first server of a
  process also pays for importing Skiff, spread over the N tests);
* ``start + stop, in-process``: ``Server(port=0, jetstream=True)`` started and shut down in one loop, the work the
  fixture does, without pytest.

Both run the servers of this checkout (``PYTHONPATH`` is set to it), with JetStream on and a temporary store.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET_MS = 5.0


def _test_file(n: int, with_fixture: bool) -> str:
    arg = "nats_server" if with_fixture else ""
    body = "    assert nats_server.client_url\n" if with_fixture else "    pass\n"
    return "".join(f"async def test_{i}({arg}):\n{body}\n\n" for i in range(n))


def _pytest_seconds(path: Path) -> float:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "asyncio_mode=auto",
                           "-o", "asyncio_default_fixture_loop_scope=function", str(path)],
                          cwd=path.parent, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - t
    if proc.returncode != 0:
        raise SystemExit(f"pytest failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return elapsed


def fixture_in_pytest(n: int, runs: int) -> float:
    with tempfile.TemporaryDirectory() as d:
        with_f, without = Path(d) / "test_with.py", Path(d) / "test_without.py"
        with_f.write_text(_test_file(n, True))
        without.write_text(_test_file(n, False))
        per_test = []
        for _ in range(runs):  # alternating, so that load on the machine hits both alike
            a = _pytest_seconds(with_f)
            b = _pytest_seconds(without)
            per_test.append((a - b) / n)
        return statistics.median(per_test)


def start_stop_in_process(n: int) -> float:
    sys.path.insert(0, str(ROOT))
    from skiff.server.core.server import Server

    async def run() -> list[float]:
        out = []
        for _ in range(n + 5):
            t = time.perf_counter()
            server = Server(port=0, jetstream=True)
            await server.start()
            await server.shutdown()
            out.append(time.perf_counter() - t)
        return out[5:]  # the first starts import and warm up

    return statistics.median(asyncio.run(run()))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.plugin", description=__doc__.splitlines()[0])
    p.add_argument("--tests", type=int, default=200, help="tests per generated file (default 200)")
    p.add_argument("--runs", type=int, default=3, help="alternating pytest runs of each file (default 3)")
    a = p.parse_args(argv)
    import logging

    logging.disable(logging.CRITICAL)
    fixture = fixture_in_pytest(a.tests, a.runs) * 1000
    inproc = start_stop_in_process(a.tests) * 1000
    print(f"{'figure':<34}{'ms per test':>12}  target")
    print(f"{'nats_server fixture, in pytest':<34}{fixture:>12.2f}  < {TARGET_MS:g} ms  {'met' if fixture < TARGET_MS else 'NOT met'}")
    print(f"{'start + stop, in-process':<34}{inproc:>12.2f}")
    print(f"({a.tests} tests per file, median of {a.runs} alternating runs; load average "
          f"{os.getloadavg()[0]:.2f})")


if __name__ == "__main__":
    main()
