"""No workload pod can obtain the node's credentials: one metadata hop on every
launch template, a node role without the VPC CNI's or Session Manager's permissions, and a
NetworkPolicy wall around 169.254.169.254 in every training namespace. And what each component
that runs on the nodes does with the instance metadata service, read from its pinned source."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any

import pytest

from infra.components.autoscaling import autoscaler_values
from infra.components.cluster import pulumi_eks_cni_urn
from infra.config.errors import ConfigError
from infra.specs import node_security
from infra.validate import parse_stack_config
from offline.plan.runner import PlanResult
from tests.checkov_scan import kubernetes_objects

METADATA = ipaddress.ip_network(node_security.IMDS_IPV4_CIDR)


def test_every_launch_template_requires_imdsv2_with_one_hop(dev: PlanResult, prod: PlanResult) -> None:
    for plan in (dev, prod):
        templates = plan.of_type("aws:ec2/launchTemplate:LaunchTemplate")
        # Core, job-support and every Trainium group: one code path (infra/components/launch_template.py).
        assert {t.name for t in templates} >= {"cluster-core-lt", "cluster-job-support-lt", "trn1-32xl-ng1-lt"}
        for template in templates:
            assert template.inputs["metadataOptions"] == {
                "httpEndpoint": "enabled",
                "httpTokens": "required",
                "httpPutResponseHopLimit": 1,
                "httpProtocolIpv6": "disabled",
            }, template.name
    assert node_security.IMDS_HOP_LIMIT == 1


def egress_reaches_metadata(rule: dict[str, Any]) -> bool:
    """Whether a NetworkPolicy egress rule admits 169.254.169.254 (no `to`: everywhere)."""
    if "to" not in rule:
        return True
    for peer in rule["to"]:
        if "ipBlock" not in peer:
            continue  # pod and namespace selectors name pods, never the metadata address
        block = peer["ipBlock"]
        cidr = ipaddress.ip_network(block["cidr"])
        if cidr.version == 4 and METADATA.subnet_of(cidr):  # type: ignore[arg-type]
            if not any(METADATA.subnet_of(ipaddress.ip_network(e)) for e in block.get("except", [])):  # type: ignore[arg-type]
                return True
    return False


def test_every_training_namespace_walls_its_pods_off_from_instance_metadata(
    dev: PlanResult, prod: PlanResult, workloads_all: PlanResult, workloads_prod: PlanResult
) -> None:
    """NetworkPolicy is an allow-list, and egress allowed by any policy selecting a pod is allowed:
    so the wall holds if one policy per training namespace selects every pod (podSelector {}) with
    egress everywhere but 169.254.169.254, and no policy of either stack admits it. The VPC CNI's
    network policy agent turns an `except` into a deny entry for that range: the agent the pinned
    vpc-cni add-on runs (v1.20.4-eksbuild.1 for Kubernetes 1.34, offline/plan/fixtures.py; its chart
    aws/amazon-vpc-cni-k8s v1.20.4 charts/aws-vpc-cni/values.yaml nodeAgent.image.tag v1.2.7),
    aws/aws-network-policy-agent v1.2.7 pkg/fwruleprocessor/fw_rule_processor.go l.63-64 ("each
    `except` CIDR is added explicitly with a deny-all L4 entry") and l.135-146 (addDenyAllL4Entry)."""
    for cluster, workloads in ((dev, workloads_all), (prod, workloads_prod)):
        policies = [
            o for plan in (cluster, workloads) for o in kubernetes_objects(plan) if o["kind"] == "NetworkPolicy"
        ]
        for namespace in cluster.outputs["trainingNamespaces"]:
            walls = [p for p in policies if p["metadata"] == {"name": "deny-instance-metadata", "namespace": namespace}]
            assert len(walls) == 1, namespace
            spec = walls[0]["spec"]
            assert spec["podSelector"] == {} and spec["policyTypes"] == ["Egress"]
            # Everything else stays reachable: DNS, the API, S3, peers, the Pod Identity agent.
            assert not egress_reaches_metadata(spec["egress"][0])
            assert ipaddress.ip_address("169.254.170.23") in ipaddress.ip_network(
                spec["egress"][0]["to"][0]["ipBlock"]["cidr"]
            )
        for policy in policies:
            if "Egress" in policy["spec"]["policyTypes"]:
                assert not any(egress_reaches_metadata(r) for r in policy["spec"].get("egress", [])), policy["metadata"]


def test_the_wall_check_would_see_an_open_rule() -> None:
    assert egress_reaches_metadata({})
    assert egress_reaches_metadata({"to": [{"ipBlock": {"cidr": "169.254.0.0/16"}}]})
    assert egress_reaches_metadata({"to": [{"ipBlock": {"cidr": "0.0.0.0/1"}}, {"ipBlock": {"cidr": "128.0.0.0/1"}}]})
    assert not egress_reaches_metadata(node_security.egress_except_instance_metadata_and_lustre())
    assert not egress_reaches_metadata({"to": [{"podSelector": {}}]})


def test_the_vpc_cni_add_on_pulumi_eks_made_is_adopted_under_its_urn(dev: PlanResult) -> None:
    # pulumi-eks 4.4.0 declared `new VpcCniAddon(`${name}-vpc-cni`, ...)` with the cluster component as
    # parent and inside it `new aws.eks.Addon(name, ...)` (nodejs/eks/cluster/cluster.ts createCore,
    # nodejs/eks/addons/cni-addon.ts); our add-on aliases that URN, so the switch is an update.
    cluster = dev.named("cluster-eks", "eks:index:Cluster").urn
    assert pulumi_eks_cni_urn(cluster) == (
        "urn:pulumi:dev::trainium-eks::trainium:infra:EksCluster$eks:index:Cluster$eks:index:VpcCniAddon"
        "$aws:eks/addon:Addon::cluster-eks-vpc-cni"
    )


def test_namespace_buckets_name_training_namespaces_only() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_stack_config({"region": "us-west-2", "namespaceDataBuckets": {"research": ["data"], "default": ["bad/"]}})
    text = str(caught.value)
    assert (
        "trainium-eks:namespaceDataBuckets.research = ['data']: not a training namespace; "
        "trainingNamespaces lists ['default']"
    ) in text
    assert "trainium-eks:namespaceDataBuckets.default[0] = 'bad/': not an S3 bucket name" in text
    config = parse_stack_config(
        {
            "region": "us-west-2",
            "trainingNamespaces": ["default", "research"],
            "namespaceIds": {"default": 20001, "research": 20002},
            "trainingDataBuckets": ["shared"],
            "namespaceDataBuckets": {"research": []},
        }
    )
    assert config.data_buckets("default") == ["shared"] and config.data_buckets("research") == []


# --- what each component on the nodes does with the metadata service ---------------------------


@dataclass(frozen=True)
class NodeComponent:
    name: str
    host_network: bool
    """Host-network pods are one hop from the metadata service: a hop limit of 1 reaches them."""
    reads_imds: bool
    without_imds: str
    """What it does when it cannot reach the metadata service ("" when it never asks)."""
    source: str


# Versions: the add-on builds EKS marks default for Kubernetes 1.34 (offline/plan/fixtures.py
# ADDON_DEFAULT_BUILDS: vpc-cni v1.20.4, aws-ebs-csi-driver v1.51.1, amazon-cloudwatch-observability
# v4.6.0, eks-node-monitoring-agent v1.4.1) read in their public source at those versions, and the
# charts infra/facts/versions.py pins (aws-fsx-csi-driver 1.17.0, cluster-autoscaler 9.53.0).
COMPONENTS = (
    NodeComponent(
        "EKS Pod Identity agent",
        True,
        False,
        "",
        "EKS user guide, pod-id-agent-setup.adoc: a host-network DaemonSet serving 169.254.170.23",
    ),
    NodeComponent(
        "VPC CNI (aws-node)",
        True,
        True,
        "",
        "aws/amazon-vpc-cni-k8s#2780: supports the Pod Identity agent; the add-on's DaemonSet is host-network",
    ),
    NodeComponent(
        "EFA device plugin",
        True,
        False,
        "",
        "aws/eks-charts stable/aws-efa-k8s-device-plugin v0.5.30, templates/daemonset.yaml: hostNetwork: "
        "true; device nodes under /dev/infiniband only",
    ),
    NodeComponent(
        "FSx CSI node plugin",
        False,
        True,
        "the Kubernetes API (its node object, CSI_NODE_NAME)",
        "kubernetes-sigs/aws-fsx-csi-driver v1.9.0 (chart 1.17.0), pkg/cloud/metadata.go NewMetadataService",
    ),
    NodeComponent(
        "FSx CSI controller",
        False,
        True,
        "the Kubernetes API (its node object: CSI_NODE_NAME, and the chart's ClusterRole grants nodes get)",
        "kubernetes-sigs/aws-fsx-csi-driver helm-chart-aws-fsx-csi-driver-1.17.0 (driver v1.9.0), "
        "pkg/driver/controller.go newControllerService l.89-99 (no AWS_REGION: NewMetadataService), "
        "pkg/cloud/metadata.go NewMetadataService (IMDS, then the Kubernetes API), "
        "charts/aws-fsx-csi-driver/templates/controller-deployment.yaml l.58 CSI_NODE_NAME, "
        "templates/controller-serviceaccount.yaml l.42-44 (fsx-csi-external-provisioner-role: nodes get)",
    ),
    NodeComponent(
        "EBS CSI node plugin",
        False,
        True,
        "the Kubernetes API (metadata sources [imds, kubernetes])",
        "kubernetes-sigs/aws-ebs-csi-driver v1.51.1, pkg/cloud/metadata/metadata.go l.51-52 "
        "DefaultMetadataSources; charts/aws-ebs-csi-driver/values.yaml node.hostNetwork: false (l.440)",
    ),
    NodeComponent(
        "EBS CSI controller",
        False,
        True,
        "the Kubernetes API (metadata sources [imds, kubernetes])",
        "kubernetes-sigs/aws-ebs-csi-driver v1.51.1, cmd/main.go l.143-179 (no AWS_REGION: "
        "NewMetadataService over DefaultMetadataSources), charts/aws-ebs-csi-driver/templates/controller.yaml "
        "l.117 CSI_NODE_NAME",
    ),
    NodeComponent(
        "CloudWatch agent",
        True,
        True,
        "",
        "aws-observability/helm-charts amazon-cloudwatch-observability-4.6.0, "
        "templates/linux/cloudwatch-agent-custom-resource.yaml l.99 hostNetwork: true",
    ),
    NodeComponent(
        "Fluent Bit (CloudWatch add-on)",
        True,
        True,
        "",
        "aws-observability/helm-charts amazon-cloudwatch-observability-4.6.0, "
        "templates/linux/fluent-bit-daemonset.yaml l.89 hostNetwork: true, service account cloudwatch-agent "
        "(l.125), the one the add-on's association covers",
    ),
    NodeComponent(
        "neuron-monitor (CloudWatch add-on)",
        False,
        True,
        "its instance_info section stays empty (a binary, not verified); the host-network agent adds the "
        "instance dimensions itself",
        "aws-observability/helm-charts amazon-cloudwatch-observability-4.6.0, "
        "templates/linux/neuron-monitor-daemonset.yaml (no hostNetwork)",
    ),
    NodeComponent(
        "cluster-autoscaler",
        False,
        True,
        "the region from AWS_REGION, which the chart sets from awsRegion",
        "kubernetes/autoscaler cluster-autoscaler-1.34.2, cloudprovider/aws/aws_sdk_provider.go getRegion; "
        "chart 9.53.0 templates/deployment.yaml AWS_REGION",
    ),
    NodeComponent(
        "Neuron device plugin",
        False,
        False,
        "",
        "aws-neuron/neuron-helm-charts templates/device-plugin-daemonset.yaml: no AWS environment; the "
        "Neuron driver's device nodes and the kubelet socket",
    ),
    NodeComponent(
        "Neuron node problem detector recovery",
        False,
        True,
        "unknown: check-health.py ships in the image, not the chart; off by default",
        "aws-neuron/neuron-helm-charts templates/npd-daemonset.yaml: node-recovery gets NODE_NAME and "
        "ENABLE_RECOVERY only",
    ),
    # The add-on build (v1.4.1-eksbuild.1) is not tagged in the public repository (its tags start at
    # v1.6.0): the chart there is hostNetwork from its first commit to v1.7.0, taken as the add-on's.
    NodeComponent(
        "EKS node monitoring agent",
        True,
        True,
        "",
        "aws/eks-node-monitoring-agent charts/eks-node-monitoring-agent/templates/daemonset.yaml "
        "hostNetwork: true at 2cce168 (2025-02-14, first commit) and at v1.7.0; it reads IMDS "
        "(internal/pkg/instanceinfo/provider.go at v1.7.0). Not verified at v1.4.1",
    ),
    NodeComponent(
        "Volcano, KubeRay, MPI operator",
        False,
        False,
        "",
        "volcano-sh/volcano v1.15.1 pkg/, ray-project/kuberay ray-operator/v1.7.0, kubeflow/mpi-operator "
        "v0.8.0 pkg/: no 169.254.169.254, ec2metadata or imds client",
    ),
)


def test_no_node_component_depends_on_reaching_imds_from_the_pod_network(dev: PlanResult) -> None:
    pod_network = [c for c in COMPONENTS if c.reads_imds and not c.host_network]
    assert {c.name for c in pod_network} == {
        "FSx CSI node plugin",
        "FSx CSI controller",
        "EBS CSI node plugin",
        "EBS CSI controller",
        "neuron-monitor (CloudWatch add-on)",
        "cluster-autoscaler",
        "Neuron node problem detector recovery",
    }
    assert all(c.without_imds for c in pod_network)
    # cluster-autoscaler: the region is set, so it never asks IMDS.
    assert autoscaler_values("trn-dev", "us-west-2", "v1.35.2")["awsRegion"] == "us-west-2"
    # Neuron node recovery is the one left unverified: off unless a stack turns it on (docs/security.md).
    assert dev.outputs["features"]["neuronNodeRecovery"] is False


def admitted_tcp_ports(rule: dict[str, Any]) -> set[int]:
    """The TCP ports a NetworkPolicy egress rule admits (no `ports`: every one; a port's protocol
    defaults to TCP; endPort makes it a range)."""
    if "ports" not in rule:
        return set(range(1, 65536))
    return {
        p
        for entry in rule["ports"]
        if entry.get("protocol", "TCP") == "TCP"
        for p in range(entry["port"], entry.get("endPort", entry["port"]) + 1)
    }


def test_no_training_pod_may_speak_lustre_to_the_file_system_servers(
    dev: PlanResult, prod: PlanResult, workloads_all: PlanResult, workloads_prod: PlanResult
) -> None:
    """FSx for Lustre believes the address and user ids a client sends, so a pod speaking LNet itself
    could pose as any namespace's id, and from a core node (exempt from root squash) as root. The
    wall admits no address of the file system's servers, every TCP port but Lustre's (988, 1018-1023)
    and every UDP port; no other egress rule in a training namespace admits a Lustre port. endPort is honoured by the pinned agent
    (aws/aws-network-policy-agent v1.2.7 pkg/fwruleprocessor/fw_rule_processor.go)."""
    from infra.specs.lustre_nids import LUSTRE_PORTS

    lustre = {p for low, high in LUSTRE_PORTS for p in range(low, high + 1)}
    assert lustre == {988, 1018, 1019, 1020, 1021, 1022, 1023}
    for cluster, workloads in ((dev, workloads_all), (prod, workloads_prod)):
        namespaces = set(cluster.outputs["trainingNamespaces"])
        policies = [
            o
            for plan in (cluster, workloads)
            for o in kubernetes_objects(plan)
            if o["kind"] == "NetworkPolicy" and o["metadata"]["namespace"] in namespaces
        ]
        for policy in policies:
            if "Egress" in policy["spec"]["policyTypes"]:
                for rule in policy["spec"].get("egress", []):
                    assert not admitted_tcp_ports(rule) & lustre, policy["metadata"]
        for namespace in namespaces:
            wall = next(
                p for p in policies if p["metadata"] == {"name": "deny-instance-metadata", "namespace": namespace}
            )["spec"]["egress"][0]
            assert admitted_tcp_ports(wall) == set(range(1, 65536)) - lustre
            assert {"protocol": "UDP", "port": 1, "endPort": 65535} in wall["ports"]
            # The file system's own servers on any port, by address, which the agent reads exactly: the
            # offline plan's FSx file system has two interfaces, 192.0.2.10 and .11 (offline/plan/mocks.py);
            # dev's EFS file system a mount target in each node zone (a pod reaching one could mount the root).
            blocked = wall["to"][0]["ipBlock"]["except"]
            if cluster is dev:
                mount_targets = cluster.of_type("aws:efs/mountTarget:MountTarget")
                assert blocked[0] == "169.254.169.254/32" and len(blocked) == 1 + len(mount_targets) == 3
                assert all(ipaddress.ip_network(b).num_addresses == 1 for b in blocked)
            else:
                assert blocked == ["169.254.169.254/32", "192.0.2.10/32", "192.0.2.11/32"]


def test_without_the_file_system_the_wall_names_only_the_metadata_service(plan_with) -> None:
    plan = plan_with(features={"fsxCsi": False})
    (wall,) = [
        o
        for o in kubernetes_objects(plan)
        if o["kind"] == "NetworkPolicy" and o["metadata"] == {"name": "deny-instance-metadata", "namespace": "default"}
    ]
    assert wall["spec"]["egress"][0]["to"][0]["ipBlock"]["except"] == ["169.254.169.254/32"]
