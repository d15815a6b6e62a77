"""Every command and code example in the README and in docs/ runs as printed, and CI runs them (the project's rule).

This test finds every fenced block tagged ``sh`` or ``python`` in README.md, docs/*.md, spark/README.md and
examples/README.md, and runs each as far as a test can:

- a ``python`` block must be a file CI runs: its text appears verbatim in a test module under tests/ or in a file of
  examples/ that a test module names (README's embedding example is examples/test_embedded.py, run by
  tests/server/test_readme_example.py), or a test module executes the blocks of its document as printed and says
  so with ``DOC_BLOCKS_RUN = [<document>]`` (spark/README.md: tests/spark/test_readme_block.py);
- a command that starts the server (``.venv/bin/skiff ...``, ``python -m skiff.server ...``) is run exactly as
  printed until the server says it is ready, then stopped with SIGTERM, which must exit 0;
- ``make`` lines: every target must exist and expand (``make -n``).  The README's two commands are what CI runs
  (``.ci/run`` is ``make test``); the benchmark and reliability targets run at smoke size in tests/bench/;
- ``python -m <module> ...`` of bench/ and the lab: the module's ``--help`` must list every flag the line uses and
  the campaign it names must exist, since their full runs take minutes to hours (smoke runs: tests/bench/).

Untagged blocks are diagrams and listings, not commands.
"""
from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "spark" / "README.md",
        ROOT / "examples" / "README.md"]
BLOCK = re.compile(r"^```(\w*)[ \t]*\n(.*?)^```", re.M | re.S)


def _blocks(lang: str) -> list[tuple[str, str]]:
    out = []
    for doc in DOCS:
        if not doc.exists():
            continue
        text = doc.read_text()
        for m in BLOCK.finditer(text):
            if m.group(1) == lang:
                line = text[:m.start()].count("\n") + 1
                out.append((f"{doc.relative_to(ROOT)}:{line}", m.group(2)))
    return out


def _commands() -> list[tuple[str, str]]:
    """(where, command) for every line of every sh block, comments dropped, continuations joined."""
    out = []
    for where, body in _blocks("sh"):
        joined = body.replace("\\\n", " ")
        for line in joined.splitlines():
            cmd = _strip_comment(line).strip()
            if cmd:
                out.append((where, cmd))
    return out


def _strip_comment(line: str) -> str:
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i]
    return line


def _runner_files() -> str:
    """The text of every test module: an example file counts as run by CI when one of them names it."""
    return "\n".join(p.read_text() for p in (ROOT / "tests").rglob("*.py"))


# ------------------------------------------------------------------------------------------------ python blocks

@pytest.mark.parametrize("where,body", _blocks("python"), ids=[w for w, _ in _blocks("python")])
def test_python_examples_are_files_ci_runs(where, body):
    runners = _runner_files()
    doc = where.rsplit(":", 1)[0]
    if re.search(r"^DOC_BLOCKS_RUN = \[[^\]]*" + re.escape(repr(doc)).replace("'", "[\"']") + r"[^\]]*\]", runners, re.M):
        return  # executed as printed by the module that lists it
    block = body.strip("\n")
    candidates = [p for p in (ROOT / "tests").rglob("*.py")] + [p for p in (ROOT / "examples").rglob("*.py")]
    homes = [p for p in candidates if block in p.read_text()]
    ran = [p for p in homes if p.is_relative_to(ROOT / "tests") or p.name in runners]
    assert ran, (f"{where}: this python block is not the text of a file CI runs (put it in a test module, or in "
                 f"examples/ with a test that runs that file); found in: {[str(p) for p in homes]}")


# ------------------------------------------------------------------------------------------------ sh blocks

def _kind(cmd: str) -> str:
    argv = shlex.split(cmd)
    if argv[0] == "make":
        return "make"
    if argv[0].endswith("bin/skiff") or argv[:3] in (["python", "-m", "skiff.server"],
                                                      [".venv/bin/python", "-m", "skiff.server"]):
        return "server"
    if len(argv) > 2 and argv[0].endswith("python") and argv[1] == "-m":
        return "module"
    return "other"


COMMANDS = _commands()


def test_docs_have_commands():
    kinds = {_kind(c) for _, c in COMMANDS}
    assert {"make", "server"} <= kinds, kinds  # the README's own: the test must never pass on nothing


@pytest.mark.parametrize("where,cmd", COMMANDS, ids=[f"{w}:{c[:40]}" for w, c in COMMANDS])
def test_command_runs_as_printed(where, cmd, tmp_path):
    kind = _kind(cmd)
    argv = shlex.split(cmd)
    assert kind != "other", f"{where}: `{cmd}` is a command this test does not know how to run: teach it"
    if kind == "make":
        _dry_run_make(where, [a for a in argv[1:] if "=" not in a], tmp_path)
    elif kind == "server":
        _run_server(where, argv)
    else:
        _check_module(where, argv)


def _dry_run_make(where: str, targets: list[str], tmp_path: Path) -> None:
    """``make -n`` as on a fresh machine: the venv a directory that does not exist yet, so every command that runs the
    venv's Python must come after the line that creates it (a target without the right stamp as prerequisite would
    run a Python that is not there), and no variable the Makefile reads may be undefined (a misspelt stamp expands
    to nothing, which is how `make reliability` once lost its venv)."""
    venv = tmp_path / "fresh-venv"
    proc = subprocess.run(["make", "--warn-undefined-variables", "-n", f"VENV={venv}", *targets], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, f"{where}: make -n {' '.join(targets)}: {proc.stderr[-2000:]}"
    undefined = [line for line in proc.stderr.splitlines() if "undefined variable" in line]
    assert not undefined, f"{where}: make {' '.join(targets)} reads undefined variables: {undefined}"
    lines = proc.stdout.splitlines()
    uses = [i for i, line in enumerate(lines) if f"{venv}/bin/" in line]
    created = [i for i, line in enumerate(lines) if f"-m venv {venv}" in line]
    assert not uses or (created and created[0] < uses[0]), \
        f"{where}: make {' '.join(targets)} runs the venv before creating it:\n{proc.stdout[-2000:]}"


def _run_server(where: str, argv: list[str]) -> None:
    """Start it as printed (the venv's skiff is this interpreter's skiff.server), wait for ready, SIGTERM."""
    args = argv[1:] if argv[0].endswith("bin/skiff") else argv[3:]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "skiff.server", *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen = []
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            seen.append(line)
            if "Server is ready" in line:
                break
        assert any("Server is ready" in s for s in seen), f"{where}: {' '.join(argv)} did not start:\n{''.join(seen)}"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0, f"{where}: {' '.join(argv)} did not stop cleanly"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _check_module(where: str, argv: list[str]) -> None:
    module = argv[2]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", module, "--help"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, f"{where}: python -m {module} --help: {proc.stderr[-2000:]}"
    for arg in argv[3:]:
        if arg.startswith("--"):
            flag = arg.split("=", 1)[0]
            assert flag in proc.stdout, f"{where}: {flag} is not an option of python -m {module}"
        elif not arg.startswith("-") and argv[argv.index(arg) - 1] == module and not arg.isdigit():
            assert arg in proc.stdout, f"{where}: {arg} is not something python -m {module} knows"
