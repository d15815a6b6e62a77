"""DESIGN.md: imports point one way. protocol/ imports neither storage/ nor server/ (and has no asyncio);
storage/ never imports server/; neither imports the optional spark/ package.  And everything is imported under the
one installed name, ``skiff.`` (issue #14): a bare ``import server`` would load a second copy of the modules in a
checkout and fail in an installed wheel."""
import ast
from pathlib import Path

import pytest
from tests.harness import parse_python

ROOT = Path(__file__).resolve().parents[1]
SPARK = {"spark", "pyspark", "pyspark_jetstream"}
FORBIDDEN = {
    "protocol": {"server", "storage", "asyncio"} | SPARK,
    "storage": {"server", "asyncio"} | SPARK,
    "server": SPARK,
}


def _absolute_imports(folder: str):
    """(path, module name) for every absolute import in the .py files below ``folder``."""
    for path in (ROOT / folder).rglob("*.py"):
        for node in ast.walk(parse_python(path.read_text())):
            if isinstance(node, ast.Import):
                for a in node.names:
                    yield path, a.name
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                yield path, node.module


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_imports_point_one_way(package):
    bad = []
    for path, n in _absolute_imports(package):
        parts = n.split(".")
        if parts[0] in FORBIDDEN:
            bad.append(f"{path.relative_to(ROOT)} imports {n}: import it as skiff.{n}")
        if parts[0] == "skiff" and len(parts) > 1:
            parts = parts[1:]
        if parts[0] in FORBIDDEN[package]:
            bad.append(f"{path.relative_to(ROOT)} imports {n}")
    assert not bad, bad


def test_everything_imports_skiff_by_its_installed_name():
    """tests/, bench/, examples/ and skiff/ too: no bare server/protocol/storage import anywhere."""
    bad = [f"{path.relative_to(ROOT)} imports {n}"
           for folder in ("skiff", "tests", "bench", "examples", "spark")
           for path, n in _absolute_imports(folder) if n.split(".")[0] in FORBIDDEN]
    assert not bad, bad
