"""The cluster stack as declared: the real program under the offline mocks."""

from __future__ import annotations

import base64
import ipaddress
import json

import pytest

from infra.config.errors import ConfigError
from infra.facts.neuron import compatible_ami_release
from offline.plan import fixtures
from offline.plan.runner import PlanResult

SUBNET = "aws:ec2/subnet:Subnet"
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
ASG_TAG = "aws:autoscaling/tag:Tag"
PREFIX = "k8s.io/cluster-autoscaler/node-template"


def subnets(plan: PlanResult, tier: str) -> list[dict]:
    return [r.inputs for r in plan.of_type(SUBNET) if r.name.startswith(f"network-{tier}-")]


def asg_tags(plan: PlanResult, group: str) -> dict[str, str]:
    return {
        r.inputs["tag"]["key"]: r.inputs["tag"]["value"]
        for r in plan.of_type(ASG_TAG)
        if r.inputs["autoscalingGroupName"] == f"eks-{group}-placeholder"
    }


# --- network ---------------------------------------------------------------------------------


def test_dev_network_two_zones_single_nat(dev):
    assert len(subnets(dev, "public")) == len(subnets(dev, "private")) == len(subnets(dev, "node")) == 2
    assert len(dev.of_type("aws:ec2/natGateway:NatGateway")) == 1
    assert len(dev.of_type("aws:ec2/eip:Eip")) == 1
    assert dev.named("network-secondary-cidr").inputs["cidrBlock"] == "100.64.0.0/16"


def test_node_subnets_in_the_secondary_range_and_tagged(dev):
    for subnet in subnets(dev, "node"):
        assert ipaddress.ip_network(subnet["cidrBlock"]).subnet_of(ipaddress.ip_network("100.64.0.0/16"))
        assert subnet["tags"]["kubernetes.io/cluster/trn-dev"] == "shared"
    for subnet in subnets(dev, "public"):
        assert subnet["tags"]["kubernetes.io/role/elb"] == "1"
        assert subnet["mapPublicIpOnLaunch"] is False
    for subnet in subnets(dev, "private"):
        assert subnet["tags"]["kubernetes.io/role/internal-elb"] == "1"
        assert ipaddress.ip_network(subnet["cidrBlock"]).subnet_of(ipaddress.ip_network("10.0.0.0/16"))


def test_routes(dev):
    public_rt = dev.named("network-public-rt").inputs
    assert public_rt["routes"] == [{"cidrBlock": "0.0.0.0/0", "gatewayId": "igw-placeholder-network-igw"}]
    for zone in ("usw2-az4", "usw2-az1"):
        routes = dev.named(f"network-private-rt-{zone}").inputs["routes"]
        assert routes == [{"cidrBlock": "0.0.0.0/0", "natGatewayId": "nat-placeholder-network-nat-usw2-az4"}]
    assert len(dev.of_type("aws:ec2/routeTableAssociation:RouteTableAssociation")) == 6
    assert dev.named("network-s3").inputs["vpcEndpointType"] == "Gateway"


def test_prod_network_nat_per_zone(prod):
    assert len(prod.of_type("aws:ec2/natGateway:NatGateway")) == 3
    assert len(subnets(prod, "node")) == 3
    natted = {
        r.inputs["routes"][0]["natGatewayId"]
        for r in prod.of_type("aws:ec2/routeTable:RouteTable")
        if "private" in r.name
    }
    assert len(natted) == 3


# --- EKS cluster ------------------------------------------------------------------------------


def test_eks_cluster_settings(dev):
    cluster = dev.named("cluster-eks").inputs
    assert cluster["name"] == "trn-dev"
    assert cluster["version"] == "1.35"
    assert cluster["skipDefaultNodeGroup"] is True
    assert cluster["authenticationMode"] == "API"
    assert cluster["createOidcProvider"] is True
    assert cluster["bootstrapSelfManagedAddons"] is False
    assert cluster["enabledClusterLogTypes"] == ["api", "audit", "authenticator", "controllerManager", "scheduler"]
    assert cluster["encryptionConfigKeyArn"].startswith("arn:aws:kms:us-west-2:")
    assert cluster["privateSubnetIds"] == [
        "subnet-placeholder-network-private-usw2-az4",
        "subnet-placeholder-network-private-usw2-az1",
    ]
    # The builds AWS marks default for 1.35 (the offline stand-ins in offline/plan/fixtures.py).
    # pulumi-eks installs no VPC CNI of its own: the add-on is ours, with its own role.
    assert cluster["useDefaultVpcCni"] is True and "vpcCniOptions" not in cluster
    assert cluster["kubeProxyAddonOptions"]["version"] == fixtures.ADDON_DEFAULT_BUILDS["1.35"]["kube-proxy"]
    assert cluster["corednsAddonOptions"]["enabled"] is False
    assert dev.named("cluster-secrets").inputs["enableKeyRotation"] is True


