"""Reading the stack's raw configuration inside a running Pulumi program."""

from __future__ import annotations

from typing import Any

from pulumi.runtime import config as runtime_config

from infra.config.base import PROFILE_KEY, REGION_KEY, project_values
from infra.config.models import PROJECT


def engine_config() -> dict[str, str]:
    """Every key the stack sets, as the engine passed them.

    The CLI hands config to the program in the PULUMI_CONFIG environment variable; the
    automation API and the mock runtime set it in-process. Seeing every key (rather than
    asking for known ones) is what lets a misspelled key be refused instead of ignored.
    """
    return {**runtime_config.get_config_env(), **runtime_config.CONFIG.get()}


def raw_from_pulumi_config(all_config: dict[str, str]) -> dict[str, Any]:
    """Pick this project's keys (and the AWS provider's region and profile) out of the
    engine's flat config map."""
    raw = project_values(all_config, PROJECT)
    if REGION_KEY in all_config:
        raw["region"] = all_config[REGION_KEY]
    if PROFILE_KEY in all_config:
        raw["profile"] = all_config[PROFILE_KEY]
    return raw
