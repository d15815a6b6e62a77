"""The README's embedding example is examples/test_embedded.py, verbatim, and it passes."""
from __future__ import annotations

import subprocess
import sys

from tests.harness import ROOT


def test_readme_shows_the_example_verbatim():
    example = (ROOT / "examples" / "test_embedded.py").read_text()
    assert "```python\n" + example + "```" in (ROOT / "README.md").read_text()


def test_example_passes():
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "examples/test_embedded.py"],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "1 passed" in r.stdout, r.stdout + r.stderr