def test_managed_addons_pinned_and_ordered(dev):
    addons = {r.inputs["addonName"]: r for r in dev.of_type("aws:eks/addon:Addon") if r.parent.endswith("::cluster")}
    assert set(addons) == {
        "vpc-cni",
        "coredns",
        "eks-pod-identity-agent",
        "eks-node-monitoring-agent",
    }
    # The builds AWS marks default for 1.35 (the offline stand-ins in offline/plan/fixtures.py).
    assert addons["vpc-cni"].inputs["addonVersion"] == fixtures.ADDON_DEFAULT_BUILDS["1.35"]["vpc-cni"]
    assert all(r.inputs["addonVersion"].endswith(tuple(f"eksbuild.{n}" for n in range(1, 20))) for r in addons.values())
    core_group = dev.named("cluster-core").urn
    assert core_group in addons["coredns"].dependencies
    # The EBS CSI driver only with what makes EBS volumes (tests/test_core_nodes.py).


def test_core_node_group(dev):
    core = dev.named("cluster-core").inputs
    assert core["amiType"] == "AL2023_x86_64_STANDARD"
    assert core["capacityType"] == "ON_DEMAND"
    # System pods only, on two small nodes (tests/test_node_layout.py checks they fit).
    assert core["instanceTypes"] == ["m6i.large"]
    assert core["scalingConfig"] == {"minSize": 2, "desiredSize": 2, "maxSize": 3}
    # And the label of the nodes root squash exempts (tests/test_root_squash.py).
    assert core["labels"] == {"role": "core", "storage.trainium-eks/root-squash-exempt": "true"}
    assert "taints" not in core


def node_role_policies(plan) -> set[str]:
    return {
        r.inputs["policyArn"].rsplit("/", 1)[1]
        for r in plan.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
        if r.name.startswith("cluster-node-")
    }


def test_node_role_policies(dev, prod, plan_with):
    # What every process that reaches the node's credentials holds: the kubelet's and image pulls'
    # needs only. The VPC CNI's ENI permissions are aws-node's own (below); Session Manager's
    # account-wide ssm:GetParameter comes only with features.sessionManager.
    for plan in (dev, prod):
        assert node_role_policies(plan) == {"AmazonEKSWorkerNodePolicy", "AmazonEC2ContainerRegistryReadOnly"}
    with_ssm = plan_with(features={"sessionManager": True})
    assert node_role_policies(with_ssm) == {
        "AmazonEKSWorkerNodePolicy",
        "AmazonEC2ContainerRegistryReadOnly",
        "AmazonSSMManagedInstanceCore",
    }


def test_the_vpc_cni_has_its_own_role_through_pod_identity(dev):
    cni = dev.named("cluster-vpc-cni", "aws:eks/addon:Addon")
    (association,) = cni.inputs["podIdentityAssociations"]
    assert association == {
        "roleArn": "arn:aws:iam::123456789012:role/cluster-vpc-cni-placeholder",
        "serviceAccount": "aws-node",
    }
    attached = {
        r.inputs["policyArn"]
        for r in dev.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
        if r.name.startswith("cluster-vpc-cni-attach")
    }
    assert attached == {"arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy"}
    # The Pod Identity agent hands aws-node its credentials; nodes wait for both (they are not Ready
    # without a working CNI).
    assert dev.named("cluster-eks-pod-identity-agent").urn in cni.dependencies
    for group in dev.of_type("aws:eks/nodeGroup:NodeGroup"):
        assert cni.urn in group.dependencies, group.name
    # pulumi-eks 4.4.0 kept aws-node on deletion (addons/cni-addon.ts, preserve: true), and the
    # add-on it declared is adopted under its old URN rather than created a second time.
    assert cni.inputs["preserve"] is True
    assert json.loads(cni.inputs["configurationValues"]) == {"enableNetworkPolicy": "true"}


