"""`deviceAllocation: dra` (docs/dra.md): refused where the Neuron and EFA DRA drivers cannot serve a group,
and otherwise a device-plugin release and a DRA release of the Neuron chart that never select the same node,
aws-dranet instead of the EFA device plugin on those nodes, whole-node claim templates that the burn-in and
the workload stacks use, and no extended resources advertised for such a group."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from infra import contract
from infra.config.errors import ConfigError
from infra.facts.dra import DRA_INSTANCE_TYPES
from infra.specs import host_access
from infra.specs.dra_objects import (
    INSTANCE_TYPE_PLACEHOLDER,
    NEURON_INSTANCES_PLACEHOLDER,
    DraGroup,
    neuron_device_selector,
    whole_node_claim_template,
)
from infra.specs.node_template import DEVICE_ALLOCATION_LABEL, EFA_PRESENT_LABEL
from infra.validate import parse_stack_config
from offline.plan.runner import PlanResult, stack_config
from tests.conftest import remembered_program
from tests.fixture_project import FIXTURE_ROOT

RELEASE = "kubernetes:helm.sh/v3:Release"
CLAIM_TEMPLATE = "kubernetes:resource.k8s.io/v1:ResourceClaimTemplate"
DRA_GROUP = "trn2-48xl-ng"
TRN2 = {
    "name": DRA_GROUP,
    "instanceType": "trn2.48xlarge",
    "amiReleaseVersion": "1.35.6-20260625",
    "minSize": 1,
    "desiredSize": 1,
    "maxSize": 4,
    "deviceAllocation": "dra",
}


def raw(**changes: Any) -> dict[str, Any]:
    """A stack in a region that offers trn2.48xlarge, with one DRA group (``group`` overrides its fields)."""
    group = {**TRN2, **changes.pop("group", {})}
    return {"region": "us-east-2", "kubernetesVersion": "1.35", "acceleratorNodeGroups": [group], **changes}


def refused(config: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as err:
        parse_stack_config(config)
    return [p for p in err.value.problems if "deviceAllocation" in p]


KEY = "trainium-eks:acceleratorNodeGroups[0].deviceAllocation = 'dra'"


# --- refusals ---------------------------------------------------------------------------------


def test_a_dra_group_on_trn2_with_a_node_kept_is_accepted():
    config = parse_stack_config(raw())
    (group,) = config.accelerator_node_groups
    assert group.dra and group.device_allocation == "dra"
    assert parse_stack_config(raw(group={"deviceAllocation": "device-plugin"})).accelerator_node_groups[0].dra is False
    # The default stays the device plugin.
    assert parse_stack_config({"region": "us-west-2"}).accelerator_node_groups[0].device_allocation == "device-plugin"


@pytest.mark.parametrize("instance_type", ["trn1.32xlarge", "inf2.48xlarge", "trn2.3xlarge"])
def test_types_the_neuron_dra_docs_do_not_serve_are_refused_naming_the_three_sources(instance_type):
    group = {"instanceType": instance_type, "amiReleaseVersion": "1.35.6-20260625"}
    (problem,) = refused(raw(group=group, region="us-east-1" if instance_type != "trn2.3xlarge" else "us-east-2"))
    assert problem.startswith(f"{KEY}: {instance_type} is not served by the Neuron DRA driver; allowed: ")
    assert "trn2.48xlarge, trn2u.48xlarge, or device-plugin" in problem
    for source in ("Neuron DRA docs", "EKS user guide device-management-neuron", "DaemonSet affinity"):
        assert source in problem
    assert "The Neuron docs win" in problem
    assert DRA_INSTANCE_TYPES == ("trn2.48xlarge", "trn2u.48xlarge")


def test_kubernetes_without_resource_k8s_io_v1_is_refused():
    problems = refused(raw(kubernetesVersion="1.33", group={"amiReleaseVersion": "1.33.9-20260625"}))
    assert any("kubernetesVersion 1.33 has no resource.k8s.io/v1" in p and "1.35 or later" in p for p in problems)


def test_1_34_is_refused_while_cluster_autoscaler_scales_the_group():
    group = {"amiReleaseVersion": "1.34.4-20260625"}
    (problem,) = refused(raw(kubernetesVersion="1.34", group=group))
    assert "the pinned cluster-autoscaler (v1.34.2, chart 9.53.0) ignores DRA claims" in problem
    # Without cluster-autoscaler (a fixed-size group) 1.34 serves DRA, but not EFA through aws-dranet (1.35+).
    fixed = {**group, "minSize": 2, "desiredSize": 2, "maxSize": 2}
    no_autoscaler = {"features": {"clusterAutoscaler": False}, "jobNodeGroup": {"desiredSize": 1, "maxSize": 1}}
    (problem,) = refused(raw(kubernetesVersion="1.34", group=fixed, **no_autoscaler))
    assert "EFA under DRA is aws-dranet" in problem and "efa: false" in problem
    config = parse_stack_config(raw(kubernetesVersion="1.34", group={**fixed, "efa": False}, **no_autoscaler))
    assert config.accelerator_node_groups[0].dra


def test_node_amis_of_1_34_0_and_1_34_1_are_refused():
    group = {"amiReleaseVersion": "1.34.1-20251001", "minSize": 2, "desiredSize": 2, "maxSize": 2, "efa": False}
    no_autoscaler = {"features": {"clusterAutoscaler": False}, "jobNodeGroup": {"desiredSize": 1, "maxSize": 1}}
    problems = refused(raw(kubernetesVersion="1.34", group=group, **no_autoscaler))
    (problem,) = [p for p in problems if "amiReleaseVersion" in p]
    assert "amiReleaseVersion '1.34.1-20251001' runs Kubernetes 1.34.1 on the node" in problem
    assert "kubernetes/kubernetes#133920" in problem


def test_karpenter_is_refused():
    group = {"minSize": 0, "desiredSize": 0}
    (problem,) = refused(raw(nodeProvisioner="karpenter", group=group))
    assert problem.startswith(f"{KEY}: with nodeProvisioner karpenter; EKS supports DRA with Karpenter only on static")


@pytest.mark.parametrize("block", [False, True])
def test_min_size_zero_is_refused_capacity_block_or_not(block):
    group: dict[str, Any] = {"minSize": 0, "desiredSize": 0}
    if block:
        group["capacityReservation"] = {"id": "cr-0c0ffee0c0ffee001", "type": "capacity-block"}
    problems = refused(raw(group=group))
    (problem,) = problems
    assert problem.startswith(f"{KEY}: with minSize 0; cluster-autoscaler cannot bring a DRA group back from zero")
    assert "cloudprovider/aws/aws_cloud_provider.go TemplateNodeInfo" in problem
    assert "a Capacity Block is no exception" in problem


def test_the_allocation_label_is_the_programs_own():
    group = {"deviceAllocation": "device-plugin", "labels": {DEVICE_ALLOCATION_LABEL: "dra"}}
    with pytest.raises(ConfigError) as err:
        parse_stack_config(raw(group=group))
    assert f"labels.{DEVICE_ALLOCATION_LABEL}: set by this project" in str(err.value)


# --- the plan with a DRA group ------------------------------------------------------------------


@pytest.fixture(scope="module")
def dra_plan() -> PlanResult:
    """The prod stack with its trn2.48xlarge group allocated by DRA (one node kept)."""
    config = stack_config(FIXTURE_ROOT, "prod")
    groups = json.loads(config["trainium-eks:acceleratorNodeGroups"])
    (trn2,) = [g for g in groups if g["name"] == DRA_GROUP]
    trn2.update(deviceAllocation="dra", minSize=1, desiredSize=1)
    config["trainium-eks:acceleratorNodeGroups"] = json.dumps(groups)
    return remembered_program(FIXTURE_ROOT, "prod", config)


def values(plan: PlanResult, release: str) -> dict[str, Any]:
    return plan.named(release, RELEASE).inputs["values"]


# aws-neuron/neuron-helm-charts charts/neuron-helm-chart values.yaml at 1.9.0 (b77a6f90): neuronInstances.
CHART_NEURON_INSTANCES = (
    "trn1.2xlarge trn1.32xlarge trn1n.32xlarge trn2.3xlarge trn2.48xlarge trn2u.48xlarge trn3.48xlarge "
    "trn3e.24xlarge inf1.xlarge inf1.2xlarge inf1.6xlarge inf1.24xlarge inf2.xlarge inf2.8xlarge inf2.24xlarge "
    "inf2.48xlarge ml.inf2.xlarge ml.inf2.8xlarge ml.inf2.24xlarge ml.inf2.48xlarge ml.trn1.2xlarge "
    "ml.trn1.32xlarge ml.trn1n.32xlarge"
).split()
COMPUTE_TYPE_NOT_SERVERLESS = {
    "key": "eks.amazonaws.com/compute-type",
    "operator": "NotIn",
    "values": ["fargate", "hybrid", "auto"],
}


def chart_affinity(affinity: dict[str, Any], instances: list[str]) -> dict[str, Any]:
    """What the chart's affinity helpers render (templates/_helpers.tpl at 1.8.0, cea92c38:
    neuron-device-plugin.affinity and neuron-dra-driver.affinity replace the instance-type key placeholder
    with node.kubernetes.io/instance-type and the instances placeholder with the list)."""
    text = json.dumps(affinity)
    text = text.replace(f'"{INSTANCE_TYPE_PLACEHOLDER}"', '"node.kubernetes.io/instance-type"')
    text = text.replace(f'"{NEURON_INSTANCES_PLACEHOLDER}"', json.dumps(instances))
    return json.loads(text)


def selects(labels: dict[str, str], node_selector: dict[str, str], affinity: dict[str, Any] | None) -> bool:
    """Whether a DaemonSet with this nodeSelector and required node affinity runs on a node with ``labels``
    (the scheduler's NodeSelectorRequirement operators In, NotIn, Exists, DoesNotExist)."""
    if any(labels.get(k) != v for k, v in node_selector.items()):
        return False
    if not affinity:
        return True
    terms = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]

    def holds(e: dict[str, Any]) -> bool:
        present, value = e["key"] in labels, labels.get(e["key"])
        return {
            "In": lambda: present and value in e["values"],
            "NotIn": lambda: not present or value not in e["values"],
            "Exists": lambda: present,
            "DoesNotExist": lambda: not present,
        }[e["operator"]]()

    return any(all(holds(e) for e in term["matchExpressions"]) for term in terms)


