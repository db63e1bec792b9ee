"""The "Run engine" dialog: build a run configuration (every RunConfig field) and run it.

The form is generated from ``engine.config.RunConfig.model_fields``, so it always offers every
option the engine has, with its default, description (tooltip) and allowed values:
``bool`` -> check box, ``Literal[...]`` -> combo box, ``int`` / ``float`` -> spin boxes bounded by
the field's ``ge`` / ``le``, optional numbers -> a text field where empty means "default",
lists -> comma-separated text, dicts -> JSON text, anything else -> text. Values are validated by
``RunConfig.from_dict`` (one-sentence errors shown in the dialog); the run itself goes through
:class:`analyser.gui.whatif.WhatIfDialog` (the simulation service, progress, cancel) and the
result opens in the window, compared with the current profile when asked.
"""

from __future__ import annotations

import json
import types
import typing
from pathlib import Path
from typing import Any

from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from analyser.core.run_options import SECTION_STARTS, run_name, section_starts
from analyser.gui.theme import emphasised
from analyser.gui.whatif import WhatIfDialog
from analyser.gui.widgets import push_button
from analyser.literal import html as lit
from engine.run_option import bounds
from profiles.errors import UserFacingError

_INT_MAX = 2_000_000_000
#: Decimals of the real-number spin boxes (also the step that makes an exclusive bound inclusive).
_DECIMALS = 4

#: Section headings of the form (analyser.core.run_options: the first field of each section).
SECTIONS: dict[str, str] = SECTION_STARTS


def example_configs() -> list[tuple[str, Path]]:
    """The bundled example run configurations (``assets/runs``, walkthrough steps included) as
    (label, path), to start a run from."""
    from importlib import resources

    root = Path(str(resources.files("assets").joinpath("runs")))
    out = [(p.stem, p) for p in sorted(root.glob("*.toml"))]
    out += [(f"walkthrough {p.stem}", p) for p in sorted((root / "walkthrough").glob("*.toml"))]
    return out


def _unwrap_optional(ann: Any) -> tuple[Any, bool]:
    origin = typing.get_origin(ann)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(ann) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(ann)) == 2:
            return args[0], True
    return ann, False


def _bounds(field, step: float = 1) -> tuple[float | None, float | None]:
    """The inclusive range a spin box may offer for ``field``: its ``ge`` / ``le`` as they are,
    and an exclusive ``gt`` / ``lt`` moved in by ``step`` (the box's smallest change: 1 for whole
    numbers, 10^-decimals for reals), so that no offered value is one RunConfig refuses
    (``loss_scaling`` > 0 starts at 0.0001, not 0)."""
    declared = bounds(field)
    lo = declared.get("ge", declared["gt"] + step if "gt" in declared else None)
    hi = declared.get("le", declared["lt"] - step if "lt" in declared else None)
    return lo, hi


def _suggestions() -> dict[str, list[str]]:
    """Known values of free-text fields (the target names, the zoo models; the model field also
    takes an ONNX file: its button, or a file dropped on the dialog)."""
    from engine.config import MODEL_NAMES

    try:
        from engine.targets import TARGET_NAMES
    except ImportError:
        return {"model": list(MODEL_NAMES)}
    return {"target": list(TARGET_NAMES), "model": list(MODEL_NAMES)}


def _onnx_file(mime) -> str | None:
    """The first local .onnx file of a drag's mime data (None if there is none)."""
    if not mime.hasUrls():
        return None
    for url in mime.urls():
        path = url.toLocalFile()
        if path.lower().endswith(".onnx"):
            return path
    return None


