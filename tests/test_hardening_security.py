"""Security: nothing outside the profile is read; profile text reaches every output
literally (no terminal escapes, no Markdown / HTML injection, no matplotlib mathtext)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import hostile
import pytest

from analyser.cli import main
from profiles import open_profile
from profiles.errors import ForeignDataError
from profiles.validation import validate

#: C0 controls except newline, DEL, C1 controls, bidi overrides / isolates.
RAW_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


@pytest.fixture(scope="session")
def base_profile(tmp_path_factory) -> Path:
    import engine
    from engine.config import RunConfig

    path = tmp_path_factory.mktemp("base") / "mlp.h5"
    engine.simulate_to_file(RunConfig(model="mlp"), path)
    return path


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("name", list(hostile.profile_mutations()["foreign"]))
def test_foreign_data_is_refused_never_read(base_profile, tmp_path, capsys, name):
    bad = hostile.mutated(
        base_profile, tmp_path, name, hostile.profile_mutations()["foreign"][name]
    )
    with pytest.raises(ForeignDataError, match="self-contained"):
        open_profile(bad)
    problems = validate(bad)
    assert [p.kind for p in problems] == ["ForeignData"]
    for argv in (
        ("validate", str(bad)),
        ("summary", "--json", str(bad)),
        ("report", str(bad), "-o", str(tmp_path / "r.json")),
        ("export-trace", str(bad), "-o", str(tmp_path / "t.json")),
    ):
        code, out, err = run_cli(capsys, *argv)
        assert code == 2, (argv, out, err)
        assert hostile.SECRET not in out + err
        assert err.strip().count("\n") == 0 and "Traceback" not in err, err
    assert not (tmp_path / "r.json").exists() and not (tmp_path / "t.json").exists()


@pytest.fixture(scope="module")
def injected(base_profile, tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("injected")
    return {
        k: hostile.mutated(base_profile, folder, k, m)
        for k, m in hostile.profile_mutations()["injection"].items()
    }


def test_terminal_output_shows_control_characters_escaped(injected, base_profile, capsys):
    bad = injected["names-terminal"]
    for argv in (
        ("summary", str(bad)),
        ("insights", "--no-resimulate", str(bad)),
        ("compare", str(base_profile), str(bad)),
        ("validate", str(bad)),
    ):
        code, out, err = run_cli(capsys, *argv)
        assert code in (0, 1), (argv, err)
        assert not RAW_CONTROL.search(out + err), (argv, repr(out[:400]))
    code, out, _ = run_cli(capsys, "summary", str(bad))
    assert "\\x1b[2J" in out  # shown, not swallowed


def test_terminal_output_keeps_names_literal(injected, capsys):
    code, out, _ = run_cli(capsys, "summary", str(injected["names-rich"]))
    assert code == 0
    assert "[bold red]markup[/]" in out  # rich markup in a name is text, not style
    code, out, _ = run_cli(capsys, "summary", str(injected["names-bidi"]))
    assert "\\u202e" in out and "\u202e" not in out


def _markdown_report(path: Path, tmp_path: Path, capsys) -> str:
    out = tmp_path / f"{path.stem}.md"
    code, _, err = run_cli(capsys, "report", str(path), "-o", str(out))
    assert code == 0, err
    return out.read_text("utf-8")


def test_markdown_report_writes_names_literally(injected, tmp_path, capsys):
    """Rendered by a CommonMark parser (markdown-it-py, rich's own), a name stays text: no raw
    HTML, no link, no heading of its own; the stored characters are all there."""
    from markdown_it import MarkdownIt

    render = MarkdownIt("commonmark").enable("table").render
    md = _markdown_report(injected["names-markdown"], tmp_path, capsys)
    html = render(md)
    assert "<script" not in html and "javascript:" not in html.replace("(javascript:", "")
    assert 'href="javascript' not in html
    assert not re.search(r"<h\d>Injected heading", html)
    assert "[x](javascript:alert(1)) &lt;script&gt;alert(1)&lt;/script&gt;model" in html
    html = render(_markdown_report(injected["names-html"], tmp_path, capsys))
    # the report's own images (its charts, files beside it) are the only <img> elements
    imgs = re.findall(r"<img[^>]*>", html)
    assert imgs and all('src="names-html_files/' in i for i in imgs), imgs
    assert "&lt;img src=x" in html
    md = _markdown_report(injected["names-terminal"], tmp_path, capsys)
    assert not RAW_CONTROL.search(md)


def test_reports_with_mathtext_names_render(injected, tmp_path, capsys):
    """A '$\\foo$' in a name is text for matplotlib, not mathtext (it crashed the charts)."""
    for fmt in ("html", "md"):
        out = tmp_path / f"m.{fmt}"
        code, _, err = run_cli(capsys, "report", str(injected["names-mathtext"]), "-o", str(out))
        assert code == 0, err
    odd = tmp_path / "$\\foo$.h5"
    odd.write_bytes(injected["names-terminal"].read_bytes())
    code, _, err = run_cli(capsys, "report", str(odd), "-o", str(tmp_path / "odd.html"))
    assert code == 0, err
    html = (tmp_path / "odd.html").read_text("utf-8")
    assert "\x1b" not in html


def test_json_outputs_stay_exact(injected, capsys):
    """JSON is for programs: names stay exactly as stored (json escapes control characters)."""
    code, out, _ = run_cli(capsys, "summary", "--json", str(injected["names-terminal"]))
    assert code == 0 and "\x1b" not in out
    assert hostile.INJECTIONS["terminal"] + "model" in out.encode().decode("unicode_escape") or (
        hostile.INJECTIONS["terminal"] + "model" in json.dumps(json.loads(out), ensure_ascii=False)
    )


def test_list_thresholds_needs_no_file(capsys):
    code, out, _ = run_cli(capsys, "insights", "--list-thresholds")
    assert code == 0 and "host_wait_high" in out
    code, _, err = run_cli(capsys, "insights")
    assert code == 2 and "--list-thresholds" in err and "Traceback" not in err