def agents(plan: PlanResult) -> dict[str, tuple[dict[str, str], dict[str, Any] | None]]:
    """Each device agent's DaemonSet placement as the charts render it from this plan's values."""
    plugin = values(plan, "neuron")["devicePlugin"]
    dra = values(plan, "neuron-dra")["draDriver"]
    efa = values(plan, "aws-efa-k8s-device-plugin")
    dranet = values(plan, "aws-dranet")
    # The chart's DRA DaemonSet keeps its default affinity (draDriver.affinity at 1.9.0: instance types and
    # compute type), minus inf types (the neuron-dra-driver.affinity helper).
    dra_default = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {
                                "key": INSTANCE_TYPE_PLACEHOLDER,
                                "operator": "In",
                                "values": NEURON_INSTANCES_PLACEHOLDER,
                            },
                            COMPUTE_TYPE_NOT_SERVERLESS,
                        ]
                    }
                ]
            }
        }
    }
    not_inf = [t for t in CHART_NEURON_INSTANCES if not t.startswith(("inf", "ml.inf"))]
    return {
        "neuron device plugin": (
            plugin.get("nodeSelector", {}),
            chart_affinity(plugin["affinity"], CHART_NEURON_INSTANCES),
        ),
        "neuron DRA driver": (dra["nodeSelector"], chart_affinity(dra_default, not_inf)),
        # eks-charts stable/aws-efa-k8s-device-plugin v0.5.30 and stable/aws-dranet 1.0.0 templates/daemonset.yaml:
        # `nodeSelector` from values and an instance-type affinity that lists every EFA type.
        "EFA device plugin": (efa["nodeSelector"], None),
        "aws-dranet": (dranet["nodeSelector"], None),
    }


