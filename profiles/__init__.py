"""The IPU profile format: schema, writer, lazy reader, validation, synthetic profiles.

Public API::

    from profiles import open_profile, write_profile, ProfileWriter, validate
    from profiles.synthetic import make_synthetic_profile, write_synthetic_profile

See docs/profile-format.md for the format and examples.
"""

from __future__ import annotations

from profiles.errors import ProfileError, ProfileWriteError, SchemaMismatchError, UserFacingError
from profiles.problems import Problem
from profiles.reader import Profile, open_profile
from profiles.schema import FORMAT_NAME, FORMAT_VERSION
from profiles.validation import validate
from profiles.writer import ProfileWriter, write_profile

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
