"""The type checker's configuration in pyproject.toml: the packages that check clean are in its
``files`` (which name real paths), and its exemption list (overrides with ``ignore_errors``) names
real modules and none of those packages, so the checked code can only grow. .ci/run runs
``mypy`` with this configuration."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: What checks clean, as ``files`` names it: each is checked and none is exempted.
CHECKED = {
    "analyser/__init__.py",
    "analyser/_sigint.py",
    "analyser/literal.py",
    "analyser/output.py",
    "analyser/notebook.py",
    "analyser/core",
    "analyser/reports",
    "analyser/sim",
    "analyser/query",
    "analyser/cli",
    "analyser/trace",
    "analyser/export",
    "analyser/viewmodels",
    "analyser/gui/model",
    "profiles",
    "engine/*.py",
    "engine/onnx",
}
#: Packages none of whose modules may be exempted (the engine's packages as well as its top
#: level: they checked clean once and stay checked), and single modules of the same standing.
CLEAN_PACKAGES = (
    "analyser.core",
    "analyser.reports",
    "analyser.sim",
    "analyser.query",
    "analyser.cli",
    "analyser.trace",
    "analyser.export",
    "analyser.viewmodels",
    "analyser.gui.model",
    "profiles",
    "engine",
)
CLEAN_MODULES = (
    "analyser",
    "analyser._sigint",
    "analyser.literal",
    "analyser.output",
    "analyser.notebook",
)

#: The project's own top-level packages: no override may skip or silence them.
OWN = ("analyser", "engine", "profiles")


def _config() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]


def _overrides() -> list[dict]:
    return _config().get("overrides", [])


def _modules(override: dict) -> list[str]:
    names = override["module"]  # mypy takes one name or a list
    return [names] if isinstance(names, str) else list(names)


def _exempt() -> list[str]:
    return [m for o in _overrides() if o.get("ignore_errors") for m in _modules(o)]


def _module_path(name: str) -> Path:
    base = ROOT.joinpath(*name.split("."))
    return base / "__init__.py" if base.is_dir() else base.with_suffix(".py")


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_every_exempted_module_exists() -> None:
    missing = [m for m in _exempt() if not _module_path(m).is_file()]
    assert not missing, f"exempted modules that no longer exist: {missing}"


def test_exemption_list_has_no_duplicates_and_no_wildcards() -> None:
    names = _exempt()
    assert len(names) == len(set(names)), f"exempted twice: {names}"
    assert not [m for m in names if "*" in m], "a wildcard would exempt modules added later"


def test_checked_files_cover_the_clean_packages() -> None:
    files = _config()["files"]
    assert set(files) >= CHECKED, f"not checked: {sorted(CHECKED - set(files))}"


def test_every_checked_path_exists() -> None:
    # mypy stops on a path that names nothing; a glob matching nothing checks nothing
    for entry in _config()["files"]:
        matches = list(ROOT.glob(entry))
        assert matches, f"[tool.mypy] files names {entry!r}, which is not in the repository"
        assert all(p.is_dir() or p.suffix == ".py" for p in matches), entry


def test_no_clean_package_is_exempted() -> None:
    # what checks clean stays checked: the exemption list only holds modules outside it
    exempt = sorted(
        m for m in _exempt() if m in CLEAN_MODULES or any(_within(m, p) for p in CLEAN_PACKAGES)
    )
    assert not exempt, f"modules exempted from mypy although their package checks clean: {exempt}"


def test_no_override_skips_or_silences_our_modules() -> None:
    # follow_imports = "skip" / "silent" or a disabled error code would be an exemption that
    # the list above does not show; only third-party modules (pandas) are skipped
    hidden = sorted(
        m
        for o in _overrides()
        if o.get("follow_imports") in ("skip", "silent") or o.get("disable_error_code")
        for m in _modules(o)
        if any(_within(m.removesuffix(".*"), p) for p in OWN)
    )
    assert not hidden, f"overrides that hide type errors of the project's own modules: {hidden}"
    assert _config().get("follow_imports", "normal") == "normal"
    assert not _config().get("disable_error_code")