def node_label_sets(plan: PlanResult) -> dict[str, dict[str, str]]:
    """Every accelerator group's node labels as a node carries them, and the variations a node can show."""
    found = {}
    for group in plan.outputs["acceleratorNodeGroups"]:
        labels = {**group["labels"], "node.kubernetes.io/instance-type": group["instanceType"]}
        found[group["name"]] = labels
        found[f"{group['name']} (compute-type label)"] = {**labels, "eks.amazonaws.com/compute-type": "ec2"}
    return found


def test_no_node_is_served_by_both_a_device_plugin_and_a_dra_driver(dra_plan):
    placement = agents(dra_plan)
    for node, labels in node_label_sets(dra_plan).items():
        on = {agent for agent, (selector, affinity) in placement.items() if selects(labels, selector, affinity)}
        assert not {"neuron device plugin", "neuron DRA driver"} <= on, node
        assert not {"EFA device plugin", "aws-dranet"} <= on, node
        if node.startswith(DRA_GROUP):
            assert on == {"neuron DRA driver", "aws-dranet"}, node
        else:
            assert on == {"neuron device plugin", "EFA device plugin"}, node


def test_the_split_would_fail_without_the_label(dra_plan):
    # The check above is not vacuous: the chart's default affinity alone puts the device plugin on the DRA group.
    plugin = values(dra_plan, "neuron")["devicePlugin"]
    default = copy.deepcopy(plugin["affinity"])
    default["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0][
        "matchExpressions"
    ].pop()
    labels = node_label_sets(dra_plan)[DRA_GROUP]
    assert selects(labels, {}, chart_affinity(default, CHART_NEURON_INSTANCES))
    assert not selects(labels, {}, chart_affinity(plugin["affinity"], CHART_NEURON_INSTANCES))


