"""What the offline plan prints and writes for each planned stack: the resource table, the
outputs, the cost estimate, the policy report, ``resources.json`` and one YAML file per
Kubernetes object (``offline/plan/command.py`` runs the programs and calls these)."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from offline.plan import policy_run as policy_pack
from offline.plan.mocks import Registration
from offline.plan.runner import PlanResult
from offline.report import render

# The inputs worth a glance per resource type; the rest is in resources.json.
SUMMARY_KEYS: dict[str, tuple[str, ...]] = {
    "aws:ec2/vpc:Vpc": ("cidrBlock",),
    "aws:ec2/vpcIpv4CidrBlockAssociation:VpcIpv4CidrBlockAssociation": ("cidrBlock",),
    "aws:ec2/subnet:Subnet": ("cidrBlock", "availabilityZoneId"),
    "aws:ec2/vpcEndpoint:VpcEndpoint": ("serviceName",),
    "aws:ec2/placementGroup:PlacementGroup": ("strategy",),
    "aws:eks/nodeGroup:NodeGroup": ("instanceTypes", "amiType", "capacityType", "scalingConfig", "nodeRepairConfig"),
    "aws:fsx/lustreFileSystem:LustreFileSystem": ("deploymentType", "storageCapacity", "perUnitStorageThroughput"),
    "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation": ("fileSystemPath", "dataRepositoryPath"),
    "aws:eks/accessEntry:AccessEntry": ("principalArn",),
    "aws:cloudwatch/logGroup:LogGroup": ("name", "retentionInDays"),
    "aws:eks/addon:Addon": ("addonName", "addonVersion"),
    "eks:index:Cluster": ("name", "version", "authenticationMode"),
    "aws:autoscaling/tag:Tag": ("tag",),
    "aws:iam/rolePolicyAttachment:RolePolicyAttachment": ("policyArn",),
    "aws:kms/alias:Alias": ("name",),
}


def _short(value: Any) -> str:
    if isinstance(value, dict) and {"key", "value"} <= value.keys():
        return f"{value['key']}={value['value']}"
    if isinstance(value, dict):
        return ",".join(f"{k}={v}" for k, v in value.items())
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)


def summarize(r: Registration) -> str:
    if r.type == "aws:ec2/launchTemplate:LaunchTemplate":
        nics = r.inputs.get("networkInterfaces") or []
        parts = [f"efaInterfaces={len(nics)}"] if nics else []
        if "placement" in r.inputs:
            parts.append("placementGroup")
        if "capacityReservationSpecification" in r.inputs:
            parts.append("capacityReservation")
        parts.append(f"imds={r.inputs.get('metadataOptions', {}).get('httpTokens')}")
        return " ".join(parts)
    if r.type == "kubernetes:core/v1:PersistentVolume":
        csi = r.inputs.get("spec", {}).get("csi", {})
        return f"volumeHandle={csi.get('volumeHandle')} claim={r.inputs['spec'].get('claimRef', {}).get('namespace')}"
    keys = SUMMARY_KEYS.get(r.type, ())
    parts = [f"{k}={_short(r.inputs[k])}" for k in keys if k in r.inputs]
    if r.protect:
        parts.append("protected")
    return " ".join(parts)


def kubernetes_objects(result: PlanResult) -> list[dict[str, Any]]:
    return [
        r.inputs
        for r in result.registrations
        if r.type.startswith("kubernetes:") and r.custom and "apiVersion" in r.inputs and "kind" in r.inputs
    ]


def manifest_file_name(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata", {})
    parts = [obj["kind"].lower(), meta.get("namespace", ""), meta.get("name", "unnamed")]
    return "-".join(p for p in parts if p) + ".yaml"


@dataclass(frozen=True)
class RenderedPlan:
    """One stack's part of the plan, ready to go out: the text to print, the files to write
    (by path under ``out``), and what the closing summary needs."""

    text: str
    out: Path
    files: dict[str, str]
    planned: render.Planned


def plan_files(
    result: PlanResult, cost: dict[str, Any] | None = None, policy: dict[str, Any] | None = None
) -> dict[str, str]:
    """``resources.json`` and one YAML file per Kubernetes object under ``manifests/``."""
    document = {
        **result.as_json(),
        **({"cost": cost} if cost is not None else {}),
        **({"policy": policy} if policy is not None else {}),
    }
    files = {"resources.json": json.dumps(document, indent=2, sort_keys=False) + "\n"}
    for obj in kubernetes_objects(result):
        # The pure-Python SafeDumper: PyYAML 6.0.3's libyaml CSafeDumper folds long quoted strings (the scripts
        # the workload objects carry) at other places, so the same object would read differently.
        files[f"manifests/{manifest_file_name(obj)}"] = yaml.safe_dump(obj, sort_keys=False)
    return files


def write_files(out: Path, files: dict[str, str]) -> Path:
    """``out`` made anew with exactly ``files``."""
    if out.exists():
        shutil.rmtree(out)
    (out / "manifests").mkdir(parents=True)
    for name, text in files.items():
        (out / name).write_text(text)
    return out


def write_plan(
    result: PlanResult, out_root: Path, cost: dict[str, Any] | None = None, policy: dict[str, Any] | None = None
) -> Path:
    return write_files(out_root / result.project / result.stack, plan_files(result, cost, policy))


def render_plan(
    result: PlanResult,
    out_root: Path,
    cost: dict[str, Any] | None = None,
    region: str = "",
    policy: policy_pack.PolicyReport | None = None,
    wide: bool = False,
    width: int = render.WIDTH,
) -> RenderedPlan:
    """Everything one stack's plan prints and writes, computed without printing or writing: the
    offline plan renders every stack before it writes any (a refused stack leaves build/plan as it was)."""
    out = out_root / result.project / result.stack
    shown = out.relative_to(Path.cwd()) if out.is_relative_to(Path.cwd()) else out
    files = plan_files(result, cost, policy.as_json() if policy is not None else None)
    parts = [
        f"Offline plan of {result.project} / {result.stack}: {len(result.registrations)} resources to create\n",
        "\n".join(render.resource_table(result, summarize, wide, width)),
        "\n" + "\n".join(render.outputs(result, wide, width)),
    ]
    if cost is not None:
        kind = "cluster" if result.project == "trainium-eks" else "workloads"
        parts.append("\n" + render.cost_section(cost, region, kind, wide, width))
    parts.append(f"\nWrote {shown}/resources.json and {len(kubernetes_objects(result))} manifests.\n")
    if policy is not None:
        text = policy_pack.render_report(result.project, result.stack, policy)
        parts.append((text if wide else render.wrapped(text, width)) + "\n")
    return RenderedPlan("".join(f"{part}\n" for part in parts), out, files, render.planned(result, cost, policy, shown))


def emit(rendered: RenderedPlan) -> render.Planned:
    """Write a rendered stack's files, then print its text."""
    write_files(rendered.out, rendered.files)
    print(rendered.text, end="")
    return rendered.planned


def check_policies(result: PlanResult, config: policy_pack.PackConfig, region: str | None) -> policy_pack.PolicyReport:
    return policy_pack.run_policies(result.registrations, config, region)
