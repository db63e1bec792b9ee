"""Command-line options of the simulation service, shared by the commands that simulate
(``tune``, ``insights``): where the work runs, the cache and the per-simulation limits."""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from analyser.cli.errors import CliError

if TYPE_CHECKING:
    from analyser.sim.service.service import SimulationService


def add_service_arguments(parser: argparse.ArgumentParser, *, few: bool = False) -> None:
    """Options of the simulation service (shared by the commands that simulate); ``few``: the
    command re-simulates a few configurations, in this process unless the options ask for the
    cluster (:func:`simulator_from_args`)."""
    g = parser.add_argument_group(
        "simulation service",
        "the few re-simulations run in this process; --scheduler (or $ANALYSE_SCHEDULER), "
        "--workers or --memory-limit runs them on a Dask cluster instead"
        if few
        else None,
    )
    g.add_argument(
        "--scheduler",
        metavar="tcp://HOST:PORT",
        default=None,
        help="use the Dask cluster at this scheduler address (default: $ANALYSE_SCHEDULER, "
        "else a local cluster with one worker process per core, secured by TLS credentials "
        "made for the run)",
    )
    g.add_argument(
        "--tls-ca-file",
        metavar="PEM",
        default=None,
        help="with --scheduler tls://...: the CA certificate(s) the scheduler's certificate is "
        "checked against (default: Dask's configuration, distributed.comm.tls.ca-file)",
    )
    g.add_argument(
        "--tls-cert",
        metavar="PEM",
        default=None,
        help="with --scheduler tls://...: this client's certificate (default: Dask's "
        "configuration, distributed.comm.tls.client.cert)",
    )
    g.add_argument(
        "--tls-key",
        metavar="PEM",
        default=None,
        help="with --scheduler tls://...: the key of --tls-cert (default: inside --tls-cert)",
    )
    g.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help="worker processes of the local cluster (default: the number of cores)",
    )
    g.add_argument(
        "--cache",
        metavar="DIR",
        default=None,
        help="simulation cache folder (default: $ANALYSE_CACHE, else "
        "~/.cache/ipu-graph-analyser/simulations)",
    )
    g.add_argument(
        "--time-limit",
        type=float,
        default=None,
        metavar="SECONDS",
        help="stop a simulation after this long (default 600)",
    )
    g.add_argument(
        "--memory-limit",
        default=None,
        metavar="BYTES",
        help="stop a simulation that needs more memory than this, e.g. 4GiB "
        "(default: 85%% of the machine's memory per worker)",
    )


#: Most worker processes of the local cluster per core: each simulates on one core, so more
#: only share the cores (and the memory) with each other.
WORKERS_PER_CORE = 4
#: Smallest --memory-limit: a worker's Python with the engine imported takes about 200 MB
#: before it simulates anything, so a smaller limit stops every simulation at its start.
MIN_MEMORY_LIMIT = 256 << 20
#: Largest --time-limit (a week): longer is no limit, and the watchdog's timer takes seconds
#: as a finite float.
MAX_TIME_LIMIT = 7 * 86400.0


def check_count(option: str, value: int, low: int, high: int, what: str) -> int:
    """A whole-number option between ``low`` and ``high`` (``what``: what ``high`` counts)."""
    if value < low:
        raise CliError(f"{option} must be at least {low}.")
    if value > high:
        raise CliError(f"{option} {value:,} is more than the {high:,} {what}; give at most that.")
    return value


def check_workers(workers: int | None) -> int | None:
    """``--workers`` checked: 1 to :data:`WORKERS_PER_CORE` per core of this machine."""
    import os

    if workers is None:
        return None
    most = WORKERS_PER_CORE * (os.cpu_count() or 1)
    what = f"worker processes this machine runs usefully ({WORKERS_PER_CORE} per core)"
    return check_count("--workers", workers, 1, most, what)


