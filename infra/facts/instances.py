"""One row per instance type: everything the program knows about a type, each figure with its source.

``INSTANCE_TYPES`` is the table. Adding a type is one row in it: validation, the node groups'
specs and labels, the system-node fit, the cost estimate and the cost policy, the acceptance
test's all-reduce floor and the offline plan's EC2 answers all read it. No code decides anything
from a type's name.

When deploying, the counts EC2 knows (Neuron devices, cores and device memory, network cards, EFA,
NVMe) come from the EC2 instance-type look-up (``from_ec2``), except the device figures of Trainium2,
which EC2 gets wrong (``Accelerator.ec2_neuron_info_wrong``); the offline plan's mocks answer that
look-up from this same table, so both paths share one code path. Which zones offer a type is a fact of
the account, not of the type: a deploy looks it up, the offline plan and the policy pack read
``infra/facts/regions.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from infra.facts.prices import Price, read_for_us_east_1
from infra.facts.regions import VANTAGE_READ

# Pages the figures were read from (2026-11-27), one per family.
_NEURON_DOCS = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/general/arch/neuron-hardware/"
_TRN1_PAGE = _NEURON_DOCS + "trn1-arch.html (devices, vCPUs, host memory; 2 NeuronCore-v2 per device: trainium.html)"
_TRN2_PAGE = (
    _NEURON_DOCS + "trn2-arch.html (16 Trainium2 devices, 192 vCPUs, 2,048 GiB host memory, 1,536 GiB device memory: "
    "the same for trn2.48xlarge and trn2u.48xlarge; aws-neuron/aws-neuron-sdk 81ce03a "
    "about-neuron/arch/neuron-hardware/trn2-arch.rst); trainium2.html (8 NeuronCore-v3 and 96 GiB per device: "
    "trainium2.rst); logical-neuroncore-config.rst (LNC 1 or 2, 2 the default on Trn2)"
)
_INF2_PAGE = _NEURON_DOCS + "inf2-arch.html (devices, vCPUs, host memory; 2 NeuronCore-v2 per device: inferentia2.html)"
_EC2_ONLY = (
    "a deploy reads network cards, EFA and NVMe disks (and the devices where EC2 has them right) from "
    "ec2:DescribeInstanceTypes (from_ec2), and the table is what the offline plan answers in its place"
)
_MAX_PODS = "max pods: aws/amazon-vpc-cni-k8s misc/eni-max-pods.txt at v1.22.0-234-gb52188387"
# EC2's "Specifications for Amazon EC2 accelerated computing instances" (read 2026-11-28): vCPUs, memory,
# network cards, interfaces and IPs per interface, EFA, instance store. Its accelerator columns are wrong
# for Trainium2 (see TRAINIUM2): the device figures come from the Neuron docs.
_EC2_SPECS_PAGE = "https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html"
_EC2_SPECS = (
    f"{_EC2_SPECS_PAGE} (vCPUs, memory, Trainium and Inferentia2 device memory, network cards, network interfaces, "
    "IPs per interface, EFA, instance store)"
)
# nodeadm's max pods, the VPC CNI formula "# of ENI on default network card * (# of IPv4 per ENI - 1) + 2"
# (awslabs/amazon-eks-ami v20260724 nodeadm/internal/kubelet/eni_max_pods.go calculateStandardMaxPods) over
# its table nodeadm/internal/kubelet/instance-info.jsonl.
_NODEADM_MAX_PODS = (
    "max pods: awslabs/amazon-eks-ami v20260724 nodeadm/internal/kubelet/instance-info.jsonl "
    "(defaultMaxENIs {enis}, ipv4AddressesPerInterface {ips}: {enis} x ({ips} - 1) + 2)"
)
_EC2_SIZES = "vCPUs and MiB: the EC2 instance type; " + _MAX_PODS

# General-purpose instance prices (read 2026-11-22): every figure was read for us-east-1 (or a page that gives one
# "US" rate); ``read_for_us_east_1`` marks the other regions' copies with ``copied_from``. Outside the
# regions of infra/facts/prices.py REGIONS they are unknown.
_PRICES_READ = "2026-11-22"
_TABLES = (
    "public us-east-1 on-demand price tables that reproduce https://aws.amazon.com/ec2/pricing/on-demand/ "
    "(Linux); the page the figures were copied from was not recorded"
)

# Neuron instance prices, read for each region where the type is offered (Linux on-demand, USD/h), from
# the same data as the region list of infra/facts/regions.py; the us-east-1 figures match
# aws/karpenter-provider-aws v1.14.1 pkg/providers/pricing/zz_generated.pricing_aws.go (generated
# 2026-07-06 from the AWS price list API for us-east-1). trn2.48xlarge has none there: unknown.
_VANTAGE_PAGE = (
    "https://github.com/tsaol/aws-gpu/tree/7412fd256c5e/data ({family}_instances.js: instances.vantage.sh data "
    "from the AWS price list API, 'Last updated: 2026-01-21')"
)
_US = ("us-east-1", "us-east-2", "us-west-2")
_INF2_REGIONS = (
    "ap-northeast-1",
    "ap-south-1",
    "ap-southeast-1",
    "ap-southeast-2",
    "eu-central-1",
    "eu-north-1",
    "eu-west-1",
    "eu-west-2",
    "eu-west-3",
    "sa-east-1",
)
_NEURON_HOURLY: dict[str, dict[str, float]] = {
    "trn1.2xlarge": dict.fromkeys(_US, 1.34375),
    "trn1.32xlarge": dict.fromkeys(_US, 21.5),
    "trn1n.32xlarge": dict.fromkeys(_US, 24.78),
    "inf2.xlarge": {
        **dict(
            zip(
                _INF2_REGIONS,
                (1.1373, 0.98566, 1.06148, 0.98566, 1.1373, 0.83402, 0.94775, 1.1373, 1.06148, 1.28894),
                strict=True,
            )
        ),
        "ap-northeast-2": 0.90984,
        **dict.fromkeys(_US, 0.7582),
    },
    "inf2.8xlarge": {
        **dict(
            zip(
                _INF2_REGIONS,
                (2.95179, 2.55822, 2.755, 2.55822, 2.95179, 2.16465, 2.45982, 2.95179, 2.755, 3.34536),
                strict=True,
            )
        ),
        **dict.fromkeys(_US, 1.96786),
    },
    "inf2.24xlarge": {
        **dict(
            zip(
                _INF2_REGIONS,
                (9.73595, 8.43782, 9.08689, 8.43782, 9.73595, 7.1397, 8.11329, 9.73595, 9.08689, 11.03408),
                strict=True,
            )
        ),
        **dict.fromkeys(_US, 6.49063),
    },
    "inf2.48xlarge": {
        **dict(
            zip(
                _INF2_REGIONS,
                (19.4719, 16.87565, 18.17377, 16.87565, 19.4719, 14.27939, 16.22658, 19.4719, 18.17377, 22.06815),
                strict=True,
            )
        ),
        **dict.fromkeys(_US, 12.98127),
    },
}


def _read_hourly(instance_type: str) -> dict[str, Price]:
    """The type's price in each region it was read for (none copied from another region)."""
    page = _VANTAGE_PAGE.format(family=instance_type.split(".")[0])
    return {region: Price(usd, "hour", page, VANTAGE_READ) for region, usd in _NEURON_HOURLY[instance_type].items()}


