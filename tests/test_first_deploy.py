"""The cluster stack as its first real `pulumi up`, a later `up` and `pulumi destroy` meet it.

Each test states the upstream behaviour it guards and where that behaviour lives.
"""

from __future__ import annotations

import json

import pytest

from infra.components.cluster import admin_policy_arn, principal_key
from infra.components.devices import NPD_NAMESPACE, irsa_trust_policy, neuron_values, node_recovery_policy
from infra.components.kube import kubeconfig_for
from infra.components.observability import metric_search
from infra.config.errors import ConfigError
from infra.facts.addons import addon_pin_problem, resolve_builds
from infra.facts.neuron import compatible_ami_release
from offline.plan import fixtures
from offline.plan.mocks import ExistingCluster
from offline.plan.runner import REPO_ROOT, run_program, stack_config
from tests.fixture_project import FIXTURE_ROOT
from tests.project_copy import dev_groups_at, kept_past_support

ADMIN_A = "arn:aws:iam::123456789012:role/PlatformAdmin"  # the offline deployer (fixtures)
ADMIN_B = "arn:aws:iam::123456789012:role/MlOps"
GROUP = {
    "name": "trn1-32xl-ng1",
    "instanceType": "trn1.32xlarge",
    "minSize": 0,
    "desiredSize": 0,
    "maxSize": 4,
    "amiReleaseVersion": compatible_ami_release(),
}


def dev_with(existing_cluster=None, deploy=None, **overrides):
    config = stack_config(FIXTURE_ROOT, "dev")
    for key, value in overrides.items():
        full = key if ":" in key else f"trainium-eks:{key}"
        config[full] = json.dumps(value) if isinstance(value, (dict, list)) else str(value)
    return run_program(FIXTURE_ROOT, "dev", config, existing_cluster=existing_cluster, deploy=deploy)


# --- 1. Neuron chart: the node problem detector's namespace -----------------------------------


def test_neuron_release_waits_for_the_namespace_its_chart_does_not_create(dev):
    # aws-neuron/neuron-helm-charts, charts/neuron-helm-chart 1.9.0: values.yaml sets
    # npd.namespaceOverride: neuron-healthcheck-system and no template creates that Namespace;
    # the release is atomic, so the missing namespace rolled back the device plugin with it.
    namespace = dev.named(NPD_NAMESPACE, "kubernetes:core/v1:Namespace")
    release = dev.named("neuron", "kubernetes:helm.sh/v3:Release")
    assert namespace.urn in release.dependencies
    assert release.inputs["values"]["npd"]["namespaceOverride"] == NPD_NAMESPACE


def test_node_recovery_is_monitor_only_by_default(dev):
    npd = dev.named("neuron", "kubernetes:helm.sh/v3:Release").inputs["values"]["npd"]
    assert npd["nodeRecovery"]["enabled"] is False
    assert "serviceAccount" not in npd
    assert not [r for r in dev.of_type("aws:iam/role:Role") if "node-recovery" in r.name]


def test_node_recovery_gets_an_irsa_role_scoped_to_this_cluster(plan_with):
    # Chart 1.9.0: npd.nodeRecovery.enabled only flips ENABLE_RECOVERY on the always-present
    # recovery sidecar; it authenticates through IRSA on the service account
    # node-problem-detector (aws-neuron-sdk deploy/infrastructure/problem-detector-irsa.rst).
    plan = plan_with(features={"neuronNodeRecovery": True})
    npd = plan.named("neuron", "kubernetes:helm.sh/v3:Release").inputs["values"]["npd"]
    assert npd["nodeRecovery"]["enabled"] is True
    role = plan.named("devices-neuron-node-recovery", "aws:iam/role:Role")
    assert npd["serviceAccount"] == {
        "create": True,
        "name": "node-problem-detector",
        "annotations": {
            "eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/devices-neuron-node-recovery-placeholder"
        },
    }
    trust = json.loads(role.inputs["assumeRolePolicy"])["Statement"][0]
    issuer = "oidc.eks.us-west-2.amazonaws.com/id/PLACEHOLDER"
    assert trust["Condition"]["StringEquals"] == {
        f"{issuer}:sub": "system:serviceaccount:neuron-healthcheck-system:node-problem-detector",
        f"{issuer}:aud": "sts.amazonaws.com",
    }
    policy = json.loads(plan.named("devices-neuron-node-recovery-policy").inputs["policy"])
    (mark,) = [s for s in policy["Statement"] if s["Sid"] == "MarkOwnInstancesUnhealthy"]
    assert mark["Action"] == ["autoscaling:SetInstanceHealth"]
    assert mark["Condition"] == {"StringEquals": {"aws:ResourceTag/k8s.io/cluster-autoscaler/trn-dev": "owned"}}


