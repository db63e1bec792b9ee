"""Start the desktop Graph Analyser: ``analyse gui [FILE...]`` or ``python -m analyser.gui``."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from PySide6.QtGui import QIcon
from PySide6.QtWidgets import QApplication

from analyser.gui.main_window import APP_NAME, ORGANISATION, MainWindow


def app_icon() -> QIcon:
    from importlib import resources

    path = resources.files("assets").joinpath("icons", "app.svg")
    return QIcon(str(path)) if path.is_file() else QIcon()


def ensure_app(argv: Sequence[str] | None = None) -> QApplication:
    app = QApplication.instance()
    if app is None:
        app = QApplication(list(argv) if argv is not None else [sys.argv[0]])
        app.setOrganizationName(ORGANISATION)
        app.setApplicationName(APP_NAME)
        app.setWindowIcon(app_icon())
    return app  # type: ignore[return-value]


def run(files: Sequence[str | Path] = (), theme: str | None = None) -> int:
    """Open the main window (with up to two files: the second is compared with the first)."""
    app = ensure_app()
    window = MainWindow()
    if theme is not None:
        window.set_theme(theme)
    window.show()
    if files:
        window.open_files(list(files))
    return app.exec()


def main() -> int:  # pragma: no cover - interactive
    return run(sys.argv[1:])


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
