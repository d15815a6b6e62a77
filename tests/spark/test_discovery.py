"""``format("jetstream")`` is found with nothing registered (issue #18 item 5): from the session that started Spark,
from another thread and from ``spark.newSession()``, whether Skiff was installed from its wheel or with
``pip install -e .``.

PySpark's lookup (pyspark/sql/worker/lookup_data_sources.py) runs once per JVM in a Python worker and registers
every ``pyspark_*`` module that ``pkgutil.iter_modules()`` lists and that has a ``DefaultSource``, for all sessions.
Each case installs Skiff into a fresh virtual environment and runs a fresh Spark there, with no ``PYTHONPATH``: what
a user gets.  The environment reaches pyspark, pyarrow and Skiff's dependencies through a folder of links to this
suite's site-packages that leaves out this suite's own (editable) Skiff, so only the fresh install can be found.

The wheel case is also the suite's one run on a standalone cluster (issue #18 "Also"): a master and a worker
started from the pyspark installation with ``spark-class`` (separate JVMs, stopped at the end), as a user with the
wheel installed on every node has it.  Unlike ``local[n]``, the data source is pickled to an executor in another JVM
whose Python workers import the installed ``pyspark_jetstream`` themselves: a write in 3 tasks and a read in 3 tasks
go through them, every row checked, against one server (the first target of the run: server behaviour is covered on
both servers by the local-mode tests, and a cluster costs three JVM starts).  The editable case plans a read only
(``load()`` runs the data source's ``schema()`` in a Python worker, where the class is unpickled) and needs no server.
In both, an unknown option must come back as the connector's own error.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import sysconfig
import time
import tomllib
from pathlib import Path

import pytest

from tests.conftest import selected_targets
from tests.harness import ServerProcess
from tests.spark.conftest import ensure_java
from tests.spark.helpers import JVM_OPTIONS, sync, unique

ROOT = Path(__file__).resolve().parents[2]
SITE = Path(sysconfig.get_paths()["purelib"])
# what pyproject.toml builds from: itself, the readme, and the top folder of every package-dir entry
_PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
SOURCES = ("pyproject.toml", _PYPROJECT["project"]["readme"],
           *sorted({d.split("/")[0] for d in _PYPROJECT["tool"]["setuptools"]["package-dir"].values()}))

# the probe runs in the fresh venv, where tests/ is not importable: the JVM options go in as its first line
PROBE = f"JVM_OPTIONS = {JVM_OPTIONS!r}\n" + r'''
import json, sys, threading
from pyspark.sql import SparkSession

master, url, stream = (sys.argv[1:] + ["local[1]", "", ""])[:3]
builder = (SparkSession.builder.master(master).config("spark.ui.enabled", "false")
           .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
           # short-lived JVMs, as the suite's own session (tests/spark/helpers.py)
           .config("spark.driver.extraJavaOptions", JVM_OPTIONS)
           .config("spark.executor.extraJavaOptions", JVM_OPTIONS))
if master.startswith("spark://"):
    builder = builder.config("spark.executor.memory", "512m").config("spark.pyspark.python", sys.executable)
spark = builder.getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
out = {}


def probe(session, where):
    read = session.read.format("jetstream").option("servers", "nats://127.0.0.1:1").option("stream", "S")
    try:
        out[where] = [f.name for f in read.load().schema.fields]
    except Exception as e:
        out[where] = "error: " + str(e)[:300]
    try:
        read.option("filterSubject", "S.x").load()
        out[where + " typo"] = "accepted"
    except Exception as e:
        out[where + " typo"] = str(e)


probe(spark, "main")
# a thread of its own has no active session in PySpark: it gets the process's session from the builder
t = threading.Thread(target=probe, args=(SparkSession.builder.getOrCreate(), "thread"))
t.start()
t.join()
probe(spark.newSession(), "new session")
if url:
    df = spark.range(0, 3000, 1, 3).selectExpr(f"concat('{stream}.', cast(id % 5 as string)) as subject",
                                               "cast(id as string) as data")
    df.write.format("jetstream").mode("append").option("servers", url).option("stream", stream).save()
    read = (spark.read.format("jetstream").option("servers", url).option("stream", stream)
            .option("minPartitions", 3).load())
    out["partitions"] = read.rdd.getNumPartitions()
    out["data"] = sorted(int(bytes(r.data)) for r in read.select("data").collect())
    # the driver's own entry plus the executors of the worker
    out["executors"] = len(spark.sparkContext._jsc.sc().statusTracker().getExecutorInfos()) - 1
spark.stop()
print("RESULT " + json.dumps(out))
'''

COLUMNS = ["stream", "subject", "seq", "timestamp", "headers", "data"]


@pytest.fixture(scope="module")
def java():
    pytest.importorskip("pyspark", reason="skiff[spark] is not installed")
    reason = ensure_java()
    if reason:
        pytest.skip(reason)


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    """The files a build reads, copied (setuptools writes build/ and *.egg-info into the tree it builds)."""
    src = tmp_path_factory.mktemp("src") / "skiff"
    src.mkdir()
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info", "build", "dist")
    for name in SOURCES:
        p = ROOT / name
        if p.is_dir():
            shutil.copytree(p, src / name, ignore=skip)
        else:
            shutil.copy2(p, src / name)
    return src


@pytest.fixture(scope="module")
def deps(tmp_path_factory) -> Path:
    """Links to everything in this suite's site-packages but Skiff itself and the path files."""
    d = tmp_path_factory.mktemp("deps")
    for p in SITE.iterdir():
        n = p.name
        if n.endswith(".pth") or n.startswith(("__editable__", "skiff-", "pyspark_jetstream", "__pycache__")):
            continue
        (d / n).symlink_to(p)
    return d


