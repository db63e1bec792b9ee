"""IPU systems (Pods) as data: ``engine/data/systems.toml`` loaded into :class:`System`.

A system is a number of machines (IPU-M2000 / Bow-2000, ``Target.ipus_per_machine`` IPUs each)
in ``pod64_racks`` IPU-Link domains of at most 64 IPUs (an IPU-POD64 rack), joined by GW-Links
between the racks, with ``host_servers`` host servers of ``host_server_cores`` cores each, whose CPU is
``host_cpu`` (``engine/data/cpus.toml``).
``RunConfig.system`` names one: it sets the chip target and, unless given, the replication
factor that fills the system, and refuses a run that needs more IPUs than the system has.
"""

from __future__ import annotations

import math
import tomllib
from functools import cache
from importlib import resources

from pydantic import BaseModel, ConfigDict, Field, model_validator

from engine.errors import ConfigError

POD64_IPUS = 64


class System(BaseModel):
    """One IPU system: machines, IPU-Link domains, host servers."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    display_name: str
    chip: str = Field(description="Chip target name (engine/data/chips.toml).")
    machines: int = Field(gt=0, description="IPU-M2000 / Bow-2000 machines.")
    pod64_racks: int = Field(gt=0, description="IPU-Link domains (Pod64 racks) joined by GW-Links.")
    host_servers: int = Field(gt=0, description="Host servers (default of the datasheet).")
    host_server: str = Field(description="The host server model.")
    host_server_cores: int = Field(gt=0, description="CPU cores per host server.")
    host_cpu: str = Field(description="The host server's CPU (a key of engine/data/cpus.toml).")

    @model_validator(mode="after")
    def _check(self) -> System:
        if self.host_servers > self.machines:
            raise ValueError("host_servers must not exceed machines")
        from engine.host.cpus import cpus

        if self.host_cpu not in cpus():
            raise ValueError(f"host_cpu {self.host_cpu!r} is not in engine/data/cpus.toml")
        return self

    @property
    def ipus(self) -> int:
        """The IPUs of the system."""
        from engine.targets import get_target

        return self.machines * get_target(self.chip).ipus_per_machine

    @property
    def ipus_per_rack(self) -> int:
        """The IPUs per IPU-POD64 rack."""
        return self.ipus // self.pod64_racks


@cache
def systems() -> dict[str, System]:
    """The systems of ``engine/data/systems.toml``, by name."""
    text = resources.files("engine").joinpath("data/systems.toml").read_text("utf-8")
    return {name: System(name=name, **table) for name, table in tomllib.loads(text).items()}


SYSTEM_NAMES: tuple[str, ...] = tuple(systems())


def get_system(name: str) -> System:
    """The system called ``name`` (other spellings accepted); ConfigError when unknown."""
    key = str(name).strip().lower().replace("ipu-pod", "mk2-pod").replace("_", "-")
    if key not in systems():
        raise ConfigError(
            f"system: unknown system {name!r}; allowed values are {', '.join(SYSTEM_NAMES)}."
        )
    return systems()[key]


def racks_spanned(total_ipus: int, system: System | None) -> int:
    """Pod64 racks (IPU-Link domains) a run of ``total_ipus`` IPUs spans (1 without a system)."""
    if system is None:
        return 1
    return max(1, min(system.pod64_racks, math.ceil(total_ipus / system.ipus_per_rack)))


__all__ = ["POD64_IPUS", "SYSTEM_NAMES", "System", "get_system", "racks_spanned", "systems"]
