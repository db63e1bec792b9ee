"""Loading profiles off the GUI thread.

A load is a frozen request (paths to open, analysis keys to warm) run as a QRunnable on a
QThreadPool; the result comes back to the GUI thread through a signal. Opening a profile reads
metadata only; warming computes the analysis results the first report needs, so the first paint
does not block the GUI thread either. Stale results (a newer load started meanwhile) are dropped
by the window using the request id.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from PySide6.QtCore import QObject, QRunnable, Signal

from analyser.gui.model.document import Document
from profiles.errors import UserFacingError

_ids = itertools.count(1)


@dataclass(frozen=True)
class LoadRequest:
    """Open ``paths`` (the first is the document, the second, if any, the compare document)."""

    paths: tuple[Path, ...]
    #: Called in the worker thread with each opened Document to warm its cache, and a function
    #: to call with the name of each of its ``steps`` steps as it starts (the progress shown).
    warm: Callable[[Document, Callable[[str], None]], None] | None = None
    request_id: int = field(default_factory=lambda: next(_ids))
    #: Called in the worker thread with (A, B) when two profiles open together (what compare
    #: mode computes for the pair, e.g. the explained comparison the Summary shows).
    warm_pair: Callable[[Document, Document], None] | None = None
    #: Steps of ``warm`` per document (for the progress: reading a file is one step more).
    steps: int = 0

    def total_steps(self) -> int:
        """Steps of the whole load: per file its reading and its warm steps, then the pair."""
        pair = 1 if self.warm_pair is not None and len(self.paths) == 2 else 0
        return len(self.paths) * (1 + self.steps) + pair


@dataclass(frozen=True)
class LoadResult:
    request: LoadRequest
    documents: tuple[Document, ...] = ()
    #: One sentence saying what went wrong, or "" on success.
    error: str = ""
    #: The file the error is about.
    error_path: Path | None = None
    #: Sentences on what makes an opened profile's figures wrong (it opens all the same).
    warnings: tuple[str, ...] = ()


class LoadSignals(QObject):
    """The loader's results, delivered on the GUI thread. The window owns one: a runnable must
    never own a QObject, because the pool deletes a finished runnable on its own thread, which
    would destroy a GUI-thread object there while the GUI thread may still be delivering its
    queued signal (a segmentation fault in CI; Qt: "a QObject must be deleted in the thread
    that owns it", https://doc.qt.io/qt-6/threads-qobject.html)."""

    finished = Signal(object)  # LoadResult
    #: (request id, steps done, steps in all, what is being done) as a load goes on
    progress = Signal(int, int, int, str)


class LoadTask(QRunnable):
    """Open the profiles of a LoadRequest in a worker thread; the result goes out through the
    caller's ``signals``."""

    def __init__(self, request: LoadRequest, signals: LoadSignals) -> None:
        super().__init__()
        self.request = request
        self.signals = signals
        self.setAutoDelete(True)

    def _step(self, what: str) -> None:
        req = self.request
        self.signals.progress.emit(req.request_id, self._done, req.total_steps(), what)
        self._done += 1

    def run(self) -> None:
        docs: list[Document] = []
        warnings: list[str] = []
        current: Path | None = None
        self._done = 0
        try:
            for path in self.request.paths:
                current = path
                self._step(f"reading {path.name}")
                doc = Document.open(path)
                docs.append(doc)
                warnings.extend(_warnings_of(doc))
                if self.request.warm is not None:
                    # the file's name bound now (a closure would read the loop's last path)
                    def progress(need: str, n: str = path.name) -> None:
                        self._step(f"{n}: {need.replace('_', ' ')}")

                    self.request.warm(doc, progress)
            if self.request.warm_pair is not None and len(docs) == 2:
                current = None
                self._step("comparing the two profiles")
                self.request.warm_pair(docs[0], docs[1])
            result = LoadResult(self.request, tuple(docs), warnings=tuple(warnings))
        except UserFacingError as exc:
            for doc in docs:
                doc.close()
            result = LoadResult(self.request, (), str(exc), current)
        except Exception as exc:  # a bug in reading or analysis: report it, keep the app alive
            for doc in docs:
                doc.close()
            name = current.name if current is not None else "the profile"
            result = LoadResult(
                self.request,
                (),
                f"{name} could not be analysed: {type(exc).__name__}: {exc}",
                current,
            )
        self.signals.finished.emit(result)


def _warnings_of(doc: Document) -> list[str]:
    """The profile's warnings (``data.profile_warnings``); a check that cannot read what it
    checks says nothing (the reports that read it give their own sentence)."""
    from analyser.gui.model import data

    try:
        return data.profile_warnings(doc)
    except Exception:
        return []


def make_request(
    paths: Sequence[str | Path],
    warm: Callable[[Document, Callable[[str], None]], None] | None = None,
    warm_pair: Callable[[Document, Document], None] | None = None,
    steps: int = 0,
) -> LoadRequest:
    """A load of ``paths`` (see :class:`LoadRequest`)."""
    return LoadRequest(tuple(Path(p) for p in paths), warm, warm_pair=warm_pair, steps=steps)