def user_env(venv: Path) -> dict[str, str]:
    """The environment of a user who activated ``venv``: none of this suite's paths or Spark settings."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTHON", "PYSPARK_", "SPARK_", "SKIFF_", "PIP_")) and k != "VIRTUAL_ENV"}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", VIRTUAL_ENV=str(venv),
               SPARK_LOCAL_IP="127.0.0.1")
    return env


def fresh_venv(tmp_path: Path, deps: Path) -> tuple[Path, Path]:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "deps.pth").write_text(f"{deps}\n")
    return venv, site


def pip_install(venv: Path, *args: str) -> None:
    r = subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q",
                        "--no-deps", *args], capture_output=True, text=True, timeout=600, env=user_env(venv))
    if r.returncode != 0 and re.search(r"(Could not find a version|connection|resolve|Network)", r.stderr, re.I):
        pytest.skip(f"the package index is not reachable (build isolation): {r.stderr.strip().splitlines()[-1]}")
    assert r.returncode == 0, r.stderr[-3000:]


def run_probe(venv: Path, cwd: Path, *args: str) -> dict:
    r = subprocess.run([str(venv / "bin" / "python"), "-c", PROBE, *args], cwd=cwd, env=user_env(venv),
                       capture_output=True, text=True, timeout=300)
    line = next((ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert r.returncode == 0 and line, r.stdout[-2000:] + r.stderr[-3000:]
    return json.loads(line.removeprefix("RESULT "))


def assert_found_everywhere(out: dict) -> None:
    for where in ("main", "thread", "new session"):
        assert out[where] == COLUMNS, (where, out[where])
        # the connector's own refusal, so its code is what ran (not some other 'jetstream' source)
        # (Spark hands options over case-insensitively, lower-cased)
        assert re.search(r"unknown option 'filtersubject'.*did you mean.*filterSubjects", out[where + " typo"],
                         re.I | re.S), (where, out[where + " typo"])


def test_editable_install_is_discovered(java, source, deps, tmp_path):
    venv, site = fresh_venv(tmp_path, deps)
    pip_install(venv, "-e", str(source))
    # setuptools' import hook serves the packages; the path file is what lets Spark's lookup list pyspark_jetstream
    pth = site / "pyspark_jetstream-editable.pth"
    assert pth.read_text().strip() == str(source / "spark")
    assert_found_everywhere(run_probe(venv, tmp_path))
    # the file is in the install's RECORD: uninstalling removes it
    r = subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "uninstall", "-y",
                        "skiff"], capture_output=True, text=True, timeout=120, env=user_env(venv))
    assert r.returncode == 0, r.stderr
    assert not pth.exists() and not list(site.glob("__editable__*skiff*"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_line(path: Path, text: str, proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if text in path.read_text(errors="replace"):
            return
        time.sleep(0.2)
    raise AssertionError(f"no {text!r} in {path.name}:\n{path.read_text(errors='replace')[-3000:]}")


@contextlib.contextmanager
def standalone_cluster(venv: Path, tmp: Path):
    """A master and a worker (2 cores, 1 GB) of the venv's pyspark, in the foreground; both stopped at the end."""
    out = subprocess.run([str(venv / "bin" / "python"), "-c", "import pyspark; print(pyspark.__file__)"],
                         capture_output=True, text=True, check=True, env=user_env(venv))
    home = Path(out.stdout.strip()).parent
    env = dict(user_env(venv), SPARK_HOME=str(home), SPARK_NO_DAEMONIZE="1",
               SPARK_DAEMON_JAVA_OPTS=JVM_OPTIONS)  # short-lived JVMs, as the suite's own session
    port = free_port()
    master = f"spark://127.0.0.1:{port}"
    procs: list[subprocess.Popen] = []
    try:
        for name, cls, args, ready in (
                ("master", "org.apache.spark.deploy.master.Master", ["--port", str(port)], "elected leader"),
                ("worker", "org.apache.spark.deploy.worker.Worker",
                 [master, "--cores", "2", "--memory", "1g", "--work-dir", str(tmp / "work")],
                 "Successfully registered with master")):
            log = tmp / f"{name}.log"
            with log.open("wb") as f:
                procs.append(subprocess.Popen([str(home / "bin" / "spark-class"), cls, "--host", "127.0.0.1",
                                               "--webui-port", str(free_port()), *args],
                                              stdout=f, stderr=subprocess.STDOUT, env=env, cwd=tmp))
            wait_for_line(log, ready, procs[-1], 120)
        yield master
    finally:
        for p in reversed(procs):  # only the processes started here, by their handles
            p.terminate()
        for p in procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)


