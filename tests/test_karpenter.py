"""The karpenter node provisioner (`nodeProvisioner: karpenter`): the setting, the install, the
NodePools and EC2NodeClasses.

Upstream read for these tests, at the pinned versions:
- aws/karpenter-provider-aws v1.14.0: pkg/apis/crds/karpenter.k8s.aws_ec2nodeclasses.yaml and
  karpenter.sh_nodepools.yaml (field paths in tests/crd_paths; enums and CEL rules restated in
  ``crd_rule_problems`` below), charts/karpenter values.yaml, charts/karpenter-crd/templates,
  pkg/providers/amifamily/al2023.go, pkg/providers/launchtemplate/launchtemplate.go
  (generateNetworkInterfaces), pkg/providers/instancetype/types.go (efas), pkg/cloudprovider/
  cloudprovider.go (RepairPolicies), and the release's docs (commit 692ccdd06,
  website/content/en/v1.14: getting-started cloudformation.yaml, concepts/disruption.md,
  concepts/nodeclasses.md);
- kubernetes-sigs/karpenter v1.14.0 pkg/apis/v1/nodepool.go, pkg/controllers/provisioning/
  scheduling/scheduler.go (limits.nodes enforced for dynamic NodePools).
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from infra.components.accelerators import group_spec
from infra.config.errors import ConfigError
from infra.facts.instances import NEURON_INSTANCE_TYPES
from infra.facts.neuron import compatible_ami_release
from infra.specs import nodepools as plan
from infra.specs.efa import karpenter_interfaces
from infra.specs.node_security import IMDS_HOP_LIMIT
from infra.specs.node_template import GANG_HOLD_AUTOSCALER_KEYS, NEURON_TAINT, Taint
from infra.specs.placement import Zone
from infra.validate import parse_stack_config
from offline.plan.runner import PlanResult, run_program, stack_config
from tests.crd_fields import undefined_fields
from tests.fixture_project import FIXTURE_ROOT, fixture_policy_config
from tests.node_groups import trainium_group

NODEPOOL = "kubernetes:karpenter.sh/v1:NodePool"
NODECLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
RELEASE = "kubernetes:helm.sh/v3:Release"
# A third group beside the dev stack's two: reserved capacity selected by tag, Spot allowed; a
# label tells it from the dev stack's trn1.32xlarge group (the workload stack refuses groups its
# pods cannot tell apart).
TAGGED_GROUP = {
    "name": "trn1-reserved",
    "instanceType": "trn1.32xlarge",
    "maxSize": 2,
    "azId": "usw2-az4",
    "spot": True,
    "capacityReservation": {"tags": {"team": "ml"}},
    "labels": {"capacity": "reserved"},
    "amiReleaseVersion": compatible_ami_release(),
}


@pytest.fixture(scope="module")
def karp() -> PlanResult:
    """The dev stack with nodeProvisioner: karpenter (what `make test` plans of the Karpenter variant)."""
    config = stack_config(FIXTURE_ROOT, "dev")
    groups = json.loads(config["trainium-eks:acceleratorNodeGroups"])
    groups[0]["labels"] = {"capacity": "on-demand"}
    groups.append(TAGGED_GROUP)
    config["trainium-eks:acceleratorNodeGroups"] = json.dumps(groups)
    config["trainium-eks:nodeProvisioner"] = "karpenter"
    return run_program(FIXTURE_ROOT, "dev", config)


def by_name(plan_: PlanResult, type_: str) -> dict[str, dict[str, Any]]:
    return {r.inputs["metadata"]["name"]: r.inputs for r in plan_.of_type(type_)}


def crd_rule_problems(obj: dict[str, Any]) -> list[str]:
    """The enums, patterns and CEL rules of the v1.14.0 CRDs our objects touch (the field paths
    are checked separately against tests/crd_paths)."""
    spec, problems = obj["spec"], []
    duration = r"([0-9]+(s|m|h))+"
    if obj["kind"] == "EC2NodeClass":
        # exactly one of role and instanceProfile; an alias family@version from the allowed families.
        if ("role" in spec) == ("instanceProfile" in spec):
            problems.append("role xor instanceProfile")
        for term in spec["amiSelectorTerms"]:
            if "alias" in term and (
                not re.fullmatch(r"[a-zA-Z0-9]+@.+", term["alias"])
                or len(term["alias"]) > 30
                or term["alias"].split("@")[0] not in ("al2", "al2023", "bottlerocket")
            ):
                problems.append(f"alias {term['alias']}")
        nics = spec.get("networkInterfaces", [])
        if nics and not any(n == {"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"} for n in nics):
            problems.append("networkInterfaces without a primary interface")
        pairs = [(n["networkCardIndex"], n["deviceIndex"]) for n in nics]
        efa_cards = [n["networkCardIndex"] for n in nics if n["interfaceType"] == "efa-only"]
        if len(set(pairs)) != len(pairs) or len(set(efa_cards)) != len(efa_cards):
            problems.append("duplicate interface or two efa-only on one card")
        problems += [
            f"interfaceType {n['interfaceType']}" for n in nics if n["interfaceType"] not in ("interface", "efa-only")
        ]
        if spec.get("instanceStorePolicy", "RAID0") != "RAID0":
            problems.append("instanceStorePolicy")
        for term in spec.get("capacityReservationSelectorTerms", []):
            if "id" in term and (set(term) - {"id"} or not re.fullmatch(r"cr-[0-9a-z]+", term["id"])):
                problems.append(f"reservation term {term}")
            if not ({"id", "tags", "instanceMatchCriteria"} & set(term)):
                problems.append("empty reservation term")
        restricted = (
            "eks:eks-cluster-name",
            "karpenter.sh/nodepool",
            "karpenter.sh/nodeclaim",
            "karpenter.k8s.aws/ec2nodeclass",
        )
        problems += [
            f"tag {k}"
            for k in spec.get("tags", {})
            if not k or k in restricted or k.startswith("kubernetes.io/cluster")
        ]
        for terms in ("subnetSelectorTerms", "securityGroupSelectorTerms"):
            if not spec[terms] or any(
                not ({"tags", "id", "name"} & set(t)) or ("id" in t and len(t) > 1) for t in spec[terms]
            ):
                problems.append(terms)
        roots = [m for m in spec.get("blockDeviceMappings", []) if m.get("rootVolume")]
        if len(roots) > 1 or any(
            not re.fullmatch(r"[1-9][0-9]{0,3}Gi|[1-4][0-9]{4}Gi", m["ebs"]["volumeSize"])
            for m in spec.get("blockDeviceMappings", [])
        ):
            problems.append("blockDeviceMappings")
        hop = spec["metadataOptions"]["httpPutResponseHopLimit"]
        if not 1 <= hop <= 64 or spec["metadataOptions"]["httpTokens"] not in ("required", "optional"):
            problems.append("metadataOptions")
    else:
        template = spec["template"]["spec"]
        if spec["disruption"]["consolidationPolicy"] not in ("WhenEmpty", "WhenEmptyOrUnderutilized", "Balanced"):
            problems.append("consolidationPolicy")
        for budget in spec["disruption"]["budgets"]:
            if not re.fullmatch(r"((100|[0-9]{1,2})%|[0-9]+)", budget["nodes"]):
                problems.append(f"budget nodes {budget['nodes']}")
            problems += [
                f"reason {r}" for r in budget.get("reasons", []) if r not in ("Underutilized", "Empty", "Drifted")
            ]
        for field_ in ("expireAfter",):
            if not re.fullmatch(f"({duration}|Never)", template[field_]):
                problems.append(field_)
        if not re.fullmatch(duration, template["terminationGracePeriod"]):
            problems.append("terminationGracePeriod")
        for req in template["requirements"]:
            if req["key"].split("/")[0].endswith("karpenter.sh") and req["key"] != plan.CAPACITY_TYPE_LABEL:
                problems.append(f"restricted requirement {req['key']}")
            if req["operator"] not in ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte"):
                problems.append(f"operator {req['operator']}")
        for taint in template["taints"]:
            if taint["effect"] not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
                problems.append(f"taint effect {taint['effect']}")
    return problems


# --- 1. the setting ------------------------------------------------------------------------------

BASE = {
    "region": "us-west-2",
    "nodeProvisioner": "karpenter",
    "acceleratorNodeGroups": [
        {
            "name": "trn1-32xl-ng1",
            "instanceType": "trn1.32xlarge",
            "maxSize": 4,
            "amiReleaseVersion": compatible_ami_release(),
        }
    ],
}


def refusal(**group: Any) -> str:
    raw = json.loads(json.dumps(BASE))
    raw["acceleratorNodeGroups"][0].update(group)
    with pytest.raises(ConfigError) as caught:
        parse_stack_config(raw)
    return str(caught.value)


def test_the_default_is_cluster_autoscaler_and_karpenter_accepts_the_seed_groups():
    assert parse_stack_config({"region": "us-west-2"}).node_provisioner == "cluster-autoscaler"
    assert parse_stack_config(BASE).node_provisioner == "karpenter"
    with pytest.raises(ConfigError, match="nodeProvisioner"):
        parse_stack_config({**BASE, "nodeProvisioner": "auto-mode"})


@pytest.mark.parametrize(
    ("group", "message"),
    [
        (
            {"minSize": 1},
            "acceleratorNodeGroups[0].minSize = 1: with trainium-eks:nodeProvisioner: karpenter nodes "
            "exist only while pods need them; allowed: 0",
        ),
        ({"desiredSize": 2}, "acceleratorNodeGroups[0].desiredSize = 2"),
        (
            {"efaInterfaceType": "efa"},
            "efaInterfaceType = 'efa': an EC2NodeClass (Karpenter 1.14) knows only "
            "`interface` and `efa-only` interfaces; allowed: efa-only",
        ),
        ({"capacityReservation": {"tags": {"team": "ml"}}}, "azId: required with capacityReservation"),
        (
            {"labels": {"karpenter.sh/team": "ml"}},
            "labels.karpenter.sh/team: a NodePool may not set labels of Karpenter's own",
        ),
        (
            {"capacityReservation": {"id": "cr-0123456789abcdef0", "tags": {"a": "b"}}, "azId": "usw2-az4"},
            "give exactly one of id (cr-...) and tags",
        ),
        (
            {
                "spot": True,
                "capacityReservation": {"id": "cr-0123456789abcdef0", "type": "capacity-block"},
                "azId": "usw2-az4",
            },
            "acceleratorNodeGroups[0].spot = true: a Capacity Block group launches only into its block (capacity type "
            "`reserved`), never Spot; allowed: false",
        ),
    ],
)
def test_group_keys_without_a_karpenter_meaning_are_refused(group, message):
    assert message in refusal(**group)


def test_cluster_wide_and_autoscaler_only_keys_are_refused():
    two = json.loads(json.dumps(BASE))
    two["acceleratorNodeGroups"].append(
        {
            "name": "b",
            "instanceType": "trn1.32xlarge",
            "maxSize": 1,
            "autoRepair": False,
            "amiReleaseVersion": compatible_ami_release(),
        }
    )
    with pytest.raises(ConfigError, match=r"autoRepair: differs between groups; Karpenter's node repair is one switch"):
        parse_stack_config(two)
    with pytest.raises(
        ConfigError, match=r"features.neuronNodeRecovery = true: it marks nodes unhealthy in their Auto Scaling"
    ):
        parse_stack_config({**BASE, "features": {"neuronNodeRecovery": True}})
    with pytest.raises(ConfigError, match=r"karpenter.expireAfter = '30d': a duration such as 720h"):
        parse_stack_config({**BASE, "karpenter": {"expireAfter": "30d"}})
    with pytest.raises(ConfigError, match=r"tags.kubernetes.io/cluster/x: Karpenter sets this tag on its nodes itself"):
        parse_stack_config({**BASE, "tags": {"kubernetes.io/cluster/x": "owned"}})


def test_karpenter_only_keys_are_refused_with_cluster_autoscaler():
    cas = {**BASE, "nodeProvisioner": "cluster-autoscaler"}
    cas["acceleratorNodeGroups"] = [
        {
            **BASE["acceleratorNodeGroups"][0],
            "spot": True,
            "capacityReservation": {"tags": {"team": "ml"}},
            "azId": "usw2-az4",
        }
    ]
    message = str(pytest.raises(ConfigError, parse_stack_config, cas).value)
    assert "spot = true: a managed node group has one capacity type" in message
    assert "capacityReservation.tags = {'team': 'ml'}: a node group launches into one reservation id" in message


def test_with_cluster_autoscaler_nothing_of_karpenter_is_declared(dev):
    """But the gang hold's node annotation for Karpenter (infra/specs/gang_hold.py), which is inert under
    cluster-autoscaler and has a node held the same way after the stack switches provisioner."""
    hold = "karpenter.sh/do-not-disrupt"
    assert hold in GANG_HOLD_AUTOSCALER_KEYS
    assert not [
        r
        for r in dev.registrations
        if "karpenter" in r.type.lower() or "karpenter" in json.dumps(r.inputs).replace(hold, "")
    ]


# --- 2. the install ------------------------------------------------------------------------------


def test_charts_pinned_and_crds_from_their_own_chart(karp):
    """charts/karpenter/crds/ holds the CRDs (symlinks to pkg/apis/crds) that Helm installs once
    and never upgrades (the release's upgrading/upgrade-guide.md, "CRD Upgrades", recommends the
    karpenter-crd chart for that reason); charts/karpenter-crd ships the same CRDs as templates,
    which upgrades do update. pulumi-kubernetes' Release passes skipCrds to Helm's install
    (provider/pkg/provider/helm_release.go: client.SkipCRDs = newRelease.SkipCrds; its update is a
    plain action.NewUpgrade, which leaves crds/ alone; mirror 94977969d, 2026-07-01, the 4.34.2 tag
    not mirrored). So the CRD chart owns them and the controller's release skips its crds/."""
    releases = {r.name: r for r in karp.of_type(RELEASE)}
    crd, controller = releases["karpenter-crd"], releases["karpenter"]
    assert (crd.inputs["chart"], crd.inputs["version"]) == ("oci://public.ecr.aws/karpenter/karpenter-crd", "1.14.1")
    assert (controller.inputs["chart"], controller.inputs["version"]) == (
        "oci://public.ecr.aws/karpenter/karpenter",
        "1.14.1",
    )
    assert controller.inputs["skipCrds"] is True and not crd.inputs.get("skipCrds")
    assert crd.urn in controller.dependencies
    values = controller.inputs["values"]
    assert values["settings"]["clusterName"] == "trn-dev"
    assert values["nodeSelector"] == {"role": "core"}
    assert values["serviceAccount"]["name"] == "karpenter"
    assert values["controller"]["env"] == [{"name": "AWS_REGION", "value": "us-west-2"}]  # not from IMDS
    assert values["controller"]["resources"] == plan.CONTROLLER_RESOURCES
    queue = karp.of_type("aws:sqs/queue:Queue")[0]
    assert values["settings"]["interruptionQueue"] == queue.inputs["name"]
    # autoRepair (default on) -> Karpenter's node repair, which replaces a node whose
    # AcceleratedHardwareReady stays False 10 minutes, as EKS auto-repair does.
    assert values["settings"]["featureGates"] == {"nodeRepair": True}


