"""Errors that carry a message meant for the user (no traceback is shown for these)."""

from __future__ import annotations


class UserFacingError(Exception):
    """Base for expected errors: the message is one sentence naming the problem.

    ``exit_code`` is what the CLI exits with (2 for usage / input problems).
    Every package (profiles, engine, analyser) derives its expected errors from this class so
    the CLI and GUI can show them without a traceback.
    """

    exit_code: int = 2


class ProfileError(UserFacingError):
    """A profile file cannot be read: missing, not HDF5, truncated, wrong schema or version."""


class ForeignDataError(ProfileError):
    """A profile keeps data outside the file (external link, external raw storage, virtual
    dataset); it is refused before anything is read (see :mod:`profiles.foreign`)."""


class ProfileWriteError(UserFacingError):
    """A profile cannot be written: refused overwrite, missing folder, no permission, disk full."""


class SchemaMismatchError(ProfileWriteError):
    """The data handed to the writer does not match the schema (missing field, wrong shape...)."""
