"""Every rule a cluster-stack setting must obey beyond its type, as one list of refusals.

Each refusal reads ``<key> = <value>: <what is allowed>``. Rules that mirror what an AWS or
Kubernetes API would refuse at deploy time cite where that rule is documented, so a bad value
stops the program before any resource exists instead of half-way through `pulumi up`.
"""

from __future__ import annotations

import ipaddress
import math
import re
from collections.abc import Callable, Mapping
from datetime import date
from typing import Any

from pydantic.alias_generators import to_camel

from infra.config import naming as rules
from infra.config.aws_limits import aws_limit_problems, region_partition
from infra.config.base import PROFILE_KEY, REGION_KEY, ConfigModel
from infra.config.errors import EGRESS_IP_ENV, EgressLookupFailed
from infra.config.models import (
    DEFAULT_NAMESPACE_ID,
    EFS_INFREQUENT_ACCESS_DAYS,
    EFS_ONLY_STORAGE_KEYS,
    FSX_ONLY_STORAGE_KEYS,
    FSX_THROUGHPUTS,
    LOG_RETENTION_DAYS,
    LOG_TYPES,
    MAX_BACKUP_RETENTION_DAYS,
    MAX_NAMESPACE_ID,
    MIN_NAMESPACE_ID,
    PROD_MIN_BACKUP_RETENTION_DAYS,
    SQUASHED_ID,
    AcceleratorNodeGroupConfig,
    EndpointAccessConfig,
    NetworkConfig,
    StackConfig,
    StorageConfig,
    key_name,
)
from infra.facts.addons import ADDON_NAMES, addon_pin_problem
from infra.facts.dra import (
    DRA_INSTANCE_TYPES,
    DRA_MIN_KUBERNETES,
    DRA_MIN_KUBERNETES_WITH_AUTOSCALER,
    DRA_MIN_NODE_VERSION,
    DRA_SOURCES,
    DRANET_MIN_KUBERNETES,
)
from infra.facts.instances import (
    INSTANCE_TYPES,
    NEURON_INSTANCE_TYPES,
    TRAINIUM3_UNDOCUMENTED,
    instance_hourly,
    trains,
)
from infra.facts.neuron import BURN_IN_IMAGE, compatible_release_hint, images_for, incompatibilities
from infra.facts.pins import (
    CHART_FEATURES,
    Pin,
    chart_pin,
    image_pins,
    minor,
    mpi_operator_pin,
    repository_pins,
    verdicts,
)
from infra.facts.regions import NEURON_REGIONS, regions_offering
from infra.facts.support import kubernetes_pin
from infra.facts.versions import (
    EKS_ADDON_REGISTRIES,
    EKS_KUBERNETES_VERSIONS,
    NEURON_MONITOR_IMAGE,
    PYTHON_SLIM_IMAGE,
    autoscaler_release,
)

NAME_PATTERN = r"^[a-z][a-z0-9-]{0,37}[a-z0-9]$"
AZ_ID_PATTERN = r"^[a-z]{3,5}[0-9]?-az[0-9]+$"
IAM_PRINCIPAL_PATTERN = r"^arn:(aws|aws-cn|aws-us-gov):iam::[0-9]{12}:(role|user)/[\w+=,.@/-]{1,512}$"
CAPACITY_RESERVATION_PATTERN = r"^cr-[0-9a-f]{8,17}$"
KUBERNETES_VERSION_PATTERN = r"^1\.[0-9]{2}$"
# EKS AMI release versions: <kubernetes patch>-<build date>, e.g. 1.34.2-20251112.
AMI_RELEASE_PATTERN = r"^1\.[0-9]{2}\.[0-9]+-[0-9]{8}$"
INSTANCE_TYPE_PATTERN = r"^[a-z][a-z0-9-]*\.[a-z0-9]+$"
# The provider takes the file system's kms_key_id as an ARN only (terraform-provider-aws
# aws_fsx_lustre_file_system: ValidateFunc verify.ValidARN).
KMS_KEY_PATTERN = (
    r"^arn:(aws|aws-cn|aws-us-gov):kms:[a-z0-9-]+:[0-9]{12}:key/[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}$"
)
QUANTITY = r"^[0-9]+(\.[0-9]+)?(m|k|Ki|Mi|Gi|Ti|Pi|Ei|M|G|T|P|E)?$"
BUCKET = r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$"
S3_URL = r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/[^\s]*)?$"
SYSTEM_NAMESPACES = ("kube-system", "kube-public", "kube-node-lease")
# Namespaces the cluster software creates or installs into: a training namespace of the same
# name would be declared twice (AlreadyExists) or mix jobs with controllers.
SOFTWARE_NAMESPACES = (
    "neuron-healthcheck-system",
    "volcano-system",
    "kuberay-system",
    "mpi-operator",
    "amazon-cloudwatch",
)
# The burn-in's namespace (infra/specs/burn_in_objects.py NAMESPACE): its service account may patch
# nodes (lift a node's startup taint), so no training workload or user may share it.
BURN_IN_NAMESPACE = "neuron-burn-in"
# Volcano creates these queues itself (its controller's default queue and the root of the
# queue hierarchy); declaring them again fails with AlreadyExists.
VOLCANO_OWN_QUEUES = ("default", "root")
# EKS quota "Public endpoint access CIDR ranges per cluster" (default 40).
MAX_PUBLIC_CIDRS = 40
# The labels this project sets on nodes; workloads select on them (`role` tells core nodes).
# NodePool duration fields (karpenter.sh_nodepools.yaml v1.14.0: expireAfter, consolidateAfter,
# terminationGracePeriod patterns, without the fractional forms).
KARPENTER_DURATION = r"([0-9]+(s|m|h))+"
RESERVED_NODE_LABELS = (
    "instance-type",
    "provisioner",
    "vpc.amazonaws.com/efa.present",
    "role",
    "devices.trainium-eks/allocation",
    "ultraserver.trainium-eks/group",
)


