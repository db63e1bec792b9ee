"""Import ONNX models as engine graphs (and export zoo models as ONNX): see docs/onnx.md.

``load_graph(config)`` is the model registry hook: the forward graph of ``config.model`` when it
is an ``.onnx`` path, cached per file (path, size, modification time) and import options, so
what-if re-simulations do not re-read the file. ``import_onnx(path, ...)`` returns the graph and
the import facts; errors are :class:`OnnxError` (one sentence naming the file).

Modules: ``reader`` (parse, opset, external data, cycles, checker), ``shapes`` (binding dynamic
dimensions, constant folding, strict shape inference), ``ops`` (the operator table),
``importer`` (the walk), ``export`` (zoo -> ONNX), ``info`` (``analyse model-info``).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from engine.onnx.importer import ImportInfo, import_onnx, layer_path
from engine.onnx.reader import OLDEST_OPSET, OnnxError, newest_opset


def load_graph(config):
    """The forward graph of the ONNX model of a RunConfig (cached)."""
    p = Path(config.model)
    try:
        st = p.stat()
        stamp = (st.st_size, st.st_mtime_ns)
    except OSError:
        stamp = (-1, -1)
    shapes = tuple(sorted((k, tuple(v)) for k, v in config.input_shapes.items()))
    return _cached(str(p), stamp, shapes, config.training, config.unknown_ops)[0]


@lru_cache(maxsize=8)
def _cached(path, stamp, shapes, training, unknown_ops):
    return import_onnx(
        path,
        input_shapes={k: list(v) for k, v in shapes},
        training=training,
        unknown_ops=unknown_ops,
    )


__all__ = [
    "OLDEST_OPSET",
    "ImportInfo",
    "OnnxError",
    "import_onnx",
    "layer_path",
    "load_graph",
    "newest_opset",
]
