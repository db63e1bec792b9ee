"""Typed problems found in a profile (or in data handed to the writer).

A problem names where it is (``path``: a group, ``group/field`` or ``group@attribute``) and says
what is wrong in one sentence (``message``). ``str(problem)`` is ``"path: message"``.
The validator returns a list of these instead of stopping at the first one.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """Base class of every problem."""

    path: str
    message: str

    @property
    def kind(self) -> str:
        """The problem's type name, e.g. ``"MissingDataset"``."""
        return type(self).__name__

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class Unreadable(Problem):
    """The file cannot be opened or a dataset cannot be read (I/O error, corrupt chunk...)."""


class UnknownVersion(Problem):
    """The file's format name or version is missing, malformed or newer than this build reads."""


class MissingGroup(Problem):
    """A required group is absent."""


class MissingDataset(Problem):
    """A required dataset or table column is absent."""


class MissingAttribute(Problem):
    """A required attribute is absent."""


class WrongDtype(Problem):
    """A dataset, column or attribute has the wrong type."""


class WrongShape(Problem):
    """A dataset's shape does not match the schema (or a table's columns differ in length)."""


class AbsurdSize(Problem):
    """A size is implausible (e.g. 10^15 rows, or a dimension attribute out of any real range)."""


class OutOfRange(Problem):
    """Values outside their allowed range: enum codes, ids, negative sizes."""


class DanglingReference(Problem):
    """An id refers to a row that does not exist in the referenced table."""


class Inconsistent(Problem):
    """Values that contradict each other (unsorted steps, offsets not matching rows, status)."""


class ForeignData(Problem):
    """The file keeps data in other files (external link, external raw storage, virtual
    dataset): refused, nothing outside the file is read."""


PROBLEM_TYPES: tuple[type[Problem], ...] = (
    Unreadable,
    UnknownVersion,
    MissingGroup,
    MissingDataset,
    MissingAttribute,
    WrongDtype,
    WrongShape,
    AbsurdSize,
    OutOfRange,
    DanglingReference,
    Inconsistent,
    ForeignData,
)

__all__ = ["PROBLEM_TYPES", "Problem", *(t.__name__ for t in PROBLEM_TYPES)]
