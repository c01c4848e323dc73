"""The cluster stack's configuration, validated whole: the models and rules of
``infra.config.models`` plus the checks that need a plan (system pods fit the core nodes).

Sits above ``infra.specs`` so the config layer never imports a computation.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

import pulumi

from infra import lookups
from infra.config.base import validated_with_rules, with_stray_keys_refused
from infra.config.errors import ConfigError
from infra.config.load import engine_config, raw_from_pulumi_config
from infra.config.models import PROJECT, AcceleratorNodeGroupConfig, StackConfig, is_prod_stack, key_name
from infra.config.rules import (
    advisories,
    deploy_problems,
    end_of_support,
    kubernetes_version_change_problem,
    lagging_node_groups_problem,
    neuron_compatibility_problems,
    provisioner_switch_problem,
    semantic_problems,
)
from infra.facts.pins import for_terminal
from infra.specs.burn_in_objects import NAMESPACE as BURN_IN_NAMESPACE
from infra.specs.group_replacement import group_replacement_problems
from infra.specs.placement import Placement, deployed_zones_problem, in_deployed_order
from infra.specs.system_capacity import SystemLoad, load_problem


def with_stack_environment(raw: dict[str, Any], stack: str) -> dict[str, Any]:
    """``raw`` with the environment its stack's name implies: a stack named prod (or prod-<suffix>,
    infra/config/models.py ``PROD_STACK_PATTERN``) is prod without the key, and refused with another
    value, so no single line of its stack file unprotects its data."""
    if not is_prod_stack(stack):
        return raw
    environment = raw.get("environment", "prod")
    if environment != "prod":
        raise ConfigError(
            [
                f"{key_name(('environment',))} = {environment!r}: stack {stack!r} is named as a prod stack "
                "(prod or prod-<suffix>), so its environment is prod (allowed: prod, or leave the key out); "
                "a stack for experiments takes another name"
            ]
        )
    return {**raw, "environment": "prod"}


def parse_stack_config(raw: dict[str, Any], stack: str | None = None) -> StackConfig:
    """Validate raw config into a ``StackConfig`` or raise ``ConfigError`` listing every problem.
    ``stack``: the stack's name, which makes a prod-named stack prod (``with_stack_environment``)."""
    if stack is not None:
        raw = with_stack_environment(raw, stack)
    return validated_with_rules(
        StackConfig, raw, key_name, lambda config: semantic_problems(config) + plan_problems(config)
    )


def load() -> StackConfig:
    """The running stack's configuration, validated."""
    all_config = engine_config()
    return with_stray_keys_refused(
        all_config, PROJECT, lambda: parse_stack_config(raw_from_pulumi_config(all_config), pulumi.get_stack())
    )


def check_end_of_support(config: StackConfig, today: date | None = None) -> None:
    """The stack's pins against their end of support (infra/config/rules.py ``end_of_support``, as of
    ``today``, the clock's date unless given): refused past it unless the stack file keeps them,
    warned ahead of it and while kept. Checked once the rest of the configuration is sound, so a
    mistyped setting is reported for what it is, and before any resource is declared."""
    refused, warnings = end_of_support(config, today or datetime.now(UTC).date())
    if refused:
        raise ConfigError(refused)
    for warning in warnings:
        pulumi.log.warn(for_terminal(warning))


def check_against_the_account(config: StackConfig) -> None:
    """What only the account can tell, checked before anything is declared: the deployer can
    reach the API it will install through, and EKS accepts the version change."""
    check_api_reachable(config)
    running = lookups.running_kubernetes_version(config.cluster_name)
    problem = running and kubernetes_version_change_problem(running, config.kubernetes_version)
    if running and not problem and config.kubernetes_version != running:
        groups = lookups.node_group_versions(config.cluster_name)
        problem = lagging_node_groups_problem(running, config.kubernetes_version, groups)
    if problem:
        raise ConfigError([problem], f"stack configuration for the running cluster {config.cluster_name}")
    if running:
        check_provisioner_switch(config)


