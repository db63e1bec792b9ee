"""The IPU profile format: schema, writer, lazy reader, validation, synthetic profiles.

Public API::

    from profiles import open_profile, write_profile, ProfileWriter, validate
    from profiles.synthetic import make_synthetic_profile, write_synthetic_profile

See docs/profile-format.md for the format and examples.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from profiles.errors import (
        ProfileError,
        ProfileWriteError,
        SchemaMismatchError,
        UserFacingError,
    )
    from profiles.problems import Problem
    from profiles.reader import Profile, open_profile
    from profiles.schema import FORMAT_NAME, FORMAT_VERSION
    from profiles.validation import validate
    from profiles.writer import ProfileWriter, write_profile

# Each public name is imported from its module on first use, so that importing a light module of
# the package (profiles.errors, profiles.atomic: what every command needs at start-up) does not
# import h5py and numpy through the reader (about 0.2 s of CPU, more than the whole of
# ``analyse --version`` otherwise).
_HOME = {
    "FORMAT_NAME": "profiles.schema",
    "FORMAT_VERSION": "profiles.schema",
    "Problem": "profiles.problems",
    "Profile": "profiles.reader",
    "ProfileError": "profiles.errors",
    "ProfileWriteError": "profiles.errors",
    "ProfileWriter": "profiles.writer",
    "SchemaMismatchError": "profiles.errors",
    "UserFacingError": "profiles.errors",
    "open_profile": "profiles.reader",
    "validate": "profiles.validation",
    "write_profile": "profiles.writer",
}


def __getattr__(name: str) -> object:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'profiles' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # later look-ups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOME))


__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "Problem",
    "Profile",
    "ProfileError",
    "ProfileWriteError",
    "ProfileWriter",
    "SchemaMismatchError",
    "UserFacingError",
    "open_profile",
    "validate",
    "write_profile",
]