@dataclass(frozen=True)
class Accelerator:
    """The Neuron device as EC2 names it (``neuronInfo.neuronDevices[].name``)."""

    name: str
    core_version: int  # NeuronCore-v<n>
    # Runs the training images, so the Neuron driver/runtime compatibility rules apply to its groups.
    trains: bool
    # Why a deploy keeps the table's device count, cores and device memory instead of EC2's NeuronInfo
    # for this device (from_ec2); None: EC2's figures are used.
    ec2_neuron_info_wrong: str | None = None


TRAINIUM = Accelerator("Trainium", core_version=2, trains=True)
# EC2 lists 512 GiB per Trainium2 (8,192 GiB on trn2.48xlarge) where the Neuron docs give 96 GiB
# (1,536 GiB), and no accelerator at all for trn2u.48xlarge ("Accelerators: No"), on its
# specifications page; a third-party account's ec2:DescribeInstanceTypes of 2026-10-03 saw the same
# (MemoryInfo.SizeInMiB 524288 per Trainium2, an empty NeuronInfo for trn2u.48xlarge). Taken from
# EC2, a trn2u group would get 0 devices and no aws.amazon.com/neuron request.
TRAINIUM2 = Accelerator(
    "Trainium2",
    core_version=3,
    trains=True,
    ec2_neuron_info_wrong=(
        f"EC2 reports 512 GiB per Trainium2 and no Neuron devices for trn2u.48xlarge ({_EC2_SPECS_PAGE} "
        "Performance specifications; a third-party ec2:DescribeInstanceTypes of 2026-10-03 agrees); the Neuron "
        "docs' figures stand"
    ),
)
INFERENTIA2 = Accelerator("Inferentia2", core_version=2, trains=False)