def test_the_controller_counts_against_the_system_nodes():
    """Two controller replicas (chart v1.14.0 values.yaml replicas: 2) with CONTROLLER_RESOURCES
    on the core group: counted by the system-capacity check, which still passes on the default two
    m6i.large."""
    from infra.config.models import FeaturesConfig
    from infra.specs.system_capacity import system_fit

    without = system_fit("m6i.large", 2, FeaturesConfig(), ["default"])
    with_karpenter = system_fit("m6i.large", 2, FeaturesConfig(), ["default"], karpenter=True)
    assert with_karpenter.cpu_millis - without.cpu_millis == 2 * 250
    assert with_karpenter.memory_mib - without.memory_mib == 2 * 1024
    assert with_karpenter.fits
    # Two c6i.large with the Neuron scheduler extension hold cluster-autoscaler's pods (two replicas
    # of each controller), not Karpenter's as well: its memory does not fit.
    busy = {**BASE, "coreNodeGroup": {"instanceTypes": ["c6i.large"]}, "features": {"neuronSchedulerExtension": True}}
    parse_stack_config({**busy, "nodeProvisioner": "cluster-autoscaler"})
    with pytest.raises(ConfigError, match=r"coreNodeGroup.*cannot hold the system pods"):
        parse_stack_config(busy)


