"""What a change does to every stack: the offline plan of a base revision against this checkout.

    python -m offline.diff --base <git ref> [--stacks dev,prod] [--out build/plan-diff]
    make plan BASE=<git ref>

Plans the base revision in a temporary ``git worktree`` (its own program and stack files,
run with this checkout's virtualenv) and this checkout, each with ``offline.plan.command``, then
compares ``resources.json`` per project and stack the way ``pulumi preview --diff`` reads:
resources added, deleted, updated (changed input paths, old -> new; secrets stay
``[secret]``) and replaced (see ``offline/diff/replacement.py`` for which changes replace), changed
outputs, and the ``policy`` and ``cost`` sections when the plans carry them. Prints text and
writes ``diff.md`` (the PR comment and job summary) and ``diff.txt`` under ``--out``.
Exit code 2 when a plan cannot be made (bad configuration, unknown ref).
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infra.config.rules import kubernetes_version_change_problem
from offline.diff.replacement import LAUNCH_TEMPLATE, NODE_GROUP, dependent_replacements, replaces
from offline.plan.mocks import SECRET
from offline.plan.runner import REPO_ROOT, project_name, stack_config
from offline.report import render

STACKS = ("dev", "prod")
# offline.plan.command's exit code when the policy pack finds mandatory violations (plans still written).
POLICY_VIOLATIONS_EXIT = 3
# Lines of changed paths shown per resource in Markdown before the rest is folded away.
MARKDOWN_PATHS = 12


@dataclass(frozen=True)
class PathChange:
    path: str
    old: Any
    new: Any
    replace_reason: str | None = None


@dataclass
class ResourceChange:
    kind: str  # create | delete | update | replace
    type: str
    name: str
    urn: str
    paths: list[PathChange] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class StackDiff:
    project: str
    stack: str
    changes: list[ResourceChange]
    outputs: list[PathChange]
    policy: dict[str, list[dict[str, Any]]]
    cost: list[PathChange]
    base_missing: bool = False
    head_missing: bool = False

    def count(self, kind: str) -> int:
        return sum(1 for c in self.changes if c.kind == kind)

    @property
    def empty(self) -> bool:
        return not (self.changes or self.outputs or self.policy.get("new") or self.policy.get("resolved") or self.cost)


# --- comparing two plans (pure) ----------------------------------------------------------------

_MISSING = object()


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Leaf paths of a JSON value: ``{"a": {"b": [1]}}`` -> ``{"a.b[0]": 1}``; empty containers are leaves."""
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for key, child in value.items():
            out.update(flatten(child, f"{prefix}.{key}" if prefix else str(key)))
        return out
    if isinstance(value, list) and value:
        out = {}
        for i, child in enumerate(value):
            out.update(flatten(child, f"{prefix}[{i}]"))
        return out
    if not prefix and value in ({}, []):
        return {}  # nothing at all, not a change at the path ""
    return {prefix: value}


