"""spark/README.md's "Guarantees" table cites a test for its cells ([G1], [K3], ...): each cited test must exist,
so the table cannot go on naming a test that was renamed or removed."""
from __future__ import annotations

import ast
import re

from tests.spark.conftest import ROOT

README = ROOT / "spark" / "README.md"


def cited_tests() -> dict[str, tuple[str, str, str | None]]:
    """[label] -> (file, test function, parameter id or None), from the lines after the table.  A citation may
    leave out the file (``::name``: the file before) or the function (``[id]``: the function before)."""
    text = README.read_text()
    section = text[text.index("## Guarantees"):text.index("**The streaming write and its checkpoint.**")]
    cites = {}
    file = func = None
    for label, ref in re.findall(r"\[([A-Z]\d)\] `([^`]+)`", section):
        m = re.fullmatch(r"(?:(test_\w+\.py))?(?:::(\w+))?(?:\[([\w-]+)\])?", ref)
        assert m, f"[{label}]: cannot read {ref!r}"
        file = m.group(1) or file
        func = m.group(2) or func
        cites[label] = (file, func, m.group(3))
    return cites


def test_every_cited_test_exists():
    cites = cited_tests()
    text = README.read_text()
    table = text[text.index("## Guarantees"):text.index("[G1] `")]
    used = set(re.findall(r"\[([A-Z]\d)\]", table))
    assert used and used <= set(cites), f"cited in the table but not named below it: {used - set(cites)}"
    for label, (file, func, param) in cites.items():
        source = (ROOT / "tests" / "spark" / file).read_text()
        names = {n.name for n in ast.walk(ast.parse(source)) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        assert func in names, f"[{label}]: {file} has no {func}"
        if param:
            assert f'"{param}"' in source, f"[{label}]: {file} has no parameter id {param!r}"