@dataclass(frozen=True)
class AllReduceFloor:
    """The acceptance test's default lowest bus bandwidth (nccom-test's GB/s at 1 GiB)."""

    gbps: float
    source: str


# The only published multi-node figure is the Neuron docs' example (aws-neuron-sdk v2.20.2
# tools/neuron-sys-tools/nccom-test.rst, "Multiple Instances Example"): 2 x trn1.32xlarge, 64 ranks,
# fp32 all-reduce of 1 GiB at 47.09 GB/s bus bandwidth, marked there as not up to date. The floor is
# a conservative 20 GB/s, about 40% of that: it catches collectives that fell back from EFA to TCP
# or lost interfaces, not a few percent of tuning. trn1n.32xlarge has twice trn1's EFA bandwidth and
# no published figure: it gets the same floor as a lower bound. Other types have no default (the
# workload stack then requires one).
_NCCOM_EXAMPLE_FLOOR = AllReduceFloor(
    20.0, "conservative default: ~40% of the Neuron docs' 2 x trn1.32xlarge example (47.09 GB/s at 1 GiB)"
)
# Trainium2 has no published multi-node nccom-test figure either (aws-neuron-sdk 81ce03a nccom-test.rst shows
# trn1 only). trn2.48xlarge and trn2u.48xlarge carry 3,200 Gbps of EFA (16 cards x 200, EC2 specifications),
# four times trn1.32xlarge's 800: trn1's floor stays a lower bound that still tells EFA from a TCP fallback.
# trn2.3xlarge carries one 200 Gbps card, a quarter of trn1.32xlarge's: its floor is trn1's scaled by that.
_TRN2_FLOOR = AllReduceFloor(
    20.0,
    "lower bound: trn1.32xlarge's floor; 3,200 Gbps of EFA against trn1's 800 and no published Trainium2 "
    "multi-node figure (record the first burn-in's result)",
)
_TRN2_ONE_CARD_FLOOR = AllReduceFloor(
    5.0,
    "derived, not measured: trn1.32xlarge's 20 GB/s floor scaled by EFA bandwidth, 200 Gbps (one card) against 800",
)


@dataclass(frozen=True)
class InstanceFacts:
    """A Neuron type's accelerator facts: what a node group and the workloads on it are built from."""

    instance_type: str
    accelerator: Accelerator
    neuron_devices: int
    # NeuronCores per device as EC2 reports them (physical cores).
    cores_per_device: int
    # Logical NeuronCore config the Neuron runtime defaults to: trn2 pairs two physical
    # cores into one logical core (LNC=2), so the device plugin advertises half of them.
    logical_nc_config: int
    # High-bandwidth memory of one device (GiB).
    device_memory_gib: int
    network_cards: int
    efa_supported: bool
    nvme_disks: int
    nvme_disk_gb: int | None  # size of each NVMe disk; None without any
    allreduce_floor: AllReduceFloor | None
    source: str
    # Instances per UltraServer for a type sold only as part of one; None for a standalone instance.
    ultraserver_nodes: int | None = None

    @property
    def physical_neuron_cores(self) -> int:
        return self.neuron_devices * self.cores_per_device

    @property
    def neuron_cores(self) -> int:
        """NeuronCores the device plugin advertises as ``aws.amazon.com/neuroncore``."""
        return self.physical_neuron_cores // self.logical_nc_config

    @property
    def device_memory_gib_total(self) -> int:
        return self.neuron_devices * self.device_memory_gib

    @property
    def max_efa_interfaces(self) -> int:
        """One EFA interface per network card; zero without EFA."""
        return self.network_cards if self.efa_supported else 0