def check_time_limit(seconds: float | None) -> float | None:
    """``--time-limit`` checked: a finite number of seconds, above 0, at most a week."""
    import math

    if seconds is None:
        return None
    if not math.isfinite(seconds) or seconds <= 0:
        raise CliError(f"--time-limit {seconds}: give a positive number of seconds such as 600.")
    if seconds > MAX_TIME_LIMIT:
        raise CliError(
            f"--time-limit {seconds:,.0f} is more than a week ({MAX_TIME_LIMIT:,.0f} s); give "
            "at most that."
        )
    return seconds


def check_memory_limit(text: str | None) -> int | None:
    """``--memory-limit`` as bytes: a size Dask reads (4GiB, 512MB), at least
    :data:`MIN_MEMORY_LIMIT`."""
    import math

    if text is None:
        return None
    from dask.utils import parse_bytes

    shown = text if len(text) <= 40 else text[:37] + "..."
    try:
        value = parse_bytes(text)
        if not math.isfinite(value):
            raise ValueError(text)
        memory = int(value)
    except (ValueError, TypeError, OverflowError):
        raise CliError(f"--memory-limit {shown!r}: give a size such as 4GiB or 512MB.") from None
    if memory < MIN_MEMORY_LIMIT:
        raise CliError(
            f"--memory-limit {shown} is less than a simulation needs to start (at least "
            f"{MIN_MEMORY_LIMIT >> 20} MiB); give a size such as 4GiB."
        )
    return memory


def check_scheduler(address: str | None) -> str | None:
    """``--scheduler`` checked for its form (a protocol Dask speaks, HOST:PORT), without
    connecting to it."""
    if address is None:
        return None
    if not address.strip():
        raise CliError("--scheduler: give an address such as tcp://10.0.0.5:8786.")
    from analyser.sim.service.service import ServiceError, check_scheduler_address

    try:
        check_scheduler_address(address)
    except ServiceError as exc:
        raise CliError(f"--scheduler: {exc}") from None
    return address


def check_service_args(args: argparse.Namespace) -> tuple[int | None, float | None, int | None]:
    """The options of :func:`add_service_arguments` checked (one sentence, exit 2) without
    touching the service: (workers, time limit, memory limit in bytes)."""
    workers = check_workers(args.workers)
    time_limit = check_time_limit(args.time_limit)
    memory = check_memory_limit(args.memory_limit)
    check_scheduler(args.scheduler)
    return workers, time_limit, memory


def configure_from_args(args: argparse.Namespace) -> None:
    """Set up the process-wide simulation service from :func:`add_service_arguments`, each
    option checked first (one sentence, exit 2)."""
    from analyser.sim.service import configure_service

    workers, time_limit, memory = check_service_args(args)
    security = _tls_security(args)
    configure_service(
        scheduler=args.scheduler,
        workers=workers,
        cache_dir=args.cache,
        memory_limit=memory,
        time_limit=time_limit,
        security=security,
    )


def simulator_from_args(args: argparse.Namespace):
    """The simulator of a command that re-simulates a few configurations (``insights``): in
    this process, unless the options ask for the Dask cluster (``--scheduler`` or
    ``$ANALYSE_SCHEDULER``, ``--workers``, ``--memory-limit``); either answers from the cache."""
    from analyser.sim.service import get_service
    from analyser.sim.simulators import InProcessSimulator, ServiceSimulator, wants_cluster

    configure_from_args(args)
    if wants_cluster(
        scheduler=args.scheduler, workers=args.workers, memory_limit=args.memory_limit
    ):
        return ServiceSimulator(get_service())
    limit = args.time_limit
    return (
        InProcessSimulator(args.cache) if limit is None else InProcessSimulator(args.cache, limit)
    )


