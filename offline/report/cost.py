"""What a planned stack costs per hour and per month, from the plan itself.

Pure functions over the plan's resources (``resources.json``'s ``resources``: type, urn,
dependencies, inputs), so the estimate follows whatever node groups, gateways and file
systems the program declares, and a plan diff can compare two estimates. Three scenarios:
**idle** (every node group at its minSize), **configured** (desiredSize) and **fullScale**
(maxSize). A price the table lacks makes its line, and every total it takes part in,
``None`` — never zero — unless nothing of it runs in that scenario.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from infra.config.models import FSX_THROUGHPUTS
from infra.facts import efs, prices, startup
from infra.facts.instances import instance_hourly, node_group_instance_types
from infra.facts.prices import HOURS_PER_MONTH, Price
from infra.specs.burn_in_objects import BURN_IN_MINUTES
from infra.specs.node_template import (
    TRAINIUM_SCALE_DOWN_UNNEEDED_SECONDS,
    UNHELD_SCALE_DOWN_UNNEEDED,
    UNHELD_SCALE_DOWN_UNNEEDED_SECONDS,
)
from workloads import deadlines, first_step, goodput

SCENARIOS = ("idle", "configured", "fullScale")
SCALING_KEY = {"idle": "minSize", "configured": "desiredSize", "fullScale": "maxSize"}

NOT_ESTIMATED = (
    "data processed by NAT gateways and interface endpoints",
    "data transfer (internet, cross-AZ, cross-region)",
    "CloudWatch Logs ingestion and storage, Container Insights metrics, the dashboard and alarms",
    "ECR image storage",
    "S3 storage and requests (datasets, FSx data repository traffic, scheduled checkpoint exports)",
    "FSx backups (a final backup when a retained file system is deleted)",
    "load balancers the workloads' Services create",
    "KMS keys and requests",
    "Amazon Managed Service for Prometheus samples ingested, stored and queried, and the samples its managed "
    "collector collects (monitoring.prometheus: managed)",
    "SNS messages of the training alerts",
)

# T3, T3a and T4g instances launch in unlimited mode unless told otherwise ("Default: standard (T2 instances) or
# unlimited (T3/T3a/T4g instances)", AWS SDK for Kotlin, EC2 RunInstancesRequest.creditSpecification), and the
# launch templates here set no credit specification: CPU above the baseline is billed per vCPU-hour.
BURSTABLE_FAMILY = re.compile(r"^t[0-9][a-z]*\.")


def burstable_credits(types: Iterable[str]) -> str:
    """The NOT_ESTIMATED entry for node groups running burstable ``types``."""
    return (
        f"surplus CPU credits of burstable nodes ({', '.join(sorted(set(types)))}) in unlimited mode, billed per "
        "vCPU-hour when their average CPU stays above the baseline"
    )


T_NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
T_LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
T_NAT = "aws:ec2/natGateway:NatGateway"
T_EIP = "aws:ec2/eip:Eip"
T_ENDPOINT = "aws:ec2/vpcEndpoint:VpcEndpoint"
T_FSX = "aws:fsx/lustreFileSystem:LustreFileSystem"
T_EFS = "aws:efs/fileSystem:FileSystem"
T_CLUSTERS = ("eks:index:Cluster", "aws:eks/cluster:Cluster")
T_NODEPOOL = "kubernetes:karpenter.sh/v1:NodePool"
T_NODECLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"


@dataclass
class Line:
    """One priced item: ``unit`` USD per hour for each of ``counts`` units per scenario."""

    item: str
    detail: str
    unit: float | None
    counts: dict[str, float]
    note: str = ""
    source: str = ""
    # Scenarios whose charge the plan cannot tell even with a unit price (an On-Demand Capacity
    # Reservation bills its reserved size, which the plan does not carry, whether or not nodes run).
    unknown_in: tuple[str, ...] = ()

    def hourly(self, scenario: str) -> float | None:
        if scenario in self.unknown_in:
            return None
        return self.known(scenario)

    def known(self, scenario: str) -> float | None:
        """The charge of the counted units alone (a floor where the scenario is ``unknown_in``)."""
        count = self.counts[scenario]
        if count == 0:
            return 0.0
        return None if self.unit is None else self.unit * count

    def as_json(self) -> dict[str, Any]:
        hourly = {s: _round(self.hourly(s)) for s in SCENARIOS}
        return {
            "item": self.item,
            "detail": self.detail,
            "unitHourly": _round(self.unit),
            "counts": dict(self.counts),
            "hourly": hourly,
            "monthly": {s: _round(None if v is None else v * HOURS_PER_MONTH) for s, v in hourly.items()},
            **({"note": self.note} if self.note else {}),
            **({"source": self.source} if self.source else {}),
        }


@dataclass
class Estimate:
    lines: list[Line] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    not_estimated: list[str] = field(default_factory=lambda: list(NOT_ESTIMATED))

    def add(self, line: Line, what_is_unknown: str = "") -> None:
        self.lines.append(line)
        unpriced = line.unit is None or any(line.hourly(s) is None for s in SCENARIOS)
        if unpriced and what_is_unknown:
            self.note_unknown(what_is_unknown)

    def note_unknown(self, what: str) -> None:
        if what not in self.unknown:
            self.unknown.append(what)

    def total(self, scenario: str) -> float | None:
        values = [line.hourly(scenario) for line in self.lines]
        return None if any(v is None for v in values) else sum(v for v in values if v is not None)

    def known_total(self, scenario: str) -> float:
        return sum(v for line in self.lines if (v := line.known(scenario)) is not None)

    def as_json(self) -> dict[str, Any]:
        hourly = {s: _round(self.total(s)) for s in SCENARIOS}
        known = {s: _round(self.known_total(s)) for s in SCENARIOS}
        return {
            "currency": "USD",
            "hourly": hourly,
            "monthly": {s: _round(None if v is None else v * HOURS_PER_MONTH) for s, v in hourly.items()},
            # What the priced lines alone add up to: a floor when some line is unknown.
            "knownHourly": known,
            "lines": [line.as_json() for line in self.lines],
            "unknown": list(self.unknown),
            "notEstimated": list(self.not_estimated),
            "hoursPerMonth": HOURS_PER_MONTH,
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _usd(price: Price | None, per_hour_divisor: float = 1.0) -> float | None:
    return None if price is None else price.usd / per_hour_divisor


def _fixed(count: float) -> dict[str, float]:
    return {s: count for s in SCENARIOS}


# --- the cluster stack ------------------------------------------------------------------------


def estimate_cluster(resources: list[dict[str, Any]], region: str) -> dict[str, Any]:
    """The estimate of a planned cluster stack in ``region``, in resources.json's ``cost`` shape."""
    estimate = Estimate()
    by_urn = {r["urn"]: r for r in resources}
    _control_plane(estimate, resources, region)
    for group in (r for r in resources if r["type"] == T_NODE_GROUP):
        template = next(
            (by_urn[u] for u in group.get("dependencies", []) if by_urn.get(u, {}).get("type") == T_LAUNCH_TEMPLATE),
            None,
        )
        _node_group(estimate, group, template, region)
    classes = {r["inputs"]["metadata"]["name"]: r for r in resources if r["type"] == T_NODECLASS}
    for pool in (r for r in resources if r["type"] == T_NODEPOOL):
        ref = pool["inputs"]["spec"]["template"]["spec"]["nodeClassRef"]["name"]
        _node_pool(estimate, pool, classes.get(ref), region)
    _network(estimate, resources, region)
    for fs in (r for r in resources if r["type"] == T_FSX):
        _file_system(estimate, fs, region)
    for fs in (r for r in resources if r["type"] == T_EFS):
        _efs_file_system(estimate, fs, region)
    _managed_prometheus(estimate, resources, region)
    _in_cluster_prometheus(estimate, resources, region)
    burstable = [
        t
        for group in (r for r in resources if r["type"] == T_NODE_GROUP)
        for t in node_group_instance_types(group["inputs"], None)
        if BURSTABLE_FAMILY.match(t)
    ]
    if burstable:
        estimate.not_estimated.append(burstable_credits(burstable))
    return {**estimate.as_json(), "pricesCopiedFrom": prices.copied_from(region)}