def test_node_recovery_helpers_are_pure():
    values = neuron_values(False, "arn:aws:iam::1:role/r")
    assert values["npd"]["nodeRecovery"]["enabled"] is True
    policy = json.loads(node_recovery_policy("aws-cn", "cn-north-1", "123456789012", "c"))
    assert policy["Statement"][0]["Resource"].startswith("arn:aws-cn:autoscaling:cn-north-1:123456789012:")
    trust = json.loads(irsa_trust_policy("arn:aws:iam::1:oidc-provider/x", "https://oidc.example/id/1", "ns", "sa"))
    assert "oidc.example/id/1:sub" in trust["Statement"][0]["Condition"]["StringEquals"]


def test_node_recovery_needs_the_neuron_chart():
    with pytest.raises(ConfigError) as err:
        run_program(
            REPO_ROOT,
            "dev",
            {
                **stack_config(FIXTURE_ROOT, "dev"),
                "trainium-eks:features": json.dumps({"neuronNodeRecovery": True, "neuronDevicePlugin": False}),
            },
        )
    assert "features.neuronNodeRecovery = true: node recovery is part of the Neuron chart" in str(err.value)


# --- 3. Capacity Blocks and reservations -------------------------------------------------------


def test_capacity_block_names_the_instance_type_in_the_launch_template_only(plan_with):
    # EKS user guide, "Create a managed node group with Capacity Blocks for ML": the launch
    # template carries the instance type and the node group none; EKS refuses the group
    # otherwise. terraform-aws-eks modules/eks-managed-node-group does the same.
    reservation = {"id": "cr-0c0ffee0c0ffee001", "type": "capacity-block"}
    plan = plan_with(acceleratorNodeGroups=[{**GROUP, "capacityReservation": reservation}])
    template, group = plan.named("trn1-32xl-ng1-lt").inputs, plan.named("trn1-32xl-ng1").inputs
    assert template["instanceType"] == "trn1.32xlarge"
    assert "instanceTypes" not in group
    assert group["capacityType"] == "CAPACITY_BLOCK"
    # The zone comes from the reservation (usw2-az4 in the offline account).
    assert group["subnetIds"] == ["subnet-placeholder-network-node-usw2-az4"]


def test_on_demand_groups_keep_the_instance_type_on_the_node_group(dev):
    assert "instanceType" not in dev.named("trn1-32xl-ng1-lt").inputs
    assert dev.named("trn1-32xl-ng1").inputs["instanceTypes"] == ["trn1.32xlarge"]


def test_capacity_block_zone_or_type_mismatch_is_refused(plan_with):
    reservation = {"id": "cr-0c0ffee0c0ffee001", "type": "capacity-block"}
    with pytest.raises(ConfigError) as err:
        plan_with(
            # trn2.48xlarge is offered as Capacity Blocks, so the configuration rules pass and the look-up
            # compares the group with the block it names.
            acceleratorNodeGroups=[
                {**GROUP, "instanceType": "trn2.48xlarge", "azId": "usw2-az3", "capacityReservation": reservation}
            ]
        )
    message = str(err.value)
    assert (
        "acceleratorNodeGroups[0].azId = 'usw2-az3': capacity reservation cr-0c0ffee0c0ffee001 is in usw2-az4"
        in message
    )
    assert (
        "acceleratorNodeGroups[0].instanceType = 'trn2.48xlarge': capacity reservation cr-0c0ffee0c0ffee001 holds trn1.32xlarge"
        in message
    )


def test_unknown_capacity_block_is_refused(plan_with):
    with pytest.raises(ConfigError) as err:
        plan_with(
            acceleratorNodeGroups=[
                {**GROUP, "capacityReservation": {"id": "cr-0123456789abcdef0", "type": "capacity-block"}}
            ]
        )
    assert "capacityReservation.id = 'cr-0123456789abcdef0': no Capacity Block with this id" in str(err.value)


