"""The plan report's cost section: which estimate each stack gets, and how it prints."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

from offline.plan.runner import PlanResult, stack_config
from offline.report import cost


def cluster_cost(result: PlanResult) -> dict[str, Any]:
    return cost.estimate_cluster(result.as_json()["resources"], result.outputs["region"])


def workloads_cost(workloads_dir: Path, stack: str, cluster: PlanResult) -> dict[str, Any]:
    from workloads import goodput
    from workloads.settings import parse_workloads_config

    mbps = cost.training_file_system_mbps(cluster.as_json()["resources"])
    # The settings the jobs get: what the stack file leaves unset, derived as the program derives it.
    settings = goodput.resolved(parse_workloads_config(stack_config(workloads_dir, stack)), mbps)
    return cost.estimate_workloads(settings, cluster.outputs["acceleratorNodeGroups"], cluster.outputs["region"], mbps)


ROUNDING_NOTE = (
    "Amounts under $1 print to a tenth of a cent, others to the cent (half up); totals are sums of the "
    "unrounded amounts, so printed rows can differ from them in the last digit."
)


def money(value: float | None) -> str:
    """One rule for every amount: under $1 to 3 decimals (NAT $0.045 stays $0.045), else cents."""
    if value is None:
        return "unknown"
    amount = Decimal(repr(value))
    places = Decimal("0.001") if abs(amount) < 1 else Decimal("0.01")
    rounded = amount.quantize(places, rounding=ROUND_HALF_UP)
    if abs(rounded) >= 1 and places == Decimal("0.001"):  # 0.9996 rounds up into the cents rule
        rounded = amount.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
    return f"${rounded:,}"


def render_cost(estimate: dict[str, Any], region: str, what: str = "cluster") -> str:
    heads = ("ITEM", "DETAIL", "IDLE/h", "CONFIGURED/h", "FULL SCALE/h")
    rows: list[tuple[str, ...]] = [heads]
    rows += [
        (line["item"], line["detail"], *(money(line["hourly"][s]) for s in cost.SCENARIOS))
        for line in estimate["lines"]
    ]
    # The workloads' total is not the sum of their lines: each group holds at most maxSize nodes.
    total = "TOTAL" if what == "cluster" else "ALL AT ONCE (groups capped at maxSize)"
    rows.append((f"{total} per hour", "", *(money(estimate["hourly"][s]) for s in cost.SCENARIOS)))
    rows.append(
        (
            f"{total} per month ({estimate['hoursPerMonth']} h)",
            "",
            *(money(estimate["monthly"][s]) for s in cost.SCENARIOS),
        )
    )
    if any(estimate["hourly"][s] is None for s in cost.SCENARIOS):
        rows.append(("priced lines only, per hour", "", *(money(estimate["knownHourly"][s]) for s in cost.SCENARIOS)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(heads))]
    table = "\n".join(
        "  ".join(c.ljust(widths[i]) if i < 2 else c.rjust(widths[i]) for i, c in enumerate(r)).rstrip() for r in rows
    )
    scenarios = (
        "idle = every node group at minSize, configured = desiredSize, full scale = maxSize"
        if what == "cluster"
        else "idle = no job running; configured and full scale = every enabled workload running at once, each node "
        "group holding at most its maxSize nodes (workloads on one group queue for its nodes)"
    )
    return "\n".join(
        [
            f"Cost estimate ({what}, USD, on-demand list prices in {region}; {scenarios})",
            table,
            *cost_notes(estimate, region),
            *first_step_breakdown(estimate),
        ]
    )


def first_step_breakdown(estimate: dict[str, Any]) -> list[str]:
    """Each training workload's modelled start, phase by phase (infra/facts/startup.py: figure, kind, source)."""
    lines = []
    for name, start in (estimate.get("firstStep") or {}).items():
        lines.append(
            f"First step of {name} from zero nodes: warm about {start['warmMinutes']} min, cold about "
            f"{start['coldMinutes']} min (a model; nothing here was timed on hardware)"
        )
        for heading, phases in (("warm cache", start["warm"]), ("a cold cache adds", start["coldExtra"])):
            lines.append(f"  {heading}:")
            lines += [f"    {p['minutes']:>4.1f} min  {p['what']} [{p['kind']}: {p['source']}]" for p in phases]
    return lines


