"""Skiff installed as a user installs it (issue #14): the wheel holds one top-level name, and in a fresh virtual
environment ``pip install <wheel>`` plus a test file of the user's own (no conftest) that uses ``nats_server`` and
``nats_clock`` passes."""
from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

USER_TEST = '''
import nats
import pytest


@pytest.mark.asyncio
async def test_redelivery_without_waiting(nats_server, nats_clock):
    nc = await nats.connect(nats_server.client_url)
    js = nc.jetstream()
    await js.add_stream(name="ORDERS", subjects=["orders.>"])
    await js.publish("orders.new", b"1")
    sub = await js.pull_subscribe("orders.>", durable="w", config=nats.js.api.ConsumerConfig(ack_wait=30))
    first = (await sub.fetch(1))[0]
    await nats_clock.tick(31)
    again = (await sub.fetch(1))[0]
    assert again.data == first.data and again.metadata.num_delivered == 2
    await nc.close()
'''


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    return build_wheel(tmp_path_factory)


def build_wheel(tmp_path_factory, env: dict | None = None) -> Path:
    """Built from a copy of the tree: setuptools builds in place and keeps build/lib/ between builds, so a module
    deleted from the source would still ship from a stale build/ of the checkout (and so would the compiled
    accelerator a checkout builds in place: ``*.so`` stays behind too)."""
    out = tmp_path_factory.mktemp("wheel")
    src = tmp_path_factory.mktemp("src") / "skiff"
    everywhere = shutil.ignore_patterns(".venv", ".git", "*.egg-info", "__pycache__", "node_modules", "*.so")

    def ignore(folder: str, names: list[str]) -> set[str]:
        skip = set(everywhere(folder, names))
        if Path(folder) == ROOT:  # the checkout's own build output and data, not protocol/data/
            skip |= {n for n in names if n in ("build", "dist", "data")}
        return skip

    shutil.copytree(ROOT, src, ignore=ignore)
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "-w", str(out),
                        str(src)], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    (whl,) = out.glob("skiff-*.whl")
    (whl.parent / "build.log").write_text(r.stdout + r.stderr)
    return whl


def test_the_build_uses_no_configuration_setuptools_has_set_an_end_date_for(wheel):
    """setuptools warns of deprecated pyproject.toml forms with a date after which builds fail ("By 2027-Feb-18,
    you need to update your project", said of `project.license` as a table): a fresh machine's `make test` would
    break that day.  The build log must carry no such notice."""
    log = (wheel.parent / "build.log").read_text()
    assert "you need to update your project" not in log, log[log.find("you need to update") - 600:][:1200]


ACCEL = re.compile(r"^skiff/protocol/_speedups\.[\w.-]+\.so$")


def test_the_accelerator_is_in_the_wheel(wheel):
    """Built where a compiler is (as here): the wheel holds the compiled scanner (protocol/_speedups.c), and is
    therefore tagged for this interpreter and platform, not py3-none-any."""
    names = zipfile.ZipFile(wheel).namelist()
    assert [n for n in names if ACCEL.match(n)], [n for n in names if n.startswith("skiff/protocol/")]
    assert not wheel.name.endswith("-py3-none-any.whl"), wheel.name