@dataclass(frozen=True)
class NodeSize:
    """What the kubelet's reservations and the pod limit are computed from (infra/specs/system_capacity.py)."""

    vcpus: int
    memory_mib: int  # as EC2 lists it
    max_pods: int  # the VPC CNI's limit without prefix delegation: ENIs * (IPv4 per ENI - 1) + 2
    source: str


@dataclass(frozen=True)
class InstanceType:
    name: str
    # None: the system-node fit and the allocatable figures do not know this type.
    node: NodeSize | None = None
    # region -> on-demand hourly list price; a region missing is unknown, never zero.
    on_demand: Mapping[str, Price] = field(default_factory=dict)
    # Neuron types only: the accelerator node groups accept exactly these.
    neuron: InstanceFacts | None = None

    @property
    def node_label(self) -> str:
        """The seeds' ``instance-type`` label value: ``trn1.32xlarge`` -> ``trn1-32xl``."""
        family, size = self.name.split(".", 1)
        return f"{family}-{size.replace('xlarge', 'xl')}"


def _neuron(
    name: str,
    accelerator: Accelerator,
    *,
    devices: int,
    cores_per_device: int,
    memory_gib: int,
    cards: int,
    efa: bool,
    nvme: tuple[int, int | None],
    node: NodeSize,
    on_demand: dict[str, Price] | None = None,
    lnc: int = 1,
    floor: AllReduceFloor | None = None,
    ultraserver_nodes: int | None = None,
    source: str,
) -> InstanceType:
    facts = InstanceFacts(
        name,
        accelerator,
        devices,
        cores_per_device,
        lnc,
        memory_gib,
        cards,
        efa,
        nvme[0],
        nvme[1],
        floor,
        f"{source}; {_EC2_SPECS}; {_EC2_ONLY}",
        ultraserver_nodes,
    )
    return InstanceType(name, node, on_demand or {}, facts)


def _us_hourly(usd: float, source: str) -> dict[str, Price]:
    return read_for_us_east_1(Price(usd, "hour", source, _PRICES_READ))


def _general(name: str, node: tuple[int, int, int] | None, usd: float | None) -> InstanceType:
    return InstanceType(
        name, NodeSize(*node, _EC2_SIZES) if node else None, _us_hourly(usd, _TABLES) if usd is not None else {}
    )


_KARPENTER_PRICES = (
    "https://github.com/aws/karpenter-provider-aws/blob/v1.14.1/pkg/providers/pricing/zz_generated.pricing_aws.go "
    "(l.573, generated 2026-07-06T14:20:29Z for us-east-1)"
)


def _burstable(name: str, size: tuple[int, int], enis_ips: tuple[int, int], usd: float) -> InstanceType:
    """A T-class row: its max pods by nodeadm's own formula over its instance-info row (ENIs, IPv4 per ENI)."""
    enis, ips = enis_ips
    source = "vCPUs and MiB: the EC2 instance type; " + _NODEADM_MAX_PODS.format(enis=enis, ips=ips)
    return InstanceType(name, NodeSize(*size, enis * (ips - 1) + 2, source), _us_hourly(usd, _KARPENTER_PRICES))


