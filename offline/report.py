"""The plan report's cost section: which estimate each stack gets, and how it prints."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from offline import cost
from offline.runner import PlanResult, stack_config


def cluster_cost(result: PlanResult) -> dict[str, Any]:
    return cost.estimate_cluster(result.as_json()["resources"], result.outputs["region"])


def workloads_cost(workloads_dir: Path, stack: str, cluster: PlanResult) -> dict[str, Any]:
    from workloads.settings import parse_workloads_config

    settings = parse_workloads_config(stack_config(workloads_dir, stack))
    return cost.estimate_workloads(settings, cluster.outputs["acceleratorNodeGroups"], cluster.outputs["region"])


def money(value: Optional[float]) -> str:
    if value is None:
        return "unknown"
    return f"${value:,.2f}" if value >= 0.01 or value == 0 else f"${value:.4f}"


def render_cost(estimate: dict[str, Any], region: str, what: str = "cluster") -> str:
    heads = ("ITEM", "DETAIL", "IDLE/h", "CONFIGURED/h", "FULL SCALE/h")
    rows = [heads]
    rows += [(line["item"], line["detail"], *(money(line["hourly"][s]) for s in cost.SCENARIOS)) for line in
             estimate["lines"]]
    rows.append(("TOTAL per hour", "", *(money(estimate["hourly"][s]) for s in cost.SCENARIOS)))
    rows.append((f"TOTAL per month ({estimate['hoursPerMonth']} h)", "",
                 *(money(estimate["monthly"][s]) for s in cost.SCENARIOS)))
    if any(estimate["hourly"][s] is None for s in cost.SCENARIOS):
        rows.append(("priced lines only, per hour", "", *(money(estimate["knownHourly"][s]) for s in cost.SCENARIOS)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(heads))]
    table = "\n".join(
        "  ".join(c.ljust(widths[i]) if i < 2 else c.rjust(widths[i]) for i, c in enumerate(r)).rstrip() for r in rows
    )
    scenarios = (
        "idle = every node group at minSize, configured = desiredSize, full scale = maxSize"
        if what == "cluster"
        else "idle = no job running; configured and full scale = every enabled workload running at once"
    )
    parts = [f"Cost estimate ({what}, USD, on-demand list prices in {region}; {scenarios})", table]
    for line in estimate["lines"]:
        if line.get("note"):
            parts.append(f"  {line['item']}: {line['note']}")
    for name, bound in (estimate.get("boundUsd") or {}).items():
        if bound is not None:
            parts.append(f"  {name}: at most {money(bound)} per run of its bounded step")
    if estimate["unknown"]:
        parts.append("Unknown (no price in infra/prices.py): " + "; ".join(estimate["unknown"]))
    parts.append("Not estimated (priced by usage): " + "; ".join(estimate["notEstimated"]))
    return "\n".join(parts)
