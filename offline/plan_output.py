"""What the offline plan prints and writes for each planned stack: the resource table, the
outputs, the cost estimate, the policy report, ``resources.json`` and one YAML file per
Kubernetes object (``offline/plan.py`` runs the programs and calls these)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import yaml

from offline import policy_run as policy_pack
from offline import render
from offline.mocks import Registration
from offline.runner import PlanResult


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


def write_plan(result: PlanResult, out_root: Path, cost: dict[str, Any] | None = None,
               policy: dict[str, Any] | None = None) -> Path:
    out = out_root / result.project / result.stack
    if out.exists():
        shutil.rmtree(out)
    manifests = out / "manifests"
    manifests.mkdir(parents=True)
    document = {**result.as_json(), **({"cost": cost} if cost is not None else {}),
                **({"policy": policy} if policy is not None else {})}
    (out / "resources.json").write_text(json.dumps(document, indent=2, sort_keys=False) + "\n")
    for obj in kubernetes_objects(result):
        (manifests / manifest_file_name(obj)).write_text(yaml.safe_dump(obj, sort_keys=False))
    return out


def print_plan(result: PlanResult, out_root: Path, cost: dict[str, Any] | None = None, region: str = "",
               policy: policy_pack.PolicyReport | None = None, wide: bool = False) -> render.Planned:
    print(f"Offline plan of {result.project} / {result.stack}: {len(result.registrations)} resources to create\n")
    print("\n".join(render.resource_table(result, summarize, wide)))
    print("\n" + "\n".join(render.outputs(result, wide)))
    if cost is not None:
        kind = "cluster" if result.project == "trainium-eks" else "workloads"
        print("\n" + render.cost_section(cost, region, kind, wide))
    out = write_plan(result, out_root, cost, policy.as_json() if policy is not None else None)
    shown = out.relative_to(Path.cwd()) if out.is_relative_to(Path.cwd()) else out
    print(f"\nWrote {shown}/resources.json and {len(kubernetes_objects(result))} manifests.\n")
    if policy is not None:
        text = policy_pack.render_report(result.project, result.stack, policy)
        print((text if wide else render.wrapped(text)) + "\n")
    return render.planned(result, cost, policy, shown)


def check_policies(result: PlanResult, config: policy_pack.PackConfig, region: str | None) -> policy_pack.PolicyReport:
    return policy_pack.run_policies(result.registrations, config, region)
