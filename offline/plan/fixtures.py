"""Stand-ins for what AWS would answer, for the offline plan and the tests.

Zones and offerings come from infra/facts/regions.py, every region where the catalog's Neuron
types are offered, each with its source and date. Zone names map to zone ids differently in every
account: the names are realistic examples, not the truth for your account, and in the regions whose
zones are not sourced (``zones_sourced`` False) the zone ids offering a type are examples too (only
the region is known).
A real deploy looks everything up.
"""

from __future__ import annotations

from infra.facts.instances import NEURON_INSTANCE_TYPES
from infra.facts.regions import NEURON_REGIONS

ACCOUNT_ID = "123456789012"
DEPLOYER_ROLE_ARN = f"arn:aws:iam::{ACCOUNT_ID}:role/PlatformAdmin"
DEPLOYER_SESSION_ARN = f"arn:aws:sts::{ACCOUNT_ID}:assumed-role/PlatformAdmin/offline-plan"

# region -> [(zone name, zone id)]
ZONES: dict[str, list[tuple[str, str]]] = {name: list(region.zones) for name, region in NEURON_REGIONS.items()}

# region -> instance type -> zone ids offering it
OFFERINGS: dict[str, dict[str, set[str]]] = {
    name: {t: set(zones) for t, zones in region.offerings.items()} for name, region in NEURON_REGIONS.items()
}


def home_of(table: str) -> str:
    """Where an entry of ``table`` (``OFFERINGS['eu-west-1']``, ``ADDON_DEFAULT_BUILDS``...) is added: the
    zone and offering tables are built from infra/facts/regions.py, the others live here."""
    if table.split("[")[0] in ("ZONES", "OFFERINGS"):
        return f"{table}, built from NEURON_REGIONS in infra/facts/regions.py (each region with its source)"
    return table


# Instance types for core nodes the region-wide look-up answers in every region of ZONES: a stand-in,
# not read per region (a deploy looks them up; the offline plan accepts them everywhere).
GENERAL_PURPOSE_TYPES = {
    f"{family}.{size}"
    for family in ("m5", "m6i", "m7i", "c6i", "c7i", "r6i", "r7i")
    for size in ("large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge")
} | {f"{family}.{size}" for family in ("t3", "t3a") for size in ("medium", "large", "xlarge")}


def instance_type_answer(instance_type: str) -> dict:
    """What ``ec2:DescribeInstanceTypes`` should say about a Neuron type, built from its row in
    infra/facts/instances.py (for Trainium2 EC2 says otherwise, and from_ec2 keeps the row's figures)."""
    facts = NEURON_INSTANCE_TYPES[instance_type]
    return {
        "id": instance_type,
        "instanceType": instance_type,
        "maximumNetworkCards": facts.network_cards,
        "efaSupported": facts.efa_supported,
        "efaMaximumInterfaces": facts.max_efa_interfaces,
        "neuronDevices": [
            {
                "count": facts.neuron_devices,
                "coreCount": facts.cores_per_device,
                "name": facts.accelerator.name,
                "coreVersion": facts.accelerator.core_version,
                "memorySize": facts.device_memory_gib * 1024,
            }
        ],
        "instanceDisks": (
            [{"count": facts.nvme_disks, "size": facts.nvme_disk_gb, "type": "ssd"}] if facts.nvme_disks else []
        ),
    }


