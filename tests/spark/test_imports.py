"""The connector is a client built on protocol/ alone: it never imports nats-py (a test-only dependency), the
server or the storage; and the modules that need no Spark import without pyspark."""
import ast
import subprocess
import sys
from pathlib import Path
from tests.harness import parse_python

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "spark" / "pyspark_jetstream"
SPARK_FREE = ("client", "jetstream", "offsets", "options", "runner")  # the wire is skiff.protocol.client_wire


def imported(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(parse_python(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_connector_imports_no_nats_py_server_or_storage():
    bad = {f"{p.name} imports {n}" for p in PKG.rglob("*.py") for n in imported(p) & {"nats", "server", "storage"}}
    assert not bad, bad


def test_spark_free_modules_import_without_pyspark():
    code = (
        "import sys; sys.modules['pyspark'] = None; sys.modules['pyarrow'] = None\n"
        + "".join(f"import pyspark_jetstream.{m}\n" for m in SPARK_FREE)
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={"PYTHONPATH": f"{ROOT / 'spark'}:{ROOT}", "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