# Rows in this order: validation lists the Neuron types in it. No Trainium2 type has an on-demand
# price, unknown and never zero: the price data above lists none, and the AWS price list API holds
# only Capacity Block products (marketoption CapacityBlock) for trn2.48xlarge and nothing for
# trn2u.48xlarge or trn2.3xlarge (a third-party account's pricing get-products of 2026-10-03). A
# Capacity Block's price is the one EC2 quotes for that block when it is bought.
INSTANCE_TYPES: dict[str, InstanceType] = {
    row.name: row
    for row in (
        _neuron(
            "trn1.2xlarge",
            TRAINIUM,
            memory_gib=32,
            devices=1,
            cores_per_device=2,
            cards=1,
            efa=False,
            nvme=(1, 474),
            node=NodeSize(8, 32768, 58, f"{_TRN1_PAGE}; {_MAX_PODS}"),
            on_demand=_read_hourly("trn1.2xlarge"),
            source=_TRN1_PAGE,
        ),
        _neuron(
            "trn1.32xlarge",
            TRAINIUM,
            memory_gib=32,
            devices=16,
            cores_per_device=2,
            cards=8,
            efa=True,
            nvme=(4, 1900),
            node=NodeSize(128, 524288, 247, f"{_TRN1_PAGE}; {_MAX_PODS}"),
            on_demand=_read_hourly("trn1.32xlarge"),
            floor=_NCCOM_EXAMPLE_FLOOR,
            source=_TRN1_PAGE,
        ),
        _neuron(
            "trn1n.32xlarge",
            TRAINIUM,
            memory_gib=32,
            devices=16,
            cores_per_device=2,
            cards=16,
            efa=True,
            nvme=(4, 1900),
            node=NodeSize(128, 524288, 247, f"{_TRN1_PAGE}; {_MAX_PODS}"),
            on_demand=_read_hourly("trn1n.32xlarge"),
            floor=_NCCOM_EXAMPLE_FLOOR,
            source=_TRN1_PAGE,
        ),
        _neuron(
            "trn2.48xlarge",
            TRAINIUM2,
            memory_gib=96,
            devices=16,
            cores_per_device=8,
            cards=16,
            efa=True,
            nvme=(4, 1900),
            lnc=2,
            node=NodeSize(192, 2097152, 100, f"{_EC2_SPECS}; {_NODEADM_MAX_PODS.format(enis=2, ips=50)}"),
            floor=_TRN2_FLOOR,
            source=_TRN2_PAGE,
        ),
        # One of the four instances of a Trn2 UltraServer, joined by NeuronLink-v3 (trn2-arch.rst "Trn2
        # UltraServer"): the same instance as trn2.48xlarge otherwise. No Spot (EC2 specifications, Instance
        # family summary). nodeadm's table has no row for it (v20260724): nodeadm then asks EC2
        # (eni_max_pods.go GetInstanceInfo), whose 32 interfaces over 16 cards and 50 IPs each give the same
        # 2 x 49 + 2 as trn2.48xlarge's row.
        _neuron(
            "trn2u.48xlarge",
            TRAINIUM2,
            memory_gib=96,
            devices=16,
            cores_per_device=8,
            cards=16,
            efa=True,
            nvme=(4, 1900),
            lnc=2,
            node=NodeSize(
                192,
                2097152,
                100,
                f"{_EC2_SPECS}; max pods: 2 x (50 - 1) + 2, nodeadm's formula (awslabs/amazon-eks-ami v20260724 "
                "nodeadm/internal/kubelet/eni_max_pods.go) on EC2's figures, 2 interfaces on card 0 being 32 over 16 "
                "cards: its instance-info.jsonl has no trn2u.48xlarge row",
            ),
            ultraserver_nodes=4,
            floor=_TRN2_FLOOR,
            source=_TRN2_PAGE,
        ),
        # One Trainium2 (EC2 specifications: "1 x AWS Trainium2"; its 8 NeuronCore-v3 and 96 GiB are the
        # device's, trainium2.rst) on one network card with EFA.
        _neuron(
            "trn2.3xlarge",
            TRAINIUM2,
            memory_gib=96,
            devices=1,
            cores_per_device=8,
            cards=1,
            efa=True,
            nvme=(1, 470),
            lnc=2,
            node=NodeSize(12, 131072, 30, f"{_EC2_SPECS}; {_NODEADM_MAX_PODS.format(enis=2, ips=15)}"),
            floor=_TRN2_ONE_CARD_FLOOR,
            source=_TRN2_PAGE,
        ),
        _neuron(
            "inf2.xlarge",
            INFERENTIA2,
            memory_gib=32,
            devices=1,
            cores_per_device=2,
            cards=1,
            efa=False,
            nvme=(0, None),
            node=NodeSize(4, 16384, 58, f"{_INF2_PAGE}; {_MAX_PODS}"),
            on_demand=_read_hourly("inf2.xlarge"),
            source=_INF2_PAGE,
        ),
        _neuron(
            "inf2.8xlarge",
            INFERENTIA2,
            memory_gib=32,
            devices=1,
            cores_per_device=2,
            cards=1,
            efa=False,
            nvme=(0, None),
            node=NodeSize(32, 131072, 234, f"{_INF2_PAGE}; {_MAX_PODS}"),
            on_demand=_read_hourly("inf2.8xlarge"),
            source=_INF2_PAGE,
        ),
        _neuron(
            "inf2.24xlarge",
            INFERENTIA2,
            memory_gib=32,
            devices=6,
            cores_per_device=2,
            cards=1,
            efa=False,
            nvme=(0, None),
            node=NodeSize(96, 393216, 737, f"{_INF2_PAGE}; {_MAX_PODS}"),
            on_demand=_read_hourly("inf2.24xlarge"),
            source=_INF2_PAGE,
        ),
        _neuron(
            "inf2.48xlarge",
            INFERENTIA2,
            memory_gib=32,
            devices=12,
            cores_per_device=2,
            cards=1,
            efa=False,
            nvme=(0, None),
            node=NodeSize(192, 786432, 737, f"{_INF2_PAGE}; {_MAX_PODS}"),
            on_demand=_read_hourly("inf2.48xlarge"),
            source=_INF2_PAGE,
        ),
        # General-purpose types for the core and job-support groups: (vCPUs, MiB, max pods), hourly USD.
        _general("t3.medium", (2, 4096, 17), 0.0416),
        _general("t3.large", (2, 8192, 35), 0.0832),
        _general("t3.xlarge", (4, 16384, 58), None),
        # The burstable AMD rows: 2 vCPUs each, 4 and 8 GiB (EC2 "general purpose instances" specifications, T3a),
        # max pods from nodeadm's table (awslabs/amazon-eks-ami v20260724 instance-info.jsonl: 3 ENIs of 6 and of
        # 12 IPv4 addresses); prices from Karpenter's generated table (_KARPENTER_PRICES).
        _burstable("t3a.medium", (2, 4096), (3, 6), 0.0376),
        _burstable("t3a.large", (2, 8192), (3, 12), 0.0752),
        _general("m6i.large", (2, 8192, 29), 0.096),
        _general("m6i.xlarge", (4, 16384, 58), 0.192),
        _general("m6i.2xlarge", (8, 32768, 58), 0.384),
        _general("m6i.4xlarge", (16, 65536, 234), 0.768),
        _general("m7i.large", (2, 8192, 29), 0.1008),
        _general("m7i.xlarge", (4, 16384, 58), 0.2016),
        _general("m7i.2xlarge", None, 0.4032),
        _general("m7i.4xlarge", None, 0.8064),
        _general("c6i.large", (2, 4096, 29), 0.085),
        _general("c6i.xlarge", (4, 8192, 58), 0.17),
        _general("c6i.2xlarge", None, 0.34),
        _general("c6i.4xlarge", None, 0.68),
        _general("c7i.large", None, 0.08925),
        _general("c7i.xlarge", None, 0.1785),
        _general("c7i.2xlarge", None, 0.357),
        _general("c7i.4xlarge", None, 0.714),
    )
}