# Value keys of charts/karpenter/values.yaml at the v1.14.0 release (commit 692ccdd06) that the
# stack sets; Helm ignores a misspelled key silently, so each is checked against this copy.
CHART_VALUE_KEYS = {
    "settings.clusterName",
    "settings.interruptionQueue",
    "settings.featureGates.nodeRepair",
    "serviceAccount.name",
    "nodeSelector",
    "controller.env",
    "controller.resources",
    "replicas",
}


def _leaf_keys(values: dict[str, Any], prefix: str = "") -> set[str]:
    keys = set()
    for key, value in values.items():
        path = f"{prefix}.{key}" if prefix else key
        # nodeSelector's and env's contents are the chart's to pass through, not its keys.
        opaque = path in ("nodeSelector", "controller.resources")
        keys |= _leaf_keys(value, path) if isinstance(value, dict) and not opaque else {path}
    return keys


def test_chart_values_use_keys_the_pinned_chart_reads(karp):
    values = {r.name: r for r in karp.of_type(RELEASE)}["karpenter"].inputs["values"]
    assert _leaf_keys(values) == CHART_VALUE_KEYS


def test_every_nodepool_and_nodeclass_waits_for_crds_and_controller(karp):
    releases = {r.name: r.urn for r in karp.of_type(RELEASE)}
    for r in karp.of_type(NODEPOOL) + karp.of_type(NODECLASS):
        assert {releases["karpenter-crd"], releases["karpenter"]} <= set(r.dependencies), r.name