def test_prod_endpoint_is_public_only_to_listed_ranges(dev, prod):
    dev_cluster = dev.named("cluster-eks").inputs
    assert dev_cluster["endpointPublicAccess"] is True and dev_cluster["publicAccessCidrs"] == ["0.0.0.0/0"]
    cluster = prod.named("cluster-eks").inputs
    assert cluster["endpointPublicAccess"] is True and cluster["endpointPrivateAccess"] is True
    assert cluster["publicAccessCidrs"] == ["198.51.100.0/24"]


# --- accelerator node groups ---------------------------------------------------------------


@pytest.mark.parametrize("plan_name", ["dev", "prod"])
def test_every_launch_template_requires_imdsv2_and_encrypted_gp3(plan_name, request):
    plan = request.getfixturevalue(plan_name)
    templates = plan.of_type(LAUNCH_TEMPLATE)
    assert len(templates) == len(plan.of_type(NODE_GROUP))
    for template in templates:
        assert template.inputs["metadataOptions"]["httpTokens"] == "required"
        (root,) = template.inputs["blockDeviceMappings"]
        assert root["deviceName"] == "/dev/xvda"
        assert root["ebs"]["volumeType"] == "gp3" and root["ebs"]["encrypted"] == "true"
        assert root["ebs"]["volumeSize"] >= 50


@pytest.mark.parametrize(
    ("plan_name", "group", "interfaces"),
    [("dev", "trn1-32xl-ng1", 8), ("dev", "trn1n-32xl-ng", 16), ("prod", "trn2-48xl-ng", 16)],
)
def test_efa_interfaces_per_group(plan_name, group, interfaces, request):
    plan = request.getfixturevalue(plan_name)
    nics = plan.named(f"{group}-lt").inputs["networkInterfaces"]
    assert len(nics) == interfaces
    assert [n["networkCardIndex"] for n in nics] == list(range(interfaces))
    assert (nics[0]["deviceIndex"], nics[0]["interfaceType"]) == (0, "efa")
    assert {(n["deviceIndex"], n["interfaceType"]) for n in nics[1:]} == {(1, "efa-only")}
    for nic in nics:
        assert nic["securityGroups"] == ["sg-placeholder-accelerators-efa", "sg-placeholder-eks-cluster"]


def test_efa_security_group_only_talks_to_itself(dev):
    (ingress,) = [
        r
        for r in dev.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
        if r.name.startswith("accelerators-")
    ]
    (egress,) = [
        r
        for r in dev.of_type("aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule")
        if r.name.startswith("accelerators-")
    ]
    for rule in (ingress, egress):
        assert rule.inputs["ipProtocol"] == "-1"
        assert (
            rule.inputs["referencedSecurityGroupId"]
            == rule.inputs["securityGroupId"]
            == "sg-placeholder-accelerators-efa"
        )
        assert "cidrIpv4" not in rule.inputs


def test_nothing_is_open_to_the_world(dev, prod):
    for plan in (dev, prod):
        for rule in plan.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"):
            assert rule.inputs.get("cidrIpv4") != "0.0.0.0/0"
        for sg in plan.of_type("aws:ec2/securityGroup:SecurityGroup"):
            assert not sg.inputs.get("ingress")


def test_accelerator_node_groups(dev):
    group = dev.named("trn1-32xl-ng1").inputs
    assert group["amiType"] == "AL2023_x86_64_NEURON"
    assert group["instanceTypes"] == ["trn1.32xlarge"]
    assert group["subnetIds"] == ["subnet-placeholder-network-node-usw2-az4"]
    assert group["scalingConfig"] == {"minSize": 0, "desiredSize": 0, "maxSize": 4}
    assert group["capacityType"] == "ON_DEMAND"
    assert group["labels"] == {
        "instance-type": "trn1-32xl",
        "provisioner": "cluster-autoscaler",
        "vpc.amazonaws.com/efa.present": "true",
    }
    assert group["taints"] == [
        {"key": "aws.amazon.com/neuron", "value": "true", "effect": "NO_SCHEDULE"},
        # Until the burn-in passes (tests/test_node_health.py).
        {
            "key": "startup-taint.cluster-autoscaler.kubernetes.io/neuron-burn-in",
            "value": "pending",
            "effect": "NO_SCHEDULE",
        },
    ]
    assert group["launchTemplate"] == {"id": "lt-placeholder-trn1-32xl-ng1-lt", "version": "1"}
    assert dev.named("trn1n-32xl-ng").inputs["scalingConfig"]["maxSize"] == 2


