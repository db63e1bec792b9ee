"""Command-line options of the simulation service, shared by the commands that simulate
(``tune``, ``insights``): where the work runs, the cache and the per-simulation limits."""

from __future__ import annotations

import argparse

from analyser.cli.errors import CliError


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


def configure_from_args(args: argparse.Namespace) -> None:
    """Set up the process-wide simulation service from :func:`add_service_arguments`."""
    from analyser.sim.service import configure_service

    if args.workers is not None and args.workers < 1:
        raise CliError("--workers must be at least 1.")
    if args.time_limit is not None and args.time_limit <= 0:
        raise CliError("--time-limit must be a positive number of seconds.")
    memory = None
    if args.memory_limit is not None:
        from dask.utils import parse_bytes

        try:
            memory = int(parse_bytes(args.memory_limit))
        except (ValueError, TypeError):
            raise CliError(
                f"--memory-limit {args.memory_limit}: give a size such as 4GiB or 512MB."
            ) from None
        if memory <= 0:
            raise CliError("--memory-limit must be positive.")
    if args.scheduler is not None and not args.scheduler.strip():
        raise CliError("--scheduler: give an address such as tcp://10.0.0.5:8786.")
    security = _tls_security(args)
    configure_service(
        scheduler=args.scheduler,
        workers=args.workers,
        cache_dir=args.cache,
        memory_limit=memory,
        time_limit=args.time_limit,
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
