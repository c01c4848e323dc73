"""Cost: what the Trainium groups cost per hour at their maximum size, against a ceiling.

Prices come only from infra/facts/instances.py and prices.py. A price the table does not know is reported as unknown,
never counted as zero. The region is the AWS provider's (``region`` of the node group's
provider, which the engine fills from ``aws:region``).
"""

from __future__ import annotations

from dataclasses import dataclass

from pulumi_policy import StackValidationArgs

from infra.facts.instances import instance_hourly
from policy.guardrails.declare import ADVISORY, Report, stack_rule
from policy.guardrails.props import get
from policy.guardrails.trainium import accelerator_groups, karpenter_groups

DEFAULT_CEILING_USD = 500.0


@dataclass(frozen=True)
class GroupCost:
    urn: str
    group: str
    instance_type: str
    max_size: int
    hourly_each: float | None
    kind: str = "Node group"

    @property
    def hourly_at_max(self) -> float | None:
        return None if self.hourly_each is None else self.hourly_each * self.max_size


def group_costs(args: StackValidationArgs, default_region: str | None) -> list[GroupCost]:
    costs = []
    for g in accelerator_groups(args.resources):
        region = get(g.group.provider.props, "region") if g.group.provider is not None else None
        price = instance_hourly(region or default_region or "", g.instance_type)
        max_size = int(get(g.group.props, "scalingConfig", "maxSize", default=0))
        costs.append(GroupCost(g.group.urn, g.group.name, g.instance_type, max_size, price.usd if price else None))
    # A NodePool's maximum is its limits.nodes; it has no AWS provider of its own, so it is priced in
    # the stack's AWS region (any AWS resource's provider names it).
    stack_region = next(
        (
            get(r.provider.props, "region")
            for r in args.resources
            if r.provider is not None
            and r.resource_type.startswith("aws:")
            and get(r.provider.props, "region", default=None)
        ),
        None,
    )
    for k in karpenter_groups(args.resources):
        price = instance_hourly(default_region or stack_region or "", k.instance_type)
        max_size = int(get(k.pool.props, "spec", "limits", "nodes", default=0))
        costs.append(
            GroupCost(k.pool.urn, k.pool.name, k.instance_type, max_size, price.usd if price else None, "NodePool")
        )
    return costs


@stack_rule(
    "trainium-hourly-ceiling",
    "The on-demand hourly cost of every Trainium group at its maximum size stays under a ceiling; unknown prices are reported.",
    level=ADVISORY,
    config_schema={
        "maxHourlyUsd": {
            "type": "number",
            "minimum": 0,
            "default": DEFAULT_CEILING_USD,
            "description": "ceiling in USD per hour for all accelerator groups at maxSize",
        },
        "region": {"type": "string", "description": "region to price in when the provider does not say"},
    },
)
def trainium_hourly_ceiling(args: StackValidationArgs, report: Report) -> None:
    config = args.get_config()
    ceiling = float(config.get("maxHourlyUsd", DEFAULT_CEILING_USD))
    costs = group_costs(args, config.get("region"))
    unknown = [c for c in costs if c.hourly_at_max is None]
    for c in unknown:
        report(
            f"{c.kind} '{c.group}': no list price known for {c.instance_type} in this region (infra/facts/instances.py and prices.py), so its "
            f"cost at maxSize {c.max_size} is unknown - not counted as zero. Add the price to check it against the ceiling.",
            c.urn,
        )
    total = sum(c.hourly_at_max for c in costs if c.hourly_at_max is not None)
    if total > ceiling:
        lines = "; ".join(
            f"{c.group}: {c.max_size} x {c.instance_type} = ${c.hourly_at_max:,.2f}/h"
            for c in costs
            if c.hourly_at_max is not None
        )
        report(
            f"Trainium node groups at their maximum size cost ${total:,.2f}/h on demand, over the ceiling of "
            f"${ceiling:,.2f}/h ({lines}): check maxSize, or raise maxHourlyUsd in the policy config."
        )


POLICIES = [trainium_hourly_ceiling]