def test_instance_store_raid0_user_data(dev):
    import base64

    user_data = base64.b64decode(dev.named("trn1-32xl-ng1-lt").inputs["userData"]).decode()
    assert "strategy: RAID0" in user_data


@pytest.mark.parametrize(("group", "efa", "cores"), [("trn1-32xl-ng1", "8", "32"), ("trn1n-32xl-ng", "16", "32")])
def test_scale_from_zero_tags(dev, group, efa, cores):
    tags = asg_tags(dev, group)
    assert tags[f"{PREFIX}/resources/aws.amazon.com/neuron"] == "16"
    assert tags[f"{PREFIX}/resources/aws.amazon.com/neuroncore"] == cores
    assert tags[f"{PREFIX}/resources/vpc.amazonaws.com/efa"] == efa
    assert tags[f"{PREFIX}/taint/aws.amazon.com/neuron"] == "true:NoSchedule"
    assert tags[f"{PREFIX}/label/instance-type"] == dev.named(group).inputs["labels"]["instance-type"]
    assert all(r.inputs["tag"]["propagateAtLaunch"] is False for r in dev.of_type(ASG_TAG))


def test_prod_trn2_group(prod):
    tags = asg_tags(prod, "trn2-48xl-ng")
    assert tags[f"{PREFIX}/resources/aws.amazon.com/neuroncore"] == "64"
    assert prod.named("trn2-48xl-ng").inputs["labels"]["instance-type"] == "trn2-48xl"
    assert prod.named("trn2-48xl-ng").inputs["subnetIds"] == ["subnet-placeholder-network-node-use2-az3"]


def test_placement_groups_by_default(dev):
    groups = dev.of_type("aws:ec2/placementGroup:PlacementGroup")
    assert {g.name for g in groups} == {"trn1-32xl-ng1-pg", "trn1n-32xl-ng-pg"}
    assert all(g.inputs["strategy"] == "cluster" for g in groups)
    assert dev.named("trn1-32xl-ng1-lt").inputs["placement"] == {"groupName": "trn1-32xl-ng1-pg-placeholder"}


GROUP = {
    "name": "trn1-32xl-ng1",
    "instanceType": "trn1.32xlarge",
    "maxSize": 4,
    "amiReleaseVersion": compatible_ami_release(),
}


def test_on_demand_capacity_reservation(plan_with):
    plan = plan_with(
        acceleratorNodeGroups=[{**GROUP, "azId": "usw2-az4", "capacityReservation": {"id": "cr-0123456789abcdef0"}}]
    )
    template = plan.named("trn1-32xl-ng1-lt").inputs
    assert template["capacityReservationSpecification"] == {
        "capacityReservationTarget": {"capacityReservationId": "cr-0123456789abcdef0"}
    }
    assert "placement" not in template and "instanceMarketOptions" not in template
    assert not plan.of_type("aws:ec2/placementGroup:PlacementGroup")
    assert plan.named("trn1-32xl-ng1").inputs["capacityType"] == "ON_DEMAND"
    assert plan.named("trn1-32xl-ng1").inputs["instanceTypes"] == ["trn1.32xlarge"]


def test_capacity_block(plan_with):
    reservation = {"id": "cr-0c0ffee0c0ffee001", "type": "capacity-block"}
    plan = plan_with(acceleratorNodeGroups=[{**GROUP, "capacityReservation": reservation}])
    assert plan.named("trn1-32xl-ng1-lt").inputs["instanceMarketOptions"] == {"marketType": "capacity-block"}
    assert plan.named("trn1-32xl-ng1").inputs["capacityType"] == "CAPACITY_BLOCK"
    # The block's window, from the look-up (offline/plan/fixtures.py CAPACITY_BLOCKS), for the workload stack.
    [group] = plan.outputs["acceleratorNodeGroups"]
    assert group["capacityBlock"] == {"start": "2026-12-01T11:30:00Z", "end": "2026-12-15T11:30:00Z"}


