"""The Help menu's parts: the keyboard and mouse reference (PopVision and
Perfetto both have one) and "Open demo profile" (PopVision bundles a demo report): the six
walkthrough runs (``assets/runs/walkthrough``) simulated on the simulation service, kept in its
cache (nothing written elsewhere) and opened, compared with the open profile when one is."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QTextBrowser, QVBoxLayout, QWidget

from analyser.gui.whatif import WhatIfDialog
from analyser.literal import html as lit
from profiles.errors import UserFacingError

if TYPE_CHECKING:
    from analyser.gui.model.document import Document

#: (where, keys or mouse, what it does): the reference the Help menu shows.
SHORTCUTS: tuple[tuple[str, str, str], ...] = (
    ("Window", "Ctrl+O / Ctrl+Shift+O", "open a profile / compare the open one with another"),
    ("Window", "F5 / Ctrl+W / Ctrl+Q", "reload / close / quit"),
    ("Window", "Ctrl+Shift+S", "save the profile shown (B when comparing) as..."),
    ("Window", "Ctrl+E", "export the current report's chart as an image"),
    ("Window", "Ctrl+PgDown / Ctrl+PgUp", "next / previous report"),
    ("Window", "drop one or two files", "open them (two: A compared with B)"),
    ("Window", "F1", "this keyboard and mouse reference"),
    ("Execution Trace", "W / S, mouse wheel", "zoom in / out about the pointer"),
    ("Execution Trace", "A / D, drag", "pan left / right"),
    ("Execution Trace", "Home or 0", "the whole run"),
    ("Execution Trace", "click / double-click", "select a step / fit it"),
    ("Execution Trace", "Shift + drag, drag on the time axis", "select a range of cycles"),
    ("Execution Trace", "F", "fit the selection (range, step or host event)"),
    ("Execution Trace", "M", "mark the selection (a pinned band that stays; M again removes it)"),
    ("Execution Trace", "Esc", "clear the selected range"),
    (
        "Execution Trace",
        "Ctrl+F, Enter / Esc",
        "search the whole trace (Enter: the first match, keys back to the trace) / back",
    ),
    ("Execution Trace", "click a lane label", "fold / unfold an IPU's lanes"),
    (
        "Execution Trace",
        "Alt+C",
        "show / hide the critical path (the steps that set the call's length)",
    ),
    (
        "Execution Trace",
        "P, right-click a lane",
        "pin the lane to the top / unpin it (it stays while the others scroll)",
    ),
    (
        "Execution Trace",
        "hover / click a difference",
        "compare mode: its step and B − A / select its cycles in A and B",
    ),
    ("BSP view", "wheel, drag, Tiles box", "zoom / pan the tiles, a typed range"),
    ("Any chart (click it first)", "W / S, A / D, Home", "zoom, pan, show everything"),
    ("Memory Report", "click, Shift+click, typed list", "select tiles (0-15, 1000, 1:0-15)"),
    ("Liveness Report", "click, Shift+click", "a step's live variables, compare two steps"),
    ("Program Tree", "Enter / Next / Previous", "walk the matches of a search"),
    ("Query", "Ctrl+Enter", "run the query"),
    ("Tables", "click a header, type in the filter", "sort, filter"),
)


def shortcuts_html() -> str:
    """The reference as an HTML table, grouped by where the keys work."""
    rows = []
    last = None
    for where, keys, what in SHORTCUTS:
        if where != last:
            rows.append(f"<tr><th colspan='2' align='left'><br>{lit(where)}</th></tr>")
            last = where
        rows.append(f"<tr><td><b>{lit(keys)}</b>&nbsp;&nbsp;</td><td>{lit(what)}</td></tr>")
    return "<table cellspacing='2'>" + "".join(rows) + "</table>"


def show_shortcuts(window: QWidget | None) -> QDialog:
    """Help > Keyboard and mouse: a non-modal reference."""
    dialog = QDialog(window)
    dialog.setWindowTitle("Keyboard and mouse")
    dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    lay = QVBoxLayout(dialog)
    text = QTextBrowser()
    text.setHtml(shortcuts_html())
    lay.addWidget(text)
    buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
    buttons.rejected.connect(dialog.close)
    lay.addWidget(buttons)
    dialog.resize(620, 640)
    dialog.show()
    return dialog


def demo_configs() -> list[Path]:
    """The six walkthrough run configurations (``assets/runs/walkthrough``), in step order."""
    import assets.runs.walkthrough as pkg

    folder = Path(pkg.__file__).parent
    paths = sorted(folder.glob("[0-9]-*.toml"))
    if not paths:
        raise UserFacingError(f"no demo run configuration in {folder} (reinstall the package).")
    return paths


def open_demo(window: Any, config: Path) -> WhatIfDialog | None:
    """Simulate one demo step on the simulation service (its cache answers at once after the
    first time) and open it, compared with the open profile when there is one."""
    from engine.config import RunConfig

    try:
        cfg = RunConfig.from_toml(config).to_dict()
    except UserFacingError as exc:
        from PySide6.QtWidgets import QMessageBox

        QMessageBox.warning(window, "Cannot open the demo profile", str(exc))
        return None
    workspace = getattr(window, "workspace", None)
    doc: Document | None = getattr(workspace, "document", None)
    original = Path(doc.path) if doc is not None else None
    replaced: Document | None = getattr(workspace, "compare", None) if doc is not None else None

    def opened(orig: Path | None, result: Path) -> None:
        if orig is not None and hasattr(window, "open_compare"):
            window.open_compare(orig, result)
        elif hasattr(window, "open_files"):
            window.open_files([result])

    what = "compared with the open profile" if original is not None else "in the window"
    if doc is not None and replaced is not None:  # it replaced B without a word
        what = f"compared with A ({lit(doc.name)}), in place of B ({lit(replaced.name)})"
    dialog = WhatIfDialog(
        f"Demo: {config.stem}",
        f"Simulating the walkthrough's <b>{lit(config.stem)}</b> (ResNet-101 on 2 IPUs); it "
        f"opens {what} and stays in the analyser's cache.",
        cfg,
        None,
        original,
        opened,
        window,
        name=f"demo-{config.stem}",
    )
    dialog.start()
    return dialog
