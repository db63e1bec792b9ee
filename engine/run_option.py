"""What a run option is beyond its type, default and bounds, declared on its RunConfig field.

Every :class:`engine.config.RunConfig` field may carry a :class:`RunOption` record (written with
:func:`option`, stored in the field's ``json_schema_extra`` under ``"run_option"`` as plain JSON
values), and everything that lists run options is generated from the model and these records:
the command-line flags (``analyser.cli.run_flags``), the run form and its sections
(``analyser.gui.run_dialog`` through ``analyser.core.run_options``), the figures a change
explains in a comparison (``analyser.core.comparison``) and ``analyse tune``'s levers, aliases
and search values (``analyser.sim.tune.space``). Bounds are the field's own ``ge`` / ``gt`` /
``le`` / ``lt``, read by :func:`bounds`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

_KEY = "run_option"


@dataclass(frozen=True)
class RunOption:
    """One run option's metadata (all optional).

    * ``section``: the heading of the form / what-if section this field starts (a field without
      one falls in the section of the field before it);
    * ``aliases``: short names, accepted by ``analyse tune`` as written (``ga``) and on the
      command line as flags (``--ga``);
    * ``explains``: the comparison figures a change of the option can explain, and
      ``explain_rank`` the place of its reason among the others (lower first);
    * ``tune``: the values ``analyse tune`` tries for it beside the start's, and ``lever_rank``
      the lever's place in tune's default space (None: not a default lever);
    * ``what_if``: the engine simulates it but no framework can apply it (tune never proposes it);
    * ``cli_help`` / ``cli_metavar`` / ``cli_flag`` / ``cli_repeat``: how the command line shows
      it when the TOML description does not fit (a comma-separated list, a repeated flag).
    """

    section: str | None = None
    aliases: tuple[str, ...] = ()
    explains: tuple[str, ...] = ()
    explain_rank: int = 1000
    tune: tuple[Any, ...] = ()
    lever_rank: int | None = None
    what_if: bool = False
    cli_help: str | None = None
    cli_metavar: str | None = None
    cli_flag: str | None = None
    cli_repeat: bool = False


def option(**meta: Any) -> dict[str, Any]:
    """The ``json_schema_extra`` of a RunConfig field carrying :class:`RunOption` ``meta``."""
    record = vars(RunOption(**meta))  # unknown keys fail here, at import
    default = vars(RunOption())
    plain = {
        k: list(v) if isinstance(v, tuple) else v for k, v in record.items() if v != default[k]
    }
    return {_KEY: plain}  # JSON values only: the field's JSON schema stays valid


def option_meta(field: Any) -> RunOption:
    """The :class:`RunOption` declared on a pydantic field (the defaults when none is)."""
    extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
    raw = dict(extra.get(_KEY) or {})
    for name in ("aliases", "explains", "tune"):
        if name in raw:
            raw[name] = tuple(raw[name])
    return RunOption(**raw)


def bounds(field: Any) -> dict[str, float]:
    """The field's declared bounds, ``{"ge"|"gt"|"le"|"lt": value}``."""
    out: dict[str, float] = {}
    for meta in field.metadata:
        for name in ("ge", "gt", "le", "lt"):
            value = getattr(meta, name, None)
            if value is not None:
                out[name] = value
    return out


__all__ = ["RunOption", "bounds", "option", "option_meta"]