def test_a_group_asking_more_than_its_block_holds_is_refused(plan_with):
    # EC2 says the block holds 4 (offline/plan/fixtures.py CAPACITY_BLOCKS); a 5th node never launches.
    reservation = {"id": "cr-0c0ffee0c0ffee001", "type": "capacity-block"}
    with pytest.raises(ConfigError) as caught:
        plan_with(acceleratorNodeGroups=[{**GROUP, "maxSize": 8, "capacityReservation": reservation}])
    assert (
        "acceleratorNodeGroups[0].maxSize = 8: capacity reservation cr-0c0ffee0c0ffee001 holds 4 instances, so "
        "nodes past that never launch; allowed: at most 4" in str(caught.value)
    )


def test_an_ultraserver_group_is_built_as_one_capacity_block(tmp_path):
    # A trn2u.48xlarge group in ap-south-2 (the one region offering it), launching into one UltraServer's
    # Capacity Block: the block's zone, 16 EFA interfaces, no placement group, and its window exported.
    from offline.plan.runner import run_program, stack_config
    from tests.fixture_project import FIXTURE_ROOT

    config = stack_config(FIXTURE_ROOT, "dev")
    config["aws:region"] = "ap-south-2"
    group = {
        "name": "trn2u-48xl-us1",
        "instanceType": "trn2u.48xlarge",
        "maxSize": 4,
        "amiReleaseVersion": compatible_ami_release(),
        "capacityReservation": {"id": "cr-0c0ffee0c0ffee003", "type": "capacity-block"},
    }
    config["trainium-eks:acceleratorNodeGroups"] = json.dumps([group])
    plan = run_program(FIXTURE_ROOT, "dev", config)
    template = plan.named("trn2u-48xl-us1-lt").inputs
    assert template["instanceMarketOptions"] == {"marketType": "capacity-block"}
    # EKS rejects a Capacity Block group whose launch template does not target the reservation
    # (awsdocs/amazon-eks-user-guide latest/ug/ml/capacity-blocks-mng.adoc).
    assert template["capacityReservationSpecification"] == {
        "capacityReservationTarget": {"capacityReservationId": "cr-0c0ffee0c0ffee003"}
    }
    assert len(template["networkInterfaces"]) == 16 and "placement" not in template
    assert not plan.of_type("aws:ec2/placementGroup:PlacementGroup")
    node_group = plan.named("trn2u-48xl-us1").inputs
    assert node_group["capacityType"] == "CAPACITY_BLOCK" and node_group["scalingConfig"]["maxSize"] == 4
    assert node_group["subnetIds"] == ["subnet-placeholder-network-node-aps2-az1"]
    assert node_group["labels"]["instance-type"] == "trn2u-48xl"
    # Its own label, in the node group, the autoscaler's node template and what workloads select on: a
    # second UltraServer's group differs by it, so neither pods nor cluster-autoscaler mix the two.
    assert node_group["labels"]["ultraserver.trainium-eks/group"] == "trn2u-48xl-us1"
    [exported] = plan.outputs["acceleratorNodeGroups"]
    assert exported["capacityBlock"] == {"start": "2026-12-01T11:30:00Z", "end": "2026-12-08T11:30:00Z"}
    assert exported["labels"]["ultraserver.trainium-eks/group"] == "trn2u-48xl-us1"
    assert asg_tags(plan, "trn2u-48xl-us1")[f"{PREFIX}/label/ultraserver.trainium-eks/group"] == "trn2u-48xl-us1"
    # A second group on the same block is refused, and a group asking for more than the block holds.
    twice = {**group, "name": "trn2u-48xl-us2"}
    config["trainium-eks:acceleratorNodeGroups"] = json.dumps([group, twice])
    with pytest.raises(
        ConfigError, match=r"acceleratorNodeGroups\[1\]\.capacityReservation\.id = 'cr-0c0ffee0c0ffee003': "
    ):
        run_program(FIXTURE_ROOT, "dev", config)
    # A reservation of 8 is not one UltraServer: refused, naming what it holds.
    config["trainium-eks:acceleratorNodeGroups"] = json.dumps(
        [{**group, "capacityReservation": {"id": "cr-0c0ffee0c0ffee004", "type": "capacity-block"}}]
    )
    with pytest.raises(ConfigError, match=r"holds 8 trn2u\.48xlarge instances, not the 4 of one UltraServer"):
        run_program(FIXTURE_ROOT, "dev", config)