# No Trainium3 row. EC2's accelerated-computing specifications (_EC2_SPECS_PAGE, read 2026-11-28) list
# Trn1, Trn1n, Trn2 (trn2.3xlarge, trn2.48xlarge) and Trn2u (trn2u.48xlarge) and no Trn3 type; a
# third-party account found no trn3 type in the EC2 API of any of its 34 regions (2026-10-03). The Trn3
# names in AWS software disagree with one another (the Neuron Helm chart's neuronInstances, the
# aws-dranet chart's supportedInstanceLabels, aws-neuron-driver v4/neuron_dhal_v4.c), so none is a row:
# a group of any of them is refused with this reason, and the row comes with EC2's documentation.
TRAINIUM3_UNDOCUMENTED = (
    "AWS documents no Trainium3 (trn3) instance type yet: EC2's accelerated-computing specifications "
    f"({_EC2_SPECS_PAGE}) list Trn1, Trn1n, Trn2 and Trn2u only, and the trn3 names in AWS software "
    "(trn3.48xlarge and others) are no type EC2 documents"
)
# The Trn2 UltraServer is four trn2u.48xlarge instances, 64 Trainium2 joined by NeuronLink-v3
# (trn2-arch.rst "Trn2 UltraServer"): trn2u's ultraserver_nodes. EC2 identifies an UltraServer's instances
# by their Capacity Block (InstanceTopology.capacityBlockId), and each UltraServer is one Capacity Block
# (EC2 user guide, "How Capacity Blocks work"): infra/config/rules.py holds trn2u groups to that.