T_AMP_SCRAPER = "aws:amp/scraper:Scraper"


def _managed_prometheus(estimate: Estimate, resources: list[dict[str, Any]], region: str) -> None:
    """An AWS managed collector is billed "for the number of hours it is turned on and the number of samples
    collected" (the AMP pricing page's prose): no figure was read for this table, so the line is unknown, never $0.
    Its samples, and its workspace's by use (ingested, stored, queried), are what NOT_ESTIMATED names."""
    for scraper in (r for r in resources if r["type"] == T_AMP_SCRAPER):
        estimate.add(
            Line(
                "Managed Prometheus collector",
                f"{scraper['name']}",
                None,
                _fixed(1),
                "billed per collector-hour and per sample collected (the samples and its workspace's use not "
                "estimated): no sourced price in infra/facts/prices.py",
            ),
            f"Amazon Managed Service for Prometheus collector hours in {region}",
        )


T_HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
PROMETHEUS_CHART = "prometheus"  # infra/facts/versions.py CHARTS["prometheus"].chart


def _gib(size: str) -> float:
    """A volume size as the prometheus chart's values carry it (``50Gi``)."""
    if not size.endswith("Gi"):
        raise ValueError(f"volume size {size!r} is not in Gi")
    return float(size[: -len("Gi")])


