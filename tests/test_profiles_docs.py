"""docs/profile-format.md is generated from the schema, and its Python example runs."""

from __future__ import annotations

import re

from profiles.docs import DOC_PATH, render_markdown
from profiles.schema import GROUPS, version_string
from profiles.synthetic import write_synthetic_profile


def test_profile_format_doc_is_up_to_date():
    assert DOC_PATH.read_text(encoding="utf-8") == render_markdown(), (
        "docs/profile-format.md is stale: run `python -m profiles.docs --write`"
    )


def test_doc_covers_every_field():
    text = render_markdown()
    for g in GROUPS:
        assert f"### `{g.path}`" in text
        for f in g.fields:
            assert f"| `{f.name}` |" in text


def test_reading_example_runs(tmp_path, capsys):
    path = tmp_path / "example.h5"
    write_synthetic_profile(path, n_steps=4000, n_ipus=2, tiles=16, n_programs=60, liveness_steps=8)
    code = re.search(r"```python\n(.*?)```", render_markdown(), re.S).group(1)
    exec(compile(code.replace('"resnet101_step2.h5"', repr(str(path))), "doc-example", "exec"), {})
    assert f"ok 2 16 {version_string()}" in capsys.readouterr().out