def test_the_two_neuron_releases(dra_plan):
    first, second = values(dra_plan, "neuron"), values(dra_plan, "neuron-dra")
    assert first["devicePlugin"]["enabled"] is True and first["npd"]["enabled"] is True
    assert "draDriver" not in first  # the chart's default: off
    # The chart refuses the DRA driver with the scheduler extension in one release, and chart 1.5.0 with the device
    # plugin too (templates/_helpers.tpl neuron-helm-chart.validateConfig at 1.5.0, 7324cd0e, and 1.8.0, cea92c38).
    # Its image through the cluster's pull-through cache (infra/specs/image_cache.py), at the chart's tag.
    repository = second["draDriver"].pop("image")["repository"]
    assert repository.endswith(".amazonaws.com/trn-prod/ecr-public/neuron/neuron-dra-driver")
    assert second == {
        "draDriver": {
            "enabled": True,
            "nodeSelector": {DEVICE_ALLOCATION_LABEL: "dra"},
            "tolerations": [
                {"key": "CriticalAddonsOnly", "operator": "Exists"},
                {"key": "aws.amazon.com/neuron", "operator": "Exists", "effect": "NoSchedule"},
                {
                    "key": "startup-taint.cluster-autoscaler.kubernetes.io/neuron-burn-in",
                    "operator": "Exists",
                    "effect": "NoSchedule",
                },
            ],
        },
        "devicePlugin": {"enabled": False},
        "npd": {"enabled": False},
        "scheduler": {"enabled": False},
    }
    release = dra_plan.named("neuron-dra", RELEASE).inputs
    assert (release["chart"], release["version"]) == ("oci://public.ecr.aws/neuron/neuron-helm-chart", "1.9.0")
    dranet = dra_plan.named("aws-dranet", RELEASE).inputs
    assert (dranet["chart"], dranet["version"], dranet["repositoryOpts"]["repo"]) == (
        "aws-dranet",
        "1.0.0",
        "https://aws.github.io/eks-charts",
    )
    # Its chart tolerates nothing but CriticalAddonsOnly by itself: the Neuron and burn-in taints are ours to add.
    assert {t["key"] for t in dranet["values"]["tolerations"]} == {
        "aws.amazon.com/neuron",
        "startup-taint.cluster-autoscaler.kubernetes.io/neuron-burn-in",
    }


def test_without_a_dra_group_there_is_no_dra_release(prod):
    assert {r.name for r in prod.of_type(RELEASE)} >= {"neuron", "aws-efa-k8s-device-plugin"}
    assert not [r for r in prod.of_type(RELEASE) if r.name in ("neuron-dra", "aws-dranet")]
    assert not prod.of_type(CLAIM_TEMPLATE)
    assert all(g["resourceClaimTemplate"] is None for g in prod.outputs["acceleratorNodeGroups"])


def test_a_dra_group_advertises_no_extended_resources_to_cluster_autoscaler(dra_plan):
    def template_tags(group: str) -> dict[str, str]:
        tags = [r.inputs["tag"] for r in dra_plan.of_type("aws:autoscaling/tag:Tag") if r.name.startswith(f"{group}-")]
        return {t["key"]: t["value"] for t in tags}

    dra, plugin = template_tags(DRA_GROUP), template_tags("trn1-32xl-ng1")
    resources = "k8s.io/cluster-autoscaler/node-template/resources/"
    assert not [k for k in dra if k.startswith(resources)]
    assert plugin[f"{resources}aws.amazon.com/neuron"] == "16"
    assert dra[f"k8s.io/cluster-autoscaler/node-template/label/{DEVICE_ALLOCATION_LABEL}"] == "dra"
    node_group = dra_plan.named(DRA_GROUP, "aws:eks/nodeGroup:NodeGroup").inputs
    assert node_group["labels"][DEVICE_ALLOCATION_LABEL] == "dra"
    assert EFA_PRESENT_LABEL not in node_group["labels"]
    assert node_group["scalingConfig"]["minSize"] == 1