def _in_cluster_prometheus(estimate: Estimate, resources: list[dict[str, Any]], region: str) -> None:
    """monitoring.prometheus: in-cluster: the server's and Alertmanager's EBS gp3 volumes, billed per provisioned
    GiB while they exist, in every scenario. Their pods run on the system nodes, already counted."""
    for release in (
        r for r in resources if r["type"] == T_HELM_RELEASE and r["inputs"].get("chart") == PROMETHEUS_CHART
    ):
        values = release["inputs"].get("values") or {}
        server = values.get("server", {}).get("persistentVolume", {})
        alertmanager = values.get("alertmanager", {})
        sizes = [_gib(server["size"])] if server.get("enabled") else []
        if alertmanager.get("enabled") and alertmanager.get("persistence", {}).get("enabled"):
            sizes.append(_gib(alertmanager["persistence"]["size"]))
        if not sizes:
            continue
        gib = sum(sizes)
        gp3 = prices.service_price(region, prices.EBS_GP3)
        estimate.add(
            Line(
                "In-cluster Prometheus volumes",
                f"{release['name']}: {' + '.join(f'{g:g}' for g in sizes)} GiB gp3 (server, Alertmanager)",
                _usd(gp3, HOURS_PER_MONTH / gib) if gp3 else None,
                _fixed(1),
                "billed per provisioned GiB while the volumes exist",
                gp3.source if gp3 else "",
            ),
            f"gp3 storage in {region}",
        )


def _control_plane(estimate: Estimate, resources: list[dict[str, Any]], region: str) -> None:
    for cluster in (r for r in resources if r["type"] in T_CLUSTERS):
        # No policy given means EXTENDED: pulumi-eks (v4.3.0 nodejs/eks/cluster/cluster.ts) passes
        # upgradePolicy through to EKS, whose default for new and existing clusters is EXTENDED
        # (amazon-eks-user-guide latest/ug/clusters/kubernetes-versions.adoc).
        support = (cluster["inputs"].get("upgradePolicy") or {}).get("supportType") or "EXTENDED"
        key = prices.EKS_EXTENDED if support == "EXTENDED" else prices.EKS_STANDARD
        price = prices.service_price(region, key)
        note = (
            "EXTENDED upgrade policy: priced at the extended-support rate, billed once the version leaves "
            "standard support ($0.10/h until then)"
            if support == "EXTENDED"
            else "STANDARD upgrade policy: EKS upgrades the control plane when standard support ends"
        )
        estimate.add(
            Line(
                "EKS control plane",
                f"{cluster['name']} ({support} support)",
                _usd(price),
                _fixed(1),
                note,
                price.source if price else "",
            ),
            f"EKS control plane ({support}) in {region}",
        )


def _dearest_on_demand(types: list[str], region: str) -> tuple[float | None, str]:
    """The hourly on-demand price of the dearest of ``types`` (several types: the estimate never
    under-states), None unless every one is known; and the source of the first one's price."""
    found = [instance_hourly(region, t) for t in types]
    known = [p for p in found if p is not None]
    unit = max(p.usd for p in known) if found and len(known) == len(found) else None
    return unit, found[0].source if found and found[0] is not None else ""


