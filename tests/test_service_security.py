"""Who may talk to the simulation service's embedded Dask cluster.

The embedded cluster listens on loopback, where any local process can connect; every run gets
its own TLS key and certificate (``analyser.sim.service.service._embedded_security``) and
requires them of every peer, so only our own client and workers are let in. These tests attack
the session's cluster from another process, as another local user's program would: a plain Dask
client, a TLS client without our certificate and one with a certificate of its own, against
the scheduler and each worker directly; none of them may run anything (a marker file stays
absent). The workers have no nannies, so nothing else listens."""

from __future__ import annotations

import subprocess
import sys
import textwrap

#: The attacker: every way in it tries, each with short timeouts; prints one line per attempt.
ATTACK = textwrap.dedent(
    """
    import sys, asyncio
    import dask
    dask.config.set({"distributed.comm.timeouts.connect": "2s",
                     "distributed.comm.retry.count": 0})
    from distributed import Client
    from distributed.core import rpc
    from distributed.protocol.pickle import dumps
    from distributed.security import Security

    marker = sys.argv[1]
    scheduler, others = sys.argv[2], sys.argv[3:]

    def touch(path=marker):
        open(path, "a").write("ran\\n")
        return "ran"

    class Lax(Security):
        # TLS that trusts any server and shows the attacker own certificate (or none)

        def __init__(self, own=None):
            super().__init__(require_encryption=True)
            self.own = own

        def get_connection_args(self, role):
            import ssl, tempfile, os
            ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            if self.own is not None:
                with tempfile.TemporaryDirectory() as d:
                    cert, key = os.path.join(d, "c.pem"), os.path.join(d, "k.pem")
                    open(cert, "w").write(self.own.tls_client_cert)
                    open(key, "w").write(self.own.tls_client_key)
                    ctx.load_cert_chain(cert, key)
            return {"ssl_context": ctx, "require_encryption": True, "extra_conn_args": {}}

    def variants(addr):
        port = addr.rsplit(":", 1)[1]
        yield f"tcp://127.0.0.1:{port}", None
        yield f"tls://127.0.0.1:{port}", Lax()
        yield f"tls://127.0.0.1:{port}", Lax(Security.temporary())

    for addr, sec in variants(scheduler):
        try:
            c = Client(addr, timeout=3, security=sec, set_as_default=False)
        except BaseException as exc:
            print("scheduler", addr, "refused:", type(exc).__name__)
            continue
        for how in ("run_on_scheduler", "submit", "run"):
            try:
                if how == "run_on_scheduler":
                    c.run_on_scheduler(touch)
                elif how == "submit":
                    c.submit(touch, pure=False).result(timeout=5)
                else:
                    c.run(touch)
                print("scheduler", addr, how, "RAN")
            except BaseException as exc:
                print("scheduler", addr, how, "failed:", type(exc).__name__)
        c.close()

    async def hit_worker(addr, sec):
        args = sec.get_connection_args("client") if sec is not None else {}
        r = rpc(addr, connection_args=args, timeout=3)
        try:
            return await asyncio.wait_for(r.run(function=dumps(touch)), 5)
        finally:
            await r.close_rpc()

    for addr, sec in (v for other in others for v in variants(other)):
        try:
            out = asyncio.run(hit_worker(addr, sec))
            print("worker", addr, "answered", str(out)[:60])
        except BaseException as exc:
            print("worker", addr, "refused:", type(exc).__name__)
    """
)


def test_other_processes_cannot_run_code_in_the_embedded_cluster(sim_cluster, tmp_path):
    """A plain client, a TLS client without our certificate and one with its own certificate,
    at the scheduler and at every worker: nothing runs."""
    client = sim_cluster.client()
    client.wait_for_workers(2, timeout=60)  # they join once forked, after the client is up
    scheduler = sim_cluster._cluster.scheduler_address
    workers = client.scheduler_info()["workers"]
    # no nanny listens beside a worker (a nanny runs functions too: its "run" handler)
    assert len(workers) == 2 and not any(w.get("nanny") for w in workers.values()), workers
    assert all(a.startswith("tls://") for a in (scheduler, *workers)), workers
    marker = tmp_path / "marker"
    proc = subprocess.run(
        [sys.executable, "-c", ATTACK, str(marker), scheduler, *workers],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert not marker.exists(), proc.stdout + proc.stderr
    assert "RAN" not in proc.stdout and "answered" not in proc.stdout, proc.stdout
    # every attempt was made (the attacker script did not just crash)
    assert proc.stdout.count("refused") + proc.stdout.count("failed") == 9, proc.stdout
    # and our own client still works
    assert client.run_on_scheduler(lambda: 7) == 7


def _tune(tmp_path, *extra):
    from analyser.cli import main

    cfg = tmp_path / "mlp.toml"
    cfg.write_text('model = "mlp"\n')
    argv = ["tune", str(cfg), "--vary", "micro_batch_size=1,2", "-o", str(tmp_path / "o")]
    return main([*argv, "--cache", str(tmp_path / "c"), "--quiet", *extra])


def test_tls_options_that_cannot_be_used_are_one_sentence(tmp_path, capsys):
    """--tls-* files that are missing, not regular, too big or not PEM: exit 2, one sentence
    naming the file, before any connection; and the options need a tls:// scheduler."""
    import os

    pem = tmp_path / "junk.pem"
    pem.write_text("not a certificate\n")
    fifo = tmp_path / "fifo.pem"
    os.mkfifo(fifo)
    big = tmp_path / "big.pem"
    with open(big, "wb") as fh:
        fh.truncate(2 << 20)
    sched = ["--scheduler", "tls://127.0.0.1:9"]
    cases = [
        ([*sched, "--tls-ca-file", str(tmp_path / "nope"), "--tls-cert", str(pem)], "nope"),
        ([*sched, "--tls-ca-file", str(fifo), "--tls-cert", str(pem)], "not a regular file"),
        ([*sched, "--tls-ca-file", str(big), "--tls-cert", str(pem)], "big.pem"),
        ([*sched, "--tls-ca-file", str(pem), "--tls-cert", str(pem)], "cannot be used"),
        ([*sched, "--tls-cert", str(pem)], "go together"),
        (
            ["--scheduler", "tcp://127.0.0.1:9", "--tls-ca-file", str(pem), "--tls-cert", str(pem)],
            "tls://",
        ),
    ]
    for extra, says in cases:
        assert _tune(tmp_path, *extra) == 2, extra
        err = capsys.readouterr().err
        assert says in err and err.count("\n") == 1 and "Traceback" not in err, (extra, err)
    assert not (tmp_path / "o").exists()
