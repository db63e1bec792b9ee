"""The command line's output width: into a pipe or a log nothing is cut at 80 columns (names and
headers whole), ``--width N`` fits the output to N columns, and a terminal keeps its own width."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from analyser.cli import main

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-c", "import sys; from analyser.cli import main; sys.exit(main())"]


@pytest.fixture(scope="module")
def mlp(tmp_path_factory) -> Path:
    import engine
    from engine.config import RunConfig

    path = tmp_path_factory.mktemp("width") / "mlp.h5"
    engine.simulate_to_file(RunConfig(model="mlp"), path)
    return path


@pytest.fixture(autouse=True)
def _no_columns(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)


def _operation_names(path: Path) -> list[str]:
    from analyser.core import Analysis

    with Analysis.open(path) as a:
        return [str(n) for n in a.operations["name"]]


def test_a_pipe_gets_every_name_and_header_whole(mlp, capsys):
    assert main(["roofline", str(mlp)]) == 0
    out = capsys.readouterr().out
    assert "…" not in out
    rows = [line for line in out.splitlines() if line.startswith("│")]
    shown = {line.split("│")[1].strip() for line in rows}
    assert shown and shown <= set(_operation_names(mlp))
    assert max(len(line) for line in out.splitlines()) > 80  # wider than a terminal's default

    assert main(["query", str(mlp), "SELECT * FROM variables LIMIT 3"]) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if line.startswith("┃"))
    names = [c.strip() for c in header.strip("┃").split("┃")]
    from analyser.query import query

    assert names == list(query(str(mlp), "SELECT * FROM variables LIMIT 1").columns)


def test_width_option_fits_the_output(mlp, capsys):
    assert main(["roofline", str(mlp), "--width", "70"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines and max(len(line) for line in lines) <= 70
    assert main(["summary", str(mlp), "--width", "100"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines and max(len(line) for line in lines) <= 100


def test_a_rule_in_a_log_stays_short(mlp, capsys):
    """Section rules (``analyse insights``) do not grow to the unbounded width of a log."""
    assert main(["insights", str(mlp), "--no-resimulate"]) == 0
    out = capsys.readouterr().out
    rules = [line for line in out.splitlines() if line.count("─") > 20]
    assert all(len(line) <= 100 for line in rules)


@pytest.mark.parametrize("value", ["0", "-3", "wide"])
def test_bad_width_is_one_sentence(mlp, capsys, value):
    with pytest.raises(SystemExit) as exc:
        main(["roofline", str(mlp), "--width", value])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--width" in err and "Traceback" not in err


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_a_terminal_keeps_its_width(mlp):
    """On a terminal of 90 columns the output fits in 90 columns (rich's own width)."""
    import fcntl
    import pty
    import struct
    import termios

    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 90, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env.update(PYTHONPATH=str(ROOT), TERM="xterm", NO_COLOR="1")
    proc = subprocess.Popen(
        [*CLI, "roofline", str(mlp)],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        env=env,
        cwd=ROOT,
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:  # the follower closed: the command ended
            break
        if not data:
            break
        chunks.append(data)
    code = proc.wait(timeout=120)
    os.close(leader)
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", b"".join(chunks).decode("utf-8", "replace"))
    lines = [line for line in text.replace("\r", "").splitlines() if line.strip()]
    assert code == 0, text
    assert any(line.startswith("┏") for line in lines)
    assert max(len(line) for line in lines) <= 90


def test_hostile_widths_and_image_folders(mlp, tmp_path):
    """tests/hostile.py's cases: a bad --width, and a Markdown report's images with a file, a
    FIFO or a profile in their way: one sentence each, exit 2, nothing replaced."""
    import hostile

    cases = hostile.width_and_image_cases(mlp, tmp_path)
    before = mlp.read_bytes()
    for name, case in cases.items():
        o = hostile.run_in_process(case.argv, 60.0)
        assert o.code == case.expect and o.clean, (name, o.stderr, o.traceback)
        assert len(o.stderr.strip().splitlines()) <= 2, (name, o.stderr)  # usage + sentence
        for text in case.says:
            assert text in o.stderr, (name, o.stderr)
        assert not (tmp_path / f"{name}.md").exists()
    assert (tmp_path / "h5_files" / "p1-memory-per-tile.svg").read_bytes() == before
    assert not (tmp_path / "fifo.md").exists() and not (tmp_path / "h5.md").exists()