def test_placement_group_can_be_turned_off(plan_with):
    plan = plan_with(acceleratorNodeGroups=[{**GROUP, "placementGroup": False}])
    assert not plan.of_type("aws:ec2/placementGroup:PlacementGroup")
    assert "placement" not in plan.named("trn1-32xl-ng1-lt").inputs


def test_efa_off_and_plain_efa_interfaces(plan_with):
    plan = plan_with(
        acceleratorNodeGroups=[
            {**GROUP, "efaInterfaceType": "efa"},
            {"name": "inf2-ng", "instanceType": "inf2.48xlarge", "maxSize": 1},
        ]
    )
    assert {n["interfaceType"] for n in plan.named("trn1-32xl-ng1-lt").inputs["networkInterfaces"]} == {"efa"}
    inf2 = plan.named("inf2-ng-lt").inputs
    assert "networkInterfaces" not in inf2
    # No EFA, no instance store: the user data only gives containers their devices' ownership and registers
    # the node for its burn-in (infra/specs/user_data.py).
    user_data = base64.b64decode(inf2["userData"]).decode()
    assert "RLIMIT_MEMLOCK" not in user_data and "localStorage" not in user_data
    assert "--node-labels=node-health.trainium-eks/burn-in-pending=true" in user_data
    assert "vpc.amazonaws.com/efa.present" not in plan.named("inf2-ng").inputs["labels"]
    assert not any(k.endswith("/efa") for k in asg_tags(plan, "inf2-ng"))


def test_no_efa_security_group_without_efa_groups(plan_with):
    plan = plan_with(acceleratorNodeGroups=[{"name": "inf2-ng", "instanceType": "inf2.xlarge", "maxSize": 1}])
    # Dev's one security group of its own is its EFS mount targets'.
    assert [sg.name for sg in plan.of_type("aws:ec2/securityGroup:SecurityGroup")] == ["efs-nfs"]


def test_pinned_zone_that_does_not_offer_the_type_declares_nothing(plan_with):
    with pytest.raises(ConfigError, match=r"azId = 'usw2-az1': does not offer trn1.32xlarge"):
        plan_with(acceleratorNodeGroups=[{**GROUP, "azId": "usw2-az1"}])


# --- outputs ------------------------------------------------------------------------------


def test_outputs(dev):
    assert "kubeconfig" in dev.secret_outputs
    assert dev.as_json()["outputs"]["kubeconfig"] == "[secret]"
    assert dev.outputs["clusterName"] == "trn-dev"
    assert dev.outputs["region"] == "us-west-2"
    assert dev.outputs["acceleratorZone"] == {"name": "us-west-2d", "id": "usw2-az4"}
    groups = {g["name"]: g for g in dev.outputs["acceleratorNodeGroups"]}
    assert groups["trn1-32xl-ng1"]["neuronDevices"] == 16
    assert groups["trn1-32xl-ng1"]["efaInterfaces"] == 8
    assert groups["trn1n-32xl-ng"]["efaInterfaces"] == 16
    assert groups["trn1-32xl-ng1"]["taints"] == [
        {"key": "aws.amazon.com/neuron", "value": "true", "effect": "NoSchedule"}
    ]
    for key in (
        "vpcId",
        "nodeSubnetIds",
        "oidcProviderArn",
        "oidcProviderUrl",
        "clusterSecurityGroupId",
        "nodeRoleArn",
        "features",
    ):
        assert key in dev.outputs


def test_prod_differs_from_dev(dev, prod):
    assert prod.outputs["region"] == "us-east-2"
    assert {g["name"] for g in prod.outputs["acceleratorNodeGroups"]} - {
        g["name"] for g in dev.outputs["acceleratorNodeGroups"]
    } == {"trn2-48xl-ng"}
    assert prod.named("cluster-core").inputs["scalingConfig"]["minSize"] == 3
    assert prod.named("network-vpc").inputs["tags"]["environment"] == "prod"
