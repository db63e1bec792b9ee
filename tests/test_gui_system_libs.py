"""``analyse gui`` on a machine that lacks a system library Qt's xcb plugin needs:
one sentence naming the missing libraries and the Debian packages to install, exit 2, instead of
Qt's raw plugin error and an abort (134).

The missing library is real: the test compiles a stand-in "plugin" linked against a library it
then deletes, so the dynamic loader and ``ldd`` fail exactly as they do for ``libqxcb.so`` on a
fresh Debian machine without ``libxcb-cursor0``.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from analyser.cli import gui as gui_cli
from analyser.cli import main
from analyser.cli.errors import CliError


@pytest.mark.parametrize(
    ("soname", "package"),
    [
        ("libxcb-cursor.so.0", "libxcb-cursor0"),
        ("libxcb-icccm.so.4", "libxcb-icccm4"),
        ("libxcb-render-util.so.0", "libxcb-render-util0"),
        ("libxkbcommon-x11.so.0", "libxkbcommon-x11-0"),
        ("libdbus-1.so.3", "libdbus-1-3"),
        ("libEGL.so.1", "libegl1"),
        ("libglib-2.0.so.0", "libglib2.0-0"),
    ],
)
def test_debian_package_names(soname: str, package: str) -> None:
    assert gui_cli.debian_package(soname) == package


@pytest.fixture(scope="module")
def broken_plugin(tmp_path_factory) -> Path:
    """A shared object that needs ``libxcb-fakecursor.so.0``, which is then removed."""
    if not shutil.which("gcc"):
        pytest.skip("gcc is needed to build the stand-in plugin")
    d = tmp_path_factory.mktemp("plugin")
    (d / "dep.c").write_text("int fake_cursor(void) { return 1; }\n")
    (d / "plugin.c").write_text("int fake_cursor(void);\nint use(void) { return fake_cursor(); }\n")
    dep = d / "libxcb-fakecursor.so.0"
    subprocess.run(
        [
            "gcc",
            "-shared",
            "-fPIC",
            "-Wl,-soname,libxcb-fakecursor.so.0",
            "-o",
            str(dep),
            str(d / "dep.c"),
        ],
        check=True,
    )
    plugin = d / "libqxcb.so"
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-o", str(plugin), str(d / "plugin.c"), str(dep)], check=True
    )
    dep.unlink()
    return plugin


def test_missing_library_is_named(broken_plugin: Path) -> None:
    assert gui_cli.missing_libraries(broken_plugin) == ["libxcb-fakecursor.so.0"]
    with pytest.raises(CliError) as err:
        gui_cli.check_xcb_libraries({"DISPLAY": ":0"}, "linux", broken_plugin)
    text = str(err.value)
    assert "libxcb-fakecursor.so.0" in text
    assert "sudo apt-get install libxcb-fakecursor0" in text


def test_no_check_off_xcb(broken_plugin: Path) -> None:
    # offscreen, Wayland-only and non-Linux runs never load the xcb plugin
    gui_cli.check_xcb_libraries({"QT_QPA_PLATFORM": "offscreen"}, "linux", broken_plugin)
    gui_cli.check_xcb_libraries({"WAYLAND_DISPLAY": "wayland-0"}, "linux", broken_plugin)
    gui_cli.check_xcb_libraries({"DISPLAY": ":0"}, "darwin", broken_plugin)
    with pytest.raises(CliError):
        gui_cli.check_xcb_libraries({"QT_QPA_PLATFORM": "xcb"}, "linux", broken_plugin)


def test_analyse_gui_exits_2_with_one_sentence(broken_plugin, monkeypatch, capsys) -> None:
    monkeypatch.delenv("QT_QPA_PLATFORM", raising=False)
    monkeypatch.setenv("DISPLAY", ":0")
    monkeypatch.setattr(gui_cli, "_xcb_plugin", lambda: broken_plugin)
    assert main(["gui"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "libxcb-fakecursor0" in err and "Traceback" not in err


def test_the_real_plugin_loads_or_is_explained() -> None:
    """On this machine Qt's own plugin either loads or every library it lacks maps to a package."""
    plugin = gui_cli._xcb_plugin()
    if plugin is None:
        pytest.skip("PySide6 ships no xcb plugin here")
    for soname in gui_cli.missing_libraries(plugin):
        assert gui_cli.debian_package(soname).startswith("lib")