def test_a_wheel_built_without_a_compiler_runs_the_pure_parser(tmp_path_factory, tmp_path):
    """The extension is optional (setup.py): where it cannot be compiled the build says so and goes on, and the
    wheel's parser is the pure-Python one.  CC=false stands for a machine without a C compiler."""
    whl = build_wheel(tmp_path_factory, env=dict(os.environ, CC="false"))
    assert "building 'skiff.protocol._speedups' extension" in (whl.parent / "build.log").read_text()
    names = zipfile.ZipFile(whl).namelist()
    assert not [n for n in names if ACCEL.match(n)]
    zipfile.ZipFile(whl).extractall(tmp_path / "site")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SKIFF_PURE_PYTHON")}
    env["PYTHONPATH"] = str(tmp_path / "site")  # and -S: no site-packages, where the editable install is
    code = ("import skiff.protocol.parser as p; assert p.__file__.startswith(%r), p.__file__; "
            "print(p.ACCELERATED, p.Parser().feed(b'PUB a 2\\r\\nhi\\r\\n'))" % str(tmp_path / "site"))
    r = subprocess.run([sys.executable, "-S", "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip() == "False [Pub(subject='a', reply='', hdr_len=0, data=b'hi')]"


def test_one_top_level_name(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/", 1)[0] for n in names}
    assert tops == {"skiff", "pyspark_jetstream", f"{wheel.name.split('-')[0]}-{wheel.name.split('-')[1]}.dist-info"}, tops
    assert "skiff/server/core/server.py" in names and "skiff/protocol/data/errors.json" in names
    assert not any(n.startswith(("server/", "protocol/", "storage/", "tests/", "bench/")) for n in names)
    ep = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(ep).decode()
    assert "[pytest11]" in text and "skiff = skiff.testing.plugin" in text


def test_every_package_folder_is_in_the_wheel_list():
    """pyproject lists the packages by hand (package-dir maps the folders): a new subpackage must be added there."""
    text = (ROOT / "pyproject.toml").read_text()
    listed = set(re.findall(r'"(skiff(?:\.[\w.]+)?)"', text.split("packages = [", 1)[1].split("]", 1)[0]))
    want = {"skiff"}
    for folder, name in (("skiff", "skiff"), ("server", "skiff.server"), ("protocol", "skiff.protocol"),
                         ("storage", "skiff.storage")):
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            want.add(".".join([name, *rel.parts]) if rel.parts else name)
    assert want <= listed, f"pyproject.toml packages lacks {sorted(want - listed)}"


def test_fresh_venv_user_test_passes(wheel, tmp_path):
    # The user's environment, not this suite's: the Spark fixture puts the checkout on PYTHONPATH, where pip then
    # finds skiff.egg-info and calls skiff "already satisfied" without installing the wheel (two full runs failed so).
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SKIFF_NATS_SERVER")}
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120, env=env)
    py = venv / "bin" / "python"
    r = subprocess.run([str(py), "-m", "pip", "install", "-q", str(wheel), "nats-py", "pytest", "pytest-asyncio"],
                       capture_output=True, text=True, timeout=600, env=env)
    if r.returncode != 0 and re.search(r"(Could not find a version|connection|resolve|Network)", r.stderr, re.I):
        pytest.skip(f"the package index is not reachable: {r.stderr.strip().splitlines()[-1]}")
    assert r.returncode == 0, r.stderr[-3000:]
    user = tmp_path / "user"
    user.mkdir()
    (user / "test_mine.py").write_text(USER_TEST)
    (user / "pytest.ini").write_text("[pytest]\n")  # an empty configuration of the user's: pytest's defaults
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SKIFF_NATS_SERVER")}
    # The user's own directory is the root: no configuration file of an ancestor directory may take part (the
    # suite's temporary directories are shared by every test of the run).
    r = subprocess.run([str(py), "-m", "pytest", "-q", "-rE", "-p", "no:cacheprovider", "--rootdir", str(user),
                        "-c", str(user / "pytest.ini"), "test_mine.py"], cwd=user, env=env,
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0:  # say what the user's environment had, to tell a packaging fault from the test's
        eps = subprocess.run([str(py), "-c", "import importlib.metadata as m; "
                              "print(sorted((e.name, e.value) for e in m.entry_points(group='pytest11')))"],
                             cwd=user, env=env, capture_output=True, text=True, timeout=60)
        pytest.fail(f"{r.stdout[-5000:]}\npytest11 entry points: {eps.stdout}{eps.stderr[-1000:]}\n"
                    f"env: {sorted(k for k in env if k.startswith(('PY', 'PIP')))}")
    assert "1 passed" in r.stdout, r.stdout[-3000:]
    # and the installed copy is the one that ran, not this checkout
    r = subprocess.run([str(py), "-c", "import skiff, skiff.server; print(skiff.server.__file__)"], cwd=user,
                       env=env, capture_output=True, text=True, timeout=60)
    assert str(venv) in r.stdout, r.stdout + r.stderr
    # with the compiled scanner the wheel brought, unless the user turns it off
    check = "import skiff.protocol.parser as p; print(p.ACCELERATED)"
    for value, want in (("", "True"), ("1", "False")):
        r = subprocess.run([str(py), "-c", check], cwd=user, env=dict(env, SKIFF_PURE_PYTHON=value),
                           capture_output=True, text=True, timeout=60)
        assert r.stdout.strip() == want, (value, r.stdout + r.stderr)