def _node_group(estimate: Estimate, group: dict[str, Any], template: dict[str, Any] | None, region: str) -> None:
    inputs = group["inputs"]
    lt = (template or {}).get("inputs", {})
    types = node_group_instance_types(inputs, lt)
    scaling = inputs.get("scalingConfig") or {}
    counts = {s: float(scaling.get(SCALING_KEY[s], 0) or 0) for s in SCENARIOS}
    name = inputs.get("nodeGroupName") or group["name"]
    capacity_block = inputs.get("capacityType") == "CAPACITY_BLOCK" or (
        (lt.get("instanceMarketOptions") or {}).get("marketType") == "capacity-block"
    )
    sizes = f"{int(counts['idle'])}/{int(counts['configured'])}/{int(counts['fullScale'])}"
    type_text = ", ".join(types) or "no instance type in the plan"
    unknown_in: tuple[str, ...] = ()

    if capacity_block:
        unit, note, source = (
            None,
            (
                "targets an EC2 Capacity Block: its reservation fee is paid up front at purchase and differs from the "
                "on-demand rate, so it is not priced here"
            ),
            "",
        )
        unknown = f"Capacity Block reservation of node group {name} ({type_text})"
    else:
        unit, source = _dearest_on_demand(types, region)
        note = "several types: priced at the dearest" if len(types) > 1 else ""
        unknown = f"on-demand price of {type_text} in {region}"
        if lt.get("capacityReservationSpecification") and unit is not None:
            # An ODCR is "charged at the equivalent On-Demand rate whether you run instances in
            # reserved capacity or not"; a running matching instance pays for itself and nothing
            # for the reservation (AWS EC2 User Guide, capacity-reservations-pricing-billing.html,
            # read 2026-11-22). Its size is not in the plan, so idle and configured cannot be
            # priced; full scale is maxSize running nodes if it reserves no more than that.
            unknown_in = ("idle", "configured")
            note = (note + "; " if note else "") + (
                "targets an On-Demand Capacity Reservation, billed at the on-demand rate for every reserved instance "
                "whether or not a node runs in it: its size is not in the plan, so idle and configured are unknown "
                "(the priced-lines figure counts only running nodes); full scale assumes it reserves at most maxSize"
            )
            unknown = f"size of the On-Demand Capacity Reservation of node group {name} (billed while idle)"
    estimate.add(
        Line(f"node group {name}", f"{type_text} × {sizes} (min/desired/max)", unit, counts, note, source, unknown_in),
        unknown,
    )

    volume_gib = sum(
        (m.get("ebs") or {}).get("volumeSize", 0) or 0
        for m in lt.get("blockDeviceMappings") or []
        if (m.get("ebs") or {}).get("volumeType", "gp3") == "gp3"
    )
    if volume_gib:
        gp3 = prices.service_price(region, prices.EBS_GP3)
        estimate.add(
            Line(
                f"node group {name} root volumes",
                f"{volume_gib} GiB gp3 per node",
                _usd(gp3, HOURS_PER_MONTH / volume_gib) if gp3 else None,
                counts,
                "",
                gp3.source if gp3 else "",
            ),
            f"gp3 storage in {region}",
        )


def _node_pool(estimate: Estimate, pool: dict[str, Any], node_class: dict[str, Any] | None, region: str) -> None:
    """A Karpenter NodePool: no node while no pod asks for one (idle and configured are 0), and at
    most ``limits.nodes`` nodes at full scale (kubernetes-sigs/karpenter v1.14.0 scheduler.go
    enforces it for dynamic NodePools)."""
    spec = pool["inputs"]["spec"]
    name = pool["inputs"]["metadata"]["name"]
    requirements = {r["key"]: r.get("values") or [] for r in spec["template"]["spec"].get("requirements", [])}
    types = requirements.get("node.kubernetes.io/instance-type", [])
    capacity = requirements.get("karpenter.sh/capacity-type", ["on-demand", "spot"])
    limit = (spec.get("limits") or {}).get("nodes")
    counts = {"idle": 0.0, "configured": 0.0, "fullScale": float(limit or 0)}
    type_text = ", ".join(types) or "any instance type"
    reserved = bool(((node_class or {}).get("inputs", {}).get("spec") or {}).get("capacityReservationSelectorTerms"))
    detail = f"{type_text} × 0/0/{limit if limit is not None else '?'} (Karpenter, {' > '.join(capacity)})"
    unknown_in: tuple[str, ...] = ()
    if limit is None:
        unit, note, source = None, "no limits.nodes: Karpenter may start any number of nodes", ""
        unknown_in = ("fullScale",)
        unknown = f"NodePool {name} has no node limit"
    elif capacity == ["reserved"]:
        unit, note, source = (
            None,
            ("reserved capacity only (a Capacity Block or reservations): paid for by the reservation, not priced here"),
            "",
        )
        unknown = f"reserved capacity of NodePool {name} ({type_text})"
    else:
        unit, source = _dearest_on_demand(types, region)
        note = "priced at the on-demand rate" + (" (Spot would cost less)" if "spot" in capacity else "")
        unknown = f"on-demand price of {type_text} in {region}"
        if reserved and unit is not None:
            # As for a node group on an On-Demand Capacity Reservation (see _node_group).
            unknown_in = ("idle", "configured")
            note += (
                "; selects capacity reservations, billed whether or not a node runs in them: their size is not "
                "in the plan, so idle and configured are unknown"
            )
            unknown = f"size of the capacity reservations NodePool {name} selects (billed while idle)"
    estimate.add(Line(f"NodePool {name}", detail, unit, counts, note, source, unknown_in), unknown)
    volume = sum(
        int(str((m.get("ebs") or {}).get("volumeSize", "0")).removesuffix("Gi") or 0)
        for m in ((node_class or {}).get("inputs", {}).get("spec") or {}).get("blockDeviceMappings") or []
        if (m.get("ebs") or {}).get("volumeType", "gp3") == "gp3"
    )
    if volume and limit is not None:
        gp3 = prices.service_price(region, prices.EBS_GP3)
        estimate.add(
            Line(
                f"NodePool {name} root volumes",
                f"{volume} GiB gp3 per node",
                _usd(gp3, HOURS_PER_MONTH / volume) if gp3 else None,
                counts,
                "",
                gp3.source if gp3 else "",
            ),
            f"gp3 storage in {region}",
        )


