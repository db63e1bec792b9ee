"""The Query report's view-models: what the open profiles offer a query (:class:`QueryView`:
the profiles it may read, the example to start from), built off the GUI thread like every
report's (:mod:`.views`), and each query's answer (:class:`QueryResult`: its table, or the one
sentence saying why there is none), built by :func:`run_query` on the report's pool thread and
painted when it arrives.

The query itself runs in a process of its own under a memory bound
(:func:`analyser.query.process.run_bounded`, forked from a server without the GUI's threads);
the stop the report hands :func:`run_query` ends that process. The report imports nothing of
:mod:`analyser.query`: the tables it lists are here (:data:`TABLE_DOCS`). No Qt.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from analyser.core.units import MemoryUnits
from analyser.gui.model.document import Document
from analyser.gui.model.errors import MAX_DETAIL
from analyser.query import QueryError
from analyser.query.process import Stop, run_bounded
from analyser.query.tables import TABLES
from profiles.errors import UserFacingError

if TYPE_CHECKING:
    import pandas as pd

#: The tables a query can read and what each holds (the list beside the editor).
TABLE_DOCS: tuple[tuple[str, str], ...] = tuple((name, spec.doc) for name, spec in TABLES.items())
#: The query shown when the report opens (cycles and steps by type and IPU).
EXAMPLE = (
    "SELECT ipu, type, count(*) AS steps, sum(cycles) AS cycles\n"
    "FROM steps\nGROUP BY ipu, type\nORDER BY ipu, cycles DESC"
)
#: The example for a profile without execution (it has no steps).
EXAMPLE_NO_STEPS = (
    "SELECT ipu, category, sum(bytes) AS bytes\nFROM memory\nGROUP BY ipu, category\n"
    "ORDER BY ipu, bytes DESC"
)
#: Rows the table shows (the rest are counted in the status line).
MAX_ROWS = 100_000


@dataclass(frozen=True)
class QuerySource:
    """What a query reads: one profile, or A and B together (every table then gains a
    ``profile`` column)."""

    #: the profile choice's text ("A: <name>", "B: <name>", "A and B (a profile column)")
    label: str
    #: the profiles' paths (a path cannot be shared with the query's process as an open file)
    paths: tuple[str, ...]
    #: their names, for the status line ("<A> and <B>")
    names: str


@dataclass(frozen=True)
class QueryView:
    """The profiles a query may read (A first; in compare mode B, then both) and the example
    query for A."""

    sources: tuple[QuerySource, ...]
    example: str
    #: every open profile's path: an exported result is never written over one
    inputs: tuple[str, ...]


@dataclass(frozen=True)
class QueryResult:
    """One query's answer: its table (every row), or ``error``, its one sentence, or
    ``stopped``."""

    sql: str
    source: QuerySource
    #: the result, every row (None: an error or a stop)
    frame: pd.DataFrame | None = None
    #: the rows the table shows (the first MAX_ROWS)
    shown: pd.DataFrame | None = None
    seconds: float = 0.0
    error: str = ""
    stopped: bool = False

    @property
    def n_rows(self) -> int:
        return 0 if self.frame is None else len(self.frame)

    def status(self) -> str:
        """The status line under the editor."""
        if self.stopped:
            return "Stopped."
        if self.error:
            return self.error
        n = self.n_rows
        more = f", the first {MAX_ROWS:,} shown" if n > MAX_ROWS else ""
        plural = "" if n == 1 else "s"
        return f"{n:,} row{plural}{more} from {self.source.names} in {self.seconds:.2f} s."


def build_query_view(doc: Document, other: Document | None, units: MemoryUnits) -> QueryView:
    """The Query view-model of ``doc`` (compared with ``other``); ``units`` unused (a result's
    numbers are the profile's own) but part of every builder's signature."""
    sources = [QuerySource(f"A: {doc.name}", (str(doc.path),), doc.name)]
    if other is not None:
        sources.append(QuerySource(f"B: {other.name}", (str(other.path),), other.name))
        sources.append(
            QuerySource(
                "A and B (a profile column)",
                (str(doc.path), str(other.path)),
                f"{doc.name} and {other.name}",
            )
        )
    inputs = tuple(str(d.path) for d in (doc, other) if d is not None)
    example = EXAMPLE if doc.has_execution else EXAMPLE_NO_STEPS
    return QueryView(tuple(sources), example, inputs)


def run_query(
    source: QuerySource,
    sql: str,
    stop: Stop | None = None,
    started: Callable[[int], None] | None = None,
) -> QueryResult:
    """The answer of ``sql`` over ``source`` (run in a bounded process of its own; ``stop``
    set ends it; ``started`` is called with that process's id once it has started): never
    raises for a bad query, a refused one or one that outgrew its bounds, which are the
    result's one-sentence ``error``. Call it off the GUI thread."""
    t0 = time.perf_counter()
    target: str | list[str] = source.paths[0] if len(source.paths) == 1 else list(source.paths)
    try:
        table = run_bounded(target, sql, stop=stop, start_method="forkserver", started=started)
        frame = table.to_pandas()
    except KeyboardInterrupt:  # stopped: not an error of the query
        return QueryResult(sql, source, stopped=True)
    except (QueryError, UserFacingError) as exc:
        return QueryResult(sql, source, error=_one_sentence(str(exc)))
    except Exception as exc:  # not the query's fault (its process could not start, ...)
        detail = " ".join(str(exc).split())[:MAX_DETAIL].rstrip(".")
        text = f"the query could not run ({detail})." if detail else "the query could not run."
        return QueryResult(sql, source, error=text)
    shown = frame.head(MAX_ROWS) if len(frame) > MAX_ROWS else frame
    return QueryResult(sql, source, frame, shown, time.perf_counter() - t0)


def _one_sentence(text: str) -> str:
    """``text`` on one line (DuckDB's messages can span several, with a caret under the
    position)."""
    return " ".join(text.split()) or "the query failed without saying why."