def test_on_demand_reservation_needs_its_zone(plan_with):
    # Reservations are zonal; without azId the group would land in whatever zone offers the type.
    with pytest.raises(ConfigError) as err:
        plan_with(acceleratorNodeGroups=[{**GROUP, "capacityReservation": {"id": "cr-0123456789abcdef0"}}])
    assert "acceleratorNodeGroups[0].azId: required with capacityReservation 'cr-0123456789abcdef0'" in str(err.value)


# --- 4 and 12. Where `pulumi up` can reach the API from --------------------------------------


@pytest.mark.parametrize(
    ("access", "message"),
    [
        (
            {"public": False, "private": True},
            "endpointAccess.public = false: a private-only API endpoint is unreachable from a laptop or a hosted CI runner",
        ),
        (
            {},
            "endpointAccess.publicCidrs = not set (the whole internet): prod refuses an API endpoint open to 0.0.0.0/0",
        ),
        ({"publicCidrs": ["0.0.0.0/1", "128.0.0.0/1"]}, "prod refuses an API endpoint open to 0.0.0.0/0"),
        ({"publicCidrs": ["203.0.113.7"]}, "endpointAccess.publicCidrs[0] = '203.0.113.7': give a prefix length"),
        (
            {"publicCidrs": ["203.0.113.0/24"], "private": False},
            "endpointAccess.private = false: with publicCidrs restricted, nodes reach the API only through the public endpoint",
        ),
        ({"publicCidrs": []}, "endpointAccess.publicCidrs = []: list at least one CIDR block"),
    ],
)
def test_prod_endpoint_rules(access, message):
    # pulumi/pulumi-eks nodejs/eks/cluster/cluster.ts: with the public endpoint off it skips
    # its health check, so an unreachable API first shows at the first Helm release.
    config = stack_config(FIXTURE_ROOT, "prod")
    config["trainium-eks:endpointAccess"] = json.dumps(access)
    with pytest.raises(ConfigError) as err:
        run_program(FIXTURE_ROOT, "prod", config)
    assert message in str(err.value)


def test_pulumi_up_refuses_the_shipped_prod_allow_list_before_declaring_anything():
    """The shipped Pulumi.prod.yaml, run as `pulumi up` runs it (dry_run false), with a stand-in
    for the deployer's address: refused by key, value and what is allowed, before a single
    resource is registered (the look-up runs with none), with no traceback (ConfigError is a
    pulumi.RunError). The offline plan of the same file is a preview and goes through (the
    `prod` fixture, test_config.py)."""
    import pulumi

    from infra.lookups import DeployContext

    registered_at_lookup = []

    def egress() -> str:
        registered_at_lookup.append(len(pulumi.runtime.settings.get_monitor().registrations))
        return "52.94.133.131"

    with pytest.raises(ConfigError) as err:
        run_program(FIXTURE_ROOT, "prod", deploy=DeployContext(deploying=lambda: True, egress_ipv4=egress))
    message = str(err.value)
    assert message.startswith("Invalid stack configuration for `pulumi up`:")
    assert "endpointAccess.publicCidrs[0] = '198.51.100.0/24': inside an RFC 5737 documentation range" in message
    assert "this machine's public IPv4 address 52.94.133.131 is in none of them" in message
    assert registered_at_lookup == [0]


def test_pulumi_up_is_the_run_that_is_not_a_preview():
    """The dry-run flag as the engine sets it: `pulumi preview` and the preview half of `pulumi up`
    run the program with dry_run true (warn), the update with dry_run false (refuse)."""
    import pulumi

    from infra.lookups import PULUMI_CLI
    from offline.plan.mocks import CloudMocks
    from offline.plan.runner import OFFLINE_PREVIEW

    for preview in (True, False):
        pulumi.runtime.set_mocks(CloudMocks("us-west-2"), preview=preview)
        assert PULUMI_CLI.deploying() is (not preview)
    assert OFFLINE_PREVIEW.deploying() is False


