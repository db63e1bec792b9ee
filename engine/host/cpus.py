"""Host CPUs as data (``engine/data/cpus.toml``): per-core performance figures with sources.

A host profile (:mod:`engine.host.profile`) is measured on one CPU core; each IPU system
(``engine/data/systems.toml``) names the CPU of its host server. The per-core figure of each CPU
(SPECspeed2017_int_base: one task on one core, as one data-loader process runs) gives the ratio
by which a profile measured on one CPU is scaled to another: costs on CPU ``b`` = costs on CPU
``a`` x figure(a) / figure(b).
"""

from __future__ import annotations

import tomllib
from functools import cache
from importlib import resources

from pydantic import BaseModel, ConfigDict, Field

from engine.errors import ConfigError


class Cpu(BaseModel):
    """One host CPU and its sourced per-core performance."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    key: str
    display_name: str
    match: tuple[str, ...] = Field(description="Substrings of the OS's model name (lower case).")
    specspeed2017_int_base: float = Field(gt=0, description="One copy on one core.")
    specrate2017_int_base_per_core: float = Field(gt=0, description="Cross-check figure.")
    source: str


@cache
def cpus() -> dict[str, Cpu]:
    """Every CPU of ``engine/data/cpus.toml``, validated."""
    text = resources.files("engine").joinpath("data/cpus.toml").read_text("utf-8")
    return {key: Cpu(key=key, **table) for key, table in tomllib.loads(text).items()}


def get_cpu(key: str) -> Cpu:
    """The CPU ``key`` of the table, or one sentence naming the known keys."""
    table = cpus()
    if key not in table:
        raise ConfigError(
            f"host CPU {key!r} is not in engine/data/cpus.toml; known CPUs: {', '.join(table)}."
        )
    return table[key]


def identify(model_name: str) -> str | None:
    """The table key whose ``match`` occurs in the OS's CPU model name, else None."""
    name = str(model_name).lower()
    for key, cpu in cpus().items():
        if any(m in name for m in cpu.match):
            return key
    return None


def cost_factor(from_key: str, to_key: str) -> float:
    """Multiply per-core costs measured on ``from_key`` by this to get them on ``to_key``."""
    a, b = get_cpu(from_key), get_cpu(to_key)
    return a.specspeed2017_int_base / b.specspeed2017_int_base


__all__ = ["Cpu", "cost_factor", "cpus", "get_cpu", "identify"]