def _network(estimate: Estimate, resources: list[dict[str, Any]], region: str) -> None:
    nats = [r for r in resources if r["type"] == T_NAT]
    if nats:
        price = prices.service_price(region, prices.NAT_GATEWAY)
        estimate.add(
            Line(
                "NAT gateways",
                f"{len(nats)} × hourly charge",
                _usd(price),
                _fixed(len(nats)),
                "plus a per-GB charge on data processed",
                price.source if price else "",
            ),
            f"NAT gateway hour in {region}",
        )
    eips = [r for r in resources if r["type"] == T_EIP]
    if eips:
        price = prices.service_price(region, prices.PUBLIC_IPV4)
        estimate.add(
            Line(
                "public IPv4 addresses",
                f"{len(eips)} Elastic IP(s)",
                _usd(price),
                _fixed(len(eips)),
                "",
                price.source if price else "",
            ),
            f"public IPv4 address hour in {region}",
        )
    for endpoint in (r for r in resources if r["type"] == T_ENDPOINT):
        kind = endpoint["inputs"].get("vpcEndpointType") or "Gateway"
        service = endpoint["inputs"].get("serviceName", endpoint["name"])
        if kind == "Interface":
            zones = len(endpoint["inputs"].get("subnetIds") or []) or 1
            price = prices.service_price(region, prices.INTERFACE_ENDPOINT_AZ)
            estimate.add(
                Line(
                    "VPC endpoint",
                    f"{service} (Interface, {zones} AZ)",
                    _usd(price),
                    _fixed(zones),
                    "plus a per-GB charge on data processed",
                    price.source if price else "",
                ),
                f"interface endpoint hour in {region}",
            )
        else:
            price = prices.service_price(region, prices.GATEWAY_ENDPOINT)
            estimate.add(
                Line("VPC endpoint", f"{service} ({kind})", _usd(price), _fixed(1), "", price.source if price else ""),
                f"{kind} endpoint in {region}",
            )