def test_the_deployer_address_look_up_never_needs_the_network_here(monkeypatch):
    import urllib.error
    import urllib.request

    from infra import lookups
    from infra.config.errors import EgressLookupFailed

    asked = []

    class Answer:
        def __init__(self, body: bytes) -> None:
            self.body = body

        def __enter__(self):
            return self

        def __exit__(self, *_):
            return False

        def read(self, limit: int) -> bytes:
            return self.body[:limit]

    def answering(body):
        def urlopen(url, timeout):
            asked.append((url, timeout))
            if isinstance(body, Exception):
                raise body
            return Answer(body)

        return urlopen

    monkeypatch.delenv(lookups.EGRESS_IP_ENV, raising=False)
    monkeypatch.setattr(urllib.request, "urlopen", answering(b"52.94.133.131\n"))
    assert lookups.deployer_egress_ipv4() == "52.94.133.131"
    assert asked == [("https://checkip.amazonaws.com", 5.0)]
    for failure, shown in (
        (TimeoutError("timed out"), "gave no answer within 5 s: timed out"),
        (urllib.error.URLError("Name or service not known"), "Name or service not known"),
    ):
        monkeypatch.setattr(urllib.request, "urlopen", answering(failure))
        with pytest.raises(EgressLookupFailed, match=shown):
            lookups.deployer_egress_ipv4()
    monkeypatch.setattr(urllib.request, "urlopen", answering(b"<html>captive portal</html>"))
    with pytest.raises(EgressLookupFailed, match="not an IPv4 address"):
        lookups.deployer_egress_ipv4()
    # Given by hand: the site is not asked, and the value must still be an address.
    monkeypatch.setattr(urllib.request, "urlopen", answering(AssertionError("asked the network")))
    monkeypatch.setenv(lookups.EGRESS_IP_ENV, "52.94.133.7")
    assert lookups.deployer_egress_ipv4() == "52.94.133.7"
    monkeypatch.setenv(lookups.EGRESS_IP_ENV, "my laptop")
    with pytest.raises(EgressLookupFailed, match="TRAINIUM_EKS_EGRESS_IP gave 'my laptop', not an IPv4 address"):
        lookups.deployer_egress_ipv4()


def test_private_only_endpoint_when_deployed_from_the_vpc():
    config = stack_config(FIXTURE_ROOT, "prod")
    config["trainium-eks:endpointAccess"] = json.dumps({"public": False, "private": True, "deployedFromVpc": True})
    cluster = run_program(FIXTURE_ROOT, "prod", config).named("cluster-eks").inputs
    assert cluster["endpointPublicAccess"] is False and "publicAccessCidrs" not in cluster


# --- 5. Add-on builds ---------------------------------------------------------------------------


def test_addon_builds_resolve_for_the_configured_kubernetes_version(plan_with):
    # EKS CreateAddon refuses a build not offered for the cluster's version: every build is
    # the default AWS reports for that version (aws.eks.get_addon_version, most_recent=False).
    plan = plan_with(
        kubernetesVersion="1.33",
        acceleratorNodeGroups=dev_groups_at("1.33"),
        endOfSupportAcknowledged=kept_past_support("1.33"),
    )
    builds = {r.inputs["addonName"]: r.inputs["addonVersion"] for r in plan.of_type("aws:eks/addon:Addon")}
    expected = fixtures.ADDON_DEFAULT_BUILDS["1.33"]
    # Every node group follows the control plane's version too (see test_node_groups_follow_...).
    assert {r.inputs["version"] for r in plan.of_type("aws:eks/nodeGroup:NodeGroup")} == {"1.33"}
    assert builds == {a: expected[a] for a in builds}
    assert set(builds) == {
        "vpc-cni",
        "coredns",
        "eks-pod-identity-agent",
        "amazon-cloudwatch-observability",
        "eks-node-monitoring-agent",
    }
    cluster = plan.named("cluster-eks").inputs
    assert cluster["kubeProxyAddonOptions"]["version"] == expected["kube-proxy"]
    # Every add-on the fixture offers but the EBS CSI driver, which runs only with the in-cluster Prometheus.
    assert plan.outputs["addonBuilds"] == {a: b for a, b in expected.items() if a != "aws-ebs-csi-driver"}


def test_node_groups_follow_the_control_plane_version_after_it(dev):
    """pulumi-aws 7.51.1, pulumi_aws/eks/node_group.py, `version`: "Kubernetes version. Defaults to
    EKS Cluster Kubernetes version. The provider will only perform drift detection if a
    configuration value is provided." Without it a raised kubernetesVersion upgrades the control
    plane and leaves every node group on the old AMI, unnoticed. Each group's `version` is the
    cluster's, as a property that depends on the eks.Cluster component: a remote component, which
    the SDK adds to the dependencies as is because "the construction of a remote component always
    waits on the construction of its children" (pulumi SDK 3.272.0, pulumi/runtime/rpc.py
    _add_dependency), so no group asks for a version the control plane does not run yet."""
    eks_cluster = dev.named("cluster-eks", "eks:index:Cluster")
    groups = dev.of_type("aws:eks/nodeGroup:NodeGroup")
    assert {g.name for g in groups} == {"cluster-core", "cluster-job-support", "trn1-32xl-ng1", "trn1n-32xl-ng"}
    for group in groups:
        assert group.inputs["version"] == eks_cluster.inputs["version"] == "1.35"
        assert eks_cluster.urn in group.property_dependencies["version"], group.name


