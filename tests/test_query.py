"""SQL over a profile (analyser.query, ``analyse query``): results against the
profile's own arrays, only the named step columns read, the sandbox's refusals."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from analyser.cli import main
from analyser.query import QueryError, query
from analyser.query.tables import needed_columns, tables_named
from profiles import open_profile, schema


@pytest.fixture(scope="module")
def prof(tmp_path_factory) -> Path:
    from profiles import write_profile
    from profiles.synthetic import make_synthetic_profile

    path = tmp_path_factory.mktemp("query") / "p.h5"
    write_profile(path, make_synthetic_profile(n_steps=6000, n_ipus=2, tiles=64, n_programs=60))
    return path


@pytest.fixture(scope="module")
def oom(tmp_path_factory) -> Path:
    from profiles import write_profile
    from profiles.synthetic import make_synthetic_profile

    path = tmp_path_factory.mktemp("query-oom") / "oom.h5"
    write_profile(path, make_synthetic_profile(tiles=32, n_programs=20, oom=True))
    return path


def _steps(path: Path) -> dict[str, np.ndarray]:
    with open_profile(path) as p:
        return {c: p.array(f"/execution/steps/{c}") for c in ("ipu", "type", "cycles", "phase")}


def test_group_by_matches_the_step_arrays(prof):
    s = _steps(prof)
    df = query(prof, "SELECT ipu, type, count(*) AS n, sum(cycles) AS c FROM steps GROUP BY ALL")
    n_types = len(schema.PROGRAM_TYPES)
    key = s["ipu"].astype(np.int64) * n_types + s["type"]
    want_n = np.bincount(key, minlength=2 * n_types)
    want_c = np.bincount(key, weights=s["cycles"], minlength=2 * n_types).astype(np.int64)
    assert df["n"].sum() == s["cycles"].size
    assert df["c"].dtype == np.int64  # 128-bit sums come back as integers
    for r in df.itertuples():
        k = r.ipu * n_types + schema.PROGRAM_TYPES.index(r.type)
        assert (r.n, r.c) == (want_n[k], want_c[k])
    main_steps = query(prof, "SELECT count(*) AS n FROM steps WHERE phase = 'main'")["n"][0]
    assert main_steps == int((s["phase"] == schema.PHASES.index("main")).sum())


def test_other_tables_match_the_profile(prof):
    with open_profile(prof) as p:
        by_cat = p.array("/memory/by_category")
        total = p.array("/memory/total")
        nal = p.array("/liveness/not_always_live")
        flops = p.array("/graph/operations/flops")
        n_vars = p.n_rows("/graph/variables")
        n_prog = p.n_rows("/programs/nodes")
        n_host = p.n_rows("/execution/host") if "/execution/host" in p else 0
    mem = query(prof, "SELECT category, sum(bytes) AS b FROM memory GROUP BY category")
    got = dict(zip(mem["category"], mem["b"]))
    for k, name in enumerate(schema.MEMORY_CATEGORIES):
        assert got[name] == by_cat[:, :, k].sum()
    tiles = query(prof, "SELECT ipu, tile, total FROM tiles ORDER BY ipu, tile")
    assert np.array_equal(tiles["total"].to_numpy(), total.reshape(-1))
    peak = query(
        prof, "SELECT ipu, max(not_always_live) AS m FROM liveness GROUP BY ipu ORDER BY ipu"
    )
    assert np.array_equal(peak["m"].to_numpy(), nal.max(axis=1))
    ops = query(prof, "SELECT count(*) AS n, sum(flops) AS f FROM operations")
    assert (ops["n"][0], ops["f"][0]) == (flops.size, flops.sum())
    assert query(prof, "SELECT count(*) AS n FROM variables")["n"][0] == n_vars
    assert query(prof, "SELECT count(*) AS n FROM programs")["n"][0] == n_prog
    assert query(prof, "SELECT count(*) AS n FROM host")["n"][0] == n_host
    # a join: steps by program name equals the programs table's names
    j = query(
        prof,
        "SELECT count(*) AS n FROM steps s JOIN programs p ON s.program = p.id WHERE s.name = p.name",
    )
    assert j["n"][0] == _steps(prof)["cycles"].size
    # columns of the same name are all kept
    both = query(prof, "SELECT a.id, b.id, a.name FROM programs a JOIN programs b ON a.id = b.id")
    assert list(both.columns) == ["id", "id_2", "name"] and len(both) == n_prog


def test_only_named_tables_and_step_columns_are_read():
    assert needed_columns("SELECT count(*) FROM steps") == frozenset()
    assert needed_columns("SELECT ipu, sum(cycles) FROM steps GROUP BY 1") == {"ipu", "cycles"}
    assert needed_columns("SELECT cycles * 2 FROM steps") == {"cycles"}
    assert needed_columns('SELECT "Start" FROM steps') == {"start"}
    for star in (
        "SELECT * FROM steps",
        "SELECT s.* FROM steps s",
        "SELECT 1, * FROM steps",
        "SELECT COLUMNS('c.*') FROM steps",
        "SELECT 1 FROM steps NATURAL JOIN host",
    ):
        assert needed_columns(star) is None, star
    # names inside strings and comments are not tables
    assert tables_named("SELECT 'memory' FROM steps -- and host") == ["steps"]


def _plan(sql):
    import duckdb

    from analyser.query.tables import plan_from_ast

    con = duckdb.connect(":memory:", config={"enable_external_access": False})
    return plan_from_ast(con.execute("SELECT json_serialize_sql(?)", [sql]).fetchall()[0][0])


def test_the_plan_comes_from_duckdbs_parse(prof):
    assert _plan("SELECT count(*) FROM steps") == (["steps"], frozenset())
    sql = "SELECT s.ipu, sum(s.cycles) FROM steps s JOIN programs p ON s.program = p.id GROUP BY 1"
    assert _plan(sql) == (["steps", "programs"], {"ipu", "cycles", "program"})
    for whole in (
        "SELECT s FROM steps s",
        "SELECT steps FROM steps",
        "SELECT * FROM steps",
        "SELECT 1 FROM steps NATURAL JOIN host",
    ):
        assert _plan(whole)[1] is None, whole
    assert _plan("SELECT 1 FROM steps JOIN host USING (start)")[1] == {"start"}
    # a whole row as a struct has every column
    row = query(prof, "SELECT s FROM steps s LIMIT 1")["s"][0]
    assert set(row) >= {"ipu", "start", "cycles", "type", "phase"}


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM read_csv('/etc/passwd')",
        "SELECT * FROM read_text('/etc/passwd')",
        "SELECT * FROM '/etc/passwd'",
        "COPY (SELECT 1) TO 'out.csv'",
        "ATTACH 'other.db'",
        "INSTALL httpfs",
        "LOAD httpfs",
        "SET enable_external_access = true",
        "PRAGMA enable_profiling",
        "SELECT 1; SELECT 2",
        "CREATE TABLE t AS SELECT 1",
        "SELECT * FROM glob('/*')",
        "",
    ],
)
def test_the_sandbox_refuses_in_one_sentence(prof, tmp_path, capsys, monkeypatch, sql):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(QueryError):
        query(prof, sql)
    assert main(["query", str(prof), sql]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("analyse query:") and "\n" not in err and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_cli_formats_and_bad_input(prof, oom, tmp_path, capsys):
    sql = "SELECT type, count(*) AS n FROM steps GROUP BY type ORDER BY type"
    want = query(prof, sql)
    assert main(["query", str(prof), sql, "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["n"] for r in rows] == want["n"].tolist()
    out = tmp_path / "r.parquet"
    assert main(["query", str(prof), sql, "--format", "parquet", "-o", str(out)]) == 0
    import pyarrow.parquet as pq

    assert pq.read_table(out).column("n").to_pylist() == want["n"].tolist()
    assert main(["query", str(prof), sql, "--format", "csv", "-o", str(tmp_path / "r.csv")]) == 0
    assert (tmp_path / "r.csv").read_text().splitlines()[0] == "type,n"
    assert main(["query", str(prof), sql]) == 0
    assert "OnTileExecute" in capsys.readouterr().out
    for argv in (
        ["query", str(prof), sql, "--format", "parquet"],  # no -o
        ["query", str(prof), sql, "--format", "csv", "-o", str(prof)],  # over the input
        ["query", str(oom), "SELECT count(*) FROM steps"],  # no execution
        ["query", str(tmp_path / "missing.h5"), "SELECT 1"],
        ["query", str(prof), "SELECT nope FROM steps"],
    ):
        capsys.readouterr()
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and "Traceback" not in err, err
    # the memory of an OOM profile is there
    assert query(oom, "SELECT count(*) AS n FROM tiles WHERE total + gaps > sram")["n"][0] > 0


def test_a_running_query_stops_when_interrupted(prof):
    """The CLI runs the query on a worker thread and interrupts it on Ctrl-C / SIGTERM."""
    import threading

    from analyser.query import query_arrow

    done = threading.Event()

    def keep_interrupting(con) -> None:
        def loop() -> None:
            while not done.wait(0.2):
                con.interrupt()

        threading.Thread(target=loop, daemon=True).start()

    try:
        with pytest.raises(KeyboardInterrupt):
            query_arrow(
                prof,
                "SELECT count(*) FROM steps a, steps b, steps c",  # 6,000^3 rows: stopped early
                on_connect=keep_interrupting,
            )
    finally:
        done.set()


# -- bounds, exact numbers, one sentence for each failure ----------------------------------------


def _one_sentence(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("analyse query:") and "\n" not in err and "Traceback" not in err, err
    return err


def test_128_bit_integers_print_exactly(prof, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "240")
    big, half = 2**128 - 1, 2**127
    sql = f"SELECT {big}::UHUGEINT AS u, {half}::UHUGEINT AS h, (-{half})::HUGEINT AS n, 7::HUGEINT AS s"
    assert main(["query", str(prof), sql, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"u": big, "h": half, "n": -half, "s": 7}]
    assert main(["query", str(prof), sql, "--format", "csv"]) == 0
    assert capsys.readouterr().out.splitlines()[1].split(",") == [
        str(big),
        str(half),
        str(-half),
        "7",
    ]
    assert main(["query", str(prof), sql]) == 0
    out = capsys.readouterr().out
    assert str(big) in out and str(half) in out and "-1 " not in out


def test_a_query_that_never_ends_stops_at_its_time_limit(prof, capsys):
    endless = (
        "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT count(*) FROM r"
    )
    assert main(["query", str(prof), endless, "--timeout", "0.5"]) == 2
    assert "time limit (0.5 s)" in _one_sentence(capsys)
    for bad in ("0", "-1", "nan", "inf", "soon"):
        with pytest.raises(SystemExit) as e:
            main(["query", str(prof), "SELECT 1", "--timeout", bad])
        assert e.value.code == 2


def test_rows_are_capped_before_they_are_computed(prof, capsys):
    # 6,000^3 rows: only the 100 shown are computed (the query would not end otherwise)
    sql = "SELECT a.cycles, b.cycles FROM steps a, steps b, steps c"
    assert main(["query", str(prof), sql, "--timeout", "120"]) == 0
    out = capsys.readouterr().out
    assert "the first 100 rows shown; more not computed" in out
    assert main(["query", str(prof), "SELECT 1 AS x", "--max-rows", "1"]) == 0
    assert "1 row" in capsys.readouterr().out
    with pytest.raises(SystemExit) as e:
        main(["query", str(prof), "SELECT 1", "--max-rows", "100000000000000000000"])
    assert e.value.code == 2
    assert "at most 1,000,000 rows" in capsys.readouterr().err


def test_a_result_past_its_byte_limit_is_one_sentence(prof, capsys, monkeypatch):
    import analyser.query as q

    with pytest.raises(QueryError, match="the result passed"):
        q.query_arrow(prof, "SELECT * FROM range(1000000)", max_bytes=1 << 20)
    monkeypatch.setattr(q, "RESULT_LIMIT", 1 << 20)
    monkeypatch.setattr(
        q.query_arrow, "__kwdefaults__", {**q.query_arrow.__kwdefaults__, "max_bytes": 1 << 20}
    )
    assert main(["query", str(prof), "SELECT * FROM range(1000000)", "--format", "json"]) == 2
    assert "the result passed" in _one_sentence(capsys)


def test_spill_files_go_to_the_cache_folder(prof, tmp_path, monkeypatch):
    import duckdb

    import analyser.query as q

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    seen = {}

    def look(con: duckdb.DuckDBPyConnection) -> None:
        seen["temp"] = con.execute("SELECT current_setting('temp_directory')").fetchone()[0]
        seen["max"] = con.execute("SELECT current_setting('max_temp_directory_size')").fetchone()[0]

    q.query_arrow(prof, "SELECT count(*) FROM steps", on_connect=look)
    root = tmp_path / "cache" / "ipu-graph-analyser" / "query-tmp"
    assert Path(seen["temp"]).parent == root
    assert "GiB" in seen["max"] or "GB" in seen["max"]
    assert list(root.iterdir()) == []  # its folder is removed when the query ends
    assert not (tmp_path / ".tmp").exists()


def test_types_a_format_cannot_hold_and_a_wrong_argument_are_one_sentence(prof, tmp_path, capsys):
    for sql in ("SELECT INTERVAL 1 DAY AS i", "SELECT union_value(a := 1) AS u"):
        for fmt in ("parquet", "csv"):
            out = tmp_path / f"r.{fmt}"
            assert main(["query", str(prof), sql, "--format", fmt, "-o", str(out)]) == 2
            assert "cast it in the query" in _one_sentence(capsys)
            assert not out.exists()
    with pytest.raises(QueryError, match="SQL text"):
        query(prof, 1)


def test_a_too_deep_query_does_not_suggest_a_refused_setting(prof, capsys):
    deep = "SELECT " + "(" * 2000 + "1" + ")" * 2000
    assert main(["query", str(prof), deep]) == 2
    err = _one_sentence(capsys)
    assert "SET" not in err and "fewer nested expressions" in err


def _analyse_query(*args: str, env: dict | None = None):
    """``analyse query ARGS`` in a fresh process, as a user runs it (SIGINT as a terminal's
    Ctrl-C: a suite started in the background inherits it ignored), under an address-space
    limit of its own so that a bound that failed could not take the machine."""
    import os
    import resource
    import subprocess
    import sys

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (16 << 30, 16 << 30))

    code = (
        "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "from analyser.cli import main; sys.exit(main())"
    )
    return subprocess.Popen(
        [sys.executable, "-c", code, "query", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=limit,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads VmSize from /proc")
def test_a_query_whose_lists_outgrow_every_limit_ends_in_one_sentence(prof, tmp_path):
    """DuckDB's memory limit does not count a list or the result handed to Python
    (``len(range(10**9))`` took 20 GB); the query's own process has an address-space limit,
    so it ends in one sentence, its peak bounded, its spill folder removed."""
    import resource

    cache = tmp_path / "cache"
    p = _analyse_query(
        str(prof), "SELECT len(range(1000000000)) AS n", env={"XDG_CACHE_HOME": str(cache)}
    )
    _out, err = p.communicate(timeout=120)
    assert p.returncode == 2, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "memory" in lines[0] and "Traceback" not in err, err
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    assert peak_kib < 8 << 20  # far under the 8 GB the list would need
    assert list((cache / "ipu-graph-analyser" / "query-tmp").iterdir()) == []


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_a_signal_while_duckdb_works_ends_the_query_at_once(prof, tmp_path, sig):
    """Ctrl-C or SIGTERM while DuckDB runs: the query's process is ended, the command says
    so in one sentence with 130 / 143 (it aborted the process at exit, "terminate called
    after throwing ...", when DuckDB ran on a thread of analyse's own process)."""
    import signal
    import time

    cache = tmp_path / "cache"
    p = _analyse_query(
        str(prof), "SELECT count(*) FROM range(1000000000000)", env={"XDG_CACHE_HOME": str(cache)}
    )
    root = cache / "ipu-graph-analyser" / "query-tmp"
    # DuckDB is at work once the query's spill folder exists (made just before it connects)
    deadline = time.monotonic() + 120
    while not (root.exists() and any(root.iterdir())) and p.poll() is None:
        assert time.monotonic() < deadline, "the query never started"
        time.sleep(0.02)
    p.send_signal(getattr(signal, sig))
    _out, err = p.communicate(timeout=60)
    assert p.returncode == (130 if sig == "SIGINT" else 143), err
    assert "terminate called" not in err and "Traceback" not in err
    assert len([line for line in err.splitlines() if line.strip()]) == 1, err
    assert list(root.iterdir()) == []


def test_the_hostile_query_cases_are_one_sentence(prof, tmp_path, capsys):
    import hostile

    hostile.assert_one_sentence_each(hostile.query_bound_cases(prof, tmp_path), capsys)
    assert list(tmp_path.iterdir()) == []


def test_a_wide_result_on_a_narrow_terminal_keeps_whole_columns_from_both_ends(prof, capsys):
    from analyser.cli.query import _columns_that_fit

    assert main(["query", str(prof), "SELECT * FROM steps LIMIT 3", "--width", "80"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert all(len(line) <= 80 for line in lines), out
    header = next(line for line in lines if "step" in line and "\u2503" in line)
    cells = [c.strip() for c in header.strip("\u2503").split("\u2503")]
    # the first and the last columns whole, the ones left out marked and named below
    assert cells[0] == "step" and "\u2026" in cells and cells[-1] != "\u2026"
    names = query(prof, "SELECT * FROM steps LIMIT 1").columns.tolist()
    assert cells[-1] == names[-1]
    footer = out[out.index(f"{len(names)} columns") :].replace("\n", " ")
    hidden = [n for n in names if n not in cells]
    assert hidden and all(n in footer for n in hidden)
    # wide enough: every column, no note
    assert main(["query", str(prof), "SELECT * FROM steps LIMIT 3", "--width", "400"]) == 0
    wide = capsys.readouterr().out
    assert "\u2026" not in wide and "columns," not in wide
    # the choice: whole columns only, alternately from the left and the right
    assert _columns_that_fit([5, 5, 5, 5, 5], 200) == [0, 1, 2, 3, 4]
    assert _columns_that_fit([5, 5, 5, 5, 5], 30) == [0, 1, -1, 4]  # 1 + 3 x 8 + 4 cells
    assert _columns_that_fit([100, 5], 40) == [0, -1]


def _sleep_for_a_minute(*_args, **_kwargs):
    import time

    time.sleep(60)


def test_a_signal_between_the_fork_and_start_returning_ends_the_child(prof, monkeypatch):
    """SIGTERM arriving after the query's process was forked but before ``start`` returned (a
    loaded machine) raised where the process object did not know its child yet: the cleanup's
    ``join`` failed ("can only join a started process", an internal error) and the child ran
    on, holding the command's output open. Held until ``start`` returns, it ends the child."""
    import os
    import signal
    import threading
    from multiprocessing import popen_fork

    from analyser.query.process import run_bounded

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signal handlers are set on the main thread only")
    launch = popen_fork.Popen._launch
    forked: list[int] = []

    def launch_then_signal(self, process_obj):
        launch(self, process_obj)
        forked.append(self.pid)
        os.kill(os.getpid(), signal.SIGTERM)  # inside start: its Popen is not assigned yet

    class Stopped(Exception):
        pass

    def stop(_signum, _frame):
        raise Stopped

    monkeypatch.setattr(popen_fork.Popen, "_launch", launch_then_signal)
    old = signal.signal(signal.SIGTERM, stop)
    try:
        with pytest.raises(Stopped):
            run_bounded(str(prof), "SELECT 1", query=_sleep_for_a_minute)
    finally:
        signal.signal(signal.SIGTERM, old)
    assert len(forked) == 1
    with pytest.raises(ChildProcessError):  # killed and reaped: no such child of ours
        os.waitpid(forked[0], os.WNOHANG)


def _exit_at_once(*_args, **_kwargs):
    import os

    os._exit(3)


def test_a_query_process_that_ends_with_its_own_status_is_not_called_out_of_memory(prof):
    """A child that ends with an exit status of its own (Python failed before the query ran:
    a script run from standard input cannot be re-imported by the fork server) said "most
    likely it ran out of memory", which sent the user after the wrong cause."""
    from analyser.query.process import run_bounded

    with pytest.raises(QueryError) as err:
        run_bounded(str(prof), "SELECT 1", query=_exit_at_once)
    text = str(err.value)
    assert "exit 3" in text and "failed while starting" in text
    assert "most likely it ran out of memory" not in text