def goodput_line(name: str, expected: dict[str, Any]) -> str:
    """``<workload> goodput NN.N%``, then what it rests on (workloads/goodput.py, docs/monitoring.md)."""
    if expected["goodput"] is None:
        return f"{name} goodput unknown ({expected['why']})"
    budget = expected["restartBudgetExhausted"]
    risk = f"; {budget:.1%} of runs exhaust its restart budget" if budget >= 0.0005 else ""
    return (
        f"{name} goodput {expected['goodput']:.1%} (expected share of its paid node-hours that trains: lost "
        f"{expected['fixedLoss']:.1%} to start-up and tail, {expected['checkpointLoss']:.1%} of training to "
        f"checkpoints, {expected['failureLoss']:.1%} to failures{risk}; {young_daly(expected)})"
    )


def young_daly(expected: dict[str, Any]) -> str:
    """The run's checkpoint interval against the Young/Daly optimum for its nodes and failure rate."""
    steps = expected["youngDalyIntervalSteps"]
    optimum = f"{steps} steps" if steps else f"{expected['youngDalyIntervalHours']:.1f} h"
    return (
        f"Young/Daly interval {optimum} (saves block {expected['saveBlockingHours'] * 3600:.0f} s each, "
        f"every {expected['inputs']['checkpointIntervalHours']:.2f} h now) would give "
        f"{expected['goodputAtYoungDaly']:.1%}"
    )


def checkpoint_line(name: str, expected: dict[str, Any]) -> str | None:
    """``<workload> checkpoint``: its size, how long a save blocks training, how often, and that share."""
    if expected.get("goodput") is None:
        return None
    inputs = expected["inputs"]
    steps = expected["checkpointIntervalSteps"]
    every = f"{steps} steps, " if steps else ""
    kind = "asynchronous" if expected["asynchronousSaves"] else "synchronous"
    if not expected["savesInRun"]:
        length = f"{expected['trainSteps']} steps" if expected["trainSteps"] else f"{inputs['trainHours']:.2f} h"
        return (
            f"{name} checkpoint {expected['checkpointGB']:.0f} GB, {kind}: no save in this run's {length} "
            f"(every {every}{inputs['checkpointIntervalHours']:.2f} h)"
        )
    return (
        f"{name} checkpoint {expected['checkpointGB']:.0f} GB, {kind}: writes in "
        f"{inputs['checkpointSaveHours'] * 3600:,.0f} s, blocks training {expected['saveBlockingHours'] * 3600:,.0f} s "
        f"every {every}{inputs['checkpointIntervalHours']:.2f} h ({expected['saveShare']:.1%})"
    )


def checkpoint_warning(name: str, expected: dict[str, Any]) -> str | None:
    """A run whose saves block more than checkpointStallWarning of each interval, with the cheaper fixes,
    cheapest first (workloads/goodput.py stall_warnings); past checkpointStallLimit the plan refuses it."""
    return expected.get("checkpointWarning")


def cost_notes(estimate: dict[str, Any], region: str) -> list[str]:
    """The lines under the cost table: where prices came from, each line's note, bounds, unknowns."""
    parts = []
    if estimate.get("pricesCopiedFrom"):
        parts.append(
            f"  Prices: the figures read for {estimate['pricesCopiedFrom']}, reused for {region} "
            "(infra/facts/instances.py and prices.py name each figure's page)"
        )
    for line in estimate["lines"]:
        if line.get("note"):
            parts.append(f"  {line['item']}: {line['note']}")
    for name, bound in (estimate.get("boundUsd") or {}).items():
        if bound is not None:
            parts.append(f"  {name}: at most {money(bound)} per run (bounded by its deadlines, see its note)")
    for name, expected in (estimate.get("goodput") or {}).items():
        parts.append(f"  {goodput_line(name, expected)}")
    if estimate["unknown"]:
        parts.append("Unknown (no price in infra/facts/instances.py and prices.py): " + "; ".join(estimate["unknown"]))
    for group, nodes in (estimate.get("concurrentNodes") or {}).items():
        parts.append(f"  all at once: {group} holds {nodes} node(s)")
    parts.append("Not estimated (priced by usage): " + "; ".join(estimate["notEstimated"]))
    parts.append(ROUNDING_NOTE)
    return parts