# --- claim templates ----------------------------------------------------------------------------

# kubernetes/api kubernetes-1.34.0 resource/v1/types.go: the json names of each struct a claim template holds.
API_FIELDS = {
    "ResourceClaimTemplate": {"apiVersion", "kind", "metadata", "spec"},
    "ResourceClaimTemplateSpec": {"metadata", "spec"},
    "ResourceClaimSpec": {"devices"},
    "DeviceClaim": {"requests", "constraints", "config"},
    "DeviceRequest": {"name", "exactly", "firstAvailable"},
    "ExactDeviceRequest": {
        "deviceClassName",
        "selectors",
        "allocationMode",
        "count",
        "adminAccess",
        "tolerations",
        "capacity",
    },
    "DeviceSelector": {"cel"},
    "CELDeviceSelector": {"expression"},
    "DeviceClaimConfiguration": {"requests", "opaque"},
    "OpaqueDeviceConfiguration": {"driver", "parameters"},
}


def check_api_fields(template: dict[str, Any]) -> None:
    assert set(template) <= API_FIELDS["ResourceClaimTemplate"]
    assert set(template["spec"]) <= API_FIELDS["ResourceClaimTemplateSpec"]
    assert set(template["spec"]["spec"]) <= API_FIELDS["ResourceClaimSpec"]
    devices = template["spec"]["spec"]["devices"]
    assert set(devices) <= API_FIELDS["DeviceClaim"]
    names = set()
    for request in devices["requests"]:
        assert set(request) <= API_FIELDS["DeviceRequest"]
        exactly = request["exactly"]
        assert set(exactly) <= API_FIELDS["ExactDeviceRequest"]
        # DeviceAllocationModeAll ("All") takes every matching device of the node and no count.
        assert exactly["allocationMode"] == "All" and "count" not in exactly
        for selector in exactly.get("selectors", []):
            assert set(selector) <= API_FIELDS["DeviceSelector"]
            assert set(selector["cel"]) <= API_FIELDS["CELDeviceSelector"]
        names.add(request["name"])
    for config in devices["config"]:
        assert set(config) <= API_FIELDS["DeviceClaimConfiguration"]
        assert set(config["requests"]) <= names
        assert set(config["opaque"]) <= API_FIELDS["OpaqueDeviceConfiguration"]


