"""Nothing under analyser/gui reads the raw profile: no ``.src`` attribute (the analysis's
source) and no dataset path of the profile format; those reads live in analyser.viewmodels."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import analyser.gui
import analyser.viewmodels

GUI = Path(analyser.gui.__file__).parent
#: the profile format's top-level groups (docs/profile-format.md)
DATASET = re.compile(r"^/(graph|programs|liveness|memory|execution|host|meta|trace|runs?)(/|$)")


def _offences(root: Path) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and node.body
            and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
        }
        for node in ast.walk(tree):
            where = f"{path.relative_to(root.parent)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Attribute) and node.attr == "src":
                found.append(f"{where} reads .src")
            elif (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in docstrings
                and DATASET.match(node.value)
            ):
                found.append(f"{where} names the dataset {node.value!r}")
    return found


def test_nothing_under_gui_reads_the_raw_profile():
    assert _offences(GUI) == []


def test_the_check_sees_a_raw_read(tmp_path):
    # the same walk over the view-models finds their reads: the check is not blind
    assert any("reads .src" in o for o in _offences(Path(analyser.viewmodels.__file__).parent))
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "m.py").write_text('x = doc.analysis.table("/programs/nodes")\n')
    assert _offences(pkg) == ["pkg/m.py:1 names the dataset '/programs/nodes'"]
