"""Reading the validated configuration inside a running Pulumi program."""

from __future__ import annotations

from pulumi.runtime import config as runtime_config

from infra.config.models import StackConfig, parse_stack_config, raw_from_pulumi_config


def engine_config() -> dict[str, str]:
    """Every key the stack sets, as the engine passed them.

    The CLI hands config to the program in the PULUMI_CONFIG environment variable; the
    automation API and the mock runtime set it in-process. Seeing every key (rather than
    asking for known ones) is what lets a misspelled key be refused instead of ignored.
    """
    return {**runtime_config.get_config_env(), **runtime_config.CONFIG.get()}


def load() -> StackConfig:
    return parse_stack_config(raw_from_pulumi_config(engine_config()))