def test_wheel_install_on_a_standalone_cluster(java, source, deps, tmp_path, request):
    out = tmp_path / "wheel"
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(source)],
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0 and re.search(r"(Could not find a version|connection|resolve|Network)", r.stderr, re.I):
        pytest.skip(f"the package index is not reachable (build isolation): {r.stderr.strip().splitlines()[-1]}")
    assert r.returncode == 0, r.stderr[-3000:]
    (whl,) = out.glob("skiff-*.whl")
    venv, site = fresh_venv(tmp_path, deps)
    pip_install(venv, str(whl))
    assert (site / "pyspark_jetstream" / "__init__.py").is_file()
    assert not (site / "pyspark_jetstream-editable.pth").exists()  # a wheel needs no path file
    srv = ServerProcess(kind=selected_targets(request.config)[0]).start()
    try:
        name = unique("CL")
        sync(srv.url, lambda a: a.create(name))
        with standalone_cluster(venv, tmp_path) as master:
            result = run_probe(venv, tmp_path, master, srv.url, name)
        assert_found_everywhere(result)
        assert result["executors"] >= 1, result  # the tasks ran in an executor of the worker, not in the driver
        assert result["partitions"] == 3
        assert result["data"] == list(range(3000))
        assert sync(srv.url, lambda a: a.info(name))["state"]["messages"] == 3000
    finally:
        srv.cleanup()
