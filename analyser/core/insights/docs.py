"""The catalogue and threshold tables of docs/insights.md, generated from the rule registry and
:class:`~analyser.core.insights.Thresholds` (a test checks that the file is up to date).

    python -m analyser.core.insights.docs --write   # rewrite the generated parts of the file
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import fields
from pathlib import Path

from analyser.core.insights.catalogue import all_rules
from analyser.core.insights.registry import DERIVED, CatalogueEntry
from analyser.core.insights.thresholds import Thresholds

DOC_PATH = Path(__file__).resolve().parents[3] / "docs" / "insights.md"
_BLOCK = re.compile(r"(<!-- generated: (\w+) -->\n).*?(<!-- end generated -->)", re.S)


def _row(entry: CatalogueEntry, share_of: str | None = None) -> str:
    return (
        f"| `{entry.id}` | {entry.fires_when} | {entry.change} | {entry.trade_off} "
        f"| {share_of or '-'} |"
    )


def render_catalogue() -> str:
    """The catalogue table: every registered rule (memory first, in catalogue order), the
    re-simulation's ``memory.combined`` after the memory rules; for a throughput rule, what the
    share of the run its change can save is a share of (``share_of`` in its ``@rule``)."""
    lines = [
        "| id | fires when | change | trade-off | saves a share of |",
        "|---|---|---|---|---|",
    ]
    rules = all_rules()
    for rule in (r for r in rules if r.category == "memory"):
        lines += [_row(e) for e in (rule.entry, *rule.also)]
    lines += [_row(e) for e in DERIVED]
    for rule in (r for r in rules if r.category != "memory"):
        lines += [_row(e, rule.share_of) for e in (rule.entry, *rule.also)]
    return "\n".join(lines) + "\n"


def render_thresholds() -> str:
    """The thresholds table: name, default, meaning and the insights that read it."""
    readers: dict[str, list[str]] = {}
    for rule in all_rules():
        for name in rule.thresholds:
            readers.setdefault(name, []).append(rule.id)
    defaults = Thresholds()
    lines = ["| threshold | default | meaning | read by |", "|---|---|---|---|"]
    for f in fields(Thresholds):
        used = ", ".join(f"`{i}`" for i in readers.get(f.name, [])) or "-"
        lines.append(
            f"| `{f.name}` | {getattr(defaults, f.name):g} | {f.metadata['doc']} | {used} |"
        )
    return "\n".join(lines) + "\n"


RENDERERS = {"catalogue": render_catalogue, "thresholds": render_thresholds}


def render_markdown(text: str | None = None) -> str:
    """docs/insights.md with each generated block (``<!-- generated: NAME -->`` ...
    ``<!-- end generated -->``) replaced by its rendering."""
    text = DOC_PATH.read_text(encoding="utf-8") if text is None else text
    return _BLOCK.sub(lambda m: m.group(1) + RENDERERS[m.group(2)]() + m.group(3), text)


def main(argv: list[str] | None = None) -> int:
    """Print docs/insights.md's generated parts, or rewrite them with ``--write``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"rewrite {DOC_PATH.name}")
    args = parser.parse_args(argv)
    text = render_markdown()
    if args.write:
        DOC_PATH.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