def test_a_pinned_build_wins(plan_with):
    plan = plan_with(addonVersions={"coredns": "v1.11.4-eksbuild.2"})
    assert plan.named("cluster-coredns").inputs["addonVersion"] == "v1.11.4-eksbuild.2"
    assert (
        plan.named("cluster-eks-pod-identity-agent").inputs["addonVersion"]
        == fixtures.ADDON_DEFAULT_BUILDS["1.35"]["eks-pod-identity-agent"]
    )


def test_pin_format_and_floor():
    assert addon_pin_problem("coredns", "v1.11.4") is not None
    assert addon_pin_problem("coredns", "1.11.4-eksbuild.2") is not None
    assert addon_pin_problem("coredns", "v1.11.4-eksbuild.2") is None
    assert "at least v1.18.4" in (addon_pin_problem("vpc-cni", "v1.18.3-eksbuild.1") or "")
    assert resolve_builds(["a", "b"], {"a": "pin"}, lambda addon: f"default-{addon}") == {"a": "pin", "b": "default-b"}


def test_switching_observability_off_drops_its_addon(plan_with):
    plan = plan_with(features={"observability": False, "nodeMonitoringAgent": False})
    names = {r.inputs["addonName"] for r in plan.of_type("aws:eks/addon:Addon")}
    assert names == {"vpc-cni", "coredns", "eks-pod-identity-agent"}
    assert "amazon-cloudwatch-observability" not in plan.outputs["addonBuilds"]


# --- 6. aws:profile ---------------------------------------------------------------------------


def test_the_programs_provider_uses_the_stack_profile_and_the_export_does_not(monkeypatch):
    # pulumi-eks generateKubeconfig passes a profile as `--profile` (cluster.ts); without it
    # `aws eks get-token` uses the default chain, not the profile the AWS provider uses.
    import infra.components.cluster

    made: list[str] = []

    def recording(kubeconfig, profile):
        made.append(result := kubeconfig_for(kubeconfig, profile))
        return result

    monkeypatch.setattr(infra.components.cluster, "kubeconfig_for", recording)
    plan = dev_with(**{"aws:profile": "ml-platform"})
    assert plan.named("cluster-eks").inputs["providerCredentialOpts"] == {"profileName": "ml-platform"}
    scoped = [json.loads(k)["users"][0]["user"]["exec"]["args"] for k in made]
    assert sorted(args[-2:] == ["--profile", "ml-platform"] for args in scoped) == [False, True]
    # The provider (its kubeconfig a secret) gets the deployer's; the stack output the other.
    assert "--profile" not in json.dumps(plan.outputs["kubeconfig"])


def test_kubeconfig_for_sets_and_strips_the_profile():
    source = {
        "users": [
            {
                "name": "aws",
                "user": {
                    "exec": {
                        "command": "aws",
                        "args": ["eks", "get-token", "--profile", "old"],
                        "env": [{"name": "AWS_PROFILE", "value": "old"}],
                    }
                },
            }
        ]
    }
    scoped = json.loads(kubeconfig_for(source, "ml-platform"))["users"][0]["user"]["exec"]
    assert scoped["args"] == ["eks", "get-token", "--profile", "ml-platform"] and "env" not in scoped
    plain = json.loads(kubeconfig_for(json.dumps(source), None))["users"][0]["user"]["exec"]
    assert plain["args"] == ["eks", "get-token"]


def test_bad_profile_is_refused():
    with pytest.raises(ConfigError) as err:
        dev_with(**{"aws:profile": "my profile"})
    assert "aws:profile = 'my profile': not an AWS CLI profile name" in str(err.value)


# --- 7. Admin access entries --------------------------------------------------------------------


def entries(plan) -> dict[str, str]:
    return {r.name: r.inputs["principalArn"] for r in plan.of_type("aws:eks/accessEntry:AccessEntry")}