# Kubernetes version -> add-on -> the build DescribeAddonVersions marks as default. Stand-ins
# in the real format; a deploy asks AWS (infra/facts/addons.py). Keyed by version only: the offline
# plan answers every region of ZONES with these builds, as it answers every region with the same
# AMI release (infra/facts/neuron.py COMPATIBLE_AMI_RELEASES); the EFA device plugin's image comes
# from the region's EKS add-on registry (EKS_ADDON_REGISTRIES in infra/facts/versions.py, every
# region of ZONES included).
ADDON_DEFAULT_BUILDS: dict[str, dict[str, str]] = {
    # Two minors on (EKS_KUBERNETES_VERSIONS lists it), so `make plan BASE=<ref>` of a skipped minor
    # (1.34 -> 1.36) plans both revisions and reaches the version-change refusal (offline/diff/compare.py)
    # instead of stopping at this table. Made-up builds in the real format, like 1.35's.
    "1.36": {
        "vpc-cni": "v1.20.6-eksbuild.1",
        "kube-proxy": "v1.36.0-eksbuild.1",
        "coredns": "v1.13.2-eksbuild.1",
        "eks-pod-identity-agent": "v1.3.11-eksbuild.1",
        "aws-ebs-csi-driver": "v1.54.0-eksbuild.1",
        "amazon-cloudwatch-observability": "v4.8.0-eksbuild.1",
        "eks-node-monitoring-agent": "v1.4.3-eksbuild.1",
    },
    # The next minor, so the plan of a Kubernetes upgrade (1.34 -> 1.35) can be made offline.
    "1.35": {
        "vpc-cni": "v1.20.5-eksbuild.1",
        "kube-proxy": "v1.35.0-eksbuild.2",
        "coredns": "v1.13.1-eksbuild.1",
        "eks-pod-identity-agent": "v1.3.10-eksbuild.1",
        "aws-ebs-csi-driver": "v1.53.0-eksbuild.1",
        "amazon-cloudwatch-observability": "v4.7.0-eksbuild.1",
        "eks-node-monitoring-agent": "v1.4.2-eksbuild.1",
    },
    "1.34": {
        "vpc-cni": "v1.20.4-eksbuild.1",
        "kube-proxy": "v1.34.1-eksbuild.2",
        "coredns": "v1.12.4-eksbuild.1",
        "eks-pod-identity-agent": "v1.3.9-eksbuild.3",
        "aws-ebs-csi-driver": "v1.51.1-eksbuild.1",
        "amazon-cloudwatch-observability": "v4.6.0-eksbuild.1",
        "eks-node-monitoring-agent": "v1.4.1-eksbuild.1",
    },
    "1.33": {
        "vpc-cni": "v1.19.6-eksbuild.7",
        "kube-proxy": "v1.33.3-eksbuild.6",
        "coredns": "v1.12.1-eksbuild.2",
        "eks-pod-identity-agent": "v1.3.8-eksbuild.2",
        "aws-ebs-csi-driver": "v1.46.0-eksbuild.1",
        "amazon-cloudwatch-observability": "v4.3.0-eksbuild.1",
        "eks-node-monitoring-agent": "v1.3.0-eksbuild.2",
    },
}

# Capacity Blocks for ML that exist in the offline account: id -> (region, zone id, instance type,
# start, end, instances). Blocks start and end at 11:30 UTC and last 1-14 days or a multiple of 7 days
# (EC2 user guide, "Capacity Blocks for ML"): one two-week block and one of a single day.
CAPACITY_BLOCKS: dict[str, tuple[str, str, str, str, str, int]] = {
    "cr-0c0ffee0c0ffee001": (
        "us-west-2",
        "usw2-az4",
        "trn1.32xlarge",
        "2026-12-01T11:30:00Z",
        "2026-12-15T11:30:00Z",
        4,
    ),
    "cr-0c0ffee0c0ffee002": (
        "us-east-2",
        "use2-az3",
        "trn2.48xlarge",
        "2026-12-01T11:30:00Z",
        "2026-12-02T11:30:00Z",
        4,
    ),
    # One Trn2 UltraServer's block (four trn2u.48xlarge), a week long.
    "cr-0c0ffee0c0ffee003": (
        "ap-south-2",
        "aps2-az1",
        "trn2u.48xlarge",
        "2026-12-01T11:30:00Z",
        "2026-12-08T11:30:00Z",
        4,
    ),
    # A reservation of eight trn2u.48xlarge: two UltraServers' worth, which one group must not take.
    "cr-0c0ffee0c0ffee004": (
        "ap-south-2",
        "aps2-az1",
        "trn2u.48xlarge",
        "2026-12-01T11:30:00Z",
        "2026-12-08T11:30:00Z",
        8,
    ),
}
