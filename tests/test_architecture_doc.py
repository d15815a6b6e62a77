"""docs/architecture.md stays true (issue #17): every file or folder it names exists, and every class and
``Class.method`` it names is defined in the code.  Rename a module or a method and this fails until the page says
what the code does."""
import ast
import re
from pathlib import Path
from tests.harness import parse_python

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
CODE = ("server", "protocol", "storage", "skiff")


def _definitions() -> dict[str, set[str]]:
    """Class name -> names defined in its body (methods, class attributes), over the whole code base."""
    out: dict[str, set[str]] = {}
    for folder in CODE:
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(parse_python(path.read_text())):
                if isinstance(node, ast.ClassDef):
                    names = out.setdefault(node.name, set())
                    for item in node.body:
                        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                            names.add(item.name)
                        elif isinstance(item, ast.Assign):
                            names.update(t.id for t in item.targets if isinstance(t, ast.Name))
                        elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                            names.add(item.target.id)
    return out


def _spans() -> list[str]:
    text = DOC.read_text()
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return re.findall(r"`([^`]+)`", text)


def test_named_files_exist():
    paths = [s for s in _spans() if re.fullmatch(r"[\w./]+(\.py|/)", s)]
    assert len(paths) > 40, paths  # the page names the modules; an empty match would prove nothing
    missing = [p for p in paths if not (ROOT / p).exists()]
    assert not missing, f"docs/architecture.md names files that do not exist: {missing}"


def test_named_classes_and_methods_exist():
    defs = _definitions()
    names = [s for s in _spans() if re.fullmatch(r"[A-Z]\w*[a-z]\w*(\.\w+)?", s)]  # not STREAM.CREATE
    assert len(names) > 30, names
    missing = []
    for name in names:
        cls, _, attr = name.partition(".")
        if cls not in defs or (attr and attr not in defs[cls]):
            missing.append(name)
    assert not missing, f"docs/architecture.md names classes or methods the code does not define: {missing}"