# The Neuron types, in the table's order: what an accelerator node group may run.
NEURON_INSTANCE_TYPES: dict[str, InstanceFacts] = {
    name: row.neuron for name, row in INSTANCE_TYPES.items() if row.neuron is not None
}


def accelerator_of(instance_type: str) -> Accelerator | None:
    """The type's Neuron device; None for a type without one or not in the table."""
    facts = NEURON_INSTANCE_TYPES.get(instance_type)
    return facts.accelerator if facts else None


def trains(instance_type: str) -> bool:
    """Whether groups of this type run the training images (Trainium, not Inferentia or unknown types)."""
    accelerator = accelerator_of(instance_type)
    return accelerator is not None and accelerator.trains


def node_label_value(instance_type: str) -> str:
    """The seeds' ``instance-type`` label value of a type in the table."""
    return INSTANCE_TYPES[instance_type].node_label


def instance_hourly(region: str, instance_type: str) -> Price | None:
    """The on-demand hourly price, or None when the table does not know it."""
    row = INSTANCE_TYPES.get(instance_type)
    return row.on_demand.get(region) if row else None


def from_ec2(instance_type: str, ec2: Any) -> InstanceFacts:
    """Facts from an ``aws.ec2.get_instance_type`` result (or anything shaped like it).

    EC2's counts replace the table's; the rest (the logical NeuronCore config, a Neuron runtime
    default, and the acceptance floor) is not EC2 data, so it comes from the table. So do the device
    count, cores and device memory of an accelerator whose EC2 figures are known to be wrong
    (``Accelerator.ec2_neuron_info_wrong``): the table's come from the Neuron docs.
    """
    table = NEURON_INSTANCE_TYPES[instance_type]
    devices = {}
    if table.accelerator.ec2_neuron_info_wrong is None:
        devices = {
            "neuron_devices": sum(d.count for d in ec2.neuron_devices),
            "cores_per_device": ec2.neuron_devices[0].core_count if ec2.neuron_devices else 0,
            "device_memory_gib": ec2.neuron_devices[0].memory_size // 1024 if ec2.neuron_devices else 0,
        }
    return replace(
        table,
        **devices,
        network_cards=ec2.maximum_network_cards,
        efa_supported=bool(ec2.efa_supported),
        nvme_disks=sum(d.count for d in (ec2.instance_disks or []) if d.type == "ssd"),
    )


def node_group_instance_types(group: Mapping[str, Any], launch_template: Mapping[str, Any] | None) -> list[str]:
    """The instance types an ``aws:eks/nodeGroup:NodeGroup`` runs, from its properties as the plan
    records them and the policy engine passes them: its ``instanceTypes``, or, when it sets none (a
    Capacity Block group must name the type in its launch template), its launch template's
    ``instanceType``."""
    types = list(group.get("instanceTypes") or [])
    if types:
        return types
    named = (launch_template or {}).get("instanceType")
    return [named] if named else []
