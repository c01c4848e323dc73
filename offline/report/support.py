"""Which support rows (infra/facts/support.py) a stack's files deploy, for `make plan`'s closing summary
and the documentation's table: the rows with an end date, soonest first, each with the projects that
pin it and whether their stack file keeps it past its end. No day counts, so the lines stay the same
from one day to the next; the warnings count the days."""

from __future__ import annotations

from pathlib import Path

from infra.facts import support

# `make plan`'s new output fits a terminal this wide (infra/facts/pins.py TERMINAL_COLUMNS).
COLUMNS = 80


def deployed(
    project_dir: Path, stack: str, with_workloads: bool = True
) -> tuple[dict[str, list[tuple[str, bool]]], bool]:
    """(support row -> [("cluster" or "workloads", kept by that stack file)], whether Kubernetes rows end with extended
    support) for the cluster stack file of ``stack`` and, with ``with_workloads``, its workload stack file."""
    from infra.config.load import raw_from_pulumi_config
    from infra.config.rules import cluster_pins
    from infra.validate import parse_stack_config
    from offline.plan.runner import stack_config
    from workloads.pins import workload_pins
    from workloads.settings import parse_workloads_config

    cluster = parse_stack_config(raw_from_pulumi_config(stack_config(project_dir, stack)))
    found = [("cluster", cluster_pins(cluster), cluster.end_of_support_acknowledged)]
    if with_workloads:
        work = parse_workloads_config(stack_config(project_dir / "workloads", stack))
        found.append(("workloads", workload_pins(work), work.end_of_support_acknowledged))
    rows: dict[str, list[tuple[str, bool]]] = {}
    for project, pins, kept in found:
        for name in dict.fromkeys(p.row for p in pins):
            rows.setdefault(name, []).append((project, name in kept))
    return rows, cluster.upgrade_policy == "EXTENDED"


def section(rows: dict[str, list[tuple[str, bool]]], extended: bool = False) -> list[str]:
    """The summary's lines: each dated row, soonest end first, in at most COLUMNS columns."""
    dated = sorted(
        ((name, support.support(name, extended).ends) for name in rows if support.support(name, extended).ends),
        key=lambda item: (item[1], item[0]),
    )
    width = max((len(name) for name, _ in dated), default=0)
    lines = ["End of support (what these stack files deploy; every pin: docs/architecture.md):"]
    for name, ends in dated:
        assert ends is not None
        where = ", ".join(
            project.removeprefix("trainium-") + (" (kept)" if kept else "") for project, kept in rows[name]
        )
        lines.append(f"    {name:<{width}}  {ends.isoformat()}  {where}")
    undated = len(rows) - len(dated)
    if undated:
        lines.append(f"    and {undated} pins with no end announced")
    return lines