class FieldEditor:
    """One form row: a widget plus how to read / write its value."""

    def __init__(self, name: str, field, suggestions: list[str] | None = None) -> None:
        self.name = name
        self.field = field
        ann, self.optional = _unwrap_optional(field.annotation)
        self.kind = "text"
        default = field.get_default(call_default_factory=True)
        if typing.get_origin(ann) is typing.Literal:
            self.kind = "choice"
            w = QComboBox()
            self.choices = list(typing.get_args(ann))
            w.addItems([str(c) for c in self.choices])
        elif ann is bool:
            self.kind = "bool"
            w = QCheckBox()
        elif ann is int and not self.optional:
            self.kind = "int"
            w = QSpinBox()
            lo, hi = _bounds(field)
            w.setRange(
                int(lo) if lo is not None else -_INT_MAX, int(hi) if hi is not None else _INT_MAX
            )
            w.setGroupSeparatorShown(True)
        elif ann is float and not self.optional:
            self.kind = "float"
            w = QDoubleSpinBox()
            w.setDecimals(_DECIMALS)
            lo, hi = _bounds(field, 10.0**-_DECIMALS)
            w.setRange(
                float(lo) if lo is not None else -1e12, float(hi) if hi is not None else 1e12
            )
        elif typing.get_origin(ann) is list or ann is list:
            self.kind = "list"
            w = QLineEdit()
            w.setPlaceholderText("comma-separated")
        elif typing.get_origin(ann) is dict or ann is dict:
            self.kind = "dict"
            w = QLineEdit()
            example = (
                '{"input_ids": [1, 128]}' if name == "input_shapes" else '{"clock_hz": 1.85e9}'
            )
            w.setPlaceholderText(f"JSON, e.g. {example}")
        elif ann is str and suggestions:
            self.kind = "choice"
            w = QComboBox()
            w.setEditable(True)
            self.choices = list(suggestions)
            w.addItems(self.choices)
        else:
            self.kind = "number?" if ann in (int, float) else "text"
            self.number_type = ann if ann in (int, float) else None
            w = QLineEdit()
            if self.optional:
                w.setPlaceholderText("empty = automatic / default")
        self.widget = w
        w.setObjectName(f"field_{name}")
        w.setToolTip(field.description or name)
        self.set_value(default)

    def set_value(self, value: Any) -> None:
        w = self.widget
        if self.kind == "choice":
            if value in self.choices:
                w.setCurrentIndex(self.choices.index(value))
            elif w.isEditable() and value is not None:
                w.setEditText(str(value))
        elif self.kind == "bool":
            w.setChecked(bool(value))
        elif self.kind == "int":
            w.setValue(int(value or 0))
        elif self.kind == "float":
            w.setValue(float(value or 0.0))
        elif self.kind == "list":
            w.setText(", ".join(map(str, value or [])))
        elif self.kind == "dict":
            w.setText(json.dumps(value or {}) if value else "")
        else:
            w.setText("" if value is None else str(value))

    def value(self) -> Any:
        w = self.widget
        if self.kind == "choice":
            if w.isEditable():
                return w.currentText().strip()
            return self.choices[w.currentIndex()]
        if self.kind == "bool":
            return w.isChecked()
        if self.kind in ("int", "float"):
            return w.value()
        text = w.text().strip()
        if self.kind == "list":
            return [t.strip() for t in text.split(",") if t.strip()]
        if self.kind == "dict":
            if not text:
                return {}
            try:
                return json.loads(text)
            except ValueError:
                raise UserFacingError(f"{self.name}: {text!r} is not valid JSON.") from None
        if self.kind == "number?":
            if not text:
                return None
            try:
                return self.number_type(text)
            except ValueError:
                raise UserFacingError(f"{self.name}: {text!r} is not a number.") from None
        if not text and self.optional:
            return None
        return text


