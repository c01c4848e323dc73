"""How `make plan` prints a plan: like `pulumi preview`, in the terminal's width (80 columns at least).

Only the terminal text lives here; what `make plan` writes under build/plan is offline/plan/command.py's
and does not depend on it.

- Types print as Pulumi's display names: ``aws:ec2/vpc:Vpc`` is ``aws:ec2:Vpc`` (pulumi/pulumi
  sdk/go/common/tokens/tokens.go ``Type.DisplayName``, which pkg/backend/display/rows.go uses
  for the TYPE column; read at pulumi/pulumi commit 1b59498, the newest stored snapshot, since
  the v3.272.0 tag of .pulumi-version was not available to read).
- Resources nest under their parent component with Pulumi's tree marks (``├─``, ``└─``, ``│``:
  pkg/backend/display/progress.go ``addIndentations``), each with ``+`` for create.
- The settings worth a glance go on an indented line under their resource, wrapped; outputs print
  as ``key: value``, cut at the width (resources.json holds them whole).
- A closing summary, as `pulumi preview` ends with "Resources:": what each project would create,
  the cost at idle and at full scale, the policy findings, and where the files went.

``wide=True`` (``make plan WIDE=1``) prints the table one resource a line, settings included,
and outputs whole, however wide that makes it.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from offline.plan.mocks import Registration
from offline.plan.runner import PlanResult
from offline.report import cost, report

# The narrowest terminal the output is laid out for, and the width when there is no terminal (a pipe, a
# CI log, the generated docs).
WIDTH = 80
CREATE = "+"
# Columns the resource table keeps for names beside their type.
NAME_ROOM = 28


def display_type(token: str) -> str:
    """Pulumi's display name of a type token (tokens.go ``Type.DisplayName``): the module path is
    cut at its last slash when what follows it is the type name in camel case; otherwise the
    token is returned as it is."""
    parts = token.split(":")
    if len(parts) != 3:
        return token
    package, module, name = parts
    if not name or "/" not in module:
        return token
    head, _, file = module.rpartition("/")
    if file != name[:1].lower() + name[1:]:
        return token
    return f"{package}:{head}:{name}"


def wrap(text: str, indent: str = "", width: int = WIDTH, first: str | None = None) -> list[str]:
    """``text`` wrapped to ``width``; words longer than a line are broken, never overflow."""
    return textwrap.wrap(
        text,
        width=width,
        initial_indent=indent if first is None else first,
        subsequent_indent=indent,
        break_long_words=True,
        break_on_hyphens=False,
    ) or [indent.rstrip()]


def terminal_width() -> int:
    """The terminal's columns as ``shutil.get_terminal_size`` finds them (``COLUMNS`` first, then
    the terminal stdout is, else 80), never fewer than 80: narrower, every table would fall apart."""
    import shutil

    return max(WIDTH, shutil.get_terminal_size((WIDTH, 24)).columns)


def message(text: str, width: int | None = None) -> str:
    """A refusal for stderr, each line wrapped to ``width`` (default: the terminal's), continuation
    lines indented under it; a `command` in backticks is never broken, so it can be copied whole."""
    width = width or terminal_width()

    def wrap_line(line: str, indent: str) -> list[str]:
        hanging = indent + ("    " if line.lstrip().startswith("- ") else "  ")
        # Spaces inside backticks become NUL for the wrap, then spaces again.
        protected = re.sub(r"`[^`]*`", lambda m: m.group(0).replace(" ", "\0"), line.strip())
        return [
            part.replace("\0", " ")
            for part in textwrap.wrap(
                protected,
                width=width,
                initial_indent=indent,
                subsequent_indent=hanging,
                break_long_words=False,
                break_on_hyphens=False,
            )
        ]

    return _wrap_long_lines(text, width, wrap_line)


class TerminalLog(logging.Handler):
    """The programs' warnings on stderr, wrapped like refusals: under the mock runtime,
    ``pulumi.log.warn`` reaches the root logger (pulumi/runtime/mocks.py ``MockEngine.Log``)."""

    def __init__(self, width: int) -> None:
        super().__init__(logging.WARNING)
        self.width = width

    def emit(self, record: logging.LogRecord) -> None:
        print(message(record.getMessage(), self.width), file=sys.stderr)

    @classmethod
    def install(cls, width: int) -> None:
        """One handler on the root logger, whatever ran before in this process."""
        root = logging.getLogger()
        for handler in [h for h in root.handlers if isinstance(h, cls)]:
            root.removeHandler(handler)
        root.addHandler(cls(width))


def _wrap_long_lines(text: str, width: int, wrap_line: Callable[[str, str], list[str]]) -> str:
    """``text`` with each line longer than ``width`` replaced by ``wrap_line(line, its indent)``."""
    out: list[str] = []
    for line in text.splitlines():
        if len(line) <= width:
            out.append(line)
        else:
            out += wrap_line(line, line[: len(line) - len(line.lstrip())])
    return "\n".join(out)


def _tree(registrations: Sequence[Registration]) -> list[tuple[str, Registration]]:
    """Each resource with its tree prefix, parents before their children (URN order within)."""
    urns = {r.urn for r in registrations}
    children: dict[str, list[Registration]] = {}
    roots = []
    for r in registrations:
        if r.parent in urns:
            children.setdefault(r.parent, []).append(r)
        else:
            roots.append(r)
    rows: list[tuple[str, Registration]] = []

    def walk(nodes: list[Registration], indentation: str, root: bool) -> None:
        for i, node in enumerate(nodes):
            last = i == len(nodes) - 1
            prefix = indentation if root else indentation + ("└─ " if last else "├─ ")
            rows.append((prefix, node))
            walk(children.get(node.urn, []), indentation if root else indentation + ("   " if last else "│  "), False)

    walk(roots, "", True)
    return rows


def resource_table(
    result: PlanResult, summarize: Callable[[Registration], str], wide: bool = False, width: int = WIDTH
) -> list[str]:
    rows = [(prefix + display_type(r.type), r.name, summarize(r)) for prefix, r in _tree(result.registrations)]
    type_width = max(len("Type"), *(len(t) for t, _, _ in rows))
    if not wide:
        # The Name column keeps room for a name of common length; a longer type puts its name under it.
        type_width = min(type_width, width - 5 - 2 - NAME_ROOM)
    lines = [f"     {'Type':<{type_width}}  Name" + ("  Settings" if wide else "")]
    if wide:
        name_width = max(len("Name"), *(len(n) for _, n, _ in rows))
        lines[0] = f"     {'Type':<{type_width}}  {'Name':<{name_width}}  Settings"
        lines += [f" {CREATE}   {t:<{type_width}}  {n:<{name_width}}  {s}".rstrip() for t, n, s in rows]
        return lines
    for type_text, name, settings in rows:
        row = f" {CREATE}   {type_text:<{type_width}}  {name}"
        if len(row) > width or len(type_text) > type_width:  # a long name or type: the name goes under it
            lines += _type_lines(type_text, width)
            lines += wrap(name, " " * (5 + len(type_text) - len(type_text.lstrip("│├└─ ")) + 3), width)
        else:
            lines.append(row)
        if settings:
            depth = len(type_text) - len(type_text.lstrip("│├└─ "))
            lines += wrap(settings, " " * (5 + depth + 6), width)
    return lines


def _type_lines(type_text: str, width: int) -> list[str]:
    """A type on its row, its last ``:part`` under it when the whole does not fit (a Kubernetes
    type such as ``kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding``
    a few levels deep passes 80 columns)."""
    row = f" {CREATE}   {type_text}"
    if len(row) <= width:
        return [row]
    head, _, kind = row.rpartition(":")
    depth = len(type_text) - len(type_text.lstrip("│├└─ "))
    return [f"{head}:", " " * (5 + depth + 3) + kind]


def outputs(result: PlanResult, wide: bool = False, width: int = WIDTH) -> list[str]:
    lines = ["Outputs:"]
    for key, value in result.as_json()["outputs"].items():
        text = f"    {key}: {json.dumps(value) if not isinstance(value, str) else value}"
        if not wide and len(text) > width:
            text = text[: width - 1] + "…"
        lines.append(text)
    return lines


def cost_section(estimate: dict[str, Any], region: str, what: str, wide: bool = False, width: int = WIDTH) -> str:
    """The cost estimate: as offline/report/report.py renders it with ``wide``; otherwise each line's
    detail on an indented line under its amounts, and the notes wrapped."""
    if wide:
        return report.render_cost(estimate, region, what)
    heads = ("Item", "Idle/h", "Configured/h", "Full scale/h")
    rows: list[tuple[str, ...]] = [heads]
    details: list[str] = [""]
    for line in estimate["lines"]:
        rows.append((line["item"], *(report.money(line["hourly"][s]) for s in cost.SCENARIOS)))
        details.append(line["detail"])
    total = "TOTAL" if what == "cluster" else "ALL AT ONCE (groups capped at maxSize)"
    rows.append((f"{total} per hour", *(report.money(estimate["hourly"][s]) for s in cost.SCENARIOS)))
    rows.append(
        (
            f"{total} per month ({estimate['hoursPerMonth']} h)",
            *(report.money(estimate["monthly"][s]) for s in cost.SCENARIOS),
        )
    )
    details += ["", ""]
    if any(estimate["hourly"][s] is None for s in cost.SCENARIOS):
        rows.append(
            ("Priced lines only, per hour", *(report.money(estimate["knownHourly"][s]) for s in cost.SCENARIOS))
        )
        details.append("")
    widths = [max(len(r[i]) for r in rows) for i in range(len(heads))]
    widths[0] = min(widths[0], width - 6 - sum(widths[1:]) - 6)
    lines = []
    for row, detail in zip(rows, details, strict=True):
        item = row[0] if len(row[0]) <= widths[0] else row[0][: widths[0] - 1] + "…"
        lines.append(
            (
                "    " + "  ".join([item.ljust(widths[0])] + [c.rjust(widths[i + 1]) for i, c in enumerate(row[1:])])
            ).rstrip()
        )
        if detail:
            lines += wrap(detail, "        ", width)
    scenarios = (
        "idle = every node group at minSize, configured = desiredSize, full scale = maxSize"
        if what == "cluster"
        else "idle = no job running; configured and full scale = every enabled workload running at once, each "
        "node group holding at most its maxSize nodes (workloads on one group queue for its nodes)"
    )
    out = wrap(f"Cost estimate ({what}, USD, on-demand list prices in {region}; {scenarios})", "  ", width, first="")
    out += lines
    for note in report.cost_notes(estimate, region):
        indent = "    " if note.startswith("  ") else "  "
        out += wrap(note.strip(), indent + "  ", width, first=indent)
    return "\n".join(out)


def wrapped(text: str, width: int = WIDTH) -> str:
    """Each line of ``text`` wrapped to ``width``, continuation lines indented under it."""
    return _wrap_long_lines(text, width, lambda line, indent: wrap(line.strip(), indent + "    ", width, first=indent))


@dataclass
class Planned:
    result: PlanResult
    cost: dict[str, Any] | None
    mandatory: int
    advisory: int
    findings: list[str]
    written: Path


def planned(result: PlanResult, estimate: dict[str, Any] | None, policy: Any, written: Path) -> Planned:
    """What the summary needs of one stack; ``policy`` is a policy_run.PolicyReport or None."""
    if policy is None:
        return Planned(result, estimate, 0, 0, [], written)
    findings = [
        f"[{v.enforcement_level}] {v.policy}: {result.project}/{result.stack} {v.name or '(stack)'}"
        for v in sorted(policy.violations, key=lambda v: (v.enforcement_level != "mandatory", v.policy, v.name))
    ]
    return Planned(
        result, estimate, len(policy.mandatory), len(policy.violations) - len(policy.mandatory), findings, written
    )


def summary(
    planned: Sequence[Planned],
    region: str,
    stand_ins: Sequence[str],
    width: int = WIDTH,
    support_lines: Sequence[str] = (),
    core_fit: Sequence[str] = (),
) -> str:
    """The closing summary: resources per project, cost (with ``core_fit`` after the cluster's line,
    offline/report/core_fit.py), policy findings, the pins' end of support (``support_lines``,
    offline/report/support.py), where the files went."""
    lines = ["Resources:"]
    for p in planned:
        lines.append(f"    {CREATE} {len(p.result.registrations):>4} to create   {p.result.project}/{p.result.stack}")
    lines.append(f"    {sum(len(p.result.registrations) for p in planned)} to create in all")
    lines.append("")
    lines.append(f"Cost ({region}, on-demand list prices; details above):")
    for p in planned:
        if p.cost is None:
            continue
        hourly = p.cost["hourly"]
        if p.result.project == "trainium-eks":
            idle, full = hourly["idle"], hourly["fullScale"]
            monthly = p.cost["monthly"]["idle"]
            lines += wrap(
                f"cluster idle {_per_hour(idle, p.cost, 'idle')}"
                + (f" ({report.money(monthly)}/month)" if monthly is not None else "")
                + f", full scale {_per_hour(full, p.cost, 'fullScale')}",
                "      ",
                width,
                first="    ",
            )
            for text in core_fit:
                lines += wrap(text, "        ", width, first="      ")
        else:
            together = hourly["configured"]
            lines += wrap(
                f"workloads while they run, all at once {_per_hour(together, p.cost, 'configured')}",
                "      ",
                width,
                first="    ",
            )
            lines += _workload_lines(p.cost, width)
    lines.append("")
    mandatory = sum(p.mandatory for p in planned)
    advisory = sum(p.advisory for p in planned)
    lines.append(f"Policy: {mandatory} mandatory, {advisory} advisory violation(s)")
    for p in planned:
        for finding in p.findings:
            lines += wrap(finding, "      ", width, first="    ")
    lines.append("")
    if support_lines:
        lines += [*support_lines, ""]
    lines.append("Files:")
    for p in planned:  # whole, however long: a path broken across lines cannot be copied
        lines.append(f"    {p.written}/resources.json, manifests/")
    if stand_ins:
        lines += wrap(
            "Secret config held encrypted in the stack files, or not set there, was planned with stand-ins: "
            + ", ".join(stand_ins)
            + ".",
            "  ",
            width,
            first="",
        )
    return "\n".join(lines)


def _workload_lines(estimate: dict[str, Any], width: int) -> list[str]:
    """One line per workload: what a run costs at most and its expected goodput (workloads/goodput.py), then
    its modelled time to the first step (workloads/first_step.py)."""
    bounds = estimate.get("boundUsd") or {}
    goodput = estimate.get("goodput") or {}
    starts = estimate.get("firstStep") or {}
    lines: list[str] = []
    for name in dict.fromkeys([*bounds, *goodput, *starts]):
        parts = []
        if bounds.get(name) is not None:
            parts.append(f"about {report.money(bounds[name])} a run")
        if name in goodput:
            ratio = goodput[name]["goodput"]
            parts.append(f"goodput {'unknown' if ratio is None else format(ratio, '.1%')}")
        if parts:
            lines += wrap(f"{name} {', '.join(parts)}", "        ", width, first="      ")
        for extra in (report.checkpoint_line, report.checkpoint_warning):
            if name in goodput and (text := extra(name, goodput[name])):
                lines += wrap(text, "        ", width, first="      ")
        if name in starts:
            start = starts[name]
            lines += wrap(
                f"{name} first step: warm {start['warmMinutes']} min, cold {start['coldMinutes']} min",
                "        ",
                width,
                first="      ",
            )
    return lines


def _per_hour(value: float | None, estimate: dict[str, Any], scenario: str) -> str:
    """``$0.591/h``; where a line has no price, the priced lines' sum as a floor: ``at least $0.554/h
    (a line has no price)``; where no line has one (a region the price tables do not cover), unknown:
    a floor of $0.000 would read as free."""
    if value is not None:
        return f"{report.money(value)}/h"
    known = estimate["knownHourly"][scenario]
    if not known:
        return "unknown (no line has a price)"
    return f"at least {report.money(known)}/h (a line has no price)"