def test_burn_in_daemon_sets_land_only_once_the_karpenter_controller_has(karp, dev):
    # Their node affinity names karpenter.sh/nodepool under Karpenter: updated while the switch is
    # half-applied (the controller's release waits for the interruption queue), the managed groups'
    # new nodes would keep the burn-in startup taint. Under cluster-autoscaler nothing of Karpenter exists.
    controller = karp.named("karpenter", RELEASE).urn
    daemon_sets = [r for r in karp.of_type("kubernetes:apps/v1:DaemonSet") if r.name.startswith("burn-in-")]
    assert daemon_sets
    for ds in daemon_sets:
        assert controller in ds.dependencies, ds.name
        affinity = ds.inputs["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
        assert "karpenter.sh/nodepool" in json.dumps(affinity), ds.name
    queue = karp.named("karpenter-interruptions", "aws:sqs/queue:Queue").urn
    assert queue in karp.named("karpenter", RELEASE).dependencies
    for ds in dev.of_type("kubernetes:apps/v1:DaemonSet"):
        assert not any("karpenter" in d for d in ds.dependencies), ds.name


def test_interruption_queue_and_rules(karp):
    """cloudformation.yaml (v1.14): five rules -> the queue; retention 300 s, SSE; the queue
    accepts events and sqs, and refuses plain HTTP."""
    queue = karp.of_type("aws:sqs/queue:Queue")[0]
    assert queue.inputs["messageRetentionSeconds"] == 300 and queue.inputs["sqsManagedSseEnabled"] is True
    patterns = [
        json.loads(r.inputs["eventPattern"])
        for r in karp.of_type("aws:cloudwatch/eventRule:EventRule")
        if "Karpenter" in r.inputs.get("description", "")
    ]
    kinds = {p["detail-type"][0] for p in patterns}
    assert kinds == {
        "AWS Health Event",
        "EC2 Spot Instance Interruption Warning",
        "EC2 Instance Rebalance Recommendation",
        "EC2 Instance State-change Notification",
        "EC2 Capacity Reservation Instance Interruption Warning",
    }
    targets = [r for r in karp.of_type("aws:cloudwatch/eventTarget:EventTarget") if r.name.startswith("karpenter-")]
    assert len(targets) == 5
    policy = json.loads(plan.queue_policy("arn:q"))
    assert policy["Statement"][0]["Principal"]["Service"] == ["events.amazonaws.com", "sqs.amazonaws.com"]
    assert policy["Statement"][1]["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


def test_controller_policy_has_every_statement_of_the_reference_and_fits_inline():
    document = plan.controller_policy("aws", "us-west-2", "123456789012", "trn-dev", "arn:node", "arn:queue")
    sids = [s["Sid"] for s in json.loads(document)["Statement"]]
    assert sids == [
        "AllowScopedEC2InstanceAccessActions",
        "AllowScopedEC2LaunchTemplateAccessActions",
        "AllowScopedEC2InstanceActionsWithTags",
        "AllowScopedResourceCreationTagging",
        "AllowScopedResourceTagging",
        "AllowScopedDeletion",
        "AllowPassingInstanceRole",
        "AllowScopedInstanceProfileCreationActions",
        "AllowScopedInstanceProfileTagActions",
        "AllowScopedInstanceProfileActions",
        "AllowAPIServerEndpointDiscovery",
        "AllowInterruptionQueueActions",
        "AllowRegionalReadActions",
        "AllowSSMReadActions",
        "AllowPricingReadActions",
        "AllowUnscopedInstanceProfileListAction",
        "AllowInstanceProfileReadActions",
    ]
    # IAM: a role's inline policies together at most 10,240 characters, whitespace not counted.
    assert len(re.sub(r"\s", "", document)) < 10240
    statements = {s["Sid"]: s for s in json.loads(document)["Statement"]}
    assert statements["AllowPassingInstanceRole"]["Resource"] == "arn:node"
    assert statements["AllowScopedDeletion"]["Condition"]["StringEquals"] == {
        "aws:ResourceTag/kubernetes.io/cluster/trn-dev": "owned"
    }


def test_controller_identity_node_role_and_access_entry(karp):
    association = [
        r
        for r in karp.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation")
        if r.inputs["serviceAccount"] == "karpenter"
    ]
    assert [a.inputs["namespace"] for a in association] == ["kube-system"]
    entries = [r for r in karp.of_type("aws:eks/accessEntry:AccessEntry") if r.inputs.get("type") == "EC2_LINUX"]
    assert len(entries) == 1
    node_role = karp.named("karpenter-node", "aws:iam/role:Role")
    assert "ec2.amazonaws.com" in node_role.inputs["assumeRolePolicy"]
    # Only kube-system/karpenter of this cluster may assume the controller's role (infra/components/iam.py).
    trust = json.loads(karp.named("karpenter-controller", "aws:iam/role:Role").inputs["assumeRolePolicy"])
    conditions = trust["Statement"][0]["Condition"]["StringEquals"]
    assert (
        conditions["aws:RequestTag/kubernetes-namespace"],
        conditions["aws:RequestTag/kubernetes-service-account"],
    ) == ("kube-system", "karpenter")
    # The node role has what the managed groups' role has (node_security.node_policies): no CNI policy.
    attached = {
        r.inputs["policyArn"].rsplit("/", 1)[1]
        for r in karp.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
        if r.name.startswith("karpenter-node-")
    }
    assert attached == {"AmazonEKSWorkerNodePolicy", "AmazonEC2ContainerRegistryReadOnly"}


def test_discovery_tags_on_node_subnets_and_security_groups(karp, dev):
    subnets = [r for r in karp.of_type("aws:ec2/subnet:Subnet") if r.name.startswith("network-node-")]
    assert subnets and all(s.inputs["tags"]["karpenter.sh/discovery"] == "trn-dev" for s in subnets)
    others = [r for r in karp.of_type("aws:ec2/subnet:Subnet") if not r.name.startswith("network-node-")]
    assert not any("karpenter.sh/discovery" in r.inputs["tags"] for r in others)
    assert [t.inputs["key"] for t in karp.of_type("aws:ec2/tag:Tag")] == ["karpenter.sh/discovery"]
    efa_sg = karp.named("karpenter-efa", "aws:ec2/securityGroup:SecurityGroup")
    assert efa_sg.inputs["tags"]["karpenter.sh/discovery"] == "trn-dev"


def test_trainium_capacity_is_nodepools_and_the_cpu_groups_stay_managed(karp):
    groups = {r.name for r in karp.of_type("aws:eks/nodeGroup:NodeGroup")}
    assert groups == {"cluster-core", "cluster-job-support"}
    assert not karp.of_type("aws:autoscaling/tag:Tag") or all(
        "neuron" not in t.inputs["tag"]["key"] for t in karp.of_type("aws:autoscaling/tag:Tag")
    )
    assert (
        set(by_name(karp, NODEPOOL))
        == set(by_name(karp, NODECLASS))
        == {"trn1-32xl-ng1", "trn1n-32xl-ng", "trn1-reserved"}
    )


# --- 3. what the objects guarantee ----------------------------------------------------------------


def test_objects_validate_against_the_pinned_crds(karp):
    objects = [r.inputs for r in karp.of_type(NODEPOOL) + karp.of_type(NODECLASS)]
    assert len(objects) == 6
    for obj in objects:
        assert undefined_fields(obj) == [], obj["metadata"]["name"]
        assert crd_rule_problems(obj) == [], obj["metadata"]["name"]


def test_nodepools_carry_what_the_workloads_select_on(karp):
    """The workload stacks select on the exported labels and tolerate the exported taints; the
    NodePool puts exactly those on its nodes, in the exported zone, of the exported type."""
    pools = by_name(karp, NODEPOOL)
    for group in karp.outputs["acceleratorNodeGroups"]:
        template = pools[group["name"]]["spec"]["template"]
        assert template["metadata"]["labels"] == group["labels"]
        assert group["labels"]["provisioner"] == "karpenter"
        assert template["spec"]["taints"] == group["taints"]
        requirements = {r["key"]: r["values"] for r in template["spec"]["requirements"]}
        assert requirements[plan.INSTANCE_TYPE_LABEL] == [group["instanceType"]]
        assert requirements[plan.ZONE_ID_LABEL] == [group["azId"]]
        assert pools[group["name"]]["spec"]["limits"] == {"nodes": str(group["maxSize"])}


def test_efa_devices_match_the_node_groups_count(karp):
    """Karpenter counts vpc.amazonaws.com/efa as the efa-only entries (instancetype/types.go efas);
    pods ask for every EFA interface the exported group offers."""
    classes = by_name(karp, NODECLASS)
    for group in karp.outputs["acceleratorNodeGroups"]:
        nics = classes[group["name"]]["spec"]["networkInterfaces"]
        assert sum(n["interfaceType"] == "efa-only" for n in nics) == group["efaInterfaces"]
        assert {n["networkCardIndex"] for n in nics} == set(range(group["efaInterfaces"]))
        # EFA nodes give containers a locked-memory limit, as the managed node groups' user data does.
        assert "RLIMIT_MEMLOCK" in classes[group["name"]]["spec"]["userData"]
    for type_, facts in NEURON_INSTANCE_TYPES.items():
        if facts.efa_supported:
            layout = karpenter_interfaces(facts.network_cards)
            assert sum(i.interface_type == "efa-only" for i in layout) == facts.network_cards, type_


def test_nodeclass_matches_the_launch_templates(karp):
    """Same root volume, IMDS (the launch templates' shared hop-limit constant), RAID0 on the
    instance store, placement group only without a reservation."""
    classes = by_name(karp, NODECLASS)
    for name, obj in classes.items():
        spec = obj["spec"]
        assert spec["metadataOptions"]["httpTokens"] == "required"
        assert spec["metadataOptions"]["httpPutResponseHopLimit"] == IMDS_HOP_LIMIT
        root = spec["blockDeviceMappings"][0]
        assert root["rootVolume"] is True and root["ebs"]["encrypted"] is True and root["ebs"]["volumeType"] == "gp3"
        assert spec["instanceStorePolicy"] == "RAID0"  # trn1: 4 (32xl) NVMe disks
        # The pinned release's build (its Neuron driver the images run on), not the latest AMI's.
        assert spec["amiSelectorTerms"] == [{"alias": "al2023@v20260625"}]
        assert ("placementGroupSelector" in spec) == (name != "trn1-reserved")
    assert classes["trn1-reserved"]["spec"]["capacityReservationSelectorTerms"] == [{"tags": {"team": "ml"}}]


def test_ami_release_pin_maps_to_the_same_build():
    """al2023.go resolvePath: .../x86_64/neuron/amazon-eks-node-al2023-x86_64-neuron-<k8s>-<version>;
    EKS release 1.34.2-20251112 is that AMI's v20251112 build."""
    assert plan.ami_alias("1.34.2-20251112") == "al2023@v20251112"
    assert plan.ami_alias(None) == "al2023@latest"


@pytest.mark.parametrize(
    ("reserved", "block", "spot", "expected"),
    [
        (False, False, False, ["on-demand"]),
        (True, False, False, ["reserved", "on-demand"]),
        (True, False, True, ["reserved", "spot", "on-demand"]),
        (True, True, True, ["reserved"]),
    ],
)
def test_capacity_types(reserved, block, spot, expected):
    assert plan.capacity_types(reserved, block, spot) == expected


def test_capacity_block_and_reservation_ids_render_as_reserved_only(plan_with):
    groups = [
        {
            "name": "trn1-cb",
            "instanceType": "trn1.32xlarge",
            "maxSize": 2,
            "amiReleaseVersion": compatible_ami_release(),
            "capacityReservation": {"id": "cr-0c0ffee0c0ffee001", "type": "capacity-block"},
        }
    ]
    result = plan_with(nodeProvisioner="karpenter", acceleratorNodeGroups=groups)
    pool = by_name(result, NODEPOOL)["trn1-cb"]
    requirements = {r["key"]: r["values"] for r in pool["spec"]["template"]["spec"]["requirements"]}
    assert requirements[plan.CAPACITY_TYPE_LABEL] == ["reserved"]
    assert requirements[plan.ZONE_ID_LABEL] == ["usw2-az4"]  # the block's zone, looked up as for node groups
    node_class = by_name(result, NODECLASS)["trn1-cb"]["spec"]
    assert node_class["capacityReservationSelectorTerms"] == [{"id": "cr-0c0ffee0c0ffee001"}]
    assert "placementGroupSelector" not in node_class


def test_a_taint_added_to_the_group_spec_reaches_the_nodepool():
    """Labels and taints come from the same AcceleratorGroupSpec the node groups use."""
    config = parse_stack_config(BASE).accelerator_node_groups[0]
    spec = group_spec(config, NEURON_INSTANCE_TYPES["trn1.32xlarge"], Zone("us-west-2d", "usw2-az4"), None, "karpenter")
    extra = Taint("example.com/burn-in", "pending", "NoSchedule")
    from dataclasses import replace

    # startup_taints=[]: a group without the burn-in (tests/test_node_health.py has the group with it).
    spec = replace(spec, taints=[*spec.taints, extra], labels={**spec.labels, "extra": "yes"}, startup_taints=[])
    lifetimes = plan.Lifetimes("720h", "24h", "10m")
    template = plan.node_pool(spec, lifetimes)["spec"]["template"]
    assert template["spec"]["taints"][0] == {"key": NEURON_TAINT.key, "value": "true", "effect": "NoSchedule"}
    assert template["spec"]["taints"][1]["key"] == "example.com/burn-in"
    assert template["metadata"]["labels"]["extra"] == "yes"
    assert "startupTaints" not in template["spec"]
    # A startup taint (a burn-in's) becomes a NodePool startup taint, not a taint pods must tolerate.
    burn_in = Taint("startup-taint.cluster-autoscaler.kubernetes.io/burn-in", "pending", "NoSchedule")
    with_startup = replace(spec, startup_taints=[burn_in])
    template = plan.node_pool(with_startup, lifetimes)["spec"]["template"]
    assert template["spec"]["startupTaints"] == [{"key": burn_in.key, "value": "pending", "effect": "NoSchedule"}]
    assert burn_in.key not in {t["key"] for t in template["spec"]["taints"]}
    assert undefined_fields(plan.node_pool(with_startup, lifetimes)) == []


# --- 4. disruption ---------------------------------------------------------------------------------


def test_training_nodes_are_only_consolidated_when_empty(karp):
    """disruption.md (v1.14): WhenEmpty removes only nodes without pods that cost anything to
    disrupt; with terminationGracePeriod set, Drift may disrupt nodes whose pods carry
    karpenter.sh/do-not-disrupt, so Drifted gets a zero budget; expiry drains after expireAfter
    and deletes what is left after terminationGracePeriod."""
    for pool in by_name(karp, NODEPOOL).values():
        disruption = pool["spec"]["disruption"]
        assert disruption["consolidationPolicy"] == "WhenEmpty"
        assert {"nodes": "0", "reasons": ["Drifted"]} in disruption["budgets"]
        template = pool["spec"]["template"]["spec"]
        # The Spot group's grace is cut to the interruption notice (test_forced_ends_...).
        grace = "90s" if pool["metadata"]["name"] == TAGGED_GROUP["name"] else "24h"
        assert (template["expireAfter"], template["terminationGracePeriod"]) == ("720h", grace)


@pytest.mark.parametrize(
    ("configured", "block", "spot", "expected"),
    [
        ("24h", False, False, "24h"),
        ("24h", True, False, "8m"),
        ("24h", False, True, "90s"),
        ("24h", True, True, "8m"),
        ("5m", True, False, "5m"),  # a shorter configured grace stays
        ("1m", False, True, "1m"),
    ],
)
def test_forced_ends_with_short_notice_get_a_grace_period_inside_the_notice(configured, block, spot, expected):
    """Pods with karpenter.sh/do-not-disrupt are never evicted by the drain (kubernetes-sigs/karpenter
    v1.14.0 pkg/utils/pod/scheduling.go IsEvictable); the termination controller deletes them at the
    NodeClaim's deletion + terminationGracePeriod - the pod's terminationGracePeriodSeconds
    (node/termination/terminator/terminator.go DeleteExpiringPods; nodeclaim/lifecycle/controller.go
    sets the time). Karpenter deletes a Capacity Block's NodeClaims 40 min before its end, 10 before
    EC2 reclaims, polling each minute (karpenter-provider-aws v1.14.0 pkg/controllers/
    capacityreservation/expiration/controller.go), and a Spot node's on EC2's 2-minute warning
    (pkg/controllers/interruption/utils.go: CordonAndDrain). So the grace must end inside the notice,
    with a pod's default 30 s grace, for the pods to get SIGTERM before the instance goes."""
    grace = plan.termination_grace_period(configured, block, spot)
    assert grace == expected
    notice = 10 * 60 - 60 if block else 120 if spot else None
    if notice is not None:
        assert plan.duration_seconds(grace) <= notice - 30
        assert plan.duration_seconds(grace) - 30 > 0  # the pod's SIGTERM comes after the drain starts


def test_duration_seconds_reads_the_crd_pattern_only():
    assert plan.duration_seconds("1h30m") == 5400 and plan.duration_seconds("90s") == 90
    for bad in ("", "30d", "1.5h", "h", "10"):
        with pytest.raises(ValueError):
            plan.duration_seconds(bad)


def test_deleting_a_nodepool_waits_for_its_nodes_and_what_they_use_outlives_them(karp):
    """The NodePool has no finalizer of its own, but each NodeClaim
    carries an ownerReference with blockOwnerDeletion (kubernetes-sigs/karpenter v1.14.0 pkg/controllers/
    provisioning/scheduling/nodeclaimtemplate.go) and the termination finalizer, and pulumi-kubernetes
    deletes in the foreground (v4.32.0 provider/pkg/await/await.go), so the NodePool goes only after
    every node has drained (up to terminationGracePeriod) and terminated: its delete timeout covers
    that instead of the provider's 10 minutes. The EC2NodeClass finalizer waits for every NodeClaim of
    the class, then deletes the instance profile it made (karpenter-provider-aws v1.14.0 pkg/controllers/
    nodeclass/controller.go finalize): the class depends on the security groups its nodes use and
    their rules (EFA traffic of a pod still draining), the discovery tag, the node role's policies and access entry, and the controller, so Pulumi deletes
    none of them before it."""
    pools = {r.inputs["metadata"]["name"]: r for r in karp.of_type(NODEPOOL)}
    classes = {r.inputs["metadata"]["name"]: r for r in karp.of_type(NODECLASS)}
    by_urn = {r.urn: r for r in karp.registrations}
    for name, pool in pools.items():
        grace = pool.inputs["spec"]["template"]["spec"]["terminationGracePeriod"]
        timeout = pool.lifecycle["customTimeouts"]["delete"]
        assert int(timeout.removesuffix("s")) == plan.duration_seconds(grace) + 15 * 60, name
        assert classes[name].urn in pool.dependencies
        needed = {by_urn[u].type for u in classes[name].dependencies}
        assert {
            "aws:ec2/tag:Tag",
            "aws:eks/accessEntry:AccessEntry",
            "aws:iam/rolePolicyAttachment:RolePolicyAttachment",
            RELEASE,
            "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
            "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule",
        } <= needed, (name, needed)
        efa = [by_urn[u] for u in classes[name].dependencies if by_urn[u].type == "aws:ec2/securityGroup:SecurityGroup"]
        assert [g.name for g in efa] == ["karpenter-efa"], name
    assert pools["trn1-32xl-ng1"].lifecycle["customTimeouts"]["delete"] == f"{24 * 3600 + 900}s"


# --- 5. the policy pack's Trainium rules reach the NodePools ----------------------------------------

TRAINIUM_RULES = (
    "neuron-ami-type",
    "neuron-taint",
    "accelerator-single-zone",
    "efa-interfaces-match-cards",
    "placement-group-unless-reserved",
    "karpenter-training-not-consolidated",
    "neuron-compatibility",
)


def _karpenter_objects(karp: PlanResult, edit=None) -> list:  # noqa: ANN001
    import copy
    from dataclasses import replace as copy_with

    chosen = [r for r in karp.registrations if r.type in (NODEPOOL, NODECLASS)]
    if edit is None:
        return chosen
    return [copy_with(r, inputs=edit(copy.deepcopy(r.inputs))) for r in chosen]


def test_the_rendered_nodepools_pass_the_trainium_rules(karp):
    from tests.policy_helpers import violations

    for rule in TRAINIUM_RULES:
        assert not violations(rule, *_karpenter_objects(karp)), rule


@pytest.mark.parametrize(
    ("rule", "edit", "expected"),
    [
        (
            "neuron-taint",
            lambda o: o["spec"]["template"]["spec"].update(taints=[]) if o["kind"] == "NodePool" else None,
            "has no aws.amazon.com/neuron:NoSchedule taint",
        ),
        (
            "neuron-ami-type",
            lambda o: o["spec"].update(amiSelectorTerms=[{"id": "ami-0123"}]) if o["kind"] == "EC2NodeClass" else None,
            "not an `al2023@<version>` alias",
        ),
        (
            "efa-interfaces-match-cards",
            lambda o: (
                o["spec"].update(networkInterfaces=o["spec"]["networkInterfaces"][:3])
                if o["kind"] == "EC2NodeClass"
                else None
            ),
            "needs one on each of its",
        ),
        (
            "placement-group-unless-reserved",
            lambda o: o["spec"].pop("placementGroupSelector", None) if o["kind"] == "EC2NodeClass" else None,
            "has no placementGroupSelector",
        ),
        (
            "karpenter-training-not-consolidated",
            lambda o: (
                o["spec"]["disruption"].update(consolidationPolicy="WhenEmptyOrUnderutilized", budgets=[])
                if o["kind"] == "NodePool"
                else None
            ),
            "NodePool 'trn1",
        ),
        (
            "accelerator-single-zone",
            lambda o: o["spec"]["template"]["spec"]["requirements"].pop(1) if o["kind"] == "NodePool" else None,
            "is not pinned to one zone id",
        ),
        # Karpenter re-resolves al2023@latest to the newest AMI, whose driver 2.29+ the images' runtime fails on.
        (
            "neuron-compatibility",
            lambda o: (
                o["spec"].update(amiSelectorTerms=[{"alias": "al2023@latest"}]) if o["kind"] == "EC2NodeClass" else None
            ),
            "on Neuron driver 2.30 or newer (latest AL2023 Neuron AMI) cannot run ",
        ),  # the images and the burn-in's
        (
            "neuron-compatibility",
            lambda o: (
                o["spec"].update(amiSelectorTerms=[{"alias": "al2023@v20260714"}])
                if o["kind"] == "EC2NodeClass"
                else None
            ),
            "on Neuron driver 2.29 or newer, below 2.30 (AMI release al2023@v20260714, built 2026-07-14) cannot run",
        ),
    ],
)
def test_each_trainium_rule_catches_a_broken_nodepool(karp, rule, edit, expected):
    from tests.policy_helpers import violations

    def apply(obj):  # noqa: ANN001, ANN202
        edit(obj)
        return obj

    found = violations(rule, *_karpenter_objects(karp, apply))
    assert found and all(expected in m for m in found), found
    if rule == "karpenter-training-not-consolidated":
        assert any("consolidates nodes that still run pods" in m for m in found)
        assert any("without a zero Drifted budget" in m for m in found)


# --- 4. the workloads on a Karpenter cluster ------------------------------------------------------


@pytest.fixture(scope="module")
def karp_workloads(karp: PlanResult) -> PlanResult:
    """Every workload on, against the Karpenter variant's outputs (the same stack file as on
    cluster-autoscaler: the workloads run unchanged)."""
    from tests.conftest import ALL_ON, all_on_cluster, run_workloads

    return run_workloads(karp, all_on_cluster, **ALL_ON)


def _pod_templates(result: PlanResult) -> list[tuple[str, dict[str, Any]]]:
    from workloads.kube import pod_templates

    return [
        (r.name, t)
        for r in result.registrations
        if isinstance(r.inputs.get("spec"), dict)
        for t in pod_templates(r.inputs["spec"])
    ]


def _on_trainium(template: dict[str, Any]) -> bool:
    """A pod template placed on an accelerator group: it tolerates the Neuron taint."""
    return any(t.get("key") == NEURON_TAINT.key for t in template["spec"].get("tolerations") or [])


def test_training_pods_on_karpenter_nodes_carry_do_not_disrupt(karp_workloads, workloads_dev):
    """Only pods placed on a Karpenter group (its `provisioner: karpenter` label) are annotated:
    on cluster-autoscaler clusters the workload plans stay exactly as they were."""
    accelerator, other = [], []
    for name, template in _pod_templates(karp_workloads):
        # The image pre-pull lives only during a node's burn-in, before any job holds the node
        # (workloads/image_prepull.py): nothing for it to keep from disruption.
        prepull = name.startswith("daemonset-image-prepull-")
        (accelerator if _on_trainium(template) and not prepull else other).append((name, template))
    # Every job kind that runs on Trainium: Volcano Jobs (BERT), batch Jobs and MPIJobs (the cluster
    # check), MPIJobs (NxD Training), RayJobs (Ray Train).
    assert {n for n, _ in accelerator} == {
        "job-bert-precompile",
        "job-bert-train",
        "job-cluster-check-nodes",
        "mpijob-cluster-check-allreduce",
        "mpijob-llama2-compile",
        "mpijob-llama2-train",
        "rayjob-llama2-precompilation-job",
        "rayjob-llama2-pretraining-job",
    }
    for name, template in accelerator:
        assert template["metadata"]["annotations"][plan.DO_NOT_DISRUPT] == "true", name
        # The selector leaves out the provisioner label: the same pods place on either provisioner's
        # nodes, so a nodeProvisioner switch does not strand the pods Volcano restarts.
        assert "provisioner" not in template["spec"]["nodeSelector"], name
    for name, template in other:
        assert plan.DO_NOT_DISRUPT not in (template.get("metadata", {}).get("annotations") or {}), name
    assert all(plan.DO_NOT_DISRUPT not in json.dumps(t) for _, t in _pod_templates(workloads_dev))


def test_every_gang_pod_has_a_nodepool_that_fits_it(karp, karp_workloads):
    """A gang scales up from zero when every one of its pods is one Karpenter can place:
    - volcano-sh/volcano v1.15.1 pkg/scheduler/api/job_info.go TaskSchedulingReason marks a
      pending gang task PodScheduled=False reason Unschedulable (pkg/scheduler/cache/cache.go
      taskUnschedulable writes it), with `enqueue` off as tests/test_cluster_software.py checks;
    - kubernetes-sigs/karpenter v1.14.0 pkg/utils/pod/scheduling.go IsProvisionable takes exactly
      such pods, whichever scheduler owns them (provisioning/provisioner.go GetPendingPods has no
      schedulerName filter), and launches nodes from a NodePool whose requirements and labels
      satisfy the pod's nodeSelector and whose taints it tolerates, with the instance type's
      resources (aws.amazon.com/neuron from EC2's NeuronInfo, vpc.amazonaws.com/efa = the
      NodeClass's efa-only count: karpenter-provider-aws v1.14.0 instancetype/types.go), up to
      limits.nodes (scheduling/scheduler.go), which is the exported maxSize the workload stack
      already counts each gang against (workloads/schedule.py; test_nodepools_carry_what_...)."""
    pools, classes = by_name(karp, NODEPOOL), by_name(karp, NODECLASS)
    checked = prepulls = 0
    for name, template in _pod_templates(karp_workloads):
        spec = template["spec"]
        selector = spec.get("nodeSelector") or {}
        if not _on_trainium(template):
            continue
        fits = []
        for pool_name, pool in pools.items():
            t = pool["spec"]["template"]
            requirements = {r["key"]: r["values"] for r in t["spec"]["requirements"]}
            labels_ok = all(
                t["metadata"]["labels"].get(k) == v or v in requirements.get(k, []) for k, v in selector.items()
            )
            tolerated = all(
                any(
                    tol.get("key") == taint["key"] and tol.get("effect") == taint["effect"]
                    for tol in spec.get("tolerations", [])
                )
                for taint in t["spec"]["taints"]
            )
            instance = NEURON_INSTANCE_TYPES[requirements[plan.INSTANCE_TYPE_LABEL][0]]
            efa = sum(n["interfaceType"] == "efa-only" for n in classes[pool_name]["spec"].get("networkInterfaces", []))
            offered = {"aws.amazon.com/neuron": instance.neuron_devices, "vpc.amazonaws.com/efa": efa}
            requests = {
                k: int(v)
                for c in spec["containers"]
                for k, v in c["resources"].get("requests", {}).items()
                if k in offered
            }
            if labels_ok and tolerated and all(requests[k] <= offered[k] for k in requests):
                fits.append(pool_name)
        if name.startswith("daemonset-image-prepull-"):
            # The pre-pull selects the burn-in's pending label, which no NodePool template carries: its pods
            # never make Karpenter launch a node, nor count in a new node's DaemonSet overhead.
            assert fits == [], (name, fits)
            prepulls += 1
            continue
        assert len(fits) == 1, (name, fits)
        checked += 1
    assert checked >= 5 and prepulls >= 1


# --- 5. cost, diagram, the offline plan ---------------------------------------------------------------


def test_cost_prices_nodepools_like_the_node_groups(karp, dev):
    """Idle and configured: no Karpenter node without a pending pod; full scale: limits.nodes at the
    same on-demand rate (and the same root volumes) as the managed group of the same config."""
    from offline.report import cost

    ours = {line["item"]: line for line in cost.estimate_cluster(karp.as_json()["resources"], "us-west-2")["lines"]}
    theirs = {line["item"]: line for line in cost.estimate_cluster(dev.as_json()["resources"], "us-west-2")["lines"]}
    for group in ("trn1-32xl-ng1", "trn1n-32xl-ng"):
        pool, node_group = ours[f"NodePool {group}"], theirs[f"node group {group}"]
        assert pool["hourly"] == node_group["hourly"] and pool["hourly"]["fullScale"] > 0
        assert ours[f"NodePool {group} root volumes"]["hourly"] == theirs[f"node group {group} root volumes"]["hourly"]
    reserved = ours["NodePool trn1-reserved"]
    assert reserved["hourly"]["idle"] is None and reserved["hourly"]["fullScale"] > 0  # reservations bill while idle


def test_the_architecture_picture_shows_the_nodepools(karp):
    from offline.report import diagram

    text = diagram.cluster_diagram(karp.as_json())
    zone = text[text.index("subgraph z_usw2_az4") :]
    zone = zone[: zone.index("\n      end")]
    for name in ("trn1_32xl_ng1", "trn1n_32xl_ng", "trn1_reserved"):
        assert f"np_{name}[" in zone
    assert (
        "Karpenter NodePool trn1-reserved<br/>trn1.32xlarge<br/>0..2 nodes, on demand<br/>reserved > spot > on-demand"
        in text
    )
    assert "subgraph pg_trn1n_32xl_ng" in zone and "subgraph pg_trn1_reserved" not in text
    assert "karpenter 1.14.1" in text and "karpenter-crd 1.14.1" in text
    assert "node group trn1" not in text


def test_the_offline_plan_writes_the_karpenter_objects(karp, tmp_path):
    """What `make plan` does with a stack, done to the variant: the whole policy pack at dev's
    levels passes with no mandatory violation, and the plan writes the NodePools and
    EC2NodeClasses as manifests beside their priced resources.json."""
    import yaml

    from offline.plan.policy_run import load_config
    from offline.report import report
    from offline.report.plan_output import check_policies, write_plan

    policy = check_policies(karp, load_config(fixture_policy_config("dev")), "us-west-2")
    assert policy.mandatory == [], [v.message for v in policy.mandatory]
    out = write_plan(karp, tmp_path, report.cluster_cost(karp), policy.as_json())
    pool = yaml.safe_load((out / "manifests" / "nodepool-trn1n-32xl-ng.yaml").read_text())
    assert pool["spec"]["template"]["spec"]["nodeClassRef"]["name"] == "trn1n-32xl-ng"
    node_class = yaml.safe_load((out / "manifests" / "ec2nodeclass-trn1n-32xl-ng.yaml").read_text())
    assert len(node_class["spec"]["networkInterfaces"]) == 17  # trn1n: 16 cards, card 0 twice
    lines = json.loads((out / "resources.json").read_text())["cost"]["lines"]
    assert {"NodePool trn1-32xl-ng1", "NodePool trn1n-32xl-ng", "NodePool trn1-reserved"} <= {
        line["item"] for line in lines
    }


def test_the_hourly_ceiling_counts_nodepools_at_their_node_limit(karp):
    """policy/guardrails/cost.py: limits.nodes x the on-demand price, like maxSize for a node group
    (trn1 4 + trn1n 2 + trn1-reserved 2 at us-west-2 prices: 6 x 21.50 + 2 x 24.78)."""
    from tests.policy_helpers import violations

    # The subnets stand for the stack's AWS resources, whose default provider names the region.
    stack = [*_karpenter_objects(karp), *(r for r in karp.registrations if r.type == "aws:ec2/subnet:Subnet")]
    [message] = violations("trainium-hourly-ceiling", *stack, config={"maxHourlyUsd": 100})
    assert "trn1-32xl-ng1-nodepool: 4 x trn1.32xlarge = $86.00/h" in message
    assert (
        "trn1-reserved-nodepool: 2 x trn1.32xlarge" in message
        and "trn1n-32xl-ng-nodepool: 2 x trn1n.32xlarge" in message
    )
    assert not violations("trainium-hourly-ceiling", *stack, config={"maxHourlyUsd": 500})
    assert "no list price known" in violations("trainium-hourly-ceiling", *_karpenter_objects(karp))[0]


def test_pods_select_a_group_without_the_provisioner_label():
    """Training pods that selected `provisioner: <nodeProvisioner>` would stay Pending after a switch
    (the new provisioner's nodes carry the other value) until every workload stack was re-run. The
    selector leaves out only the stack's own value; a group's label of the same key with a value of
    its own still tells groups apart."""

    def group(provisioner: str) -> Any:
        labels = {"instance-type": "trn1-32xl", "provisioner": provisioner}
        return trainium_group(name="g", labels=labels, taints=[], max_size=2)

    assert (
        group("cluster-autoscaler").node_selector
        == group("karpenter").node_selector
        == {"node.kubernetes.io/instance-type": "trn1.32xlarge", "instance-type": "trn1-32xl"}
    )
    assert group("manual").node_selector["provisioner"] == "manual"


def test_a_switch_under_running_trainium_nodes_is_refused_with_the_steps():
    from infra.config.rules import provisioner_switch_problem

    to_karpenter = provisioner_switch_problem("karpenter", {"trn1-32xl-ng1": 2, "trn1n-32xl-ng": 0}, 0)
    assert to_karpenter.startswith(
        "trainium-eks:nodeProvisioner = 'karpenter': the running cluster's node groups "
        "trn1-32xl-ng1 (2) still have Trainium nodes"
    )
    assert (
        "set their minSize and desiredSize to 0" in to_karpenter and "allowed now: cluster-autoscaler" in to_karpenter
    )
    back = provisioner_switch_problem("cluster-autoscaler", {}, 3)
    assert back.startswith(
        "trainium-eks:nodeProvisioner = 'cluster-autoscaler': the running cluster has 3 Trainium "
        "node(s) Karpenter launched"
    )
    assert "`kubectl get nodeclaims` lists none" in back and "allowed now: karpenter" in back
    # Groups at zero, no Karpenter nodes, or no switch at all: nothing to refuse.
    assert provisioner_switch_problem("karpenter", {"trn1-32xl-ng1": 0}, 0) is None
    assert provisioner_switch_problem("cluster-autoscaler", {}, 0) is None
    assert provisioner_switch_problem("cluster-autoscaler", {"trn1-32xl-ng1": 2}, 0) is None
    assert provisioner_switch_problem("karpenter", {}, 5) is None


def test_pulumi_up_refuses_the_switch_against_the_running_cluster_before_declaring_anything():
    """The look-ups behind the refusal (eks:DescribeNodegroup's desired size; ec2:DescribeInstances
    for Karpenter's tags) run only against a cluster that exists, and only `pulumi up` refuses."""
    from infra.lookups import DeployContext
    from offline.plan.mocks import ExistingCluster

    config = stack_config(FIXTURE_ROOT, "dev")
    config["trainium-eks:nodeProvisioner"] = "karpenter"
    running = ExistingCluster(
        {}, node_groups={"trn1-32xl-ng1": "1.34", "core": "1.34"}, node_group_sizes={"trn1-32xl-ng1": 2, "core": 2}
    )
    up = DeployContext(deploying=lambda: True, egress_ipv4=lambda: "52.94.133.131")
    with pytest.raises(ConfigError) as refused:
        run_program(FIXTURE_ROOT, "dev", config, existing_cluster=running, deploy=up)
    message = str(refused.value)
    assert "Invalid stack configuration for the running cluster trn-dev" in message
    assert "node groups trn1-32xl-ng1 (2) still have Trainium nodes" in message and "core (" not in message
    back = stack_config(FIXTURE_ROOT, "dev")
    with pytest.raises(ConfigError, match=r"the running cluster has 1 Trainium node\(s\) Karpenter launched"):
        run_program(FIXTURE_ROOT, "dev", back, existing_cluster=ExistingCluster({}, karpenter_instances=1), deploy=up)