class RunEngineDialog(QDialog):
    """Form over every RunConfig field; "Run" validates and starts the engine."""

    def __init__(self, window=None, initial: dict[str, Any] | None = None, parent=None) -> None:
        super().__init__(parent or window)
        from engine.config import RunConfig

        self.RunConfig = RunConfig
        self.window_ = window
        self.setWindowTitle("Run the engine")
        self.resize(620, 760)
        self.setAcceptDrops(True)  # an .onnx file dropped here becomes the model
        lay = QVBoxLayout(self)
        top = QHBoxLayout()
        # start from a bundled example (the walkthrough steps, ResNet-50, BERT, MLP)
        self.examples = QComboBox()
        self.examples.addItem("Start from an example…", None)
        for label, path in example_configs():
            self.examples.addItem(label, str(path))
        self.examples.activated.connect(self._on_example)
        top.addWidget(self.examples)
        self.filter = QLineEdit()
        self.filter.setPlaceholderText("Filter options…")
        self.filter.textChanged.connect(self._apply_filter)
        top.addWidget(self.filter, 1)
        self.load_button = push_button("Load TOML…", self._load_dialog)
        self.save_button = push_button("Save TOML…", self._save_dialog)
        top.addWidget(self.load_button)
        top.addWidget(self.save_button)
        lay.addLayout(top)
        form_host = QWidget()
        self.form = QFormLayout(form_host)
        self.editors: dict[str, FieldEditor] = {}
        self.labels: dict[str, QLabel] = {}
        suggestions = _suggestions()
        self.section_labels: dict[str, QLabel] = {}
        self._section_of: dict[str, str] = {}
        section = ""
        starts = section_starts(RunConfig)  # the model's own: a subclass's sections too
        for name, field in RunConfig.model_fields.items():
            if name in starts:
                section = starts[name]
                heading = QLabel(section)
                heading.setObjectName("sectionTitle")
                emphasised(heading, 13, top=6)
                self.form.addRow(heading)
                self.section_labels[section] = heading
            self._section_of[name] = section
            ed = FieldEditor(name, field, suggestions.get(name))
            label = QLabel(name)
            label.setToolTip(field.description or name)
            if name == "model":
                row = QWidget()
                row_lay = QHBoxLayout(row)
                row_lay.setContentsMargins(0, 0, 0, 0)
                row_lay.addWidget(ed.widget, 1)
                self.onnx_button = QPushButton("ONNX file…")
                self.onnx_button.setObjectName("onnx_button")
                self.onnx_button.setToolTip(
                    "Choose your own model as an ONNX file (or drop an .onnx file on this dialog)."
                )
                self.onnx_button.clicked.connect(self._browse_onnx)
                row_lay.addWidget(self.onnx_button)
                self.form.addRow(label, row)
            else:
                self.form.addRow(label, ed.widget)
            self.editors[name] = ed
            self.labels[name] = label
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setWidget(form_host)
        lay.addWidget(scroll, 1)
        out_row = QHBoxLayout()
        out_row.addWidget(QLabel("Output profile:"))
        # empty: the profile stays in the analyser's cache (File > Save profile as... keeps a
        # copy); a file is written only where the user asks
        self.output = QLineEdit("")
        self.output.setPlaceholderText(
            "kept in the analyser's cache (or choose a file to write it to)"
        )
        browse = push_button("…", self._browse_output)
        out_row.addWidget(self.output, 1)
        out_row.addWidget(browse)
        lay.addLayout(out_row)
        self.compare = QCheckBox("Open compared with the current profile")
        doc = getattr(getattr(window, "workspace", None), "document", None)
        self.current_doc = doc
        self.compare.setEnabled(doc is not None)
        self.compare.setChecked(doc is not None)
        lay.addWidget(self.compare)
        self.error = QLabel("")
        self.error.setWordWrap(True)
        self.error.setStyleSheet("color: #c62828;")
        lay.addWidget(self.error)
        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        self.buttons.button(QDialogButtonBox.StandardButton.Ok).setText("Run")
        self.buttons.accepted.connect(self.run)
        self.buttons.rejected.connect(self.reject)
        lay.addWidget(self.buttons)
        self.job_dialog: WhatIfDialog | None = None
        if initial is None and doc is not None:
            initial = dict(doc.analysis.run_config or {})
        if initial:
            self.set_config(initial)

    # -- values ----------------------------------------------------------------------------------
    def set_config(self, data: dict[str, Any]) -> None:
        for name, value in data.items():
            if name in self.editors:
                self.editors[name].set_value(value)

    def values(self) -> dict[str, Any]:
        return {name: ed.value() for name, ed in self.editors.items()}

    def config(self) -> dict[str, Any]:
        """The validated configuration (raises a one-sentence UserFacingError)."""
        return self.RunConfig.from_dict(self.values()).to_dict()

    def _apply_filter(self, text: str) -> None:
        t = text.lower().strip()
        shown_sections = set()
        for name, ed in self.editors.items():
            show = not t or t in name.lower() or t in (ed.field.description or "").lower()
            self.form.setRowVisible(self.labels[name], show)
            if show:
                shown_sections.add(self._section_of[name])
        for section, heading in self.section_labels.items():
            self.form.setRowVisible(heading, section in shown_sections)

    def _on_example(self, index: int) -> None:
        path = self.examples.itemData(index)
        if path:
            self.load_toml(path)

    # -- files -----------------------------------------------------------------------------------
    def load_toml(self, path: str | Path) -> None:
        try:
            cfg = self.RunConfig.from_toml(path)
        except UserFacingError as exc:
            self.error.setText(str(exc))
            return
        self.set_config(cfg.to_dict())
        self.error.setText("")

    def _load_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Load run configuration", "", "TOML (*.toml)")
        if path:
            self.load_toml(path)

    def _save_dialog(self) -> None:
        try:
            cfg = self.RunConfig.from_dict(self.values())
        except UserFacingError as exc:
            self.error.setText(str(exc))
            return
        path, _ = QFileDialog.getSaveFileName(
            self, "Save run configuration", "run.toml", "TOML (*.toml)"
        )
        if path:
            Path(path).write_text(cfg.to_toml(), encoding="utf-8")

    def _browse_onnx(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self, "Choose an ONNX model", "", "ONNX models (*.onnx);;All files (*)"
        )
        if path:
            self.set_onnx_model(path)

    def set_onnx_model(self, path: str | Path) -> None:
        """Use the ONNX file at ``path`` as the model (absolute, as the engine records it)."""
        self.editors["model"].set_value(str(Path(path).resolve()))
        # the file has its own sizes: the zoo's size options go back to their defaults
        for name in ("image_size", "image_channels", "num_classes", "seq_length", "vocab_size"):
            ed = self.editors[name]
            ed.set_value(ed.field.get_default(call_default_factory=True))
        self.error.setText("")

    def dragEnterEvent(self, event) -> None:  # Qt override
        if _onnx_file(event.mimeData()):
            event.acceptProposedAction()
        else:
            event.ignore()

    def dropEvent(self, event) -> None:  # Qt override
        path = _onnx_file(event.mimeData())
        if path:
            self.set_onnx_model(path)
            event.acceptProposedAction()

    def _browse_output(self) -> None:
        path, _ = QFileDialog.getSaveFileName(
            self, "Output profile", self.output.text() or "run.h5", "Profiles (*.h5)"
        )
        if path:
            self.output.setText(path)

    # -- run -------------------------------------------------------------------------------------
    def _check_model(self, cfg: dict[str, Any]) -> None:
        """Model-level checks before starting (an ONNX file that cannot be imported, a split point
        naming no layer), as ``analyse profile`` makes them: one sentence in the dialog."""
        import engine

        engine.check(cfg).require()

    def run(self) -> WhatIfDialog | None:
        try:
            cfg = self.config()
            self._check_model(cfg)
            text = self.output.text().strip()
            out = Path(text).expanduser() if text else None
            if out is not None and out.exists():
                raise UserFacingError(
                    f"{out} already exists; choose another output file (profiles are never "
                    "overwritten from here)."
                )
            if out is not None and not out.parent.exists():
                raise UserFacingError(f"the folder {out.parent} does not exist.")
        except UserFacingError as exc:
            self.error.setText(str(exc))
            return None
        self.error.setText("")
        original = (
            Path(self.current_doc.path) if self.compare.isChecked() and self.current_doc else None
        )
        window = self.window_

        def opened(orig: Path | None, result: Path) -> None:
            if window is None:
                return
            if orig is not None and hasattr(window, "open_compare"):
                window.open_compare(orig, result)
            elif hasattr(window, "open_files"):
                window.open_files([result])

        self.job_dialog = WhatIfDialog(
            "Running the engine",
            f"Simulating <b>{lit(cfg.get('model'))}</b> on {lit(cfg.get('num_ipus'))} × "
            f"{lit(cfg.get('target'))}"
            + (
                f" into <code>{lit(out)}</code>."
                if out is not None
                else " (kept in the analyser's cache; File &gt; Save profile as… keeps a copy)."
            ),
            cfg,
            out,
            original,
            opened,
            window or self,
            name=run_name(cfg),
        )
        self.job_dialog.start()
        self.accept()
        return self.job_dialog


def open_run_dialog(window) -> RunEngineDialog:
    """Menu action: show the dialog (non-modal) and return it."""
    dialog = RunEngineDialog(window)
    dialog.show()
    return dialog