def test_first_up_leaves_the_creator_to_eks_bootstrap():
    # pulumi/pulumi-eks cluster.ts: accessConfig.bootstrapClusterCreatorAdminPermissions is
    # always true, so EKS already made an entry for whoever creates the cluster.
    plan = dev_with(clusterAdmins=[ADMIN_A, ADMIN_B])
    assert entries(plan) == {principal_key(ADMIN_B): ADMIN_B}
    association = plan.named(f"{principal_key(ADMIN_B)}-cluster-admin").inputs
    assert association["policyArn"] == "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
    assert association["accessScope"] == {"type": "cluster"}
    (entry,) = plan.of_type("aws:eks/accessEntry:AccessEntry")
    assert entry.inputs["tags"]["trainium-eks/managed-access-entry"] == "true"


def test_a_second_admins_up_keeps_the_same_entries():
    # Later `up` by ADMIN_B: the cluster exists, ADMIN_A holds EKS's untagged creator entry,
    # ADMIN_B the entry this program tagged. Before, B's run dropped B and re-added A
    # (ResourceInUse).
    existing = ExistingCluster({ADMIN_A: {}, ADMIN_B: {"trainium-eks/managed-access-entry": "true"}})
    plan = dev_with(existing_cluster=existing, clusterAdmins=[ADMIN_B, ADMIN_A])
    assert entries(plan) == {principal_key(ADMIN_B): ADMIN_B}


def test_an_admin_added_later_gets_an_entry():
    existing = ExistingCluster({ADMIN_A: {}})
    assert entries(dev_with(existing_cluster=existing, clusterAdmins=[ADMIN_A, ADMIN_B])) == {
        principal_key(ADMIN_B): ADMIN_B
    }


def test_entries_are_keyed_by_principal_not_position():
    assert principal_key(ADMIN_B) == principal_key(ADMIN_B)
    assert principal_key(ADMIN_B) != principal_key(ADMIN_A)
    assert "::" not in principal_key("arn:aws:iam::123456789012:role/path/to/Role")


# --- 8. Charts after CoreDNS -----------------------------------------------------------------


def test_cluster_software_waits_for_coredns_and_admin_entries(plan_with):
    plan = plan_with(clusterAdmins=[ADMIN_B])
    provider = plan.named("cluster", "pulumi:providers:kubernetes")
    assert plan.named("cluster-coredns").urn in provider.dependencies
    assert plan.named("cluster-core").urn in provider.dependencies
    assert plan.named(f"{principal_key(ADMIN_B)}-cluster-admin").urn in provider.dependencies


# --- 9. Dashboard --------------------------------------------------------------------------------


def test_dashboard_search_matches_the_per_cluster_series(dev):
    # aws/amazon-cloudwatch-agent translator/translate/otel/exporter/awsemf/kubernetes.go
    # (v1.300071.0): Neuron metrics are published with [ClusterName], [ClusterName,
    # InstanceId, NodeName], ...; a SEARCH schema matches exactly its dimension set, so the
    # bare {ContainerInsights} schema matched nothing.
    assert metric_search("node_neuroncore_utilization", "c") == (
        "SEARCH('{ContainerInsights,ClusterName} MetricName=\"node_neuroncore_utilization\" ClusterName=\"c\"', 'Average', 60)"
    )
    body = json.loads(dev.named("observability-neuron").inputs["dashboardBody"])
    expressions = [w["properties"]["metrics"][0][0]["expression"] for w in body["widgets"]]
    expressions = [e for e in expressions if e.startswith("SEARCH(")]  # the training widgets query by namespace
    assert len(expressions) == 3 and all(
        "{ContainerInsights,ClusterName}" in e and 'ClusterName="trn-dev"' in e for e in expressions
    )


# --- 10. Partitions ------------------------------------------------------------------------------


def test_access_policy_arn_follows_the_partition():
    assert admin_policy_arn("aws-cn") == "arn:aws-cn:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
    assert admin_policy_arn("aws-us-gov").startswith("arn:aws-us-gov:eks::aws:")


# --- 12. Cost and exposure defaults -------------------------------------------------------------


