"""A Mermaid picture of a planned stack, drawn from the plan itself (resources + outputs).

Aggregated so it stays readable: one box per zone with its subnets, one per node group (type,
min/desired/max, EFA interfaces) inside its placement group, the file system and its S3 links,
the cluster software as one box per namespace, and for a workload stack each job with the
queue, claim and node group it attaches to. Data-driven: whatever node groups, zones and
releases the plan declares are what it draws.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from infra.facts.instances import node_group_instance_types
from offline.plan.mocks import placeholder_id

T_SUBNET = "aws:ec2/subnet:Subnet"
T_VPC = "aws:ec2/vpc:Vpc"
T_CIDR = "aws:ec2/vpcIpv4CidrBlockAssociation:VpcIpv4CidrBlockAssociation"
T_NAT = "aws:ec2/natGateway:NatGateway"
T_ENDPOINT = "aws:ec2/vpcEndpoint:VpcEndpoint"
T_NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
T_LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
T_FSX = "aws:fsx/lustreFileSystem:LustreFileSystem"
T_EFS = "aws:efs/fileSystem:FileSystem"
T_MOUNT_TARGET = "aws:efs/mountTarget:MountTarget"
T_DRA = "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation"
T_ADDON = "aws:eks/addon:Addon"
T_RELEASE = "kubernetes:helm.sh/v3:Release"
T_CONFIG_FILE = "kubernetes:yaml/v2:ConfigFile"
T_CLUSTERS = ("eks:index:Cluster", "aws:eks/cluster:Cluster")
T_NODEPOOL = "kubernetes:karpenter.sh/v1:NodePool"
T_NODECLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
WORKLOAD_KINDS = ("Job", "RayJob", "MPIJob", "Deployment", "Pod")


def _id(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", text)


def _label(*lines: str) -> str:
    return '"' + "<br/>".join(line.replace('"', "#quot;") for line in lines if line) + '"'


def _of(resources: list[dict[str, Any]], type_: str) -> list[dict[str, Any]]:
    return [r for r in resources if r["type"] == type_]


def _zone_of_subnets(resources: list[dict[str, Any]]) -> dict[str, str]:
    """Subnet id as other inputs carry it -> zone id."""
    return {
        placeholder_id(T_SUBNET, s["name"]): s["inputs"].get("availabilityZoneId", "?")
        for s in _of(resources, T_SUBNET)
    }


def _subnet_kind(name: str) -> str:
    for kind in ("public", "private", "node"):
        if f"-{kind}-" in name:
            return kind
    return "subnet"


def cluster_diagram(plan: dict[str, Any]) -> str:
    """Mermaid flowchart of a cluster stack plan (resources.json's document)."""
    resources, outputs = plan["resources"], plan.get("outputs", {})
    by_urn = {r["urn"]: r for r in resources}
    zones_of = _zone_of_subnets(resources)
    accel_zone = (outputs.get("acceleratorZone") or {}).get("id")
    out = ["flowchart TB"]

    vpc = next(iter(_of(resources, T_VPC)), None)
    cidrs = [vpc["inputs"].get("cidrBlock", "")] if vpc else []
    cidrs += [c["inputs"].get("cidrBlock", "") for c in _of(resources, T_CIDR)]
    out.append(f"  subgraph region[{_label('Region ' + str(outputs.get('region', '')))}]")
    out.append(f"    subgraph vpc[{_label('VPC ' + ' + '.join(cidrs))}]")

    subnets_by_zone: dict[str, list[str]] = defaultdict(list)
    for s in _of(resources, T_SUBNET):
        subnets_by_zone[s["inputs"].get("availabilityZoneId", "?")].append(
            f"{_subnet_kind(s['name'])} {s['inputs'].get('cidrBlock', '')}"
        )
    nats_by_zone: dict[str, int] = defaultdict(int)
    for nat in _of(resources, T_NAT):
        nats_by_zone[zones_of.get(nat["inputs"].get("subnetId", ""), "?")] += 1

    groups = []
    for group in _of(resources, T_NODE_GROUP):
        template = next(
            (by_urn[u] for u in group.get("dependencies", []) if by_urn.get(u, {}).get("type") == T_LAUNCH_TEMPLATE),
            None,
        )
        groups.append((group, (template or {}).get("inputs", {})))
    single_zone = defaultdict(list)
    multi_zone = []
    for group, lt in groups:
        zones = sorted({zones_of.get(s, "?") for s in group["inputs"].get("subnetIds") or []})
        (single_zone[zones[0]].append((group, lt)) if len(zones) == 1 else multi_zone.append((group, lt, zones)))

    classes = {c["inputs"]["metadata"]["name"]: c["inputs"]["spec"] for c in _of(resources, T_NODECLASS)}
    pools_by_zone: dict[str, list[list[str]]] = defaultdict(list)
    for pool in _of(resources, T_NODEPOOL):
        requirements = {
            r["key"]: r.get("values") or [] for r in pool["inputs"]["spec"]["template"]["spec"]["requirements"]
        }
        zones = requirements.get("topology.k8s.aws/zone-id") or ["?"]
        node_class = classes.get(pool["inputs"]["spec"]["template"]["spec"]["nodeClassRef"]["name"], {})
        pools_by_zone[zones[0] if len(zones) == 1 else "?"].append(_node_pool(pool["inputs"], requirements, node_class))

    file_systems = _of(resources, T_FSX)
    for zone in sorted(subnets_by_zone):
        title = f"zone {zone}" + (" (accelerator zone)" if zone == accel_zone else "")
        out.append(f"      subgraph z_{_id(zone)}[{_label(title)}]")
        subnet_lines = sorted(subnets_by_zone[zone])
        if nats_by_zone.get(zone):
            subnet_lines.append(f"NAT gateway x{nats_by_zone[zone]}")
        out.append(f"        sn_{_id(zone)}[{_label(*subnet_lines)}]")
        for group, lt in single_zone.get(zone, []):
            out.extend("        " + line for line in _node_group(group, lt))
        for lines in pools_by_zone.get(zone, []):
            out.extend("        " + line for line in lines)
        for fs in file_systems:
            subnet = fs["inputs"].get("subnetIds")
            subnet = subnet[0] if isinstance(subnet, list) else subnet
            if zones_of.get(subnet or "") == zone:
                out.append(f"        {_fsx_node(fs)}")
        out.append("      end")
    for group, lt, zones in multi_zone:
        out.extend("      " + line for line in _node_group(group, lt, zones))
    for fs in file_systems:
        subnet = fs["inputs"].get("subnetIds")
        subnet = subnet[0] if isinstance(subnet, list) else subnet
        if (subnet or "") not in zones_of:
            out.append(f"      {_fsx_node(fs)}")
    # EFS is Regional: one node in the VPC, with its mount targets counted (one per node zone).
    for fs in _of(resources, T_EFS):
        targets = len(_of(resources, T_MOUNT_TARGET))
        mode = fs["inputs"].get("throughputMode", "")
        out.append(
            f"      fs_{_id(fs['name'])}[({_label('Amazon EFS', f'{mode} throughput', f'{targets} mount targets')})]"
        )
    for endpoint in _of(resources, T_ENDPOINT):
        service = endpoint["inputs"].get("serviceName", "").split(".")[-1]
        kind = endpoint["inputs"].get("vpcEndpointType", "Gateway")
        out.append(f"      ep_{_id(endpoint['name'])}[{_label(f'{service} {kind} endpoint')}]")
    out.append("    end")

    for cluster in (r for t in T_CLUSTERS for r in _of(resources, t)):
        version = cluster["inputs"].get("version", "")
        support = (cluster["inputs"].get("upgradePolicy") or {}).get("supportType", "")
        out.append(
            f"    eks[{_label('EKS control plane', f'Kubernetes {version}', f'{support} support' if support else '')}]"
        )
        out.append("    eks --- vpc")
    out.append("  end")

    for dra in _of(resources, T_DRA):
        s3 = dra["inputs"].get("dataRepositoryPath", "s3")
        fs_id = next((_id(fs["name"]) for fs in file_systems), "fsx")
        out.append(f"  s3_{_id(dra['name'])}[({_label(s3)})]")
        out.append("  " + _s3_link(dra["inputs"], f"fs_{fs_id}", f"s3_{_id(dra['name'])}"))

    out.extend(_software(resources, outputs))
    return "\n".join(out) + "\n"


def _node_group(group: dict[str, Any], lt: dict[str, Any], zones: list[str] | None = None) -> list[str]:
    inputs = group["inputs"]
    name = inputs.get("nodeGroupName") or group["name"]
    types = ", ".join(node_group_instance_types(inputs, lt))
    scaling = inputs.get("scalingConfig") or {}
    sizes = f"{scaling.get('minSize', 0)}/{scaling.get('desiredSize', 0)}/{scaling.get('maxSize', 0)} min/desired/max"
    efa = len(lt.get("networkInterfaces") or [])
    extra = []
    if efa:
        extra.append(f"{efa} EFA interfaces")
    if inputs.get("capacityType") == "CAPACITY_BLOCK":
        extra.append("Capacity Block")
    elif lt.get("capacityReservationSpecification"):
        extra.append("capacity reservation")
    if zones:
        extra.append("zones " + ", ".join(zones))
    node = f"ng_{_id(name)}[{_label(f'node group {name}', types, sizes, *extra)}]"
    placement = (lt.get("placement") or {}).get("groupName")
    if placement:
        return [f"subgraph pg_{_id(name)}[{_label('cluster placement group')}]", f"  {node}", "end"]
    return [node]


def _node_pool(pool: dict[str, Any], requirements: dict[str, list[str]], node_class: dict[str, Any]) -> list[str]:
    """A Karpenter NodePool, drawn where a node group would be: its type, 0 to limits.nodes nodes,
    the capacity types in order, EFA devices, inside its placement group when it has one."""
    name = pool["metadata"]["name"]
    types = ", ".join(requirements.get("node.kubernetes.io/instance-type", []))
    limit = (pool["spec"].get("limits") or {}).get("nodes", "?")
    efa = sum(n.get("interfaceType") == "efa-only" for n in node_class.get("networkInterfaces") or [])
    extra = [" > ".join(requirements.get("karpenter.sh/capacity-type", []))]
    if efa:
        extra.append(f"{efa} EFA interfaces")
    if node_class.get("capacityReservationSelectorTerms"):
        extra.append("capacity reservations")
    node = f"np_{_id(name)}[{_label(f'Karpenter NodePool {name}', types, f'0..{limit} nodes, on demand', *extra)}]"
    if node_class.get("placementGroupSelector"):
        return [f"subgraph pg_{_id(name)}[{_label('cluster placement group')}]", f"  {node}", "end"]
    return [node]


def _s3_link(inputs: dict[str, Any], fs: str, s3: str) -> str:
    """The arrow follows the association's event policies (infra/components/storage.py association_s3):
    S3 -> file system when S3 events are imported, back when file-system changes are exported,
    a dotted link when neither flows automatically."""
    policies = inputs.get("s3") or {}
    imports = bool((policies.get("autoImportPolicy") or {}).get("events"))
    exports = bool((policies.get("autoExportPolicy") or {}).get("events"))
    label = inputs.get("fileSystemPath", "")
    if imports and exports:
        return f"{fs} <-->|{label}| {s3}"
    if imports:
        return f"{s3} -->|{label}| {fs}"
    if exports:
        return f"{fs} -->|{label}| {s3}"
    return f"{fs} -.-|{label}| {s3}"


def _fsx_node(fs: dict[str, Any]) -> str:
    i = fs["inputs"]
    tier = f"{i.get('perUnitStorageThroughput')} MB/s/TiB" if i.get("perUnitStorageThroughput") else ""
    size = f"{i.get('storageCapacity')} GiB {i.get('deploymentType', '')}"
    return f"fs_{_id(fs['name'])}[({_label('FSx for Lustre', size, tier)})]"


def _software(resources: list[dict[str, Any]], outputs: dict[str, Any]) -> list[str]:
    by_namespace: dict[str, list[str]] = defaultdict(list)
    for addon in _of(resources, T_ADDON):
        by_namespace["EKS add-ons"].append(addon["inputs"].get("addonName", addon["name"]))
    # pulumi-eks installs these two itself, before any node, from the cluster's own inputs.
    for cluster in (r for t in T_CLUSTERS for r in _of(resources, t)):
        for option, addon_name in (("vpcCniOptions", "vpc-cni"), ("kubeProxyAddonOptions", "kube-proxy")):
            if cluster["inputs"].get(option):
                by_namespace["EKS add-ons"].append(addon_name)
    for release in _of(resources, T_RELEASE):
        chart = release["inputs"].get("chart", release["name"]).rsplit("/", 1)[-1]
        by_namespace[release["inputs"].get("namespace", "default")].append(
            f"{chart} {release['inputs'].get('version', '')}".strip()
        )
    for manifest in _of(resources, T_CONFIG_FILE):
        by_namespace["mpi-operator"].append(f"release manifest ({manifest['name']})")
    queues = []
    for r in resources:
        inputs = r["inputs"]
        if not (r["type"].startswith("kubernetes:") and "kind" in inputs and "metadata" in inputs):
            continue
        kind, meta = inputs["kind"], inputs.get("metadata") or {}
        if kind == "Queue":
            queues.append(meta.get("name", ""))
        elif kind in ("Deployment", "PersistentVolumeClaim", "ServiceAccount"):
            by_namespace[meta.get("namespace", "cluster")].append(f"{kind} {meta.get('name', '')}")
    lines = [f"  subgraph software[{_label('cluster software, by namespace')}]"]
    for namespace in sorted(by_namespace):
        lines.append(f"    ns_{_id(namespace)}[{_label(namespace, *sorted(set(by_namespace[namespace])))}]")
    if queues:
        lines.append(f"    queues[{_label('Volcano queues', *sorted(queues))}]")
    lines.append("  end")
    lines.append("  software --> eks")
    return lines


# --- the workload stack -----------------------------------------------------------------------


def _walk(value: Any) -> Iterable[tuple[str, Any]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield key, item
            yield from _walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from _walk(item)


def workloads_diagram(plan: dict[str, Any], cluster_outputs: dict[str, Any]) -> str:
    """Mermaid flowchart of a workload stack plan: each job and what it attaches to."""
    groups = cluster_outputs.get("acceleratorNodeGroups") or []
    core = cluster_outputs.get("coreNodeSelector") or {}
    support = (cluster_outputs.get("jobSupportPlacement") or {}).get("nodeSelector") or {}
    out = ["flowchart LR"]
    targets: dict[str, str] = {}
    edges: list[str] = []
    jobs: dict[str, list[str]] = defaultdict(list)
    for r in plan["resources"]:
        inputs = r["inputs"]
        if not (r["type"].startswith("kubernetes:") and inputs.get("kind") in WORKLOAD_KINDS):
            continue
        meta = inputs.get("metadata") or {}
        job = f"{inputs['kind']} {meta.get('name', r['name'])}"
        job_id = "w_" + _id(job)
        jobs[meta.get("namespace", "default")].append(f"{job_id}[{_label(job)}]")
        attached = set()
        for key, value in _walk(inputs.get("spec") or {}):
            if key == "queue" and isinstance(value, str):
                attached.add(("q_" + _id(value), f"queue {value}"))
            elif key == "claimName" and isinstance(value, str):
                attached.add(("c_" + _id(value), f"claim {value}"))
            elif key == "nodeSelector" and isinstance(value, dict):
                attached.add(_node_target(value, groups, core, support))
        queue = (meta.get("labels") or {}).get("volcano.sh/queue-name")
        if queue:
            attached.add(("q_" + _id(queue), f"queue {queue}"))
        for target_id, text in sorted(attached):
            targets[target_id] = text
            edges.append(f"  {job_id} --> {target_id}")
    for namespace, items in sorted(jobs.items()):
        out.append(f"  subgraph ns_{_id(namespace)}[{_label('namespace ' + namespace)}]")
        out.extend(f"    {item}" for item in items)
        out.append("  end")
    out.append(f"  subgraph cluster[{_label('cluster stack')}]")
    for target_id, text in sorted(targets.items()):
        out.append(f"    {target_id}[{_label(text)}]")
    out.append("  end")
    out.extend(sorted(set(edges)))
    return "\n".join(out) + "\n"


def _node_target(
    selector: dict[str, Any], groups: list[dict[str, Any]], core: dict[str, Any], support: dict[str, Any]
) -> tuple[str, str]:
    """The node group whose labels a pod's nodeSelector picks (the well-known instance-type label
    must name the group's type); the core nodes; the job-support nodes; or the selector itself."""
    best, score = None, 0
    for group in groups:
        labels = {**(group.get("labels") or {}), "node.kubernetes.io/instance-type": group.get("instanceType")}
        if any(key in labels and labels[key] != value for key, value in selector.items()):
            continue
        matched = sum(1 for key in selector if key in labels)
        if matched > score:
            best, score = group, matched
    if best is not None:
        return "g_" + _id(best["name"]), f"node group {best['name']} ({best.get('instanceType', '')})"
    if core and core.items() <= selector.items():
        return "g_core", "core nodes"
    if support and support.items() <= selector.items():
        return "g_job_support", "job-support nodes"
    text = ",".join(f"{k}={v}" for k, v in sorted(selector.items()))
    return "g_" + _id(text), "nodes " + text