# RFC 5737 documentation ranges: no real traffic comes from them.
DOCUMENTATION_RANGES = tuple(ipaddress.IPv4Network(c) for c in ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24"))
_DOCUMENTATION = ", ".join(map(str, DOCUMENTATION_RANGES))


def _documentation_entries(access: EndpointAccessConfig) -> list[tuple[int, str]]:
    return [
        (i, cidr)
        for i, cidr in enumerate(access.public_cidrs or [])
        if rules.ipv4_cidr_problem(cidr) is None
        and any(ipaddress.IPv4Network(cidr).subnet_of(r) for r in DOCUMENTATION_RANGES)
    ]


def _documentation_problem(i: int, cidr: str) -> str:
    return (
        f"{key_name(('endpointAccess', 'publicCidrs', i))} = {cidr!r}: inside an RFC 5737 documentation range "
        f"({_DOCUMENTATION}), from which no deployer's traffic comes, so `pulumi up` could not reach the Kubernetes "
        "API it installs the cluster software through; allowed: your real egress ranges (office or VPN, the CI "
        "runners' NAT addresses)"
    )


def cluster_pins(config: StackConfig) -> list[Pin]:
    """Every pin this cluster stack deploys (infra/facts/pins.py): its Kubernetes minor, the AMI release
    of each Trainium group (supported as long as the minor it is built for), the cluster software its
    features switch on, the burn-in's images (its DLC, the sweeper's python) when a training group has
    the burn-in, and what every
    deploy runs with (Pulumi, its packages, TorchX, the workflows' actions)."""
    found = [
        Pin(key_name(("kubernetesVersion",)), config.kubernetes_version, kubernetes_pin(config.kubernetes_version))
    ]
    found += [
        Pin(
            key_name(("acceleratorNodeGroups", i, "amiReleaseVersion")),
            group.ami_release_version,
            kubernetes_pin(minor(group.ami_release_version)),
        )
        for i, group in enumerate(config.accelerator_node_groups)
        if group.ami_release_version
    ]
    # The shared file system's driver is the one of its kind: FSx for Lustre's chart or EFS's.
    shared_driver = "efs-csi-driver" if config.storage.kind == "efs" else "fsx-csi-driver"
    found += [
        chart_pin(shared_driver if name == "fsx-csi-driver" else name)
        for name, feature in CHART_FEATURES.items()
        if getattr(config.features, feature)
    ]
    # The `deviceAllocation: dra` groups' drivers: the Neuron chart's DRA release, and aws-dranet for EFA.
    if any(g.dra for g in config.accelerator_node_groups) and not config.features.neuron_device_plugin:
        found.append(chart_pin("neuron"))
    if any(g.dra and g.efa_enabled for g in config.accelerator_node_groups):
        found.append(chart_pin("aws-dranet"))
    if config.node_provisioner == "karpenter":
        found += [chart_pin("karpenter-crd"), chart_pin("karpenter")]
    if config.features.cluster_autoscaler:
        # Its release follows a Kubernetes minor, and lives as long as that minor.
        runs_for, release = autoscaler_release(config.kubernetes_version)
        found.append(Pin("infra/facts/versions.py CLUSTER_AUTOSCALER", release.image_tag, kubernetes_pin(runs_for)))
    if config.features.mpi_operator:
        found.append(mpi_operator_pin())
    if any(g.burn_in and trains(g.instance_type) for g in config.accelerator_node_groups):
        found += image_pins(BURN_IN_IMAGE.base, "the burn-in image")
        found += image_pins(PYTHON_SLIM_IMAGE, "the burn-in sweeper")
    return found + monitoring_pins(config) + repository_pins()


def monitoring_pins(config: StackConfig) -> list[Pin]:
    """monitoring.prometheus installs kube-state-metrics for the goodput rules (and, in-cluster, the Prometheus
    chart) and the node metrics' agents (infra/specs/node_metrics.py); monitoring.grafana the Grafana chart."""
    monitoring = config.monitoring
    found = [chart_pin("kube-state-metrics")] if monitoring.prometheus != "off" else []
    if monitoring.prometheus != "off":
        found += [chart_pin("prometheus-node-exporter"), *image_pins(NEURON_MONITOR_IMAGE, "neuron-monitor")]
        found += image_pins(PYTHON_SLIM_IMAGE, "the EFA exporter")
    if monitoring.prometheus == "in-cluster":
        found.append(chart_pin("prometheus"))
    if monitoring.grafana == "in-cluster":
        found.append(chart_pin("grafana"))
    return found


def end_of_support(config: StackConfig, today: date) -> tuple[list[str], list[str]]:
    """(refusals, warnings) for every pin the stack deploys against its support row
    (infra/facts/support.py): refused once past its end unless ``endOfSupportAcknowledged`` keeps it
    by name with a reason; warned WARN_DAYS ahead, and while kept. A Kubernetes minor's end is
    standard support's under upgradePolicy STANDARD (when EKS upgrades the control plane itself),
    extended support's under EXTENDED."""
    return verdicts(
        cluster_pins(config),
        config.end_of_support_acknowledged,
        key_name(("endOfSupportAcknowledged",)),
        today,
        extended=config.upgrade_policy == "EXTENDED",
    )


def advisories(config: StackConfig) -> list[str]:
    """What a preview (or the offline plan) warns about: what `pulumi up` refuses
    (``deploy_problems``), and what deploys but is likely not what was meant."""
    notes = [
        f"{_documentation_problem(i, cidr)}. `pulumi up` will refuse it."
        for i, cidr in _documentation_entries(config.endpoint_access)
    ]
    runs_for, release = autoscaler_release(config.kubernetes_version)
    if config.features.cluster_autoscaler and runs_for != config.kubernetes_version:
        notes.append(
            f"{key_name(('kubernetesVersion',))} = {config.kubernetes_version!r}: no cluster-autoscaler release is "
            f"recorded for it, so the cluster runs the one for Kubernetes {runs_for} ({release.image_tag}, chart "
            f"{release.chart}); cluster-autoscaler releases follow Kubernetes minors: record this minor's in "
            "CLUSTER_AUTOSCALER (infra/facts/versions.py) once kubernetes/autoscaler publishes it"
        )
    notes += unchecked_capacity_block_windows(config)
    notes += unheard_alerts(config)
    return notes


def unchecked_capacity_block_windows(config: StackConfig) -> list[str]:
    """Karpenter groups that find their Capacity Blocks by tag: the plan looks up only a block named by
    id (infra/lookups.py), so such a group exports no window and the workload stacks cannot check their
    runs against its end. Karpenter deletes a block's nodes 40 minutes before the block ends
    (aws/karpenter-provider-aws v1.14.0 pkg/apis/v1/ec2nodeclass_status.go capacityReservationExpirationPeriod,
    pkg/controllers/capacityreservation/expiration/controller.go), 10 minutes before EC2 starts
    reclaiming the instances 30 minutes before the end (EC2 user guide, "Work with Capacity Blocks")."""
    if config.node_provisioner != "karpenter":
        return []
    return [
        f"{key_name(('acceleratorNodeGroups', i, 'capacityReservation', 'tags'))} = {g.capacity_reservation.tags}: "
        f"node group {g.name} finds its Capacity Blocks by tag, so their windows are unknown to the plan and the "
        "workload stacks cannot refuse a run that outlasts a block. Karpenter deletes the nodes 40 minutes before "
        "a block ends (EC2 reclaims them from 30 minutes before the end): keep each run's "
        "deadlines that far inside the block, or name the block by id"
        for i, g in enumerate(config.accelerator_node_groups)
        if g.capacity_reservation is not None and g.capacity_block and not g.capacity_reservation.id
    ]


def neuron_compatibility_problems(config: StackConfig) -> list[str]:
    """Training images against the Neuron driver of each Trainium group's AMI (infra/facts/neuron.py):
    a pinned AMI release, or, unpinned, the latest AMI, which EKS picks when the nodes launch and
    which carries at least the newest driver the table knows. Either way the nodes come up and every
    training job on them fails, so both are refused."""
    problems = []
    for i, group in enumerate(config.accelerator_node_groups):
        if not trains(group.instance_type):
            continue  # Inferentia groups run no training image
        pinned = group.ami_release_version
        found = incompatibilities(pinned, group.instance_type, images_for(group.burn_in))
        for rule in dict.fromkeys(r for _, _, r in found):
            images = ", ".join(
                f"{image.shown} (Neuron SDK {image.sdk.version}: runtime {image.sdk.runtime}, compiler "
                f"{image.sdk.compiler}, {image.framework})"
                for image, _, r in found
                if r == rule
            )
            hint = compatible_release_hint(config.kubernetes_version) if rule.pinning_fixes else ""
            problems.append(
                f"{key_name(('acceleratorNodeGroups', i, 'amiReleaseVersion'))} = "
                f"{pinned if pinned else 'unset (the latest AMI)'}: {found[0][1].describe()} cannot run {images}: "
                f"{rule.what} ({rule.source}); fix: {rule.fix}{hint}"
            )
    return problems


def deploy_problems(config: StackConfig, egress_ipv4: Callable[[], str]) -> list[str]:
    """What `pulumi up` refuses before declaring anything: an API endpoint the deployer cannot reach.

    pulumi-eks only logs when its API health probe fails, so a wrong allow-list would otherwise
    surface after the control plane, node groups and file system exist, when every Kubernetes
    resource fails. ``egress_ipv4`` (infra/lookups.py) is asked only when the answer matters: a
    public endpoint restricted to some ranges, reached from outside the VPC.
    """
    access = config.endpoint_access
    if not access.public:
        return []  # private-only requires deployedFromVpc (_endpoint_problems)
    problems = [_documentation_problem(i, cidr) for i, cidr in _documentation_entries(access)]
    cidrs = access.effective_public_cidrs() or []
    if access.deployed_from_vpc or rules.covers_internet(cidrs):
        return problems
    key = key_name(("endpointAccess", "publicCidrs"))
    try:
        address = ipaddress.IPv4Address(egress_ipv4())
    except EgressLookupFailed as error:
        problems.append(
            f"{key} = {cidrs}: `pulumi up` checks that this machine's public IPv4 address is in the list before "
            f"creating anything, and could not find it ({error}); retry when the look-up answers, or set "
            f"{EGRESS_IP_ENV}=<this machine's public IPv4 address>, or set endpointAccess.deployedFromVpc: true if "
            "this run reaches the API from inside the VPC (runner in the VPC, VPN, peering)"
        )
        return problems
    if not any(address in ipaddress.IPv4Network(cidr) for cidr in cidrs):
        problems.append(
            f"{key} = {cidrs}: this machine's public IPv4 address {address} is in none of them, so `pulumi up` "
            "could not reach the Kubernetes API it installs the cluster software through; allowed: a list that "
            f"contains {address} (for example {address}/32 or your NAT range), or endpointAccess.deployedFromVpc: "
            "true if this run reaches the API from inside the VPC"
        )
    return problems


def _minor(version: str) -> tuple[int, int]:
    major, minor = version.split(".")
    return int(major), int(minor)


def provisioner_switch_problem(wanted: str, managed_nodes: Mapping[str, int], karpenter_nodes: int) -> str | None:
    """`pulumi up` that switches nodeProvisioner while the old provisioner's Trainium nodes run
    would evict their training: to karpenter it deletes the managed node groups (EKS drains them),
    back to cluster-autoscaler it deletes NodePools that wait for every node to drain, up to
    terminationGracePeriod (docs/provisioners.md, "Switching provisioners"). ``managed_nodes``: the
    running cluster's accelerator managed node groups and their desired sizes; ``karpenter_nodes``:
    its running instances Karpenter launched."""
    key = key_name(("nodeProvisioner",))
    steps = 'docs/provisioners.md, "Switching provisioners"'
    busy = {name: n for name, n in sorted(managed_nodes.items()) if n > 0}
    if wanted == "karpenter" and busy:
        groups = ", ".join(f"{name} ({n})" for name, n in busy.items())
        return (
            f"{key} = 'karpenter': the running cluster's node groups {groups} still have Trainium nodes, which the "
            "switch would drain under their training; first stop the training jobs and, still with cluster-autoscaler, "
            "set their minSize and desiredSize to 0 and `pulumi up`; once the groups are at zero, switch "
            f"({steps}); allowed now: cluster-autoscaler"
        )
    if wanted == "cluster-autoscaler" and karpenter_nodes > 0:
        return (
            f"{key} = 'cluster-autoscaler': the running cluster has {karpenter_nodes} Trainium node(s) Karpenter "
            "launched; deleting their NodePools would wait up to terminationGracePeriod for their training pods and "
            "fail part-way; first stop the training jobs and wait until `kubectl get nodeclaims` lists none, then "
            f"switch ({steps}); allowed now: karpenter"
        )
    return None


def kubernetes_version_change_problem(running: str, wanted: str, holder: str = "the cluster runs") -> str | None:
    """Why EKS would refuse moving a cluster from ``running`` to ``wanted``, or None.

    ``holder`` says where ``running`` comes from: the live cluster at deploy time ("the cluster
    runs"), or, offline, the revision a plan diff compares against ("the base revision declares").

    EKS never downgrades a cluster ("Once you upgrade a cluster, you can't downgrade", EKS user
    guide, update-cluster) and upgrades one minor version at a time (eksctl's cluster-upgrade
    page in the EKS docs: "the current version of the cluster or one version higher"). A
    `pulumi up` that asks for either would fail at UpdateClusterVersion, part-way through.
    """
    if wanted == running:
        return None
    major, minor = _minor(running)
    following = f"{major}.{minor + 1}"
    allowed = f"allowed: {running} (no change) or {following} (the next minor)"
    key = key_name(("kubernetesVersion",))
    if _minor(wanted) < (major, minor):
        return f"{key} = {wanted!r}: {holder} {running} and EKS cannot downgrade a cluster; {allowed}"
    if _minor(wanted) > (major, minor + 1):
        return (
            f"{key} = {wanted!r}: {holder} {running} and EKS upgrades one minor version at a time; "
            f"{allowed}: set {following}, `pulumi up`, then the next"
        )
    return None


def semantic_problems(config: StackConfig) -> list[str]:
    problems: list[str] = []
    problems += _provider_problems(config)
    problems += _group_region_problems(config)
    problems += _cluster_problems(config)
    problems += _network_problems(config.network)
    problems += _endpoint_problems(config.endpoint_access, config.environment)
    problems += _core_group_problems(config)
    problems += _accelerator_problems(config.accelerator_node_groups, config.kubernetes_version)
    problems += _provisioner_problems(config)
    problems += device_allocation_problems(config)
    problems += _nothing_to_scale_problems(config)
    problems += efs_storage_problems(config)
    problems += _storage_problems(config.storage)
    problems += _prod_storage_problems(config)
    problems += _acknowledged_replacement_problems(config.replacements_acknowledged)
    problems += _backup_problems(config)
    problems += _checkpoint_export_problems(config)
    problems += _software_problems(config)
    problems += _tag_problems(config.tags)
    problems += _monitoring_problems(config)
    problems += aws_limit_problems(config)
    return problems


def _monitoring_problems(config: StackConfig) -> list[str]:
    """The managed collector reaches the cluster through its private API endpoint (Amazon Managed Service
    for Prometheus user guide, AMP-collector-how-to), and scrapes what kube-state-metrics and the progress
    exporters serve from the system nodes. A Grafana shows what a Prometheus holds: none without one."""
    monitoring = config.monitoring
    if monitoring.grafana != "off" and monitoring.prometheus == "off":
        return [
            f"{key_name(('monitoring', 'grafana'))} = {monitoring.grafana!r}: its dashboards read a Prometheus, and "
            f"{key_name(('monitoring', 'prometheus'))} is 'off'; set prometheus to 'managed' or 'in-cluster', or "
            "grafana: off"
        ]
    problems = [
        f"{key_name(('monitoring', key))} is set, and only an in-cluster Prometheus has a volume and a retention; "
        f"{key_name(('monitoring', 'prometheus'))} is {monitoring.prometheus!r}: drop the key, or prometheus: in-cluster"
        for field, key in (("retention_days", "retentionDays"), ("volume_gib", "volumeGib"))
        if field in monitoring.model_fields_set and monitoring.prometheus != "in-cluster"
    ]
    if monitoring.prometheus == "off":
        return problems
    if monitoring.prometheus == "managed" and not config.endpoint_access.private:
        problems.append(
            f"{key_name(('monitoring', 'prometheus'))}: 'managed' needs the private API endpoint, which the AWS "
            f"managed collector scrapes through; {key_name(('endpointAccess', 'private'))} is false: set it true, "
            "or prometheus: off"
        )
    if monitoring.alert_emails and monitoring.alert_topic_arn is not None:
        problems.append(
            f"{key_name(('monitoring', 'alertEmails'))} = {monitoring.alert_emails}: only for the stack's own alert "
            f"topic, and {key_name(('monitoring', 'alertTopicArn'))} names another; subscribe the addresses to "
            "that topic where it is managed, or drop alertTopicArn"
        )
    seen: set[str] = set()
    for i, address in enumerate(monitoring.alert_emails):
        if not re.fullmatch(r"[^@\s]+@[^@\s]+\.[^@\s]+", address):
            problems.append(
                f"{key_name(('monitoring', 'alertEmails', i))} = {address!r}: not an email address (name@example.com)"
            )
        elif address.strip().lower() in seen:
            problems.append(f"{key_name(('monitoring', 'alertEmails', i))} = {address!r}: listed twice")
        seen.add(address.strip().lower())
    return problems


def unheard_alerts(config: StackConfig) -> list[str]:
    """A Prometheus whose alerts go to the stack's own topic with nobody subscribed: they reach no one."""
    monitoring = config.monitoring
    if monitoring.prometheus == "off" or monitoring.alert_topic_arn is not None or monitoring.alert_emails:
        return []
    return [
        f"{key_name(('monitoring', 'alertEmails'))} is empty: the training alerts go to the stack's SNS topic "
        "<cluster>-training-alerts, which nothing subscribes to, so they reach no one; list addresses there, or "
        "subscribe an endpoint to that topic"
    ]


def region_problem(region: str) -> str | None:
    """Why ``region`` cannot hold this cluster, or None: a name that is no AWS region is refused as
    that (before anything is looked up for it), and a region without any Neuron type as that."""
    trainium_regions = regions_offering([t for t in NEURON_INSTANCE_TYPES if trains(t)])
    trainium = ", ".join(trainium_regions)
    if not re.fullmatch(r"^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-[0-9]$", region):
        return f"not an AWS region name (for example us-west-2); regions that offer Trainium: {trainium}"
    if region not in EKS_ADDON_REGISTRIES:
        # The EKS user guide's registry page lists every region EKS runs in (infra/facts/versions.py).
        return (
            "not an AWS region EKS runs in (the regions of EKS_ADDON_REGISTRIES in infra/facts/versions.py, "
            f"from the EKS user guide); regions that offer Trainium: {trainium}"
        )
    if region not in NEURON_REGIONS:
        inferentia = ", ".join(r for r in regions_offering(list(NEURON_INSTANCE_TYPES)) if r not in trainium_regions)
        return (
            f"no Neuron instance type ({', '.join(NEURON_INSTANCE_TYPES)}) is offered in {region}; regions that "
            f"offer Trainium: {trainium}; Inferentia2 only: {inferentia} (NEURON_REGIONS in infra/facts/regions.py, "
            "from the AWS price list; add the region there with its source if AWS has started offering one)"
        )
    return None


def _group_region_problems(config: StackConfig) -> list[str]:
    """A Trainium group whose type the stack's region does not offer, said as such before the zone
    look-up (which would blame the zones): only for types the AWS price list prices on demand, whose
    absence from a region's rows therefore means the region lacks them (infra/facts/regions.py)."""
    if region_problem(config.region) is not None or config.region not in NEURON_REGIONS:
        return []
    problems = []
    for i, group in enumerate(config.accelerator_node_groups):
        listed = any(instance_hourly(r, group.instance_type) for r in NEURON_REGIONS)
        offering = ", ".join(regions_offering([group.instance_type]))
        if not listed or not offering or group.instance_type in NEURON_REGIONS[config.region].offerings:
            continue
        problems.append(
            f"{key_name(('acceleratorNodeGroups', i))}.instanceType = {group.instance_type!r}: not offered in "
            f"{config.region}; regions that offer it: {offering} (NEURON_REGIONS in infra/facts/regions.py); use "
            f"one of those regions, or a type {config.region} offers: "
            f"{', '.join(sorted(NEURON_REGIONS[config.region].offerings))}"
        )
    return problems


def _provider_problems(config: StackConfig) -> list[str]:
    problems = []
    problem = region_problem(config.region)
    if problem:
        problems.append(f"{REGION_KEY} = {config.region!r}: {problem}")
    if config.profile is not None and not re.fullmatch(rules.PROFILE_PATTERN, config.profile):
        problems.append(
            f"{PROFILE_KEY} = {config.profile!r}: not an AWS CLI profile name "
            "(letters, digits and _ . + @ -, no spaces)"
        )
    return problems


def _cluster_problems(config: StackConfig) -> list[str]:
    problems = []
    if not re.fullmatch(NAME_PATTERN, config.cluster_name):
        problems.append(
            f"{key_name(('clusterName',))} = {config.cluster_name!r}: must be 2-39 characters of lower-case letters, "
            "digits and '-', starting with a letter"
        )
    if not re.fullmatch(KUBERNETES_VERSION_PATTERN, config.kubernetes_version):
        problems.append(
            f"{key_name(('kubernetesVersion',))} = {config.kubernetes_version!r}: a Kubernetes minor version "
            f"such as 1.34{_unquoted_version_hint(config.kubernetes_version)}"
        )
    elif config.kubernetes_version not in EKS_KUBERNETES_VERSIONS:
        problems.append(
            f"{key_name(('kubernetesVersion',))} = {config.kubernetes_version!r}: not a version EKS offers; allowed: "
            f"{', '.join(EKS_KUBERNETES_VERSIONS)} (EKS_KUBERNETES_VERSIONS in infra/facts/versions.py, from the EKS "
            "release calendar; add a newer one there once `aws eks describe-cluster-versions` lists it)"
        )
    for addon, build in config.addon_versions.items():
        key = key_name(("addonVersions", addon))
        if addon not in ADDON_NAMES:
            problems.append(f"{key}: unknown add-on; allowed: {', '.join(ADDON_NAMES)}")
            continue
        problem = addon_pin_problem(addon, build)
        if problem:
            problems.append(f"{key} = {build!r}: {problem}")
    # EKS holds one access entry per principal: an ARN is an admin or a viewer, once.
    seen: set[str] = set()
    for list_key, arns in (("clusterAdmins", config.cluster_admins), ("clusterViewers", config.cluster_viewers)):
        for i, arn in enumerate(arns):
            key = key_name((list_key, i))
            if not re.fullmatch(IAM_PRINCIPAL_PATTERN, arn):
                # YAML folds a list item indented under the one before it into that item's text.
                joined = (
                    "; it holds more than one ARN, as YAML reads a list item indented under the one before it: "
                    f"give each its own `- arn:...` line at the same indentation under {list_key}"
                    if arn.count("arn:") > 1
                    else ""
                )
                problems.append(
                    f"{key} = {arn!r}: must be an IAM role or user ARN (arn:aws:iam::<account>:role/<name>){joined}"
                )
            elif arn.split(":")[1] != region_partition(config.region):
                problems.append(
                    f"{key} = {arn!r}: the partition {arn.split(':')[1]!r} is not {config.region}'s "
                    f"({region_partition(config.region)!r}), and IAM principals of another partition cannot reach "
                    f"this cluster; allowed: arn:{region_partition(config.region)}:iam::<account>:role/<name> (or "
                    "user/<name>)"
                )
            if arn in seen:
                twice = "listed twice" if arn in arns[:i] else "also in clusterAdmins; a principal has one access entry"
                problems.append(f"{key} = {arn!r}: {twice}")
            seen.add(arn)
    for i, log_type in enumerate(config.log_types):
        if log_type not in LOG_TYPES:
            problems.append(f"{key_name(('logTypes', i))} = {log_type!r}: allowed: {', '.join(LOG_TYPES)}")
        elif config.log_types.index(log_type) != i:
            problems.append(f"{key_name(('logTypes', i))} = {log_type!r}: listed twice")
    if config.log_retention_days not in LOG_RETENTION_DAYS:
        problems.append(
            f"{key_name(('logRetentionDays',))} = {config.log_retention_days}: CloudWatch Logs allows "
            f"{', '.join(map(str, LOG_RETENTION_DAYS))}"
        )
    return problems


def _parse_network(key: str, value: str, problems: list[str]) -> ipaddress.IPv4Network | None:
    problem = rules.ipv4_cidr_problem(value)
    if problem:
        problems.append(f"{key} = {value!r}: {problem}")
        return None
    return ipaddress.IPv4Network(value)


NOT_INTERNET_SOURCES = tuple(
    ipaddress.IPv4Network(c)
    for c in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16")
)
RFC1918 = tuple(ipaddress.IPv4Network(c) for c in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"))
SHARED_ADDRESS_SPACE = ipaddress.IPv4Network("100.64.0.0/10")
BENCHMARK_RANGE = ipaddress.IPv4Network("198.19.0.0/16")


def secondary_cidr_problem(primary: ipaddress.IPv4Network, secondary: ipaddress.IPv4Network) -> str | None:
    """AWS's IPv4 CIDR block association restrictions (Amazon VPC User Guide, "VPC CIDR
    blocks", IPv4 CIDR block association restrictions), narrowed to private ranges: nodes
    and pods live in the secondary range, which must never be publicly routable here."""
    if primary.overlaps(secondary):
        return f"overlaps the primary range {primary}"
    family = next((r for r in (*RFC1918, BENCHMARK_RANGE, SHARED_ADDRESS_SPACE) if primary.subnet_of(r)), None)
    own = next((r for r in (*RFC1918, BENCHMARK_RANGE, SHARED_ADDRESS_SPACE) if secondary.subnet_of(r)), None)
    if own is None:
        return "must lie within 100.64.0.0/10 or the primary range's own private block"
    if own == BENCHMARK_RANGE:
        return "AWS refuses 198.19.0.0/16 as a secondary block here; use 100.64.0.0/10"
    if own in RFC1918 and own != family:
        return f"AWS refuses an RFC 1918 block from {own} next to a primary in {family or primary}; use 100.64.0.0/10"
    if family == RFC1918[1] and secondary.subnet_of(ipaddress.IPv4Network("172.31.0.0/16")):
        return "AWS refuses 172.31.0.0/16 (the default VPC's range) next to a 172.16.0.0/12 primary"
    if (
        family == RFC1918[0]
        and primary.subnet_of(ipaddress.IPv4Network("10.0.0.0/15"))
        and secondary.subnet_of(ipaddress.IPv4Network("10.0.0.0/16"))
    ):
        return "AWS refuses a block from 10.0.0.0/16 when the primary lies in 10.0.0.0/15"
    return None


def _network_problems(network: NetworkConfig) -> list[str]:
    problems: list[str] = []
    vpc_key, secondary_key = key_name(("network", "vpcCidr")), key_name(("network", "secondaryCidr"))
    vpc = _parse_network(vpc_key, network.vpc_cidr, problems)
    secondary = _parse_network(secondary_key, network.secondary_cidr, problems)
    for key, block in ((vpc_key, vpc), (secondary_key, secondary)):
        if block is not None and not 16 <= block.prefixlen <= 24:
            problems.append(f"{key} = '{block}': prefix must be between /16 and /24 to hold the subnets")
    if vpc is not None and not any(vpc.subnet_of(r) for r in (*RFC1918, SHARED_ADDRESS_SPACE)):
        problems.append(
            f"{vpc_key} = '{vpc}': must lie within a private range (10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16)"
        )
    elif vpc is not None and secondary is not None:
        problem = secondary_cidr_problem(vpc, secondary)
        if problem:
            problems.append(f"{secondary_key} = '{secondary}': {problem}")
    return problems


def _endpoint_problems(access: EndpointAccessConfig, environment: str) -> list[str]:
    problems: list[str] = []
    key = lambda *k: key_name(("endpointAccess", *k))  # noqa: E731
    if not access.public and not access.private:
        problems.append(f"{key()}: public and private are both false; enable at least one")
    if not access.public and access.private and not access.deployed_from_vpc:
        problems.append(
            f"{key('public')} = false: a private-only API endpoint is unreachable from a laptop or a hosted CI runner, "
            "and `pulumi up` installs the cluster software through it; keep public: true with publicCidrs, or set "
            "endpointAccess.deployedFromVpc: true when you deploy from inside the VPC (runner in the VPC, VPN, peering)"
        )
    if not access.public and access.public_cidrs is not None:
        problems.append(f"{key('publicCidrs')}: only meaningful with public: true")
    if not access.public:
        return problems
    cidrs = access.public_cidrs
    if cidrs is not None:
        if not cidrs:
            problems.append(f"{key('publicCidrs')} = []: list at least one CIDR block, or set public: false")
        if len(cidrs) > MAX_PUBLIC_CIDRS:
            problems.append(f"{key('publicCidrs')}: {len(cidrs)} blocks; EKS accepts at most {MAX_PUBLIC_CIDRS}")
        for i, cidr in enumerate(cidrs):
            network = _parse_network(key("publicCidrs", i), cidr, problems)
            if network is not None and any(network.subnet_of(r) for r in NOT_INTERNET_SOURCES):
                problems.append(
                    f"{key('publicCidrs', i)} = {cidr!r}: a private range never reaches a public endpoint; "
                    "in-VPC callers use the private endpoint"
                )
    if environment == "prod" and (cidrs is None or rules.covers_internet(cidrs)):
        shown = "not set (the whole internet)" if cidrs is None else f"{cidrs} (the whole internet)"
        problems.append(
            f"{key('publicCidrs')} = {shown}: prod refuses an API endpoint open to 0.0.0.0/0; list your deployers' "
            "egress ranges (office, VPN, CI runners' NAT addresses)"
        )
    restricted = cidrs is not None and not rules.covers_internet(cidrs)
    if restricted and not access.private:
        # EKS user guide, "Cluster API server endpoint": with the private endpoint off, nodes
        # reach the API through the public one, from the NAT gateways' addresses.
        problems.append(
            f"{key('private')} = false: with publicCidrs restricted, nodes reach the API only through the public "
            "endpoint from the NAT gateways' addresses, which are not in the list; set private: true"
        )
    return problems


def _size_problems(key: str, group: Any) -> list[str]:
    if group.min_size <= group.desired_size <= group.max_size:
        return []
    return [
        f"{key}: sizes must satisfy minSize <= desiredSize <= maxSize "
        f"(got minSize={group.min_size}, desiredSize={group.desired_size}, maxSize={group.max_size})"
    ]


def _core_group_problems(config: StackConfig) -> list[str]:
    return (
        _cpu_group_problems(("coreNodeGroup",), config.core_node_group)
        + _cpu_group_problems(("jobNodeGroup",), config.job_node_group)
        + _core_subnet_problems(config)
    )


# Addresses EKS asks to find free in a subnet it puts control-plane interfaces in (EKS user guide,
# "View Amazon EKS networking requirements for VPC and subnets": at least six, 16 recommended), and
# the five AWS reserves in every subnet (VPC user guide, "Subnet CIDR blocks").
EKS_SUBNET_FREE_ADDRESSES = 16
AWS_RESERVED_ADDRESSES = 5
UPDATE_SURGE_PER_ZONE = 2


def _core_subnet_problems(config: StackConfig) -> list[str]:
    """The core nodes and their pods live in the private subnets (the clients root squash exempts), which
    also hold the control plane's interfaces: each must fit every core node at its pod limit, in case
    they all land in one zone, and EKS's free addresses."""
    try:
        vpc = ipaddress.IPv4Network(config.network.vpc_cidr)
    except ValueError:
        return []  # refused by the network rules
    slices = 2 * config.network.az_count
    size = vpc.num_addresses >> math.ceil(math.log2(slices))
    group = config.core_node_group
    # A node's own address and one per pod; an update adds up to two nodes per zone before it drains any
    # (EKS user guide, "Understand each phase of node updates": the scale-up phase raises the group by up
    # to twice its number of zones).
    per_node = 1 + max(
        (t.node.max_pods for n in group.instance_types if (t := INSTANCE_TYPES.get(n)) and t.node), default=0
    )
    needed = EKS_SUBNET_FREE_ADDRESSES + (group.max_size + UPDATE_SURGE_PER_ZONE) * per_node
    if size - AWS_RESERVED_ADDRESSES >= needed:
        return []
    return [
        f"{key_name(('network', 'vpcCidr'))} = '{vpc}': its private subnets (/{32 - size.bit_length() + 1}, "
        f"{size - AWS_RESERVED_ADDRESSES} usable addresses each with azCount {config.network.az_count}) hold the "
        f"core nodes and their pods: coreNodeGroup.maxSize {group.max_size} and {UPDATE_SURGE_PER_ZONE} more during "
        f"an update, {per_node} addresses each, plus the {EKS_SUBNET_FREE_ADDRESSES} EKS keeps free there, is "
        f"{needed}; use a larger vpcCidr"
    ]


def _cpu_group_problems(loc: tuple[str, ...], group: Any) -> list[str]:
    key = key_name(loc)
    problems = _size_problems(key, group)
    types = group.instance_types
    if not types:
        problems.append(f"{key}.instanceTypes = []: list at least one instance type (for example m6i.4xlarge)")
    for i, instance_type in enumerate(types):
        if not re.fullmatch(INSTANCE_TYPE_PATTERN, instance_type):
            problems.append(
                f"{key}.instanceTypes[{i}] = {instance_type!r}: not an EC2 instance type (for example m6i.4xlarge)"
            )
        elif instance_type in NEURON_INSTANCE_TYPES:
            problems.append(
                f"{key}.instanceTypes[{i}] = {instance_type!r}: this group runs CPU pods; use a general-purpose type"
            )
    return problems


def _label_problems(key: str, labels: dict[str, str]) -> list[str]:
    problems = []
    for label, value in labels.items():
        label_key = f"{key}.labels.{label}"
        problem = rules.label_key_problem(label) or rules.kubelet_label_problem(label)
        if problem:
            problems.append(f"{label_key}: key {label!r}: {problem}")
        elif label in RESERVED_NODE_LABELS:
            problems.append(f"{label_key}: set by this project (workloads select on it); choose another key")
        problem = rules.label_value_problem(value)
        if problem:
            problems.append(f"{label_key} = {value!r}: {problem}")
    return problems


def ami_release_problem(release: str, kubernetes_version: str) -> str | None:
    """An EKS AMI release is built for one Kubernetes minor version (<major>.<minor>.<patch>-<date>);
    the node group takes it with its `version`, which follows the cluster's."""
    if not re.fullmatch(AMI_RELEASE_PATTERN, release):
        return "an EKS AMI release version such as 1.34.2-20251112"
    built_for = ".".join(release.split("-")[0].split(".")[:2])
    if built_for != kubernetes_version:
        return (
            f"built for Kubernetes {built_for}, but kubernetesVersion is {kubernetes_version}; allowed: a "
            f"{kubernetes_version}.<patch>-<date> release of the EKS AL2023 Neuron AMI whose Neuron driver the "
            f"training images run on{compatible_release_hint(kubernetes_version)} (raise kubernetesVersion and the "
            "pin together; docs/node-health.md)"
        )
    return None


def _unquoted_version_hint(version: str) -> str:
    """YAML reads an unquoted ``1.30`` as the number 1.3, and the stack file then says 1.3: said only
    where ``<version>0`` is a minor that exists (up to the newest EKS offers), so a quoted "1.4" gets
    no hint about a 1.40 there is none of."""
    newest = max(_minor(v) for v in EKS_KUBERNETES_VERSIONS)
    if re.fullmatch(r"\d+\.[1-9]", version) and _minor(f"{version}0") <= newest:
        return (
            f' (YAML reads an unquoted {version}0 as the number {version}: quote it, kubernetesVersion: "{version}0")'
        )
    return ""


def _accelerator_problems(groups: list[AcceleratorNodeGroupConfig], kubernetes_version: str) -> list[str]:
    problems: list[str] = []
    seen: set[str] = set()
    allowed_types = ", ".join(NEURON_INSTANCE_TYPES)
    for i, group in enumerate(groups):
        key = key_name(("acceleratorNodeGroups", i))
        if not re.fullmatch(NAME_PATTERN, group.name):
            problems.append(
                f"{key}.name = {group.name!r}: must be 2-39 characters of lower-case letters, digits and '-'"
            )
        if group.name == "core":
            problems.append(f"{key}.name = 'core': taken by the core node group")
        if group.name in seen:
            problems.append(f"{key}.name = {group.name!r}: duplicate node group name; names must be unique")
        seen.add(group.name)
        problems += _size_problems(key, group)
        problems += _label_problems(key, group.labels)
        # Against a version that is itself refused, every pin would be refused again, as noise.
        release_problem = (
            group.ami_release_version
            and re.fullmatch(KUBERNETES_VERSION_PATTERN, kubernetes_version)
            and ami_release_problem(group.ami_release_version, kubernetes_version)
        )
        if release_problem:
            problems.append(f"{key}.amiReleaseVersion = {group.ami_release_version!r}: {release_problem}")
        if group.az_id is not None and not re.fullmatch(AZ_ID_PATTERN, group.az_id):
            problems.append(f"{key}.azId = {group.az_id!r}: not an availability zone id (for example usw2-az4)")
        facts = NEURON_INSTANCE_TYPES.get(group.instance_type)
        if facts is None:
            problems.append(
                f"{key}.instanceType = {group.instance_type!r}: not a supported Neuron instance type; allowed: "
                f"{allowed_types} ({TRAINIUM3_UNDOCUMENTED})"
            )
            continue
        if group.efa and not facts.efa_supported:
            efa_types = ", ".join(t for t, f in NEURON_INSTANCE_TYPES.items() if f.efa_supported)
            problems.append(
                f"{key}.efa = true: {group.instance_type} has no EFA; EFA types: {efa_types} (or set efa: false)"
            )
        problems += _reservation_problems(key, group)
        problems += _ultraserver_problems(key, group, facts.ultraserver_nodes)
    problems += _shared_ultraserver_problems(groups)
    return problems


def _shared_ultraserver_problems(groups: list[AcceleratorNodeGroupConfig]) -> list[str]:
    """One group per UltraServer: two groups naming one UltraServer's block would together ask it for more
    instances than it has, and a job on either could not tell the UltraServer apart."""
    first: dict[str, int] = {}
    problems = []
    for i, group in enumerate(groups):
        facts = NEURON_INSTANCE_TYPES.get(group.instance_type)
        reservation = group.capacity_reservation
        if facts is None or facts.ultraserver_nodes is None or reservation is None or reservation.id is None:
            continue
        if reservation.id in first:
            problems.append(
                f"{key_name(('acceleratorNodeGroups', i, 'capacityReservation', 'id'))} = {reservation.id!r}: "
                f"{key_name(('acceleratorNodeGroups', first[reservation.id]))} names this UltraServer's block already; "
                "allowed: "
                "one group per UltraServer Capacity Block"
            )
        first.setdefault(reservation.id, i)
    return problems


def _ultraserver_problems(key: str, group: AcceleratorNodeGroupConfig, nodes: int | None) -> list[str]:
    """An UltraServer type runs only as part of an UltraServer, which EC2 sells as one Capacity Block each
    (EC2 user guide, "How Capacity Blocks work": "each UltraServer corresponds to one Capacity Block"), and
    whose instances EC2 tells apart by that block (API reference, InstanceTopology.capacityBlockId: "only
    supported for UltraServer instances"). There is no Spot (EC2 specifications) and no on-demand price
    (infra/facts/instances.py), and the group grows and shrinks by whole UltraServers."""
    if nodes is None:
        return []
    problems = []
    if not group.capacity_block:
        problems.append(
            f"{key}.capacityReservation: {group.instance_type} runs only inside an UltraServer Capacity Block, one "
            "block per UltraServer (EC2 user guide, How Capacity Blocks work); set capacityReservation "
            "{type: capacity-block, id: cr-...} to the block's reservation"
        )
    elif group.capacity_reservation is not None and group.capacity_reservation.id is None:
        problems.append(
            f"{key}.capacityReservation.tags = {group.capacity_reservation.tags}: a {group.instance_type} group names "
            "its one UltraServer's block by id; tags can select several blocks, and a job would then span "
            "UltraServers; allowed: capacityReservation.id, one group per UltraServer"
        )
    for name, value in (("minSize", group.min_size), ("desiredSize", group.desired_size), ("maxSize", group.max_size)):
        if value % nodes:
            problems.append(
                f"{key}.{name} = {value}: a {group.instance_type} group holds whole UltraServers of {nodes} "
                f"instances (aws-neuron-sdk trn2-arch.rst, Trn2 UltraServer); allowed: a multiple of {nodes}"
            )
    return problems


def _reservation_problems(key: str, group: AcceleratorNodeGroupConfig) -> list[str]:
    reservation = group.capacity_reservation
    if reservation is None:
        return []
    if (reservation.id is None) == (reservation.tags is None):
        # Neither or both: what the reservation is cannot be said, so nothing else about it is checked.
        return [
            f"{key}.capacityReservation: give exactly one of id (cr-...) and tags (Karpenter only), got "
            f"id={reservation.id!r} tags={reservation.tags!r}"
        ]
    problems = []
    named = reservation.id if reservation.id is not None else f"tagged {reservation.tags}"
    if group.placement_group:
        problems.append(
            f"{key}.placementGroup = true: cannot be combined with capacityReservation {named!r}; launches "
            "into reservations fail inside a cluster placement group (remove placementGroup or the reservation)"
        )
    if reservation.id is not None and not re.fullmatch(CAPACITY_RESERVATION_PATTERN, reservation.id):
        problems.append(f"{key}.capacityReservation.id = {reservation.id!r}: must look like cr-0123456789abcdef0")
    if group.az_id is None and (reservation.id is None or not group.capacity_block):
        # Reservations are zonal: the node group's one subnet must be in the reservation's
        # zone, or every launch fails. (A Capacity Block's zone is looked up by its id.)
        problems.append(
            f"{key}.azId: required with capacityReservation {named!r}; reservations are zonal, give the "
            "reservation's zone id (aws ec2 describe-capacity-reservations --query "
            "'CapacityReservations[].AvailabilityZoneId')"
        )
    return problems


def _nothing_to_scale_problems(config: StackConfig) -> list[str]:
    """Only cluster-autoscaler changes a managed group's size after creation (the Trainium groups under
    nodeProvisioner cluster-autoscaler, and the job-support group under either provisioner, start at
    desiredSize and idle at zero): with features.clusterAutoscaler off, a group whose maxSize exceeds
    its desiredSize never uses the rest, and pods that need those nodes stay Pending. Karpenter starts
    nodes for pending pods itself; with no Trainium group it has no NodePool and launches nothing."""
    problems = []
    switch = key_name(("features", "clusterAutoscaler"))
    if not config.features.cluster_autoscaler:
        groups: list[tuple[str, Any]] = [(key_name(("jobNodeGroup",)), config.job_node_group)]
        if config.node_provisioner == "cluster-autoscaler":
            groups[:0] = [
                (key_name(("acceleratorNodeGroups", i)), g) for i, g in enumerate(config.accelerator_node_groups)
            ]
        for key, group in groups:
            if group.desired_size < group.max_size:
                problems.append(
                    f"{switch} = false: nothing would scale {key} (desiredSize {group.desired_size}, maxSize "
                    f"{group.max_size}) past its desiredSize, so pods that need more of its nodes wait Pending for "
                    "ever; allowed: true, or a fixed size on that group (desiredSize = maxSize)"
                )
    if config.node_provisioner == "karpenter" and not config.accelerator_node_groups:
        problems.append(
            f"{key_name(('acceleratorNodeGroups',))} = []: with nodeProvisioner karpenter each group becomes a "
            "NodePool, and without one Karpenter launches nothing; allowed: at least one group, or nodeProvisioner "
            "cluster-autoscaler"
        )
    return problems


def _provisioner_problems(config: StackConfig) -> list[str]:
    """Accelerator-group keys whose meaning depends on what starts the nodes (nodeProvisioner)."""
    problems: list[str] = []
    provisioner_key = key_name(("nodeProvisioner",))
    groups = config.accelerator_node_groups
    if config.node_provisioner == "cluster-autoscaler":
        for i, group in enumerate(groups):
            key = key_name(("acceleratorNodeGroups", i))
            if group.spot:
                problems.append(
                    f"{key}.spot = true: a managed node group has one capacity type; Spot fallback needs "
                    f"{provisioner_key}: karpenter (or remove spot)"
                )
            if group.capacity_reservation is not None and group.capacity_reservation.tags is not None:
                problems.append(
                    f"{key}.capacityReservation.tags = {group.capacity_reservation.tags!r}: a node group launches into "
                    f"one reservation id; selecting reservations by tag needs {provisioner_key}: karpenter"
                )
        return problems
    # Karpenter starts nodes only for pending pods (a NodePool without replicas has no size to hold).
    for i, group in enumerate(groups):
        key = key_name(("acceleratorNodeGroups", i))
        for field_, value in (("minSize", group.min_size), ("desiredSize", group.desired_size)):
            if value != 0:
                problems.append(
                    f"{key}.{field_} = {value}: with {provisioner_key}: karpenter nodes exist only while pods need "
                    "them; allowed: 0 (maxSize becomes the NodePool's node limit)"
                )
        for label in group.labels:
            # karpenter.sh_nodepools.yaml v1.14.0 template.metadata.labels CEL rules (and kubernetes-sigs/
            # karpenter pkg/apis/v1/labels.go IsRestrictedLabel): Karpenter owns these.
            domain = label.split("/", 1)[0] if "/" in label else ""
            if domain.endswith(("karpenter.sh", "karpenter.k8s.aws")) or label == "kubernetes.io/hostname":
                problems.append(
                    f"{key}.labels.{label}: a NodePool may not set labels of Karpenter's own domains "
                    f"(karpenter.sh, karpenter.k8s.aws) or kubernetes.io/hostname; use a domain of your own"
                )
        if group.spot and group.capacity_block:
            # A Capacity Block group's NodePool allows only `reserved` (infra/specs/nodepools.py
            # capacity_types): Spot would never be used, and a fallback off the block is not wanted.
            problems.append(
                f"{key}.spot = true: a Capacity Block group launches only into its block (capacity type "
                "`reserved`), never Spot; allowed: false (or a separate group with spot: true and no capacityBlock)"
            )
        if (
            group.efa_enabled
            and "efa_interface_type" in group.model_fields_set
            and group.efa_interface_type != "efa-only"
        ):
            problems.append(
                f"{key}.efaInterfaceType = {group.efa_interface_type!r}: an EC2NodeClass (Karpenter 1.14) knows only "
                "`interface` and `efa-only` interfaces; allowed: efa-only"
            )
    repair = {g.auto_repair for g in groups}
    if len(repair) > 1:
        problems.append(
            f"{key_name(('acceleratorNodeGroups',))}[*].autoRepair: differs between groups; Karpenter's node repair "
            f"is one switch for the cluster (feature gate nodeRepair); set the same value on every group"
        )
    if config.features.neuron_node_recovery:
        problems.append(
            f"{key_name(('features', 'neuronNodeRecovery'))} = true: it marks nodes unhealthy in their Auto Scaling "
            f"group, and Karpenter's nodes have none; with {provisioner_key}: karpenter use autoRepair (Karpenter "
            "node repair) instead"
        )
    for tag in config.tags:
        # karpenter.k8s.aws_ec2nodeclasses.yaml (v1.14.0) spec.tags CEL rules: Karpenter sets these itself.
        if (
            tag == "eks:eks-cluster-name"
            or tag.startswith("kubernetes.io/cluster")
            or tag in ("karpenter.sh/nodepool", "karpenter.sh/nodeclaim", "karpenter.k8s.aws/ec2nodeclass")
        ):
            problems.append(
                f"{key_name(('tags',))}.{tag}: Karpenter sets this tag on its nodes itself and an EC2NodeClass may not "
                f"carry it (with {provisioner_key}: karpenter); remove it"
            )
    for setting, duration in (
        ("expireAfter", config.karpenter.expire_after),
        ("terminationGracePeriod", config.karpenter.termination_grace_period),
        ("consolidateAfter", config.karpenter.consolidate_after),
    ):
        if not re.fullmatch(KARPENTER_DURATION, duration) and not (
            duration == "Never" and setting != "terminationGracePeriod"
        ):
            problems.append(
                f"{key_name(('karpenter', setting))} = {duration!r}: a duration such as 720h, 90m or 1h30m"
                + ("" if setting == "terminationGracePeriod" else ", or Never")
            )
    return problems


def device_allocation_problems(config: StackConfig) -> list[str]:
    """``deviceAllocation: dra`` where the Neuron and EFA DRA drivers can serve the group (docs/dra.md);
    infra/facts/dra.py cites each limit."""
    problems: list[str] = []
    version_ok = re.fullmatch(KUBERNETES_VERSION_PATTERN, config.kubernetes_version) is not None
    autoscaled = config.node_provisioner == "cluster-autoscaler" and config.features.cluster_autoscaler
    for i, group in enumerate(config.accelerator_node_groups):
        if not group.dra:
            continue
        key = key_name(("acceleratorNodeGroups", i, "deviceAllocation"))
        said = f"{key} = 'dra'"
        if group.instance_type not in DRA_INSTANCE_TYPES:
            problems.append(
                f"{said}: {group.instance_type} is not served by the Neuron DRA driver; allowed: "
                f"{', '.join(DRA_INSTANCE_TYPES)}, or device-plugin. The sources disagree ({DRA_SOURCES})"
            )
        if version_ok and _minor(config.kubernetes_version) < _minor(DRA_MIN_KUBERNETES):
            problems.append(
                f"{said}: kubernetesVersion {config.kubernetes_version} has no resource.k8s.io/v1, which the Neuron "
                f"DRA driver's DeviceClass and every claim use (GA from {DRA_MIN_KUBERNETES}); allowed: "
                f"kubernetesVersion {DRA_MIN_KUBERNETES_WITH_AUTOSCALER} or later, or device-plugin"
            )
        elif (
            version_ok and autoscaled and _minor(config.kubernetes_version) < _minor(DRA_MIN_KUBERNETES_WITH_AUTOSCALER)
        ):
            problems.append(
                f"{said}: on kubernetesVersion {config.kubernetes_version} the pinned cluster-autoscaler (v1.34.2, "
                "chart 9.53.0) ignores DRA claims (--enable-dynamic-resource-allocation off, no resource.k8s.io RBAC; "
                f"locked on from 1.35); allowed: kubernetesVersion {DRA_MIN_KUBERNETES_WITH_AUTOSCALER} or later, "
                "or device-plugin"
            )
        elif version_ok and group.efa_enabled and _minor(config.kubernetes_version) < _minor(DRANET_MIN_KUBERNETES):
            problems.append(
                f"{said}: EFA under DRA is aws-dranet (eks-charts stable/aws-dranet 1.0.0), which needs Kubernetes "
                f"{DRANET_MIN_KUBERNETES}+ (its README), and kubernetesVersion is {config.kubernetes_version}; allowed: "
                f"kubernetesVersion {DRANET_MIN_KUBERNETES} or later, efa: false, or device-plugin"
            )
        release = group.ami_release_version
        if release and re.fullmatch(AMI_RELEASE_PATTERN, release):
            node_version = tuple(int(p) for p in release.split("-")[0].split("."))
            if node_version < DRA_MIN_NODE_VERSION:
                problems.append(
                    f"{said}: amiReleaseVersion {release!r} runs Kubernetes {release.split('-')[0]} on the node, and "
                    "the Neuron DRA driver supports nodes of 1.34.2 or later only (1.34.0 and 1.34.1 have a DRA "
                    "regression, kubernetes/kubernetes#133920; aws-neuron-sdk deploy/eks/dra.rst); allowed: a "
                    "1.34.2+ release, or device-plugin"
                )
        if config.node_provisioner == "karpenter":
            problems.append(
                f"{said}: with nodeProvisioner karpenter; EKS supports DRA with Karpenter only on static capacity "
                "(EKS user guide device-management-neuron, 'Karpenter (static capacity only)'), and this project's "
                "NodePools start nodes for pending pods; allowed: nodeProvisioner cluster-autoscaler, or device-plugin"
            )
        elif autoscaled and group.min_size == 0:
            problems.append(
                f"{said}: with minSize 0; cluster-autoscaler cannot bring a DRA group back from zero on AWS (the node "
                "it imagines for an empty group carries no ResourceSlices, so no claim fits it: kubernetes/autoscaler "
                "cluster-autoscaler-1.35.2 cloudprovider/aws/aws_cloud_provider.go TemplateNodeInfo), and it scales "
                "idle groups down to minSize; a Capacity Block is no exception, since EKS only scales a block's group "
                "down by schedule (EKS user guide capacity-blocks-mng); allowed: minSize 1 or more, or device-plugin"
            )
    return problems


def fsx_capacity_problem(capacity_gib: int) -> str | None:
    """FSx for Lustre SSD capacity comes in 1200 GiB, 2400 GiB, then multiples of 2400 GiB."""
    if capacity_gib in (1200, 2400) or (capacity_gib > 2400 and capacity_gib % 2400 == 0):
        return None
    lower = 1200 if capacity_gib < 2400 else max(2400, capacity_gib // 2400 * 2400)
    upper = 1200 if capacity_gib < 1200 else (2400 if capacity_gib < 2400 else lower + 2400)
    nearest = sorted({lower, upper})
    return f"allowed: 1200, 2400, or a multiple of 2400 (nearest: {' or '.join(map(str, nearest))})"


def efs_storage_problems(config: StackConfig) -> list[str]:
    """What `storage.kind` refuses: with efs, every FSx-only key the stack file sets (EFS has no deployment
    type, capacity, Lustre tier, data repository, export task, backups or root claims here) and a prod stack
    (prod's file system is protected and backed up, which this EFS file system is not); with fsx, the keys
    only EFS reads. Keys left at their defaults are not refused: only what the stack file says."""
    storage, problems = config.storage, []
    given = storage.model_fields_set
    if storage.kind == "efs":
        for name in FSX_ONLY_STORAGE_KEYS:
            if name in given:
                value = getattr(storage, name)
                shown = value.model_dump(by_alias=True) if isinstance(value, ConfigModel) else value
                if isinstance(value, list):
                    shown = [v.model_dump(by_alias=True) if isinstance(v, ConfigModel) else v for v in value]
                problems.append(
                    f"{key_name(('storage', to_camel(name)))} = {shown!r}: an FSx for Lustre setting, and "
                    "storage.kind is efs (allowed: leave the key out, or storage.kind fsx)"
                )
        if config.environment == "prod":
            problems.append(
                f"{key_name(('storage', 'kind'))} = 'efs': prod's file system is FSx for Lustre, protected and "
                "backed up (allowed: fsx, or leave the key out)"
            )
    else:
        for name in EFS_ONLY_STORAGE_KEYS:
            if name in given:
                problems.append(
                    f"{key_name(('storage', to_camel(name)))} = {getattr(storage, name)!r}: an EFS setting, and "
                    f"storage.kind is {storage.kind} (allowed: leave the key out, or storage.kind efs)"
                )
    if storage.infrequent_access_after_days not in EFS_INFREQUENT_ACCESS_DAYS:
        problems.append(
            f"{key_name(('storage', 'infrequentAccessAfterDays'))} = {storage.infrequent_access_after_days}: "
            f"EFS lifecycle policies take {', '.join(map(str, EFS_INFREQUENT_ACCESS_DAYS))}"
        )
    return problems


def _storage_problems(storage: StorageConfig) -> list[str]:
    problems: list[str] = []
    skey = lambda *k: key_name(("storage", *k))  # noqa: E731
    capacity = fsx_capacity_problem(storage.capacity_gib)
    if capacity:
        problems.append(f"{skey('capacityGib')} = {storage.capacity_gib}: {capacity}")
    allowed = FSX_THROUGHPUTS[storage.deployment_type]
    if allowed and storage.per_unit_storage_throughput not in allowed:
        problems.append(
            f"{skey('perUnitStorageThroughput')} = {storage.per_unit_storage_throughput}: "
            f"{storage.deployment_type} allows {', '.join(map(str, allowed))}"
        )
    if not allowed and storage.per_unit_storage_throughput is not None:
        problems.append(f"{skey('perUnitStorageThroughput')}: {storage.deployment_type} takes none; set it to null")
    if storage.deployment_type == "PERSISTENT_2" and storage.lustre_version != "2.15":
        problems.append(
            f"{skey('lustreVersion')} = {storage.lustre_version!r}: PERSISTENT_2 file systems run Lustre 2.15"
        )
    problems += _data_repository_problems(storage)
    if storage.kms_key_id is not None:
        if storage.deployment_type == "SCRATCH_2":
            problems.append(f"{skey('kmsKeyId')}: SCRATCH_2 file systems cannot use a customer KMS key")
        elif not re.fullmatch(KMS_KEY_PATTERN, storage.kms_key_id):
            problems.append(
                f"{skey('kmsKeyId')} = {storage.kms_key_id!r}: a KMS key ARN "
                "(arn:aws:kms:<region>:<account>:key/<key id>)"
            )
    if storage.retain and storage.deployment_type == "SCRATCH_2":
        problems.append(f"{skey('retain')} = true: SCRATCH_2 file systems keep no backups; use PERSISTENT_2")
    days = storage.backup_retention_days
    if days is not None and not 0 <= days <= MAX_BACKUP_RETENTION_DAYS:
        problems.append(
            f"{skey('backupRetentionDays')} = {days}: FSx keeps automatic backups 0 to "
            f"{MAX_BACKUP_RETENTION_DAYS} days (0 turns them off)"
        )
    elif days and storage.deployment_type == "SCRATCH_2":
        problems.append(
            f"{skey('backupRetentionDays')} = {days}: SCRATCH_2 file systems take no backups; use PERSISTENT_2 or 0"
        )
    # FSx DailyAutomaticBackupStartTime: HH:MM, UTC (terraform-provider-aws validates
    # ^([01]\d|2[0-3]):?([0-5]\d)$ with length 5).
    if not re.fullmatch(r"([01]\d|2[0-3]):[0-5]\d", storage.backup_start_time):
        problems.append(f"{skey('backupStartTime')} = {storage.backup_start_time!r}: a UTC time HH:MM such as 05:00")
    problem = rules.dns_label_problem(storage.claim_name)
    if problem:
        problems.append(f"{skey('claimName')} = {storage.claim_name!r}: {problem}")
    return problems


def _prod_storage_problems(config: StackConfig) -> list[str]:
    """Prod's file system holds the only copy of every checkpoint: it is protected, keeps a final
    backup and is persistent (the policy pack's prod-data-protected refuses the same resources)."""
    if config.environment != "prod":
        return []
    storage, problems = config.storage, []
    if storage.retain is False:
        problems.append(
            f"{key_name(('storage', 'retain'))} = false: prod retains its file system (allowed: true, or leave "
            "the key out)"
        )
    if config.ecr_force_delete is True:
        problems.append(
            f"{key_name(('ecrForceDelete',))} = true: prod's image repositories are not deleted while they hold "
            "images (allowed: false, or leave the key out, which is false in prod)"
        )
    if storage.deployment_type.startswith("SCRATCH"):
        problems.append(
            f"{key_name(('storage', 'deploymentType'))} = {storage.deployment_type!r}: prod's file system is "
            "persistent, since a SCRATCH one keeps no backups and loses data when a server fails (allowed: "
            "PERSISTENT_2, PERSISTENT_1)"
        )
    return problems


def _acknowledged_replacement_problems(acknowledged: dict[str, str]) -> list[str]:
    """Each acknowledged data-store replacement says why (the plan diff checks the names against
    what it replaces: offline/diff/compare.py ``data_store_replacement_refusals``)."""
    key = key_name(("replacementsAcknowledged",))
    return [
        f"{key}.{name} = {reason!r}: say why this data store may be replaced (what is lost, where its data "
        "was copied to)"
        for name, reason in sorted(acknowledged.items())
        if not reason.strip()
    ]


def _backup_problems(config: StackConfig) -> list[str]:
    """A retained file system is the one copy of every checkpoint: `protect` stops only `pulumi
    destroy`, so it keeps daily backups (the policy pack's fsx-retained-backups checks the same)."""
    storage, days = config.storage, config.storage_backup_retention_days
    key = key_name(("storage", "backupRetentionDays"))
    if storage.deployment_type == "SCRATCH_2" or (storage.backup_retention_days or 0) > MAX_BACKUP_RETENTION_DAYS:
        return []
    shown = days if storage.backup_retention_days is not None else "not set (0 without storage.retain)"
    if config.environment == "prod" and days < PROD_MIN_BACKUP_RETENTION_DAYS:
        return [
            f"{key} = {shown}: prod keeps automatic backups at least {PROD_MIN_BACKUP_RETENTION_DAYS} days "
            f"(allowed: {PROD_MIN_BACKUP_RETENTION_DAYS} to {MAX_BACKUP_RETENTION_DAYS})"
        ]
    if config.retain_storage and days == 0:
        return [
            f"{key} = 0: a retained file system keeps daily automatic backups (allowed: 1 to "
            f"{MAX_BACKUP_RETENTION_DAYS}); set storage.retain to false for one that may be lost"
        ]
    return []


# FSx CreateDataRepositoryAssociation (API reference): FileSystemPath starts with '/', '/'
# alone only as the only association, associations do not nest; DataRepositoryPath is
# s3://bucket/prefix and a bucket is linked once; at most 8 associations per file system.
MAX_DATA_REPOSITORIES = 8


def _data_repository_problems(storage: StorageConfig) -> list[str]:
    problems: list[str] = []
    paths: list[str] = []
    buckets: set[str] = set()
    for i, repo in enumerate(storage.data_repositories):
        key = key_name(("storage", "dataRepositories", i))
        path = repo.file_system_path
        if not re.fullmatch(r"^/[^\s]*$", path) or (path.endswith("/") and path != "/"):
            problems.append(f"{key}.fileSystemPath = {path!r}: an absolute path such as /data, without a trailing '/'")
        else:
            for other in paths:
                if (
                    path == other
                    or path.startswith(other.rstrip("/") + "/")
                    or other.startswith(path.rstrip("/") + "/")
                ):
                    problems.append(f"{key}.fileSystemPath = {path!r}: overlaps {other!r}; associations may not nest")
            paths.append(path)
        if not re.fullmatch(S3_URL, repo.s3_path):
            problems.append(f"{key}.s3Path = {repo.s3_path!r}: must be an s3://bucket[/prefix] URL")
        else:
            bucket = repo.s3_path.removeprefix("s3://").split("/")[0]
            if bucket in buckets:
                problems.append(
                    f"{key}.s3Path = {repo.s3_path!r}: bucket {bucket!r} is already linked; FSx links a bucket once"
                )
            buckets.add(bucket)
        for field_, events in (("autoImport", repo.auto_import), ("autoExport", repo.auto_export)):
            if len(set(events)) != len(events):
                problems.append(f"{key}.{field_} = {events}: lists an event twice")
        # An exported deletion repeats every delete on the file system in the bucket: an `rm -rf`, a
        # torn run directory's cleanup, or another namespace's pod would then take the S3 copy too,
        # the one copy that outlives the file system. Refused whatever the environment: pruning the
        # bucket is an S3 lifecycle rule's job, which keeps noncurrent versions for a set time.
        if "DELETED" in repo.auto_export:
            problems.append(
                f"{key}.autoExport = {list(repo.auto_export)}: DELETED would delete the S3 copy whenever a file "
                "is deleted on the file system; allowed: NEW and CHANGED (prune the bucket with an S3 lifecycle rule)"
            )
    if len(storage.data_repositories) > MAX_DATA_REPOSITORIES:
        problems.append(
            f"{key_name(('storage', 'dataRepositories'))}: {len(storage.data_repositories)} associations; "
            f"FSx allows at most {MAX_DATA_REPOSITORIES} per file system"
        )
    if "/" in paths and len(paths) > 1:
        problems.append(
            f"{key_name(('storage', 'dataRepositories'))}: '/' can only be linked when it is the only association"
        )
    return problems


# EventBridge Scheduler ScheduleExpression (Scheduler user guide, schedule-types): rate(<value> <unit>), the
# unit singular for 1 and plural above; cron(<minutes> <hours> <day of month> <month> <day of week> <year>).
# at(...) runs once, which is no schedule for exports.
SCHEDULE_RATE = r"rate\((1 (minute|hour|day)|([2-9]|[1-9][0-9]+) (minutes|hours|days))\)"
SCHEDULE_CRON = r"cron\(\S+( \S+){5}\)"


def covering_repository(storage: StorageConfig, path: str) -> int | None:
    """The index of the data repository whose fileSystemPath holds ``path`` (associations do not nest)."""
    for i, repo in enumerate(storage.data_repositories):
        linked = repo.file_system_path
        if linked == "/" or path == linked or path.startswith(linked + "/"):
            return i
    return None


def _checkpoint_export_problems(config: StackConfig) -> list[str]:
    """An export task sends files to the bucket of the data repository association that holds them: FSx
    CreateDataRepositoryTask fails on a file system with no linked data repository (FSx API reference), and
    automatic export and export tasks do not run at the same time (FSx for Lustre user guide,
    export-changed-data-meta-dra). Every deployment type this stack allows (PERSISTENT_2, PERSISTENT_1,
    SCRATCH_2, on Lustre 2.12 or 2.15) takes associations: the FSx API reference excludes only SCRATCH_1."""
    export, storage = config.storage.checkpoint_export, config.storage
    if export is None:
        return []
    key = lambda *k: key_name(("storage", "checkpointExport", *k))  # noqa: E731
    problems: list[str] = []
    if not config.features.fsx_csi:
        problems.append(f"{key()}: set, but features.fsxCsi is false, so there is no file system to export from")
    if not re.fullmatch(SCHEDULE_RATE, export.schedule) and not re.fullmatch(SCHEDULE_CRON, export.schedule):
        problems.append(
            f"{key('schedule')} = {export.schedule!r}: a recurring EventBridge Scheduler expression, rate(<n> "
            "<minute|minutes|hour|hours|day|days>) or cron(<six fields>), e.g. rate(6 hours)"
        )
    if not export.paths:
        problems.append(f"{key('paths')} = []: name at least one file-system path to export, e.g. /nemo_experiments")
    if export.paths and not storage.data_repositories:
        problems.append(
            f"{key()}: storage.dataRepositories is empty; an export needs a data repository linked where the "
            "paths are (a dataRepositories entry whose fileSystemPath holds them)"
        )
        return problems
    for i, path in enumerate(export.paths):
        if not re.fullmatch(r"^/[^\s]*$", path) or (path.endswith("/") and path != "/"):
            problems.append(
                f"{key('paths', i)} = {path!r}: an absolute path such as /nemo_experiments, no trailing '/'"
            )
            continue
        if export.paths.index(path) != i:
            problems.append(f"{key('paths', i)} = {path!r}: listed twice")
            continue
        linked = covering_repository(storage, path)
        if linked is None:
            held = ", ".join(repr(r.file_system_path) for r in storage.data_repositories)
            problems.append(
                f"{key('paths', i)} = {path!r}: no data repository is linked there (storage.dataRepositories "
                f"fileSystemPaths: {held}); an export task only reaches S3 through one"
            )
        elif storage.data_repositories[linked].auto_export:
            problems.append(
                f"{key('paths', i)} = {path!r}: storage.dataRepositories[{linked}] already exports it automatically "
                f"(autoExport {storage.data_repositories[linked].auto_export}), and FSx does not run automatic export "
                "and export tasks at the same time; drop the path, or empty that autoExport"
            )
    return problems


def _software_problems(config: StackConfig) -> list[str]:
    problems: list[str] = []
    if not config.training_namespaces:
        problems.append(f"{key_name(('trainingNamespaces',))}: list at least one namespace (default: [default])")
    seen: set[str] = set()
    for i, namespace in enumerate(config.training_namespaces):
        key = key_name(("trainingNamespaces", i))
        problem = rules.dns_label_problem(namespace)
        if problem:
            problems.append(f"{key} = {namespace!r}: {problem}")
        if namespace in SYSTEM_NAMESPACES or namespace in SOFTWARE_NAMESPACES:
            problems.append(f"{key} = {namespace!r}: a system or cluster-software namespace; use your own or default")
        elif namespace == BURN_IN_NAMESPACE:
            problems.append(
                f"{key} = {namespace!r}: the Trainium burn-in's namespace, whose service account can lift a node's "
                "startup taint; allowed: any other namespace of your own, or default"
            )
        if namespace in seen:
            problems.append(f"{key} = {namespace!r}: listed twice")
        seen.add(namespace)

    names: set[str] = set()
    for i, queue in enumerate(config.volcano_queues):
        key = key_name(("volcanoQueues", i))
        problem = rules.dns_label_problem(queue.name)
        if problem:
            problems.append(f"{key}.name = {queue.name!r}: {problem}")
        if queue.name in names:
            problems.append(f"{key}.name = {queue.name!r}: duplicate queue name")
        if queue.name in VOLCANO_OWN_QUEUES:
            problems.append(f"{key}.name = {queue.name!r}: Volcano creates this queue itself; choose another name")
        names.add(queue.name)
        for field_, value in (("cpu", queue.cpu), ("memory", queue.memory)):
            if value is not None and not re.fullmatch(QUANTITY, value):
                problems.append(f"{key}.{field_} = {value!r}: not a Kubernetes quantity (for example 500 or 1500Gi)")

    buckets: list[tuple[tuple[str | int, ...], str]] = [
        (("trainingDataBuckets", i), b) for i, b in enumerate(config.training_data_buckets)
    ]
    for namespace, listed in config.namespace_data_buckets.items():
        if namespace not in config.training_namespaces:
            problems.append(
                f"{key_name(('namespaceDataBuckets', namespace))} = {listed!r}: not a training namespace; "
                f"trainingNamespaces lists {config.training_namespaces}"
            )
        buckets += [(("namespaceDataBuckets", namespace, i), b) for i, b in enumerate(listed)]
    # Each namespace's volume mounts only /<namespace> (infra/components/storage.py mounted_path): a link
    # elsewhere would be seen by no training pod.
    directories = [f"/{n}" for n in config.training_namespaces]
    for i, repo in enumerate(config.storage.data_repositories):
        path = repo.file_system_path
        if path.startswith("/") and not any(path == d or path.startswith(d + "/") for d in directories):
            problems.append(
                f"{key_name(('storage', 'dataRepositories', i))}.fileSystemPath = {path!r}: outside every training "
                f"namespace's directory, so no training pod sees it (each mounts only its own); put it under one of "
                f"{directories}, such as {directories[0]}{path if path != '/' else '/data'}"
            )
    problems += namespace_id_problems(config)
    if config.storage.root_claims == "mounted":
        problems.append(
            f"{key_name(('storage', 'rootClaims'))} = 'mounted': the training pods run as their namespace's id "
            "(namespaceIds) and cannot write the file system's root; allowed: migrated, with the root's entries "
            "given to their namespaces in storage.rootDataOwners (docs/operations.md, 'Moving a stack to "
            "per-namespace directories'), or retired (the default) once no pod mounts a root claim"
        )
    for namespace, owners in config.storage.shared_directories.items():
        key = key_name(("storage", "sharedDirectories", namespace))
        if namespace not in config.training_namespaces:
            problems.append(
                f"{key} = {owners!r}: not a training namespace; trainingNamespaces lists {config.training_namespaces}"
            )
        for owner in owners:
            if owner == namespace:
                problems.append(f"{key}.{owner} = {owners[owner]!r}: a namespace always mounts its own directory")
            elif owner not in config.training_namespaces:
                problems.append(
                    f"{key}.{owner} = {owners[owner]!r}: not a training namespace, so it has no directory to share; "
                    f"trainingNamespaces lists {config.training_namespaces}"
                )
    for entry, owner in config.storage.root_data_owners.items():
        key = key_name(("storage", "rootDataOwners", entry))
        if entry in (".", "..") or not re.fullmatch(r"[A-Za-z0-9._+-]+", entry) or entry.startswith(".lustre"):
            problems.append(
                f"{key} = {owner!r}: {entry!r} is not an entry of the root; name a top-level file or directory "
                "(letters, digits, '.', '_', '+', '-'), such as output or neuron_cache"
            )
        elif entry in config.training_namespaces:
            problems.append(f"{key} = {owner!r}: {entry!r} is a namespace's own directory, never moved")
        if owner not in config.training_namespaces:
            problems.append(
                f"{key} = {owner!r}: not a training namespace; trainingNamespaces lists {config.training_namespaces}"
            )
        # An association is tied to its fileSystemPath: renaming that directory from under it is nothing the
        # FSx API offers; the link moves as a new association inside the namespace's directory.
        for i, repo in enumerate(config.storage.data_repositories):
            if repo.file_system_path.strip("/").split("/")[0] == entry:
                problems.append(
                    f"{key} = {owner!r}: storage.dataRepositories[{i}] links {repo.file_system_path} to "
                    f"{repo.s3_path}; link it again under /{owner} instead (a new association imports it from the "
                    "bucket), drop the old one, and leave this entry out"
                )
    for loc, bucket in buckets:
        if not re.fullmatch(BUCKET, bucket) or ".." in bucket:
            problems.append(f"{key_name(loc)} = {bucket!r}: not an S3 bucket name (names only, no s3://)")

    features = config.features
    if features.neuron_node_recovery and not features.neuron_device_plugin:
        problems.append(
            f"{key_name(('features', 'neuronNodeRecovery'))} = true: node recovery is part of the Neuron chart's node "
            "problem detector; turn neuronDevicePlugin on"
        )
    return problems


# Tags the cluster program sets itself (__main__.py): `stack` is what the pipeline's deploy roles
# are scoped by in a shared account (bootstrap/permissions.py STACK_TAG), so no stack file may move it.
PROGRAM_TAGS = ("project", "cluster", "stack")


def namespace_id_problems(config: StackConfig) -> list[str]:
    """Each training namespace has its own id, in range, never root squash's `nobody`; no id names another namespace."""
    problems = []
    ids = config.namespace_ids
    taken = set(ids.values())
    free = next(n for n in range(DEFAULT_NAMESPACE_ID, MAX_NAMESPACE_ID) if n not in taken)
    for namespace in config.training_namespaces:
        if namespace not in ids:
            problems.append(
                f"{key_name(('namespaceIds',))} = {ids!r}: no id for training namespace {namespace!r}; give each "
                f"training namespace its own UID/GID, such as {namespace}: {free}"
            )
    seen: dict[int, str] = {}
    for namespace, number in ids.items():
        key = key_name(("namespaceIds", namespace))
        if namespace not in config.training_namespaces:
            problems.append(
                f"{key} = {number!r}: not a training namespace; trainingNamespaces lists {config.training_namespaces}"
            )
        if not MIN_NAMESPACE_ID <= number <= MAX_NAMESPACE_ID or number == SQUASHED_ID:
            problems.append(
                f"{key} = {number!r}: allowed {MIN_NAMESPACE_ID}-{MAX_NAMESPACE_ID} but {SQUASHED_ID} (`nobody`, what "
                "root squash maps root to)"
            )
        if number in seen:
            problems.append(f"{key} = {number!r}: {seen[number]!r} has it too; each namespace needs its own")
        seen.setdefault(number, namespace)
    return problems


def _tag_problems(tags: dict[str, str]) -> list[str]:
    problems = []
    for tag, value in tags.items():
        if tag in PROGRAM_TAGS:
            problems.append(
                f"{key_name(('tags', tag))} = {value!r}: set by the program (project, cluster, and the "
                "stack's name, which scopes the deploy roles); allowed: any other key"
            )
            continue
        problem = rules.aws_tag_problem(tag, value)
        if problem:
            problems.append(f"{key_name(('tags', tag))} = {value!r}: {problem}")
    return problems


def lagging_node_groups_problem(running: str, wanted: str, node_groups: dict[str, str]) -> str | None:
    """Why EKS would refuse raising the control plane while managed node groups lag it, or None.

    UpdateClusterVersion: "If your cluster has managed node groups attached to it, all of your
    node groups' Kubernetes versions must match the cluster's Kubernetes version in order to
    update the cluster to a new Kubernetes version" (AWS CLI reference, eks update-cluster-version).
    A node group left behind by a failed update (a pod that would not drain) would otherwise
    fail the next `pulumi up` at the control plane, part-way through.
    """
    if _minor(wanted) <= _minor(running):
        return None
    behind = {name: version for name, version in sorted(node_groups.items()) if version != running}
    if not behind:
        return None
    listed = ", ".join(f"{name} ({version})" for name, version in behind.items())
    return (
        f"{key_name(('kubernetesVersion',))} = {wanted!r}: the control plane runs {running} but the managed node "
        f"groups {listed} do not, and EKS upgrades the control plane only when every managed node group matches "
        f"it; allowed: {running} until `pulumi up` with kubernetesVersion {running} has brought them level, then "
        f"{wanted}"
    )