def changed_paths(old: dict[str, Any], new: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """(path, old, new) for every leaf that differs; a secret on either side is never shown, and
    two secrets cannot be compared offline (the plan holds neither value)."""
    before, after = flatten(old), flatten(new)
    changes = []
    for path in sorted(before.keys() | after.keys()):
        a, b = before.get(path, _MISSING), after.get(path, _MISSING)
        if a == b:
            continue
        if SECRET in (a, b):
            if a == b:
                continue
            a, b = (SECRET if a is not _MISSING else a), (SECRET if b is not _MISSING else b)
        changes.append((path, a, b))
    return changes


def _lifecycle(resource: dict[str, Any]) -> dict[str, Any]:
    keys = (
        "protect",
        "ignoreChanges",
        "replaceOnChanges",
        "deleteBeforeReplace",
        "retainOnDelete",
        "customTimeouts",
        "replacementTrigger",
        "replaceWith",
    )
    return {f"({k})": resource[k] for k in keys if resource.get(k) not in (None, False, [])}


TRIGGER = "(replacementTrigger)"


def _trigger_replaces(path: str, old: Any, new: Any) -> str | None:
    """pulumi/pulumi pkg/resource/deploy/step_generator.go shouldTriggerReplace (v3.259.0 and later):
    a changed replacement trigger replaces the resource; one that appears or goes (null on either
    side) does not."""
    if (path == TRIGGER or path.startswith((TRIGGER + ".", TRIGGER + "["))) and _MISSING not in (old, new):
        return "replacementTrigger changed"
    return None


def former_urns(head: list[dict[str, Any]]) -> dict[str, str]:
    """Head URN -> the URN it had, for components that carry an alias of another type or name and
    for their descendants, whose URNs name the component's type (offline/plan/mocks.py records the
    aliases a component registers). The engine matches these against the state the same way: an
    aliased resource is the same resource, updated or replaced in place, not a create and a delete."""
    renamed: dict[str, tuple[str, str, str]] = {}  # new type -> (old type, new name, old name)
    for resource in head:
        for alias in resource.get("aliases") or []:
            spec = alias.get("spec") or {}
            if spec.get("parentUrn") or spec.get("noParent") or spec.get("project") or spec.get("stack"):
                continue
            old_type, old_name = spec.get("type", resource["type"]), spec.get("name", resource["name"])
            if (old_type, old_name) != (resource["type"], resource["name"]):
                renamed[resource["type"]] = (old_type, resource["name"], old_name)
    formers: dict[str, str] = {}
    for resource in head if renamed else []:
        urn = resource["urn"]
        chain, name = urn.rsplit("::", 1)
        prefix, types = chain.rsplit("::", 1)
        parts = types.split("$")
        own = renamed.get(parts[-1])
        if own and own[1] == name:
            name = own[2]
        parts = [renamed[p][0] if p in renamed else p for p in parts]
        former = f"{prefix}::{'$'.join(parts)}::{name}"
        if former != urn:
            formers[urn] = former
    return formers


def with_head_urns(base: list[dict[str, Any]], head: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``base`` with each aliased resource under its head URN, in its own and its dependents' fields."""
    to_head = {former: urn for urn, former in former_urns(head).items()}
    if not to_head:
        return base

    def urn(value: str) -> str:
        return to_head.get(value, value)

    moved = []
    for resource in base:
        resource = {**resource, "urn": urn(resource["urn"]), "parent": urn(resource.get("parent") or "")}
        resource["dependencies"] = [urn(u) for u in resource.get("dependencies") or []]
        if resource.get("propertyDependencies"):
            resource["propertyDependencies"] = {
                k: [urn(u) for u in v] for k, v in resource["propertyDependencies"].items()
            }
        moved.append(resource)
    return moved


def compare_resources(base: list[dict[str, Any]], head: list[dict[str, Any]]) -> list[ResourceChange]:
    base = with_head_urns(base, head)
    old = {r["urn"]: r for r in base}
    new = {r["urn"]: r for r in head}
    changes: list[ResourceChange] = []
    for urn in sorted(new.keys() - old.keys()):
        changes.append(ResourceChange("create", new[urn]["type"], new[urn]["name"], urn))
    for urn in sorted(old.keys() - new.keys()):
        changes.append(ResourceChange("delete", old[urn]["type"], old[urn]["name"], urn))
    for urn in sorted(old.keys() & new.keys()):
        a, b = old[urn], new[urn]
        type_ = b["type"]
        paths = [
            PathChange(p, x, y, replaces(type_, p, x, y, b.get("replaceOnChanges") or [], b.get("inputs")))
            for p, x, y in changed_paths(a.get("inputs", {}), b.get("inputs", {}))
        ]
        paths += [
            PathChange(p, x, y, _trigger_replaces(p, x, y)) for p, x, y in changed_paths(_lifecycle(a), _lifecycle(b))
        ]
        if paths:
            kind = "replace" if any(p.replace_reason for p in paths) else "update"
            changes.append(ResourceChange(kind, type_, b["name"], urn, paths))
    _cascade_dependents(changes, new, old)
    _cascade_replace_with(changes, new, old)
    _note_launch_template_rollouts(changes, new)
    return in_deploy_order(changes, new, old)


def in_deploy_order(
    changes: list[ResourceChange], head: dict[str, dict[str, Any]], base: dict[str, dict[str, Any]]
) -> list[ResourceChange]:
    """Changes in an order the engine could take them: creates, updates and replacements after
    everything they depend on (the control plane before its node groups: EKS refuses a group
    version above the cluster's), deletions of dependents before what they depend on; ties by URN."""
    head_rank, base_rank = deploy_ranks(head), deploy_ranks(base)

    def key(change: ResourceChange) -> tuple[bool, int]:
        if change.kind == "delete":
            return True, -base_rank.get(change.urn, 0)
        return False, head_rank.get(change.urn, 0)

    return sorted(changes, key=key)


def deploy_ranks(resources: dict[str, dict[str, Any]]) -> dict[str, int]:
    """Each resource's place in a dependency order (its dependencies, property dependencies,
    parent and provider first; among the ready, the smallest URN first)."""
    needs: dict[str, set[str]] = {}
    for urn, resource in resources.items():
        provider = (resource.get("provider") or "").rsplit("::", 1)[0]  # "<provider urn>::<id>"
        wanted = {
            *(resource.get("dependencies") or []),
            resource.get("parent") or "",
            provider,
            *(u for urns in (resource.get("propertyDependencies") or {}).values() for u in urns),
        }
        needs[urn] = {u for u in wanted if u in resources and u != urn}
    waiting_on = {urn: len(deps) for urn, deps in needs.items()}
    dependents: dict[str, list[str]] = {}
    for urn, deps in needs.items():
        for dep in deps:
            dependents.setdefault(dep, []).append(urn)
    ready = [urn for urn, count in waiting_on.items() if count == 0]
    heapq.heapify(ready)
    ranks: dict[str, int] = {}
    while ready:
        urn = heapq.heappop(ready)
        ranks[urn] = len(ranks)
        for dependent in dependents.get(urn, []):
            waiting_on[dependent] -= 1
            if waiting_on[dependent] == 0:
                heapq.heappush(ready, dependent)
    for urn in sorted(resources.keys() - ranks.keys()):  # a cycle (never from a real program): URN order
        ranks[urn] = len(ranks)
    return ranks


def _cascade_dependents(
    changes: list[ResourceChange], head: dict[str, dict[str, Any]], base: dict[str, dict[str, Any]]
) -> None:
    """Resources replaced because an input comes from a replaced one (offline/diff/replacement.py
    ``dependent_replacements``, the rule the deploy preflight uses too). The offline plan's outputs
    (a job's UID) are the same on both sides, so the inputs alone never show it."""
    by_urn = {c.urn: c for c in changes}
    sources = {c.urn: c.kind for c in changes if c.kind in ("replace", "create")}
    existing = {urn: r for urn, r in head.items() if urn in base}
    for urn, why in dependent_replacements(existing, sources).items():
        change = by_urn.get(urn)
        if change is None:
            change = ResourceChange("replace", head[urn]["type"], head[urn]["name"], urn)
            changes.append(change)
            by_urn[urn] = change
        change.kind = "replace"
        change.notes.append(f"replaced: {why}")


def _cascade_replace_with(
    changes: list[ResourceChange], head: dict[str, dict[str, Any]], base: dict[str, dict[str, Any]]
) -> None:
    """A resource whose ``replaceWith`` lists a replaced resource is replaced with it (pulumi/pulumi
    pkg/resource/deploy/step_generator.go: "marked for replacement because ... (in its ReplaceWith
    list) is being replaced"), and before it when that one deletes before replacing."""
    by_urn = {c.urn: c for c in changes}
    replaced = {c.urn for c in changes if c.kind == "replace"}
    grew = True
    while grew:
        grew = False
        for urn, resource in head.items():
            targets = [t for t in resource.get("replaceWith") or [] if t in replaced]
            if not targets or urn in replaced or urn not in base:
                continue
            change = by_urn.get(urn)
            if change is None:
                change = ResourceChange("replace", resource["type"], resource["name"], urn)
                changes.append(change)
                by_urn[urn] = change
            change.kind = "replace"
            change.notes.append(f"replaced with {', '.join(t.rsplit('::', 1)[-1] for t in targets)} (replaceWith)")
            replaced.add(urn)
            grew = True


def _note_launch_template_rollouts(changes: list[ResourceChange], head: dict[str, dict[str, Any]]) -> None:
    """A launch template update is a new version; node groups that use it roll their nodes to it
    in place (EKS UpdateNodegroupVersion). The mocks report version 1 on both sides, so the plan
    alone shows no change on the node group: say so here."""
    updated = {c.urn for c in changes if c.type == LAUNCH_TEMPLATE and c.kind == "update"}
    if not updated:
        return
    by_urn = {c.urn: c for c in changes}
    for urn, resource in head.items():
        if resource["type"] != NODE_GROUP or not updated & set(resource.get("dependencies", [])):
            continue
        change = by_urn.get(urn)
        if change is None:
            change = ResourceChange("update", NODE_GROUP, resource["name"], urn)
            changes.append(change)
        if change.kind != "replace":
            change.notes.append("rolls its nodes to the launch template's new version (in place, node by node)")


def compare_outputs(base: dict[str, Any], head: dict[str, Any]) -> list[PathChange]:
    changes = []
    for key in sorted(base.keys() | head.keys()):
        a, b = base.get(key, _MISSING), head.get(key, _MISSING)
        if a != b and not (a == SECRET and b == SECRET):
            changes.append(PathChange(key, a, b))
    return changes


def _violation_key(v: dict[str, Any]) -> tuple[str, ...]:
    return tuple(str(v.get(k, "")) for k in ("policy", "urn", "enforcementLevel", "message"))


def compare_policy(base: dict[str, Any] | None, head: dict[str, Any] | None) -> dict[str, list[dict[str, Any]]]:
    """Violations this change introduces and resolves (the ``policy`` section: new, resolved, remaining)."""
    if head is None and base is None:
        return {}
    old = {_violation_key(v): v for v in (base or {}).get("violations", [])}
    new = {_violation_key(v): v for v in (head or {}).get("violations", [])}
    return {
        "new": [new[k] for k in sorted(new.keys() - old.keys())],
        "resolved": [old[k] for k in sorted(old.keys() - new.keys())],
        "remaining": [new[k] for k in sorted(new.keys() & old.keys())],
    }


COST_SCENARIOS = ("idle", "configured", "fullScale")
COST_LABEL = {"idle": "idle", "configured": "configured", "fullScale": "full scale"}


def _cost_figures(c: dict[str, Any] | None) -> dict[str, Any]:
    """Flat figures of a ``cost`` section: totals, the priced-lines floor (``knownHourly``) and
    each line's hourly charge, so a change shows even where a total is unknown (null)."""
    c = c or {}
    out = {
        f"{period}.{k}": v for period in ("hourly", "monthly", "knownHourly") for k, v in (c.get(period) or {}).items()
    }
    items = [line.get("item", "") for line in c.get("lines") or []]
    for line in c.get("lines") or []:
        # A line's item names it (a node group, the NAT gateways); repeated items (endpoints) add their detail.
        key = (
            line.get("item", "")
            if items.count(line.get("item", "")) == 1
            else f"{line.get('item')} ({line.get('detail')})"
        )
        out.update({f"lines.{key}.{k}": v for k, v in (line.get("hourly") or {}).items()})
    return out


def compare_cost(base: dict[str, Any] | None, head: dict[str, Any] | None) -> list[PathChange]:
    """Changed estimate figures (the ``cost`` section: hourly/monthly x idle,
    configured, fullScale, numbers or null; knownHourly; lines)."""
    if head is None and base is None:
        return []
    a, b = _cost_figures(base), _cost_figures(head)
    # A plan from before the estimate existed has no figure, which is not the same as unknown (null).
    return [
        PathChange(k, a.get(k, _MISSING), b.get(k, _MISSING))
        for k in sorted(a.keys() | b.keys())
        if a.get(k, _MISSING) != b.get(k, _MISSING)
    ]


def _usd(value: Any) -> str:
    from offline.report.report import money  # the plan report's one rounding rule

    return "(none)" if value is _MISSING else money(value)


def cost_summary(changes: list[PathChange]) -> list[str]:
    """What a change does to the estimate, per scenario: the total, or where it is unknown the
    priced lines' sum ("unknown (priced lines: X → Y)"), then each changed line."""
    by_path = {p.path: p for p in changes}
    out = []
    for scenario in COST_SCENARIOS:
        total, known = by_path.get(f"hourly.{scenario}"), by_path.get(f"knownHourly.{scenario}")
        label = f"{COST_LABEL[scenario]} per hour"
        if total is not None and None not in (total.old, total.new):
            out.append(f"{label}: {_usd(total.old)} → {_usd(total.new)}")
        elif total is not None or known is not None:
            # Unknown on at least one side (or both, unchanged): the priced lines still say what moved.
            text = f"{label}: " + (f"{_usd(total.old)} → {_usd(total.new)}" if total is not None else "unknown")
            if known is not None:
                text += f" (priced lines: {_usd(known.old)} → {_usd(known.new)})"
            out.append(text)
        monthly = by_path.get(f"monthly.{scenario}")
        if monthly is not None and None not in (monthly.old, monthly.new):
            out.append(f"{COST_LABEL[scenario]} per month: {_usd(monthly.old)} → {_usd(monthly.new)}")
    for p in changes:
        if p.path.startswith("lines."):
            item, scenario = p.path[len("lines.") :].rsplit(".", 1)
            out.append(f"{item}, {COST_LABEL.get(scenario, scenario)} per hour: {_usd(p.old)} → {_usd(p.new)}")
    return out


def compare_plans(project: str, stack: str, base: dict[str, Any] | None, head: dict[str, Any] | None) -> StackDiff:
    empty: dict[str, Any] = {"resources": [], "outputs": {}}
    b, h = base or empty, head or empty
    return StackDiff(
        project,
        stack,
        changes=compare_resources(b["resources"], h["resources"]),
        outputs=compare_outputs(b["outputs"], h["outputs"]),
        policy=compare_policy(b.get("policy"), h.get("policy")),
        cost=compare_cost(b.get("cost"), h.get("cost")),
        base_missing=base is None,
        head_missing=head is None,
    )


def load_plans(root: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """Every ``<project>/<stack>/resources.json`` under ``root``."""
    return {
        (path.parent.parent.name, path.parent.name): json.loads(path.read_text())
        for path in sorted(root.glob("*/*/resources.json"))
    }


def diff_plan_dirs(base_root: Path, head_root: Path) -> list[StackDiff]:
    base, head = load_plans(base_root), load_plans(head_root)
    return [compare_plans(p, s, base.get((p, s)), head.get((p, s))) for p, s in sorted(base.keys() | head.keys())]


EKS_CLUSTER = "eks:index:Cluster"


def _cluster_versions(plan: dict[str, Any]) -> dict[str, str]:
    return {
        r["name"]: r["inputs"]["version"]
        for r in plan.get("resources", [])
        if r["type"] == EKS_CLUSTER and isinstance(r["inputs"].get("version"), str)
    }


def version_change_refusals(base_root: Path, head_root: Path) -> list[str]:
    """Kubernetes version changes EKS would refuse (a downgrade, a skipped minor), per stack: the
    real `pulumi up` would fail part-way, at UpdateClusterVersion (infra/config/rules.py)."""
    base, head = load_plans(base_root), load_plans(head_root)
    refusals = []
    for (project, stack), plan in sorted(head.items()):
        before = _cluster_versions(base.get((project, stack), {}))
        for name, version in sorted(_cluster_versions(plan).items()):
            problem = name in before and kubernetes_version_change_problem(
                before[name], version, holder="the base revision declares"
            )
            if problem:
                refusals.append(f"{project}/{stack} (Pulumi.{stack}.yaml): {problem}")
    return refusals


# Where data lives: replacing or deleting one deletes it (the FSx or EFS file system, the state bucket, a KMS
# key and what it encrypted) or strands it (an association's link; a static volume or claim re-created
# unbound to the data, or gone, so that its pods mount an empty directory in its place).
DATA_STORE_TYPES = (
    "aws:fsx/lustreFileSystem:LustreFileSystem",
    "aws:efs/fileSystem:FileSystem",
    "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation",
    "kubernetes:core/v1:PersistentVolume",
    "kubernetes:core/v1:PersistentVolumeClaim",
    "aws:s3/bucket:Bucket",
    "aws:s3/bucketV2:BucketV2",
    "aws:kms/key:Key",
)
ACKNOWLEDGEMENT_KEY = "replacementsAcknowledged"


def _protected(plan: dict[str, Any] | None, urn: str) -> bool:
    return any(r["urn"] == urn and r.get("protect") for r in (plan or {}).get("resources", []))


Acknowledgements = dict[tuple[str, str], dict[str, str]]


def spent(acknowledged: Acknowledgements, deployed: Acknowledgements) -> Acknowledgements:
    """The acknowledgements the base revision's stack files already held, word for word: they were for a change
    that base made (what the deploy job diffs against is what runs), so they acknowledge nothing in this one."""
    return {
        key: {name: reason for name, reason in names.items() if deployed.get(key, {}).get(name) == reason}
        for key, names in acknowledged.items()
    }


def data_store_replacement_refusals(
    diffs: list[StackDiff],
    base: dict[tuple[str, str], dict[str, Any]],
    head: dict[tuple[str, str], dict[str, Any]],
    acknowledged: Acknowledgements,
    deployed: Acknowledgements | None = None,
) -> list[str]:
    """Data-store replacements and deletions the change may not make, per stack. Either is allowed only
    where the stack file names the resource in ``<project>:replacementsAcknowledged`` (with its
    reason, which the program requires); a deleted one's name is acknowledged in the change that
    deletes it, and refused as unknown once that has deployed. A replacement is never allowed for one
    protected before and after: the engine
    refuses to replace such a resource ("unable to replace resource ... as it is currently marked for
    protection", pulumi/pulumi pkg/resource/deploy/step_generator.go, generateSteps, at v3.259.0, the
    newest tag readable here (the pin is 3.272.0), and unchanged at its newest commit: checked when
    new.Protect && old.Protect, so unprotecting in the same update lets it through; prod's
    storage.retain cannot be turned off). An acknowledgement that names no data store of the stack
    is refused too, so a misspelt name does not pass for one. ``deployed``: the base revision's
    acknowledgements; one it already held word for word is spent (``spent``): it neither allows a change
    here nor is refused for naming nothing, so a stack file that keeps it still deploys, and a later
    replacement of a resource of the same name needs its own acknowledgement."""
    refusals = []
    used = spent(acknowledged, deployed or {})
    for d in diffs:
        where = f"{d.project}/{d.stack} (Pulumi.{d.stack}.yaml)"
        key = f"{d.project}:{ACKNOWLEDGEMENT_KEY}"
        names = {
            n: r
            for n, r in acknowledged.get((d.project, d.stack), {}).items()
            if n not in used.get((d.project, d.stack), {})
        }
        spent_here = used.get((d.project, d.stack), {})
        for c in d.changes:
            if c.kind not in ("replace", "delete") or c.type not in DATA_STORE_TYPES:
                continue
            # A spent entry names the store already: say why it does not count, and what does.
            how = (
                f"its entry in {key} is spent (the deployed commit held it word for word): reword its reason to "
                "acknowledge this change"
                if c.name in spent_here
                else f"name it in {key} with the reason"
            )
            if c.kind == "delete":
                if c.name not in names:
                    refusals.append(
                        f"{where}: {c.type.rsplit(':', 1)[-1]} {c.name!r} would be deleted, which strands its data "
                        f"(its pods would mount something else, or nothing); undo the change that deletes it, or {how}"
                    )
                continue
            plans = (base.get((d.project, d.stack)), head.get((d.project, d.stack)))
            if all(_protected(plan, c.urn) for plan in plans):
                refusals.append(
                    f"{where}: {c.type.rsplit(':', 1)[-1]} {c.name!r} would be replaced, and it is protected: "
                    "`pulumi up` refuses to replace it; undo the change that replaces it (a new one is a new stack "
                    "restored from a backup)"
                )
            elif c.name not in names:
                refusals.append(
                    f"{where}: {c.type.rsplit(':', 1)[-1]} {c.name!r} would be replaced, which deletes or strands "
                    f"its data; undo the change that replaces it, or {how}"
                )
        stores = {
            r["name"]
            for r in (head.get((d.project, d.stack)) or {}).get("resources", [])
            if r["type"] in DATA_STORE_TYPES
        } | {c.name for c in d.changes if c.kind == "delete" and c.type in DATA_STORE_TYPES}
        for name in sorted(set(names) - stores):
            refusals.append(
                f"{where}: {key}.{name}: no data store of this stack is named {name!r} (allowed: "
                f"{', '.join(sorted(stores)) or 'none'})"
            )
    return refusals


def stack_acknowledgements(project_dirs: list[Path], stacks: tuple[str, ...]) -> dict[tuple[str, str], dict[str, str]]:
    """Each project's and stack's ``replacementsAcknowledged`` from this checkout's stack files."""
    found: dict[tuple[str, str], dict[str, str]] = {}
    for project_dir in project_dirs:
        project = project_name(project_dir)
        for stack in stacks:
            if (project_dir / f"Pulumi.{stack}.yaml").exists():
                value = stack_config(project_dir, stack).get(f"{project}:{ACKNOWLEDGEMENT_KEY}")
                found[(project, stack)] = json.loads(value) if value else {}
    return found


# --- rendering (pure) --------------------------------------------------------------------------

SYMBOL = {"create": "+", "delete": "-", "update": "~", "replace": "+-"}
HEADING = {"create": "Created", "delete": "Deleted", "update": "Updated", "replace": "Replaced"}
ORDER = ("replace", "delete", "create", "update")


# The terminal shows a changed value wrapped under its path up to this many characters, then a
# marker; diff.md (the PR comment) carries values up to MARKDOWN_VALUE.
TEXT_VALUE = 600
MARKDOWN_VALUE = 4000


def shown(value: Any, limit: int | None = None) -> str:
    """``value`` as JSON; past ``limit`` characters cut with a marker that says how much is left out."""
    if value is _MISSING:
        return "(unset)"
    text = json.dumps(value, sort_keys=True) if not isinstance(value, str) else json.dumps(value)
    if limit is None or len(text) <= limit:
        return text
    return text[:limit] + f"… (+{len(text) - limit} characters)"


def summary_line(d: StackDiff) -> str:
    if d.head_missing:
        return "removed from this revision"
    counts = [f"{d.count(k)} to {k}" for k in ("create", "update", "replace", "delete") if d.count(k)]
    if d.outputs:
        counts.append(f"{len(d.outputs)} output(s) changed")
    for key in ("new", "resolved"):
        if d.policy.get(key):
            counts.append(f"{len(d.policy[key])} policy violation(s) {key}")
    if d.cost:
        counts.append("cost estimate changed")
    text = ", ".join(counts) or "no changes"
    return f"{text} (new stack)" if d.base_missing else text


# Both sides are offline plans: which of them is deployed, if either, only the stack's state knows.
BOOTSTRAP_PROJECT = "trainium-bootstrap"
BOOTSTRAP_NOTE = (
    "The bootstrap changes ({stacks}): an administrator runs `pulumi up` in bootstrap/ for each of them "
    "before this merges (docs/pipeline.md, section 1). The pipeline never runs it, and its roles are what it "
    "declares: until then a preview or deploy that needs the new permissions fails."
)


def bootstrap_note(diffs: list[StackDiff]) -> str | None:
    """What to do first when the change touches the bootstrap stacks, which the pipeline never applies."""
    changed = [d.stack for d in diffs if d.project == BOOTSTRAP_PROJECT and not d.empty]
    return BOOTSTRAP_NOTE.format(stacks=", ".join(changed)) if changed else None


NEVER_DEPLOYED_NOTE = (
    "Replacements and deletions are measured from the base revision's plan: they happen only to a stack "
    "deployed from it. A stack never deployed (`pulumi stack ls`: no resources) is created whole by "
    "`pulumi up`, whatever this diff lists."
)


def render_text(diffs: list[StackDiff], base_label: str, width: int = render.WIDTH) -> str:
    """The diff for the terminal and diff.txt, in ``width`` columns like the plan table: types in
    Pulumi's display form (offline/report/render.py), each changed path on its own line with old and new
    value wrapped under it, values past TEXT_VALUE characters cut with a marker (diff.md has them)."""
    lines = render.wrap(f"Offline plan diff: {base_label} -> this checkout", "    ", width, first="") + [""]
    note = bootstrap_note(diffs)
    if note:
        lines += render.wrap(note, "  ", width, first="") + [""]
    if any(d.count("replace") or d.count("delete") for d in diffs):
        lines += render.wrap(NEVER_DEPLOYED_NOTE, "  ", width, first="") + [""]

    def change(label: str, p: PathChange, indent: str) -> None:
        why = f"  [replaces: {p.replace_reason}]" if p.replace_reason else ""
        old, new = shown(p.old, TEXT_VALUE), shown(p.new, TEXT_VALUE)
        one = f"{indent}{label}: {old} => {new}{why}"
        if len(one) <= width:
            lines.append(one)
            return
        lines.extend(render.wrap(f"{label}:{why}", indent + "    ", width, first=indent))
        lines.extend(render.wrap(f"- {old}", indent + "      ", width, first=indent + "    "))
        lines.extend(render.wrap(f"+ {new}", indent + "      ", width, first=indent + "    "))

    for d in diffs:
        lines += render.wrap(f"{d.project}/{d.stack}: {summary_line(d)}", "    ", width, first="")
        for kind in ORDER:
            for c in (c for c in d.changes if c.kind == kind):
                row = f"  {SYMBOL[kind]:>2} {render.display_type(c.type)} {c.name}"
                if len(row) <= width:
                    lines.append(row)
                else:  # a long name goes under its type, as in the plan table
                    lines.append(f"  {SYMBOL[kind]:>2} {render.display_type(c.type)}")
                    lines += render.wrap(c.name, "       ", width)
                for p in c.paths:
                    change(p.path, p, "       ")
                for note in c.notes:
                    lines += render.wrap(f"({note})", "        ", width, first="       ")
        for p in d.outputs:
            change(f"output {p.path}", p, "  ")
        for v in d.policy.get("new", []):
            lines += render.wrap(
                f"policy NEW {v.get('enforcementLevel')} {v.get('policy')}: {v.get('name')}: {v.get('message')}",
                "      ",
                width,
                first="  ",
            )
        for v in d.policy.get("resolved", []):
            lines += render.wrap(f"policy resolved {v.get('policy')}: {v.get('name')}", "      ", width, first="  ")
        for text in cost_summary(d.cost):
            lines += render.wrap(f"cost {text}", "      ", width, first="  ")
        lines.append("")
    return "\n".join(lines)


def _md(value: str) -> str:
    return value.replace("|", "\\|").replace("`", "'")


def render_markdown(diffs: list[StackDiff], base_label: str) -> str:
    out = [
        f"### Offline plan diff against `{_md(base_label)}`",
        "",
        "| stack | create | update | replace | delete | outputs | policy (new / resolved) |",
        "|---|---|---|---|---|---|---|",
    ]
    note = bootstrap_note(diffs)
    if note:
        out[1:1] = [f"**{note}**", ""]
    for d in diffs:
        policy = f"{len(d.policy.get('new', []))} / {len(d.policy.get('resolved', []))}" if d.policy else "n/a"
        name = f"{d.project}/{d.stack}" + (" (new)" if d.base_missing else " (removed)" if d.head_missing else "")
        out.append(
            f"| {name} | {d.count('create')} | {d.count('update')} | {d.count('replace')} | "
            f"{d.count('delete')} | {len(d.outputs)} | {policy} |"
        )
    out.append("")
    for d in diffs:
        if d.empty:
            continue
        out.append(
            f"<details{' open' if d.count('replace') or d.count('delete') else ''}>"
            f"<summary><b>{d.project}/{d.stack}</b>: {summary_line(d)}</summary>\n"
        )
        for kind in ORDER:
            group = [c for c in d.changes if c.kind == kind]
            if not group:
                continue
            out.append(
                f"**{HEADING[kind]}**"
                + (" (delete and create: the old one's data and nodes go)" if kind == "replace" else "")
            )
            out.append("")
            for c in group:
                out.append(f"- `{c.type}` **{_md(c.name)}**")
                for p in c.paths[:MARKDOWN_PATHS]:
                    why = f" — replaces: {_md(p.replace_reason)}" if p.replace_reason else ""
                    out.append(
                        f"  - `{_md(p.path)}`: `{_md(shown(p.old, MARKDOWN_VALUE))}` → "
                        f"`{_md(shown(p.new, MARKDOWN_VALUE))}`{why}"
                    )
                if len(c.paths) > MARKDOWN_PATHS:
                    out.append(f"  - … {len(c.paths) - MARKDOWN_PATHS} more paths (see the job log)")
                out += [f"  - _{_md(note)}_" for note in c.notes]
            out.append("")
        if d.outputs:
            out.append("**Outputs**\n")
            out += [
                f"- `{_md(p.path)}`: `{_md(shown(p.old, MARKDOWN_VALUE))}` → `{_md(shown(p.new, MARKDOWN_VALUE))}`"
                for p in d.outputs
            ]
            out.append("")
        if d.policy.get("new") or d.policy.get("resolved"):
            out.append("**Policy**\n")
            out += [
                f"- new {v.get('enforcementLevel')}: `{_md(str(v.get('policy')))}` on {_md(str(v.get('name')))}: "
                f"{_md(str(v.get('message')))}"
                for v in d.policy.get("new", [])
            ]
            out += [
                f"- resolved: `{_md(str(v.get('policy')))}` on {_md(str(v.get('name')))}"
                for v in d.policy.get("resolved", [])
            ]
            out.append("")
        if d.cost:
            out.append("**Estimated cost (USD)**\n")
            out += [f"- {_md(text)}" for text in cost_summary(d.cost)]
            out.append("")
        out.append("</details>\n")
    out.append(
        "_Offline: the programs under Pulumi's mocks. Replacement follows the provider schemas' "
        "ForceNew properties and `replaceOnChanges` (offline/diff/replacement.py); values AWS assigns are "
        "placeholders, secrets are never shown. The per-stack `pulumi preview` comments are the real thing._"
    )
    return "\n".join(out)


# --- planning two revisions ------------------------------------------------------------------


class PlanFailed(RuntimeError):
    pass


def run_in(checkout: Path, argv: list[str]) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` for a revision: in its tree, its tree first on the import path. The
    virtualenv's editable install is a meta-path finder appended after the path finders
    (setuptools' ``__editable___*_finder``), so modules found in ``checkout`` win."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    return subprocess.run(argv, cwd=checkout, env=env, capture_output=True, text=True)


ACKNOWLEDGEMENTS_FILE = "acknowledgements.json"


def project_dirs_of(checkout: Path) -> list[Path]:
    return [d for d in (checkout, checkout / "workloads", checkout / "bootstrap") if (d / "Pulumi.yaml").exists()]


def load_acknowledgements(plans: Path) -> Acknowledgements:
    """What ``plan_revision`` recorded of the planned checkout's stack files."""
    path = plans / ACKNOWLEDGEMENTS_FILE
    recorded = json.loads(path.read_text()) if path.exists() else {}
    return {tuple(key.split("/", 1)): names for key, names in recorded.items()}  # type: ignore[misc]


def plan_revision(checkout: Path, out: Path, stacks: tuple[str, ...], label: str = "this checkout") -> None:
    """``offline.plan.command`` of ``checkout`` for each stack, with this interpreter (this checkout's
    virtualenv). ``checkout`` goes first on the import path, ahead of the installed package,
    so a base revision runs its own infra/ and workloads/. Its stack files' acknowledgements are recorded
    beside the plans (a base revision's worktree is gone once planned)."""
    for stack in stacks:
        if not (checkout / f"Pulumi.{stack}.yaml").exists():
            continue
        result = run_in(
            checkout,
            [sys.executable, "-m", "offline.plan", "--stack", stack, "--project-dir", str(checkout), "--out", str(out)],
        )
        # 3: mandatory policy violations, with every plan written; the diff shows them.
        if result.returncode not in (0, POLICY_VIOLATIONS_EXIT):
            raise PlanFailed(
                f"The offline plan of {project_name(checkout)}/{stack} (and the workload and bootstrap "
                f"stacks of that name) in {label} failed:\n{result.stderr.strip()}"
            )
    out.mkdir(parents=True, exist_ok=True)
    acknowledged = stack_acknowledgements(project_dirs_of(checkout), stacks)
    (out / ACKNOWLEDGEMENTS_FILE).write_text(json.dumps({f"{p}/{st}": n for (p, st), n in acknowledged.items()}))


def git(*args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(REPO_ROOT), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def plan_base(ref: str, out: Path, stacks: tuple[str, ...]) -> str:
    """Plan ``ref`` in a temporary worktree; returns a label for it."""
    try:
        commit = git("rev-parse", "--verify", f"{ref}^{{commit}}")
    except subprocess.CalledProcessError:
        raise PlanFailed(f"--base {ref!r}: not a commit in this repository") from None
    with tempfile.TemporaryDirectory(prefix="plan-base-") as tmp:
        worktree = Path(tmp) / "base"
        git("worktree", "add", "--detach", "--quiet", str(worktree), commit)
        try:
            plan_revision(worktree, out, stacks, f"the base revision {ref} ({commit[:12]})")
        finally:
            git("worktree", "remove", "--force", str(worktree))
    return f"{ref} ({commit[:12]})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bin/plan", description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="git ref of the revision to compare against")
    parser.add_argument("--stacks", default=",".join(STACKS), help="the stacks to compare (default: dev,prod)")
    parser.add_argument(
        "--out", type=Path, default=REPO_ROOT / "build" / "plan-diff", help="where diff.txt and diff.md go"
    )
    parser.add_argument(
        "--data-store-replacements",
        choices=("refuse", "report"),
        default="refuse",
        help="refuse (exit 2) an unacknowledged data-store replacement, as the deploy jobs do against the "
        "deployed commit, or only report it: a pull request compares against its base, which may never "
        "have been deployed",
    )
    args = parser.parse_args(argv)
    stacks = tuple(s for s in args.stacks.split(",") if s)
    out = args.out.resolve()
    base_dir, head_dir = out / "base", out / "head"
    for d in (base_dir, head_dir):
        if d.exists():
            subprocess.run(["rm", "-rf", str(d)], check=True)
    try:
        label = plan_base(args.base, base_dir, stacks)
        plan_revision(REPO_ROOT, head_dir, stacks)
    except PlanFailed as exc:
        print(render.message(str(exc)), file=sys.stderr)
        return 2
    diffs = diff_plan_dirs(base_dir, head_dir)
    text = render_text(diffs, label, render.terminal_width())
    (out / "diff.txt").write_text(text)
    (out / "diff.md").write_text(render_markdown(diffs, label) + "\n")
    print(text)
    print(f"Wrote {out / 'diff.md'} (PR comment, job summary) and {out / 'diff.txt'}.")
    acknowledged, deployed = stack_acknowledgements(project_dirs_of(REPO_ROOT), stacks), load_acknowledgements(base_dir)
    refused = {
        "EKS would refuse this change": version_change_refusals(base_dir, head_dir),
        "This change replaces data stores": data_store_replacement_refusals(
            diffs, load_plans(base_dir), load_plans(head_dir), acknowledged, deployed
        ),
    }
    for (project, stack), names in spent(acknowledged, deployed).items():
        for name in sorted(names):
            print(
                f"Note: {project}/{stack} {project}:{ACKNOWLEDGEMENT_KEY}.{name} is already in {label}: it acknowledges "
                "nothing in this change; drop it once that revision runs everywhere"
            )
    reported = "This change would replace data stores"
    if args.data_store_replacements == "report":
        refused[reported] = refused.pop("This change replaces data stores")
    for heading, refusals in refused.items():
        if refusals:
            caveat = " (if the stack was deployed from it: the deploy job checks against what runs)"
            print(
                render.message(
                    f"\n{heading} against {label}{caveat if heading == reported else ''}:\n"
                    + "\n".join(f"  - {r}" for r in refusals)
                ),
                file=sys.stderr,
            )
    if any(refusals for heading, refusals in refused.items() if heading != reported):
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
