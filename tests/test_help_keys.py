"""Help > Keyboard and mouse lists every key the GUI binds: each shortcut written in the GUI's
source (a QKeySequence, a standard key, a button's Alt mnemonic) appears in the reference."""

from __future__ import annotations

import re
from pathlib import Path

from analyser.gui.help import SHORTCUTS, shortcuts_html

GUI = Path(__file__).resolve().parents[1] / "analyser" / "gui"
#: Qt's standard keys the GUI binds, as the reference writes them.
STANDARD = {
    "HelpContents": "F1",
    "Find": "Ctrl+F",
    "Open": "Ctrl+O",
    "Close": "Ctrl+W",
    "Quit": "Ctrl+Q",
    "Refresh": "F5",
}


def _bound_keys() -> set[str]:
    keys: set[str] = set()
    for path in GUI.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        for literal in re.findall(r'QKeySequence\(\s*"([^"]+)"', text):
            keys.add(literal.replace("Return", "Enter"))
        # shortcuts bound in a loop over their key names (the query's Ctrl+Return / Ctrl+Enter)
        for names in re.findall(r"for keys in \(([^)]*)\)", text):
            keys.update(k.replace("Return", "Enter") for k in re.findall(r'"([^"]+)"', names))
        for name in re.findall(r"QKeySequence\.StandardKey\.(\w+)", text):
            keys.add(STANDARD[name])
        # a check box's or button's "&X" label is an Alt+X shortcut on the report
        for label in re.findall(r'Q(?:CheckBox|PushButton|RadioButton)\(\s*"([^"]*&[^"]*)"', text):
            letter = label[label.index("&") + 1]
            keys.add(f"Alt+{letter.upper()}")
    return keys


def test_every_bound_key_is_in_the_reference():
    listed = " / ".join(keys for _where, keys, _what in SHORTCUTS)
    tokens = {t.strip() for part in listed.split("/") for t in part.split(",")}
    bound = _bound_keys()
    assert "Alt+C" in bound and "Ctrl+Enter" in bound and "F1" in bound  # the scan finds them
    missing = sorted(k for k in bound if k not in tokens)
    assert not missing, f"keys bound but not in Help > Keyboard and mouse: {missing}"


def test_the_reference_names_the_critical_path_key():
    html = shortcuts_html()
    assert "Alt+C" in html and "critical path" in html
