"""The run dialog takes an ONNX model: the model field's file button and drag and drop."""

from __future__ import annotations

import onnx
import pytest

from tests import onnx_models as om

pytestmark = pytest.mark.gui


def test_run_dialog_takes_an_onnx_file(qtbot, tmp_path, monkeypatch):
    from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
    from PySide6.QtGui import QDragEnterEvent, QDropEvent

    from analyser.gui import run_dialog
    from analyser.gui.run_dialog import RunEngineDialog

    path = tmp_path / "mlp.onnx"
    onnx.save(om.mlp(), str(path))
    d = RunEngineDialog(None)
    qtbot.addWidget(d)
    # the zoo models are still offered
    assert "bert-large" in d.editors["model"].choices
    # the file button
    monkeypatch.setattr(
        run_dialog.QFileDialog, "getOpenFileName", staticmethod(lambda *a, **k: (str(path), ""))
    )
    d.editors["image_size"].set_value(64)  # e.g. from a walkthrough example
    d.onnx_button.click()
    assert d.config()["model"] == str(path.resolve())
    assert d.config()["image_size"] == 224  # the file has its own sizes
    # drag and drop: an .onnx file is accepted, anything else is not
    d.editors["model"].set_value("mlp")
    for name, accepted in (("notes.txt", False), ("mlp.onnx", True)):
        mime = QMimeData()
        mime.setUrls([QUrl.fromLocalFile(str(tmp_path / name))])
        enter = QDragEnterEvent(
            QPointF(5, 5).toPoint(),
            Qt.DropAction.CopyAction,
            mime,
            Qt.MouseButton.LeftButton,
            Qt.KeyboardModifier.NoModifier,
        )
        d.dragEnterEvent(enter)
        assert enter.isAccepted() is accepted
    drop = QDropEvent(
        QPointF(5, 5),
        Qt.DropAction.CopyAction,
        mime,
        Qt.MouseButton.LeftButton,
        Qt.KeyboardModifier.NoModifier,
    )
    d.dropEvent(drop)
    assert d.config()["model"] == str(path.resolve())
    # an unbindable dynamic dimension is one sentence in the dialog, no run
    seq = tmp_path / "seq.onnx"
    onnx.save(om.transformer(einsum=True), str(seq))
    d.set_onnx_model(seq)
    d.output.setText(str(tmp_path / "out.h5"))
    assert d.run() is None
    assert "nothing binds it" in d.error.text()
    assert not (tmp_path / "out.h5").exists()
