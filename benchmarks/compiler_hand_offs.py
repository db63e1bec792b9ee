"""Count the compiler's untyped hand-offs: ``config.`` reads, short and untyped parameters.

    python benchmarks/compiler_hand_offs.py [DIR]   # default engine/compiler

Prints, over the ``.py`` files of DIR: attribute reads on a name ``config`` (and how many files
make them), string-constant subscripts (``x["col"]``), and the share of function parameters
(``self`` / ``cls`` excepted) with names of two characters or fewer and with no annotation.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def count(directory: Path) -> dict[str, int]:
    out = dict(files=0, config_reads=0, config_files=0, str_keys=0, params=0, short=0, untyped=0)
    for path in sorted(directory.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        out["files"] += 1
        reads = 0
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                reads += node.value.id == "config"
            elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
                out["str_keys"] += isinstance(node.slice.value, str)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                a = node.args
                for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs]:
                    if arg.arg in ("self", "cls"):
                        continue
                    out["params"] += 1
                    out["short"] += len(arg.arg) <= 2
                    out["untyped"] += arg.annotation is None
        out["config_reads"] += reads
        out["config_files"] += reads > 0
    return out


def main() -> int:
    directory = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "engine" / "compiler"
    c = count(directory)
    p = max(c["params"], 1)
    print(f"{directory}: {c['files']} files")
    print(f"config. reads: {c['config_reads']} in {c['config_files']} files")
    print(f"string-key subscripts: {c['str_keys']}")
    print(
        f"parameters: {c['params']}, <=2 chars {c['short']} ({100 * c['short'] / p:.0f}%), "
        f"untyped {c['untyped']} ({100 * c['untyped'] / p:.0f}%)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
