"""Reading the validated configuration inside a running Pulumi program."""

from __future__ import annotations

from pulumi.runtime import config as runtime_config

from infra.config import StackConfig, parse_stack_config, raw_from_pulumi_config


def load() -> StackConfig:
    # The engine's flat config map: the only way to see every key the stack file sets, which
    # is what lets a misspelled key be refused instead of silently ignored.
    return parse_stack_config(raw_from_pulumi_config(dict(runtime_config.CONFIG.get())))