def test_standard_support_and_log_retention(dev, plan_with):
    # pulumi-eks cluster.ts documents upgradePolicy "Defaults to EXTENDED" ($0.60/h once the
    # version leaves standard support); the stack sets it.
    assert dev.named("cluster-eks").inputs["upgradePolicy"] == {"supportType": "STANDARD"}
    logs = dev.named("cluster-control-plane-logs").inputs
    assert logs == {"name": "/aws/eks/trn-dev/cluster", "retentionInDays": 90, "tags": logs["tags"]}
    # EKS writes into the group if it exists; it must exist before logging is turned on.
    assert dev.named("cluster-control-plane-logs").urn in dev.named("cluster-eks").dependencies
    plan = plan_with(upgradePolicy="EXTENDED", logRetentionDays=14)
    assert plan.named("cluster-eks").inputs["upgradePolicy"] == {"supportType": "EXTENDED"}
    assert plan.named("cluster-control-plane-logs").inputs["retentionInDays"] == 14


# --- 13. Node health ------------------------------------------------------------------------------


def test_accelerator_groups_repair_themselves_with_the_monitoring_agent(dev, plan_with):
    # EKS node auto-repair acts on AcceleratedHardwareReady (Neuron errors) only with the
    # EKS node monitoring agent; alone it sees kubelet Ready only.
    for name in ("trn1-32xl-ng1", "trn1n-32xl-ng"):
        repair = dev.named(name).inputs["nodeRepairConfig"]
        assert repair["enabled"] is True and repair["nodeRepairConfigOverrides"]  # tests/test_node_health.py
    agent = dev.named("cluster-eks-node-monitoring-agent").inputs
    assert agent["addonName"] == "eks-node-monitoring-agent" and "podIdentityAssociations" not in agent
    plan = plan_with(acceleratorNodeGroups=[{**GROUP, "autoRepair": False}])
    assert plan.named("trn1-32xl-ng1").inputs["nodeRepairConfig"] == {"enabled": False}


def test_a_version_without_addon_builds_is_refused_with_its_key():
    # 1.32 passes config validation (EKS still lists it) but the offline account has no add-on
    # builds for it: the look-up names the key instead of failing half-way through `up`.
    with pytest.raises(ConfigError) as err:
        dev_with(
            kubernetesVersion="1.32",
            acceleratorNodeGroups=dev_groups_at("1.32"),
            endOfSupportAcknowledged=kept_past_support("1.32"),
        )
    assert "trainium-eks:kubernetesVersion = '1.32': the add-on look-up (eks:DescribeAddonVersions) finds no" in str(
        err.value
    )


def test_core_instance_types_the_region_does_not_offer():
    # Refused before the control plane exists; the node group would fail only after it.
    with pytest.raises(ConfigError) as err:
        dev_with(coreNodeGroup={"instanceTypes": ["m6i.4xlargee"]})
    assert (
        "coreNodeGroup.instanceTypes[0] = 'm6i.4xlargee': the offering look-up (ec2:DescribeInstanceTypeOfferings) "
        "finds no such instance type in this region"
    ) in str(err.value)


def test_dev_may_say_the_whole_internet_explicitly():
    # Run as `pulumi up`: the whole program goes through, and an endpoint open to every address
    # needs no look-up of the deployer's (the listed-address case: test_config.py).
    from infra.lookups import DeployContext

    def never() -> str:
        raise AssertionError("looked up the deployer's address")

    plan = dev_with(endpointAccess={"publicCidrs": ["0.0.0.0/0"]}, deploy=DeployContext(lambda: True, never))
    assert plan.named("cluster-eks").inputs["publicAccessCidrs"] == ["0.0.0.0/0"]


def test_an_addon_lookup_failing_for_another_reason_is_not_blamed_on_the_version(monkeypatch):
    import pulumi_aws

    from infra import lookups

    def denied(**_):
        raise Exception(
            "invoke of aws:eks/getAddonVersion:getAddonVersion failed: AccessDeniedException: not authorized"
        )

    monkeypatch.setattr(pulumi_aws.eks, "get_addon_version", denied)
    with pytest.raises(Exception, match="AccessDeniedException") as err:
        lookups.addon_builds("1.34", ["coredns"], {})
    assert not isinstance(err.value, ConfigError)


def test_the_mpi_transform_refuses_a_manifest_it_cannot_patch():
    import pulumi

    from infra.components.schedulers import mpi_operator_gang_scheduling

    renamed = {
        "metadata": {"name": "mpi-operator"},
        "spec": {"template": {"spec": {"containers": [{"name": "operator"}]}}},
    }
    with pytest.raises(ValueError, match="no container 'mpi-operator'"):
        mpi_operator_gang_scheduling(
            pulumi.ResourceTransformArgs(
                True, "kubernetes:apps/v1:Deployment", "mpi-operator", renamed, pulumi.ResourceOptions()
            )
        )
