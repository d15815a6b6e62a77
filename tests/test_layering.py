"""DESIGN.md: imports point one way. protocol/ imports neither storage/ nor server/ (and has no asyncio);
storage/ never imports server/; neither imports the optional spark/ package."""
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SPARK = {"spark", "pyspark", "pyspark_jetstream"}
FORBIDDEN = {
    "protocol": {"server", "storage", "asyncio"} | SPARK,
    "storage": {"server", "asyncio"} | SPARK,
    "server": SPARK,
}


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_imports_point_one_way(package):
    bad = []
    for path in (ROOT / package).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            else:
                continue
            bad += [f"{path.relative_to(ROOT)} imports {n}" for n in names if n.split(".")[0] in FORBIDDEN[package]]
    assert not bad, bad