def test_every_training_namespace_gets_the_groups_whole_node_claim_template(dra_plan):
    templates = {r.name: r.inputs for r in dra_plan.of_type(CLAIM_TEMPLATE)}
    namespaces = dra_plan.outputs["trainingNamespaces"]
    claim = f"{DRA_GROUP}-whole-node"
    assert set(templates) == {f"{ns}-{claim}" for ns in namespaces} | {f"burn-in-resourceclaimtemplate-{claim}"}
    for ns in namespaces:
        template = templates[f"{ns}-{claim}"]
        assert template["metadata"] == {"name": claim, "namespace": ns, "labels": {"node-group": DRA_GROUP}}
        check_api_fields({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", **template})
        devices = template["spec"]["spec"]["devices"]
        # deploy/eks/dra.rst Example 2 and the EKS user guide: the Neuron class with its NeuronConfig, the EFA class.
        assert [(r["name"], r["exactly"]["deviceClassName"]) for r in devices["requests"]] == [
            ("neurons", "neuron.aws.com"),
            ("efa", "efa.networking.k8s.aws"),
        ]
        assert devices["config"] == [
            {
                "requests": ["neurons"],
                "opaque": {
                    "driver": "neuron.aws.com",
                    "parameters": {"apiVersion": "neuron.aws.com/v1", "kind": "NeuronConfig", "logicalNeuronCore": 2},
                },
            }
        ]
    (group,) = [g for g in dra_plan.outputs["acceleratorNodeGroups"] if g["name"] == DRA_GROUP]
    assert group["resourceClaimTemplate"] == claim
    assert contract.parse_contract(dra_plan.outputs).node_groups[DRA_GROUP].resource_claim_template == claim


def test_without_efa_the_claim_takes_no_efa_interface():
    template = whole_node_claim_template(DraGroup("g", "trn2.48xlarge", efa=False, logical_neuron_core=1), "ns")
    check_api_fields(template)
    devices = template["spec"]["spec"]["devices"]
    assert [r["name"] for r in devices["requests"]] == ["neurons"]
    assert devices["config"][0]["opaque"]["parameters"]["logicalNeuronCore"] == 1


def _device(instance_type: str, resource_type: str = "neuron_device") -> dict[str, Any]:
    # A device as the driver publishes it (deploy/eks/dra.rst, attributes reference), as DRA's CEL sees it:
    # device.attributes[<driver domain>][<attribute>].
    return {
        "driver": "neuron.aws.com",
        "attributes": {"neuron.aws.com": {"instanceType": instance_type, "resourceType": resource_type, "deviceId": 3}},
    }


@pytest.mark.parametrize(
    ("device", "taken"),
    [
        (_device("trn2.48xlarge"), True),
        (_device("trn2u.48xlarge"), False),
        (_device("trn2.48xlarge", "neuron_node"), False),
        (_device("trn1.32xlarge"), False),
    ],
)
def test_the_selector_takes_the_groups_devices_and_never_the_ultraserver_node(device, taken):
    from cel_expr_python import cel

    env = cel.NewEnv(variables={"device": cel.Type.DYN})
    assert env.compile(neuron_device_selector("trn2.48xlarge")).eval(data={"device": device}).value() is taken
    trn2u = env.compile(neuron_device_selector("trn2u.48xlarge"))
    assert trn2u.eval(data={"device": _device("trn2u.48xlarge")}).value() is True
    assert trn2u.eval(data={"device": _device("trn2u.48xlarge", "neuron_node")}).value() is False


# --- the burn-in --------------------------------------------------------------------------------


def test_the_burn_in_claims_its_nodes_devices_instead_of_requesting_extended_resources(dra_plan):
    def burn_in(group: str) -> dict[str, Any]:
        return dra_plan.named(f"burn-in-daemonset-burn-in-{group}").inputs["spec"]["template"]["spec"]

    dra, plugin = burn_in(DRA_GROUP), burn_in("trn1-32xl-ng1")
    (container,) = dra["containers"]
    assert not [r for r in container["resources"]["limits"] if r.startswith(("aws.amazon.com/", "vpc.amazonaws.com/"))]
    assert container["resources"]["claims"] == [{"name": "node"}]
    assert dra["resourceClaims"] == [{"name": "node", "resourceClaimTemplateName": f"{DRA_GROUP}-whole-node"}]
    # The template it names, in its own namespace.
    template = dra_plan.named(f"burn-in-resourceclaimtemplate-{DRA_GROUP}-whole-node").inputs
    assert template["metadata"]["namespace"] == "neuron-burn-in"
    # The device-plugin groups' burn-in is unchanged.
    assert plugin["containers"][0]["resources"]["limits"]["aws.amazon.com/neuron"] == "16"
    assert "resourceClaims" not in plugin


def test_the_dra_driver_namespace_may_hold_its_host_network_daemon_set():
    plain = host_access.exemptions(observability=False, neuron_chart=True, neuron_scheduler_extension=False)
    with_dra = host_access.exemptions(
        observability=False, neuron_chart=True, neuron_scheduler_extension=False, neuron_dra=True
    )
    assert "neuron-dra-driver/DaemonSet" not in plain
    assert with_dra["neuron-dra-driver/DaemonSet"] == ("hostNetwork", "hostPath")


def test_the_dra_plan_pins_aws_dranet(dra_plan):
    from infra.config.rules import cluster_pins

    config = parse_stack_config(raw())
    assert "infra/facts/versions.py CHARTS['aws-dranet']" in {p.key for p in cluster_pins(config)}
    no_efa = parse_stack_config(raw(group={"efa": False}))
    assert "infra/facts/versions.py CHARTS['aws-dranet']" not in {p.key for p in cluster_pins(no_efa)}


def test_a_dra_nodes_allocatable_counts_the_dra_drivers_instead_of_the_device_plugins(dra_plan, prod):
    def allocatable(plan: PlanResult) -> dict[str, str]:
        (group,) = [g for g in plan.outputs["acceleratorNodeGroups"] if g["name"] == DRA_GROUP]
        return group["allocatable"]

    dra, plugin = allocatable(dra_plan), allocatable(prod)
    # The Neuron DRA driver (10m/128Mi) and aws-dranet (100m/50Mi); the device plugins request nothing. Prod runs
    # a Prometheus, whose neuron-monitor (256m/128Mi) and EFA exporter (10m/32Mi) stay off DRA nodes.
    assert int(plugin["cpu"].rstrip("m")) - int(dra["cpu"].rstrip("m")) == 110 - 266
    assert int(plugin["memory"].rstrip("Mi")) - int(dra["memory"].rstrip("Mi")) == 178 - 160