def _tls_security(args: argparse.Namespace):
    """The ``Security`` of ``--tls-ca-file`` / ``--tls-cert`` / ``--tls-key`` (None when none
    is given: Dask's configuration applies)."""
    import os

    from analyser.sim.service import ENV_SCHEDULER, tls_security

    ca, cert, key = args.tls_ca_file, args.tls_cert, args.tls_key
    if ca is None and cert is None and key is None:
        return None
    if ca is None or cert is None:
        raise CliError(
            "--tls-ca-file and --tls-cert go together (and --tls-key unless the "
            "key is inside the certificate file)."
        )
    scheduler = args.scheduler or os.environ.get(ENV_SCHEDULER) or ""
    if not scheduler.startswith("tls://"):
        raise CliError(
            "the --tls-* options secure a scheduler given as --scheduler tls://HOST:PORT "
            "(the embedded cluster makes its own credentials)."
        )
    return tls_security(ca, cert, key)


# -- the processes a command started ------------------------------------------------------------
def started_before() -> tuple[set[int], SimulationService | None]:
    """What :func:`end_children` leaves alone: this process's children and its simulation
    service as a command finds them (a command run inside another, as the tests and the GUI
    do, must not close the service the outer one is using)."""
    from analyser.sim.service.service import current_service

    return child_pids(), current_service()


def child_pids() -> set[int]:
    """This process's children (Linux: /proc; elsewhere the ones multiprocessing started)."""
    import os

    me = os.getpid()
    out: set[int] = set()
    try:
        names = os.listdir("/proc")
    except OSError:
        import multiprocessing

        return {p.pid for p in multiprocessing.active_children() if p.pid is not None}
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces and parentheses, so after the last ')'
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 1 and int(fields[1]) == me:
            out.add(int(name))
    return out


def end_children(before: tuple[set[int], SimulationService | None], timeout: float = 10.0) -> None:
    """Return only once the processes this command started are gone: the simulation service
    is closed (its worker processes end with their cluster), multiprocessing's resource
    tracker is told to finish when this command started it, and any other child started
    since ``before`` (:func:`started_before`) gets SIGTERM, then SIGKILL after ``timeout``
    s; each is waited for. A worker left running (or the tracker, which outlived ``analyse
    tune`` by seconds) would hold memory and a core after the command had returned. The
    children and the service of ``before`` (a test session's cluster, an outer command's
    service) are left alone."""
    import contextlib
    import os
    import signal
    import time

    from analyser.sim.service.service import close_service

    pids, service = before
    with contextlib.suppress(Exception):
        close_service(keep=service)
    new = child_pids() - pids
    if not new:
        return
    with contextlib.suppress(Exception):
        from multiprocessing import resource_tracker

        # the tracker's private state, which typeshed does not declare (CPython's
        # Lib/multiprocessing/resource_tracker.py: its pid, its end of the pipe, their lock)
        rt: Any = resource_tracker._resource_tracker
        if rt._pid in new and rt._fd is not None:
            with rt._lock:
                os.close(rt._fd)  # its end of the pipe: the tracker cleans up and exits
                rt._fd = rt._pid = None
    tracked = set(new)

    def reap(seconds: float) -> None:
        end = time.monotonic() + seconds
        while tracked:
            for pid in list(tracked):
                try:
                    done, _status = os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:  # reaped by its owner (multiprocessing) already
                    done = pid
                if done:
                    tracked.discard(pid)
            if not tracked or time.monotonic() >= end:
                return
            time.sleep(0.02)

    # a child ending of itself first (the tracker's clean-up), then asked, then killed
    for sig in (None, signal.SIGTERM, signal.SIGKILL):
        if sig is not None:
            for pid in tracked:
                with contextlib.suppress(OSError):
                    os.kill(pid, sig)
        reap(timeout / 2 if sig != signal.SIGKILL else 5.0)
        if not tracked:
            return


def ending_children(
    run: Callable[[argparse.Namespace], int],
) -> Callable[[argparse.Namespace], int]:
    """``run`` as a command that returns only once the processes it started have ended
    (:func:`started_before` / :func:`end_children` around it)."""

    @functools.wraps(run)
    def command(args: argparse.Namespace) -> int:
        before = started_before()
        try:
            return run(args)
        finally:
            end_children(before)

    return command
