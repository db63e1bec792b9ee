"""The type checker's exemption list in pyproject.toml: it names real modules, and profiles/ and the
engine's top level are checked (not exempted), so the list can only shrink towards the checked code."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _config() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]


def _exempt() -> list[str]:
    return [
        m for o in _config().get("overrides", []) if o.get("ignore_errors") for m in o["module"]
    ]


def _module_path(name: str) -> Path:
    base = ROOT.joinpath(*name.split("."))
    return base / "__init__.py" if base.is_dir() else base.with_suffix(".py")


def test_every_exempted_module_exists() -> None:
    missing = [m for m in _exempt() if not _module_path(m).is_file()]
    assert not missing, f"exempted modules that no longer exist: {missing}"


def test_exemption_list_has_no_duplicates_and_no_wildcards() -> None:
    names = _exempt()
    assert names and len(names) == len(set(names))
    assert not [m for m in names if "*" in m], "a wildcard would exempt modules added later"


def test_engine_top_level_is_checked() -> None:
    # every top-level engine module is type-checked with no exemption
    top = {f"engine.{p.stem}" for p in (ROOT / "engine").glob("*.py") if p.stem != "__init__"}
    exempt_top = sorted(top & set(_exempt()))
    assert not exempt_top, f"top-level engine modules exempted from mypy: {exempt_top}"


def test_no_engine_module_is_exempted() -> None:
    # the engine's packages (compiler, execute, onnx, ...) checked clean once and stay checked
    exempt = sorted(m for m in _exempt() if m == "engine" or m.startswith("engine."))
    assert not exempt, f"engine modules exempted from mypy: {exempt}"


def test_profiles_are_checked() -> None:
    exempt = sorted(m for m in _exempt() if m == "profiles" or m.startswith("profiles."))
    assert not exempt, f"profiles modules exempted from mypy: {exempt}"


def test_checked_files_cover_core_profiles_and_engine_top_level() -> None:
    files = _config()["files"]
    assert {"analyser/core", "profiles", "engine/*.py"} <= set(files)
