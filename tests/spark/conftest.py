"""The SparkSession for the connector tests: one per test session, local[2], UI off, loopback only.

Spark needs a Java runtime: when ``java`` is missing and we are root, ``openjdk-17-jre-headless`` is installed with
apt-get (Debian/Ubuntu); otherwise the Spark tests are skipped with the reason.  The Python workers Spark starts use
this interpreter (``PYSPARK_PYTHON``), and ``spark/`` is put on their ``PYTHONPATH`` so that Spark's own lookup of
installed ``pyspark_*`` data sources finds ``pyspark_jetstream`` - the tests use ``format("jetstream")`` without
registering anything, as a user with the package installed would.

The master is ``local[2,4]``: two worker threads like ``local[2]``, and up to 4 attempts per task, so the test of a
write retried after a failure can let Spark retry (plain ``local[2]`` never retries a task).
"""
from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# The connector under test is this checkout's, in this process too (the client tests import it directly): an
# editable install of another checkout maps the name pyspark_jetstream to its own folder, and only a sys.path entry
# ahead of that import hook makes `import pyspark_jetstream` find this one.
if str(ROOT / "spark") not in sys.path:
    sys.path.insert(0, str(ROOT / "spark"))


def ensure_java() -> str | None:
    """None when a Java runtime is there (installing it if we can), else the reason it is not.  The Spark tests run
    in three xdist groups (tests/conftest.py): one worker installs while the others wait on the lock, as a second
    apt-get would fail on dpkg's."""
    if shutil.which("java"):
        return None
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return "no java on PATH and cannot install it (needs root and apt-get): install a Java 17 runtime"
    with open(Path(tempfile.gettempdir()) / "skiff-tests-java-install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _install_java()


def _install_java() -> str | None:
    if shutil.which("java"):  # another worker installed it while this one waited
        return None
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    try:
        subprocess.run(["apt-get", "update", "-q"], check=True, env=env, capture_output=True, timeout=600)
        subprocess.run(["apt-get", "install", "-y", "-q", "--no-install-recommends", "openjdk-17-jre-headless"],
                       check=True, env=env, capture_output=True, timeout=1200)
    except (subprocess.SubprocessError, OSError) as e:
        return f"installing openjdk-17-jre-headless failed: {e}"
    return None if shutil.which("java") else "openjdk-17-jre-headless installed but java is still not on PATH"


@pytest.fixture(scope="session")
def spark():
    pytest.importorskip("pyspark", reason="skiff[spark] is not installed")
    pytest.importorskip("pyarrow", reason="skiff[spark] is not installed")
    reason = ensure_java()
    if reason:
        pytest.skip(reason)
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    paths = [str(ROOT / "spark"), str(ROOT)]
    if os.environ.get("PYTHONPATH"):
        paths.append(os.environ["PYTHONPATH"])
    os.environ["PYTHONPATH"] = os.pathsep.join(paths)
    from pyspark.sql import SparkSession

    from tests.spark.helpers import JVM_OPTIONS

    session = (
        SparkSession.builder.master("local[2,4]")
        .appName("skiff-spark-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.streaming.stopTimeout", "10s")
        .config("spark.driver.extraJavaOptions", JVM_OPTIONS)
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