def lustre_capacity_for(throughput_mbps: float, per_unit: int) -> int:
    """The smallest SSD capacity FSx for Lustre takes (1200, 2400, then multiples of 2400 GiB:
    infra/config/rules.py fsx_capacity_problem) whose baseline throughput at ``per_unit`` MB/s/TiB is at least
    ``throughput_mbps``."""
    need = math.ceil(throughput_mbps * 1024 / per_unit)
    return 1200 if need <= 1200 else 2400 if need <= 2400 else -(-need // 2400) * 2400


def lustre_same_throughput(capacity_gib: int, per_unit: int, region: str) -> list[tuple[int, int, float]]:
    """(capacity, MB/s/TiB, USD per hour) of each other PERSISTENT_2 tier's smallest file system with at least the
    baseline throughput of ``capacity_gib`` at ``per_unit``, cheapest first: those the price table knows and,
    when it knows this layout's price too, only those cheaper than it."""
    throughput = goodput.lustre_throughput_mbps(capacity_gib, per_unit)
    own = prices.service_price(region, prices.fsx_lustre_key("PERSISTENT_2", per_unit))
    found = []
    for tier in FSX_THROUGHPUTS["PERSISTENT_2"]:
        capacity = lustre_capacity_for(throughput, tier)
        price = prices.service_price(region, prices.fsx_lustre_key("PERSISTENT_2", tier))
        if tier == per_unit or price is None or (own is not None and price.usd * capacity >= own.usd * capacity_gib):
            continue
        found.append((capacity, tier, price.usd * capacity / HOURS_PER_MONTH))
    return sorted(found, key=lambda f: f[2])


def _same_throughput_note(capacity_gib: int, per_unit: int, region: str) -> str | None:
    options = lustre_same_throughput(capacity_gib, per_unit, region)
    if not options:
        return None
    throughput = goodput.lustre_throughput_mbps(capacity_gib, per_unit)
    # FSx Lustre user guide managing-storage-capacity.md: "you cannot decrease storage capacity".
    return (
        f"the same {throughput:,.0f} MB/s from "
        + ", ".join(f"{capacity:,} GiB at {tier} (${hourly:.2f}/h)" for capacity, tier, hourly in options)
        + ", where the data fits; a smaller file system is a new one, its data copied over"
    )


def _file_system(estimate: Estimate, fs: dict[str, Any], region: str) -> None:
    inputs = fs["inputs"]
    deployment = inputs.get("deploymentType", "SCRATCH_1")
    throughput = inputs.get("perUnitStorageThroughput")
    capacity = inputs.get("storageCapacity", 0)
    price = prices.service_price(region, prices.fsx_lustre_key(deployment, throughput))
    tier = f"{deployment}" + (f" at {throughput} MB/s/TiB" if throughput else "")
    notes = ["billed per provisioned GiB (compression does not lower it)"]
    if deployment == "PERSISTENT_2" and throughput and (cheaper := _same_throughput_note(capacity, throughput, region)):
        notes.append(cheaper)
    if (inputs.get("metadataConfiguration") or {}).get("mode") == "USER_PROVISIONED":
        notes.append("user-provisioned metadata IOPS are billed on top and not priced here")
    if (inputs.get("automaticBackupRetentionDays") or 0) > 0:
        notes.append("automatic backups are billed per GiB stored")
    if inputs.get("skipFinalBackup") is False:
        notes.append("keeps a final backup when deleted")
    estimate.add(
        Line(
            "FSx for Lustre",
            f"{fs['name']}: {capacity} GiB {tier}",
            None if price is None else price.usd * capacity / HOURS_PER_MONTH,
            _fixed(1),
            "; ".join(notes),
            price.source if price else "",
        ),
        f"FSx for Lustre {tier} per GiB-month in {region}",
    )
    if (inputs.get("metadataConfiguration") or {}).get("mode") == "USER_PROVISIONED":
        estimate.note_unknown(f"FSx for Lustre user-provisioned metadata IOPS in {region}")


# --- the workload stack -----------------------------------------------------------------------

# cluster-autoscaler removes a Trainium node only after it has been unneeded this long (its group's
# scale-down-unneeded-time; Karpenter's consolidateAfter by default), so a finished job's nodes bill this much more.
SCALE_DOWN_UNNEEDED_SECONDS = TRAINIUM_SCALE_DOWN_UNNEEDED_SECONDS


@dataclass(frozen=True)
class WorkloadRun:
    """A workload's Trainium nodes while it runs, and a duration its settings bound it to."""

    name: str
    node_group: str
    nodes: int
    bound_seconds: int | None
    bound_text: str
    launches: int = 1  # how many times its steps may start on new nodes: every attempt of every step


def workload_runs(settings: Any) -> list[WorkloadRun]:
    """The enabled workloads that hold Trainium nodes (staging and TensorBoard run on core nodes,
    which the cluster's estimate already counts), each bounded by its steps' deadlines
    (workloads/deadlines.py, the table the jobs' deadlines and `pulumi up`'s awaits come from):
    the steps of one workload run one after another, and after the last one the autoscaler
    removes the idle nodes SCALE_DOWN_UNNEEDED_SECONDS later."""
    steps = deadlines.trainium_steps(settings)
    runs = []
    for workload in dict.fromkeys(s.workload for s in steps):
        mine = [s for s in steps if s.workload == workload]
        seconds = sum(s.hold_seconds for s in mine) + SCALE_DOWN_UNNEEDED_SECONDS
        parts = "; ".join(f"{s.name} at most {s.why}" for s in mine)
        text = (
            f"at most {seconds // 60} min a run: {parts}; + {SCALE_DOWN_UNNEEDED_SECONDS} s autoscaler scale-down "
            "delay, plus the autoscaler's scan interval and the instances' termination (about a minute, not counted)"
        )
        runs.append(
            WorkloadRun(
                workload, mine[0].node_group, max(s.nodes for s in mine), seconds, text, sum(s.attempts for s in mine)
            )
        )
    return runs


def cluster_check_run(check: Any) -> WorkloadRun:
    """The acceptance test's run alone (see ``workload_runs``). Its per-node Job's
    activeDeadlineSeconds counts from the Job's status.startTime (kubernetes/api v0.34.0 batch/v1
    types.go), and the all-reduce's from its launcher Job's, created with the workers (AtStartup),
    so workers never Ready are deleted when it passes (mpi-operator v0.8.0 cleanUpWorkerPods)."""
    from types import SimpleNamespace

    only = SimpleNamespace(on=lambda name: check if name == "cluster_check" else None)
    (run,) = workload_runs(only)
    return run


CAPACITY_BLOCK = "CAPACITY_BLOCK"


def with_burn_in(run: WorkloadRun, group: dict[str, Any]) -> WorkloadRun:
    """A group that health-gates its nodes (``startupTaints`` in its output) bills each node launch for
    its burn-in (infra/specs/burn_in_objects.py) before the run can start on it: every attempt of every step
    may start on new nodes (a retry after auto-repair replaced a node, or after a scale-down between
    steps), so the bound counts one burn-in per attempt. A node that fails its burn-in is billed too
    until its provisioner removes it (docs/node-health.md), which this bound does not count. A group without a
    burn-in has no gang hold either, so it keeps its idle nodes longer (UNHELD_SCALE_DOWN_UNNEEDED_SECONDS)."""
    if run.bound_seconds is None:
        return run
    if not group.get("startupTaints"):
        longer = UNHELD_SCALE_DOWN_UNNEEDED_SECONDS - SCALE_DOWN_UNNEEDED_SECONDS
        text = f"{run.bound_text}; + {longer} s: a group without burn-in keeps idle nodes {UNHELD_SCALE_DOWN_UNNEEDED}"
        return dataclasses.replace(run, bound_seconds=run.bound_seconds + longer, bound_text=text)
    return WorkloadRun(
        run.name,
        run.node_group,
        run.nodes,
        run.bound_seconds + run.launches * BURN_IN_MINUTES * 60,
        f"{run.bound_text}; + {run.launches} × {BURN_IN_MINUTES} min burn-in: each attempt of each step "
        "may start on new nodes, each burnt in before it takes the run",
        run.launches,
    )


def _per(region: str, key: str) -> str:
    """A by-use price as the estimate names it, or unknown."""
    price = prices.service_price(region, key)
    return "unknown" if price is None else f"${price.usd:g}/{price.unit}"


# The checkpoint a Llama-2-7B save writes, about 98 GB (workloads/goodput.py), to put the write price in scale.
EXAMPLE_CHECKPOINT_GB = 98


def _efs_file_system(estimate: Estimate, fs: dict[str, Any], region: str) -> None:
    """EFS with Elastic throughput has no provisioned size, tier or hourly charge: it bills what is stored and
    what is read and written, none of which the plan knows, so nothing is added to the hourly totals (idle, it
    costs what it holds). Its prices are named with what is not estimated (infra/facts/prices.py)."""
    write = prices.service_price(region, prices.EFS_ELASTIC_WRITE)
    example = (
        "" if write is None else f" (a {EXAMPLE_CHECKPOINT_GB} GB checkpoint: ${EXAMPLE_CHECKPOINT_GB * write.usd:.2f})"
    )
    estimate.not_estimated += [
        f"Amazon EFS storage of {fs['name']}, per GB stored: Standard {_per(region, prices.EFS_STANDARD)}, "
        f"Infrequent Access {_per(region, prices.EFS_INFREQUENT_ACCESS)} plus "
        f"{_per(region, prices.EFS_INFREQUENT_ACCESS_READ)} read from it (idle, the file system costs what it holds)",
        f"Amazon EFS Elastic throughput of {fs['name']}: reads {_per(region, prices.EFS_ELASTIC_READ)}, writes "
        f"{_per(region, prices.EFS_ELASTIC_WRITE)}{example}",
    ]


def training_file_system_mbps(resources: list[dict[str, Any]]) -> float | None:
    """The baseline throughput of the cluster's training file system (the FSx for Lustre file system the
    cluster stack declares, or its EFS file system at the modelled save throughput, infra/facts/efs.py), None
    without one or without a per-unit throughput (SCRATCH_2's documented one, goodput.per_unit_write_mbps, where
    it takes no setting)."""
    if any(r["type"] == T_EFS for r in resources):
        return efs.SAVE_THROUGHPUT_MBPS
    for fs in (r for r in resources if r["type"] == T_FSX):
        inputs = fs["inputs"]
        per_unit = inputs.get("perUnitStorageThroughput") or goodput.per_unit_write_mbps(inputs.get("deploymentType"))
        if per_unit and inputs.get("storageCapacity"):
            return goodput.lustre_throughput_mbps(inputs["storageCapacity"], per_unit)
    return None


def expected_goodput(
    settings: Any, file_system_mbps: float | None, starts: dict[str, first_step.FirstStep] | None = None
) -> dict[str, Any]:
    """Per training workload: its expected goodput (workloads/goodput.py), its starts and recoveries the
    first-step model's (``starts``), or why it is unknown."""
    if file_system_mbps is None:
        names = [r.name for r in workload_runs(settings) if r.name != "clusterCheck"]
        return {name: {"goodput": None, "why": "no FSx throughput in the plan"} for name in names}
    found = goodput.workload_goodput(settings, file_system_mbps, starts)
    warnings = goodput.stall_warnings(settings, file_system_mbps)
    return {g.run.workload: {**g.as_json(), "checkpointWarning": warnings.get(g.run.workload)} for g in found}


def estimate_workloads(
    settings: Any, node_groups: Iterable[dict[str, Any]], region: str, file_system_mbps: float | None = None
) -> dict[str, Any]:
    """Per workload: its nodes × the group's price while it runs (idle: nothing runs), and a USD
    bound where its settings limit how long it holds them. ``node_groups`` is the cluster stack's
    ``acceleratorNodeGroups`` output.

    The totals (configured and fullScale: every enabled workload at once) hold at most each
    group's maxSize nodes: workloads on one group queue for its nodes, so they cannot all run
    beyond what the group can hold."""
    groups = {g["name"]: g for g in node_groups}
    estimate = Estimate()
    bounds: dict[str, float | None] = {}
    wanted: dict[str, int] = {}
    for run in workload_runs(settings):
        group = groups.get(run.node_group, {})
        run = with_burn_in(run, group)
        instance_type = group.get("instanceType", "unknown type")
        counts = {"idle": 0.0, "configured": float(run.nodes), "fullScale": float(run.nodes)}
        detail = f"{run.nodes} × {instance_type} ({run.node_group}) while it runs"
        wanted[run.node_group] = wanted.get(run.node_group, 0) + run.nodes
        if group.get("capacityType") == CAPACITY_BLOCK:
            # A Capacity Block's fee is paid up front at purchase and is not the on-demand rate.
            estimate.add(
                Line(
                    run.name,
                    detail,
                    None,
                    counts,
                    f"runs on a Capacity Block (paid up front at purchase, not priced here); {run.bound_text}",
                ),
                f"Capacity Block reservation of node group {run.node_group} ({instance_type})",
            )
            bounds[run.name] = None
            continue
        price = instance_hourly(region, instance_type)
        estimate.add(
            Line(run.name, detail, _usd(price), counts, run.bound_text, price.source if price else ""),
            f"on-demand price of {instance_type} in {region}",
        )
        bounds[run.name] = (
            None
            if run.bound_seconds is None or price is None
            else round(price.usd * run.nodes * run.bound_seconds / 3600, 2)
        )
    result = estimate.as_json()
    total, known = _all_at_once(wanted, groups, region)
    for scenario in ("configured", "fullScale"):
        result["hourly"][scenario] = _round(total)
        result["monthly"][scenario] = _round(None if total is None else total * HOURS_PER_MONTH)
        result["knownHourly"][scenario] = _round(known)
    result["concurrentNodes"] = {
        name: min(nodes, int(groups.get(name, {}).get("maxSize", nodes))) for name, nodes in wanted.items()
    }
    result["boundUsd"] = bounds
    result["pricesCopiedFrom"] = prices.copied_from(region)
    models = first_step_models(settings, groups)
    result["firstStep"] = first_steps(models)
    result["goodput"] = expected_goodput(settings, file_system_mbps, models)
    return result


def first_step_models(settings: Any, groups: dict[str, dict[str, Any]]) -> dict[str, first_step.FirstStep]:
    """Per training workload, the first-step model (workloads/first_step.py) for the node group it runs on."""
    return {
        run.name: first_step.first_step(run.name, groups.get(run.node_group, {}), run.nodes)
        for run in workload_runs(settings)
        if run.name in startup.COMPILE  # the acceptance test trains nothing
    }


def first_steps(models: dict[str, first_step.FirstStep]) -> dict[str, dict[str, Any]]:
    """Per training workload, the modelled time from submission to its first step, warm and cold, with the
    phases it adds up."""
    steps = {}
    for name, model in models.items():
        steps[name] = {
            "warmMinutes": first_step.minutes(model.warm_minutes),
            "coldMinutes": first_step.minutes(model.cold_minutes),
            "warm": [dataclasses.asdict(p) for p in model.warm],
            "coldExtra": [dataclasses.asdict(p) for p in model.cold_extra],
        }
    return steps


def _all_at_once(wanted: dict[str, int], groups: dict[str, dict[str, Any]], region: str) -> tuple[float | None, float]:
    """(total, priced part) per hour of every workload at once, each group capped at its maxSize."""
    total: float | None = 0.0
    known = 0.0
    for name, nodes in wanted.items():
        group = groups.get(name, {})
        running = min(nodes, int(group.get("maxSize", nodes)))
        price = (
            None
            if group.get("capacityType") == CAPACITY_BLOCK
            else instance_hourly(region, group.get("instanceType", ""))
        )
        if running == 0:
            continue
        if price is None:
            total = None
        else:
            known += price.usd * running
            total = None if total is None else total + price.usd * running
    return total, known