def check_zones_kept(config: StackConfig, placement: Placement) -> Placement:
    """A running cluster keeps its zones and their address slots: another zone set is refused, in a
    preview too (it can never apply cleanly), before anything is declared; the same zones keep the
    order they run in, whatever order this program would give a new cluster."""
    deployed = lookups.deployed_zone_ids(config.cluster_name)
    problem = deployed and deployed_zones_problem(deployed, placement)
    if problem:
        raise ConfigError([problem], f"stack configuration for the running cluster {config.cluster_name}")
    return in_deployed_order(placement, deployed) if deployed else placement


def check_group_replacements(
    config: StackConfig, groups: list[AcceleratorNodeGroupConfig], placement: Placement
) -> None:
    """A change that replaces a running Trainium node group with nodes is refused by `pulumi up`
    (a preview warns: it changes nothing), before anything is declared."""
    if (
        config.node_provisioner != "cluster-autoscaler"
        or lookups.running_kubernetes_version(config.cluster_name) is None
    ):
        return
    running = lookups.running_accelerator_groups(config.cluster_name, [g.name for g in groups])
    problems = group_replacement_problems(running, groups, placement.group_zones)
    if problems and lookups.deploy_context().deploying():
        raise ConfigError(problems, f"stack configuration for the running cluster {config.cluster_name}")
    for problem in problems:
        pulumi.log.warn(problem)


def check_provisioner_switch(config: StackConfig) -> None:
    """A nodeProvisioner switch while the old provisioner's Trainium nodes run is refused by
    `pulumi up` with the steps to take (a preview warns: it changes nothing)."""
    if config.node_provisioner == "karpenter":
        names = [g.name for g in config.accelerator_node_groups]
        problem = provisioner_switch_problem(
            "karpenter", lookups.accelerator_group_sizes(config.cluster_name, names), 0
        )
    else:
        problem = provisioner_switch_problem(
            "cluster-autoscaler", {}, lookups.karpenter_instance_count(config.cluster_name)
        )
    if problem and lookups.deploy_context().deploying():
        raise ConfigError([problem], f"stack configuration for the running cluster {config.cluster_name}")
    if problem:
        pulumi.log.warn(problem)


def check_api_reachable(config: StackConfig) -> None:
    """`pulumi up` refuses an API allow-list its deployer is not in, before anything exists:
    pulumi-eks only logs a failed API probe, and every Kubernetes resource would fail later.
    A preview (and the offline plan) warns instead."""
    deploy = lookups.deploy_context()
    if not deploy.deploying():
        for advisory in advisories(config):
            pulumi.log.warn(advisory)
        return
    problems = deploy_problems(config, deploy.egress_ipv4)
    if problems:
        raise ConfigError(problems, "stack configuration for `pulumi up`")


def plan_problems(config: StackConfig) -> list[str]:
    """System nodes too small for the system pods leave CoreDNS or a controller Pending; a Trainium
    group whose AMI (pinned, or the latest when unset) carries a Neuron driver the training images
    cannot run on fails every job."""
    key = key_name(("coreNodeGroup",))
    problems = []
    for i, instance_type in enumerate(config.core_node_group.instance_types):
        problem = load_problem(instance_type, config.core_node_group.min_size, SystemLoad.of(config))
        if problem:
            problems.append(f"{key}.instanceTypes[{i}] = {instance_type!r}: {problem}")
    # The burn-in's directory, like a training namespace's (config rules), is never moved.
    if BURN_IN_NAMESPACE in config.storage.root_data_owners:
        owners_key = key_name(("storage", "rootDataOwners", BURN_IN_NAMESPACE))
        owner = config.storage.root_data_owners[BURN_IN_NAMESPACE]
        problems.append(f"{owners_key} = {owner!r}: {BURN_IN_NAMESPACE!r} is a namespace's own directory, never moved")
    return problems + neuron_compatibility_problems(config)
