"""Every configuration rule: one accepted and one refused case, checking the message names
the key, the bad value and what is allowed."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from infra.config.errors import ConfigError
from infra.config.load import raw_from_pulumi_config
from infra.facts.neuron import COMPATIBLE_AMI_RELEASES
from infra.facts.versions import KUBERNETES_VERSION
from infra.validate import parse_stack_config
from tests.fixture_project import FIXTURE_ROOT

BASE: dict[str, Any] = {
    "region": "us-west-2",
    "acceleratorNodeGroups": [
        {
            "name": "trn1-32xl-ng1",
            "instanceType": "trn1.32xlarge",
            "minSize": 0,
            "desiredSize": 0,
            "maxSize": 4,
            "amiReleaseVersion": COMPATIBLE_AMI_RELEASES[KUBERNETES_VERSION][0],
        },
    ],
}


def with_changes(**changes: Any) -> dict[str, Any]:
    raw = copy.deepcopy(BASE)
    raw.update(changes)
    return raw


def group(**fields: Any) -> dict[str, Any]:
    return {**BASE["acceleratorNodeGroups"][0], **fields}


def refused(raw: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as err:
        parse_stack_config(raw)
    return str(err.value)


def test_defaults_make_a_working_dev_config():
    config = parse_stack_config({"region": "us-west-2"})
    assert config.cluster_name == "trainium"
    assert config.network.secondary_cidr == "100.64.0.0/16"
    assert config.network.nat_gateways == "single"
    assert [g.name for g in config.accelerator_node_groups] == ["trn1-32xl-ng1", "trn1n-32xl-ng"]
    assert [(g.min_size, g.desired_size, g.max_size) for g in config.accelerator_node_groups] == [(0, 0, 4), (0, 0, 2)]
    assert all(g.efa_enabled and g.placement_group_enabled for g in config.accelerator_node_groups)
    switches = config.features.model_dump()
    assert switches.pop("neuron_scheduler_extension") is False
    assert switches.pop("neuron_node_recovery") is False
    # Session Manager's policy would give every holder of the node's credentials the account's SSM parameters.
    assert switches.pop("session_manager") is False
    assert all(switches.values())
    assert config.environment == "dev" and config.upgrade_policy == "STANDARD" and config.log_retention_days == 90
    assert all(g.auto_repair for g in config.accelerator_node_groups)


def test_region_is_required():
    assert "aws:region: required but not set" in refused({})


def test_bad_region():
    assert "aws:region = 'uswest2': not an AWS region name" in refused(with_changes(region="uswest2"))


def test_a_made_up_region_is_refused_as_no_region_not_blamed_on_a_registry():
    message = refused(with_changes(region="us-west-3"))
    assert "aws:region = 'us-west-3': not an AWS region EKS runs in" in message
    assert "regions that offer Trainium: us-west-2, us-east-1, us-east-2" in message
    assert "registry is known" not in message and "efaDevicePlugin" not in message
    # Refused whatever the features: no registry, no look-up is tried for a region that does not exist.
    assert "not an AWS region" in refused(with_changes(region="us-west-3", features={"efaDevicePlugin": False}))


def test_a_region_without_any_neuron_type_is_refused_as_such():
    # ca-central-1 is an AWS region EKS runs in (it has an add-on registry) where no Neuron type is offered.
    from infra.facts.versions import EKS_ADDON_REGISTRIES

    assert "ca-central-1" in EKS_ADDON_REGISTRIES
    message = refused(with_changes(region="ca-central-1"))
    assert "aws:region = 'ca-central-1': no Neuron instance type" in message
    assert "regions that offer Trainium: us-west-2, us-east-1, us-east-2" in message
    assert "infra/facts/regions.py" in message
    # Every region the offering table covers is accepted, with a group of a type it offers.
    from infra.facts.regions import NEURON_REGIONS

    for region, facts in NEURON_REGIONS.items():
        instance_type = "trn1.32xlarge" if "trn1.32xlarge" in facts.offerings else "inf2.48xlarge"
        if instance_type not in facts.offerings:
            instance_type = sorted(facts.offerings)[0]
        groups = [group(instanceType=instance_type)]
        assert parse_stack_config(with_changes(region=region, acceleratorNodeGroups=groups)).region == region


def test_unknown_key_is_refused_not_ignored():
    message = refused(with_changes(netwrok={"azCount": 3}))
    assert "trainium-eks:netwrok: unknown key" in message


def test_an_unknown_key_is_told_the_key_it_is_closest_to_at_its_own_level():
    assert "trainium-eks:clustername: unknown key (did you mean clusterName?" in refused(with_changes(clustername="x"))
    groups = [group(desiredsize=0)]
    assert "acceleratorNodeGroups[0].desiredsize: unknown key (did you mean desiredSize?" in refused(
        with_changes(acceleratorNodeGroups=groups)
    )
    assert "trainium-eks:zzzz: unknown key (check the spelling" in refused(with_changes(zzzz=1))
    from workloads.settings import parse_workloads_config

    with pytest.raises(ConfigError) as caught:
        parse_workloads_config(
            {"trainium-workloads:clusterStack": "o/trainium-eks/dev", "trainium-workloads:clusterChek": "{}"}
        )
    assert "trainium-workloads:clusterChek: unknown key (did you mean clusterCheck?" in str(caught.value)


def test_unknown_nested_key():
    assert "trainium-eks:acceleratorNodeGroups[0].efaCount: unknown key" in refused(
        with_changes(acceleratorNodeGroups=[group(efaCount=8)])
    )


def test_non_neuron_instance_type():
    message = refused(with_changes(acceleratorNodeGroups=[group(instanceType="p4d.24xlarge")]))
    assert "trainium-eks:acceleratorNodeGroups[0].instanceType = 'p4d.24xlarge'" in message
    assert "not a supported Neuron instance type" in message
    assert "allowed: trn1.2xlarge, trn1.32xlarge, trn1n.32xlarge, trn2.48xlarge" in message


@pytest.mark.parametrize("instance_type", ["trn3.48xlarge", "trn3p.48xlarge", "trn3pds.48xlarge"])
def test_trainium3_names_are_refused_as_undocumented(instance_type):
    # Names AWS software uses for Trainium3 (the Neuron chart, aws-dranet, the Neuron driver) that EC2
    # documents as no instance type: refused, saying so, before anything is looked up.
    message = refused(with_changes(acceleratorNodeGroups=[group(instanceType=instance_type)]))
    assert f"acceleratorNodeGroups[0].instanceType = '{instance_type}': not a supported Neuron instance type" in message
    assert "AWS documents no Trainium3 (trn3) instance type yet" in message
    assert "list Trn1, Trn1n, Trn2 and Trn2u only" in message
    assert "trn2u.48xlarge, trn2.3xlarge" in message


def test_an_ultraserver_group_is_one_capacity_block_of_whole_ultraservers():
    # trn2u.48xlarge is one of the four instances of a Trn2 UltraServer, which EC2 sells as one Capacity
    # Block each: a group without one, or sized in parts of an UltraServer, never gets its nodes.
    on_demand = group(instanceType="trn2u.48xlarge", minSize=0, desiredSize=0, maxSize=6)
    message = refused(with_changes(acceleratorNodeGroups=[on_demand]))
    assert (
        "acceleratorNodeGroups[0].capacityReservation: trn2u.48xlarge runs only inside an UltraServer Capacity "
        "Block, one block per UltraServer" in message
    )
    assert "acceleratorNodeGroups[0].maxSize = 6: a trn2u.48xlarge group holds whole UltraServers of 4" in message
    assert "minSize" not in message and "desiredSize" not in message
    assert "maxSize = 6: a trn2u.48xlarge group is one UltraServer" not in message  # said only of a block's group
    block = {"type": "capacity-block", "id": "cr-0123456789abcdef0"}
    in_a_block = {**on_demand, "capacityReservation": block}
    message = refused(with_changes(acceleratorNodeGroups=[{**in_a_block, "maxSize": 8}]))
    assert (
        "acceleratorNodeGroups[0].maxSize = 8: a trn2u.48xlarge group is one UltraServer of 4 instances, bought as "
        "one UltraServer Capacity Block" in message
    )
    tagged = {**in_a_block, "maxSize": 4, "capacityReservation": {"type": "capacity-block", "tags": {"team": "ml"}}}
    message = refused(with_changes(nodeProvisioner="karpenter", acceleratorNodeGroups=[tagged]))
    assert "acceleratorNodeGroups[0].capacityReservation.tags = {'team': 'ml'}: a trn2u.48xlarge group names its" in (
        message
    )
    config = parse_stack_config(with_changes(acceleratorNodeGroups=[{**in_a_block, "maxSize": 4, "desiredSize": 4}]))
    assert (
        config.accelerator_node_groups[0].capacity_block
        and not config.accelerator_node_groups[0].placement_group_enabled
    )
    # A trn2.48xlarge group is a standalone instance: neither rule applies.
    parse_stack_config(with_changes(acceleratorNodeGroups=[group(instanceType="trn2.48xlarge", maxSize=3)]))


def test_unknown_instance_type():
    assert "instanceType = 'trn9.64xlarge'" in refused(
        with_changes(acceleratorNodeGroups=[group(instanceType="trn9.64xlarge")])
    )


def test_efa_on_a_type_without_efa():
    message = refused(with_changes(acceleratorNodeGroups=[group(instanceType="trn1.2xlarge", efa=True)]))
    assert "acceleratorNodeGroups[0].efa = true: trn1.2xlarge has no EFA" in message
    assert "EFA types: trn1.32xlarge, trn1n.32xlarge, trn2.48xlarge" in message


def test_efa_defaults_follow_the_type():
    config = parse_stack_config(with_changes(acceleratorNodeGroups=[group(name="small", instanceType="trn1.2xlarge")]))
    assert config.accelerator_node_groups[0].efa_enabled is False


@pytest.mark.parametrize(
    ("sizes", "ok"), [((0, 0, 4), True), ((2, 2, 2), True), ((3, 2, 4), False), ((0, 5, 4), False)]
)
def test_min_desired_max(sizes, ok):
    lo, want, hi = sizes
    raw = with_changes(acceleratorNodeGroups=[group(minSize=lo, desiredSize=want, maxSize=hi)])
    if ok:
        parse_stack_config(raw)
    else:
        message = refused(raw)
        assert "trainium-eks:acceleratorNodeGroups[0]: sizes must satisfy minSize <= desiredSize <= maxSize" in message
        assert f"got minSize={lo}, desiredSize={want}, maxSize={hi}" in message


def test_core_group_sizes():
    message = refused(with_changes(coreNodeGroup={"minSize": 3, "desiredSize": 2, "maxSize": 4}))
    assert "coreNodeGroup: sizes must satisfy" in message


def test_negative_size():
    assert "acceleratorNodeGroups[0].minSize = -1: Input should be greater than or equal to 0" in refused(
        with_changes(acceleratorNodeGroups=[group(minSize=-1)])
    )


@pytest.mark.parametrize("cidr", ["10.0.0.0/33", "10.0.0.1/16", "ten.0.0.0/16"])
def test_malformed_vpc_cidr(cidr):
    message = refused(with_changes(network={"vpcCidr": cidr}))
    assert f"trainium-eks:network.vpcCidr = '{cidr}': not a valid IPv4 CIDR block" in message


def test_overlapping_cidrs():
    message = refused(with_changes(network={"vpcCidr": "100.64.0.0/16", "secondaryCidr": "100.64.0.0/17"}))
    assert "trainium-eks:network.secondaryCidr = '100.64.0.0/17': overlaps the primary range 100.64.0.0/16" in message


def test_secondary_cidr_outside_allowed_ranges():
    message = refused(with_changes(network={"secondaryCidr": "8.8.0.0/16"}))
    assert "network.secondaryCidr = '8.8.0.0/16': must lie within 100.64.0.0/10" in message


def test_cidr_prefix_range():
    assert "network.vpcCidr = '10.0.0.0/26': prefix must be between /16 and /24" in refused(
        with_changes(network={"vpcCidr": "10.0.0.0/26"})
    )


def test_az_count_range():
    assert "trainium-eks:network.azCount = 1: Input should be greater than or equal to 2" in refused(
        with_changes(network={"azCount": 1})
    )


def test_nat_strategy():
    message = refused(with_changes(network={"natGateways": "none"}))
    assert "trainium-eks:network.natGateways = 'none': Input should be 'single' or 'per-az'" in message


def test_capacity_reservation_with_placement_group():
    reservation = {"id": "cr-0123456789abcdef0"}
    message = refused(with_changes(acceleratorNodeGroups=[group(capacityReservation=reservation, placementGroup=True)]))
    assert (
        "acceleratorNodeGroups[0].placementGroup = true: cannot be combined with capacityReservation 'cr-0123456789abcdef0'"
        in message
    )


def test_capacity_reservation_turns_placement_group_off_by_default():
    config = parse_stack_config(
        with_changes(
            acceleratorNodeGroups=[group(capacityReservation={"id": "cr-0123456789abcdef0", "type": "capacity-block"})]
        )
    )
    assert config.accelerator_node_groups[0].placement_group_enabled is False


def test_a_reservation_without_id_or_tags_gets_one_refusal_not_a_garbled_second():
    message = refused(with_changes(acceleratorNodeGroups=[group(capacityReservation={"type": "capacity-block"})]))
    assert "capacityReservation: give exactly one of id (cr-...) and tags (Karpenter only), got id=None tags=None" in (
        message
    )
    assert "tagged None" not in message and "azId: required" not in message


def test_malformed_capacity_reservation_id():
    message = refused(with_changes(acceleratorNodeGroups=[group(capacityReservation={"id": "res-1"})]))
    assert "capacityReservation.id = 'res-1': must look like cr-0123456789abcdef0" in message


def test_capacity_reservation_type():
    message = refused(
        with_changes(acceleratorNodeGroups=[group(capacityReservation={"id": "cr-0123456789abcdef0", "type": "spot"})])
    )
    assert "capacityReservation.type = 'spot': Input should be 'on-demand' or 'capacity-block'" in message


def test_duplicate_group_names():
    message = refused(with_changes(acceleratorNodeGroups=[group(), group(instanceType="trn1n.32xlarge")]))
    assert "acceleratorNodeGroups[1].name = 'trn1-32xl-ng1': duplicate node group name" in message


def test_group_name_format():
    assert "acceleratorNodeGroups[0].name = 'Trn_1'" in refused(
        with_changes(acceleratorNodeGroups=[group(name="Trn_1")])
    )


def test_az_id_format():
    assert "acceleratorNodeGroups[0].azId = 'us-west-2d': not an availability zone id" in refused(
        with_changes(acceleratorNodeGroups=[group(azId="us-west-2d")])
    )


def test_efa_interface_type():
    message = refused(with_changes(acceleratorNodeGroups=[group(efaInterfaceType="ena")]))
    assert "efaInterfaceType = 'ena': Input should be 'efa-only' or 'efa'" in message


def test_endpoint_needs_public_or_private():
    assert "endpointAccess: public and private are both false" in refused(
        with_changes(endpointAccess={"public": False, "private": False})
    )


def test_endpoint_public_cidrs():
    assert "endpointAccess.publicCidrs[0] = '1.2.3.4/8'" in refused(
        with_changes(endpointAccess={"publicCidrs": ["1.2.3.4/8"]})
    )


def test_cluster_admin_arns():
    parse_stack_config(with_changes(clusterAdmins=["arn:aws:iam::123456789012:role/MlPlatform"]))
    message = refused(with_changes(clusterAdmins=["arn:aws:sts::123456789012:assumed-role/MlPlatform/me"]))
    assert (
        "clusterAdmins[0] = 'arn:aws:sts::123456789012:assumed-role/MlPlatform/me': must be an IAM role or user ARN"
        in message
    )


def test_log_types():
    assert "logTypes[0] = 'everything': allowed: api, audit, authenticator, controllerManager, scheduler" in refused(
        with_changes(logTypes=["everything"])
    )


def test_cluster_name():
    assert "trainium-eks:clusterName = 'My Cluster'" in refused(with_changes(clusterName="My Cluster"))


def test_a_kubernetes_version_eks_does_not_offer_is_refused():
    for version in ("1.30", "1.37"):
        message = refused(with_changes(kubernetesVersion=version))
        assert f"trainium-eks:kubernetesVersion = '{version}': not a version EKS offers; allowed: 1.32, 1.33" in message
        assert "EKS_KUBERNETES_VERSIONS in infra/facts/versions.py" in message
    from infra.facts import versions

    assert versions.KUBERNETES_VERSION in versions.EKS_KUBERNETES_VERSIONS


def test_a_pinned_ami_release_must_be_built_for_the_cluster_version():
    # An EKS AMI release (<kubernetes patch>-<date>) belongs to one minor version; the node group
    # runs the cluster's version (infra/components/accelerators.py), so a pin from another minor fails at
    # UpdateNodegroupVersion / CreateNodegroup, after the control plane was already changed.
    message = refused(with_changes(acceleratorNodeGroups=[group(amiReleaseVersion="1.33.5-20251112")]))
    assert (
        "trainium-eks:acceleratorNodeGroups[0].amiReleaseVersion = '1.33.5-20251112': built for Kubernetes "
        "1.33, but kubernetesVersion is 1.35; allowed: a 1.35.<patch>-<date> release"
    ) in message
    message = refused(with_changes(kubernetesVersion="1.36"))  # the stack's 1.35 pin left behind
    assert (
        "amiReleaseVersion = '1.35.6-20260625': built for Kubernetes 1.35, but kubernetesVersion is 1.36; allowed: "
        "a 1.36.<patch>-<date> release of the EKS AL2023 Neuron AMI whose Neuron driver the training images run on "
        "(for Kubernetes 1.36: 1.36.2-20260625, Neuron driver 2.28.0.0) (raise kubernetesVersion and the pin "
        "together; docs/node-health.md)"
    ) in message
    config = parse_stack_config(
        with_changes(kubernetesVersion="1.36", acceleratorNodeGroups=[group(amiReleaseVersion="1.36.2-20260625")])
    )
    assert config.accelerator_node_groups[0].ami_release_version == "1.36.2-20260625"


def test_another_kubernetes_version_needs_no_pinned_builds():
    # Builds resolve per version at deploy time (infra/facts/addons.py); only the format is checked.
    raw = with_changes(kubernetesVersion="1.36", acceleratorNodeGroups=[group(amiReleaseVersion="1.36.2-20260625")])
    assert parse_stack_config(raw).kubernetes_version == "1.36"
    # The default Trainium groups take the AMI release recorded for the version (infra/facts/neuron.py).
    defaults = parse_stack_config({"region": "us-west-2", "kubernetesVersion": "1.36"}).accelerator_node_groups
    assert [g.ami_release_version for g in defaults] == ["1.36.2-20260625"] * 2
    assert "kubernetesVersion = '1.34.1': a Kubernetes minor version such as 1.34" in refused(
        with_changes(kubernetesVersion="1.34.1")
    )


def test_an_unquoted_version_yaml_read_as_a_number_says_to_quote_it():
    # `kubernetesVersion: 1.30` is the YAML float 1.3; the program gets "1.3". One refusal, with the
    # fix, and no second refusal of every AMI pin against a version that is itself refused.
    message = refused(with_changes(kubernetesVersion="1.3", acceleratorNodeGroups=[group()]))
    assert (
        "kubernetesVersion = '1.3': a Kubernetes minor version such as 1.34 (YAML reads an unquoted 1.30 as "
        'the number 1.3: quote it, kubernetesVersion: "1.30")'
    ) in message
    assert "amiReleaseVersion" not in message
    assert "quote it" not in refused(with_changes(kubernetesVersion="1.34.1"))
    # A quoted "1.4" is what was meant: there is no 1.40 to hint at.
    assert "quote it" not in refused(with_changes(kubernetesVersion="1.4"))


def test_a_trainium_type_a_region_does_not_offer_is_refused_as_such_not_blamed_on_its_zones():
    # eu-west-1 offers Inferentia2 only (infra/facts/regions.py, from the AWS price list, which prices
    # trn1 on demand wherever it is offered).
    message = refused({"region": "eu-west-1"})
    assert (
        "acceleratorNodeGroups[0].instanceType = 'trn1.32xlarge': not offered in eu-west-1; regions that offer it: "
        "us-west-2, us-east-1, us-east-2"
    ) in message
    assert "azId" not in message
    # A type no price list row covers anywhere (trn2.48xlarge: Capacity Blocks) is left to the look-up.
    assert parse_stack_config(
        {"region": "us-east-2", "acceleratorNodeGroups": [group(instanceType="trn2.48xlarge", name="trn2")]}
    )


def test_unknown_addon():
    assert "addonVersions.aws-mountpoint: unknown add-on" in refused(
        with_changes(addonVersions={"aws-mountpoint": "v1"})
    )


def test_every_problem_is_reported_at_once():
    message = refused(
        with_changes(
            network={"secondaryCidr": "10.0.0.0/16"}, acceleratorNodeGroups=[group(instanceType="p5.48xlarge")]
        )
    )
    assert "network.secondaryCidr = '10.0.0.0/16': overlaps" in message and "instanceType = 'p5.48xlarge'" in message


def test_reading_engine_config():
    raw = raw_from_pulumi_config(
        {
            "aws:region": "us-east-2",
            "trainium-eks:clusterName": "trn-prod",
            "trainium-eks:kubernetesVersion": "1.34",
            "trainium-eks:network": '{"azCount": 3}',
            "other-project:thing": "x",
        }
    )
    assert raw == {
        "region": "us-east-2",
        "clusterName": "trn-prod",
        "kubernetesVersion": "1.34",
        "network": {"azCount": 3},
    }


def test_config_from_the_cli_environment(monkeypatch):
    """`pulumi up` passes config in PULUMI_CONFIG, not in-process."""
    from pulumi.runtime import config as runtime_config

    from infra import validate as stack_config

    runtime_config.set_all_config({})
    monkeypatch.setenv("PULUMI_CONFIG", '{"aws:region": "us-east-1", "trainium-eks:clusterName": "from-env"}')
    config = stack_config.load()
    assert (config.region, config.cluster_name) == ("us-east-1", "from-env")


# --- cluster software ---------------------------------------------------------------------------


@pytest.mark.parametrize("capacity", [1200, 2400, 4800, 9600])
def test_fsx_capacity_steps_accepted(capacity):
    assert parse_stack_config(with_changes(storage={"capacityGib": capacity})).storage.capacity_gib == capacity


@pytest.mark.parametrize(("capacity", "nearest"), [(1000, "1200"), (1800, "1200 or 2400"), (3600, "2400 or 4800")])
def test_fsx_capacity_steps_refused(capacity, nearest):
    message = refused(with_changes(storage={"capacityGib": capacity}))
    assert (
        f"trainium-eks:storage.capacityGib = {capacity}: allowed: 1200, 2400, or a multiple of 2400 (nearest: {nearest})"
        in message
    )


@pytest.mark.parametrize("throughput", [125, 250, 500, 1000])
def test_persistent_2_throughputs(throughput):
    parse_stack_config(with_changes(storage={"perUnitStorageThroughput": throughput}))


def test_bad_throughput_names_the_allowed_values():
    message = refused(with_changes(storage={"perUnitStorageThroughput": 200}))
    assert "storage.perUnitStorageThroughput = 200: PERSISTENT_2 allows 125, 250, 500, 1000" in message


def test_scratch_takes_no_throughput_and_no_kms_key():
    message = refused(
        with_changes(
            storage={
                "deploymentType": "SCRATCH_2",
                "kmsKeyId": "arn:aws:kms:us-west-2:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab",
            }
        )
    )
    assert "storage.perUnitStorageThroughput: SCRATCH_2 takes none" in message
    assert "storage.kmsKeyId: SCRATCH_2 file systems cannot use a customer KMS key" in message


def test_training_namespaces():
    two = with_changes(trainingNamespaces=["default", "research"], namespaceIds={"default": 20001, "research": 20002})
    assert parse_stack_config(two).training_namespaces == [
        "default",
        "research",
    ]
    message = refused(with_changes(trainingNamespaces=["Research", "kube-system", "default", "default"]))
    assert "trainingNamespaces[0] = 'Research': must be 1-63 characters of lower-case letters" in message
    assert "trainingNamespaces[1] = 'kube-system': a system or cluster-software namespace" in message
    assert "trainingNamespaces[3] = 'default': listed twice" in message


def test_queues():
    message = refused(with_changes(volcanoQueues=[{"name": "q", "cpu": "lots"}, {"name": "q"}]))
    assert "volcanoQueues[0].cpu = 'lots': not a Kubernetes quantity" in message
    assert "volcanoQueues[1].name = 'q': duplicate queue name" in message


def test_data_buckets_are_names():
    parse_stack_config(with_changes(trainingDataBuckets=["my-datasets"]))
    assert "trainingDataBuckets[0] = 's3://my-datasets': not an S3 bucket name" in refused(
        with_changes(trainingDataBuckets=["s3://my-datasets"])
    )


# --- bad input of every kind: the rule the receiving API applies, before any resource --------


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        # An empty string is refused by key, not with a JSON decoding traceback.
        ("network", "", "trainium-eks:network = '': Input should be a valid dictionary"),
        ("clusterName", "", "trainium-eks:clusterName = '': empty; must be 2-39 characters of lower-case letters"),
        (
            "acceleratorNodeGroups",
            "[oops",
            "trainium-eks:acceleratorNodeGroups = '[oops': Input should be a valid list",
        ),
        (
            "trainingNamespaces",
            ["default", ""],
            "trainium-eks:trainingNamespaces[1] = '': String should have at least 1 character",
        ),
        ("logRetentionDays", 10, "logRetentionDays = 10: CloudWatch Logs allows 1, 3, 5, 7, 14"),
        ("upgradePolicy", "LTS", "upgradePolicy = 'LTS': Input should be 'STANDARD' or 'EXTENDED'"),
        ("environment", "staging", "environment = 'staging': Input should be 'dev' or 'prod'"),
        (
            "addonVersions",
            {"coredns": "v1.11.4"},
            "addonVersions.coredns = 'v1.11.4': an EKS add-on build looks like v1.20.4-eksbuild.1",
        ),
        (
            "addonVersions",
            {"vpc-cni": "v1.18.0-eksbuild.1"},
            "vpc-cni must be at least v1.18.4 for efa-only network interfaces",
        ),
        ("tags", {"aws:owner": "me"}, "tags.aws:owner = 'me': the aws: prefix is reserved for AWS"),
        ("tags", {"team": "ml<platform>"}, "tags.team = 'ml<platform>': a tag value must be at most 256 characters"),
        (
            "clusterAdmins",
            ["arn:aws-cn:iam::123456789012:role/Admin"],
            "the partition 'aws-cn' is not us-west-2's ('aws')",
        ),
        (
            "clusterAdmins",
            [ADMIN := "arn:aws:iam::123456789012:role/A", ADMIN],
            "clusterAdmins[1] = 'arn:aws:iam::123456789012:role/A': listed twice",
        ),
        (
            "coreNodeGroup",
            {"instanceTypes": ["m6i 4xlarge"]},
            "coreNodeGroup.instanceTypes[0] = 'm6i 4xlarge': not an EC2 instance type",
        ),
        ("coreNodeGroup", {"instanceTypes": []}, "coreNodeGroup.instanceTypes = []: list at least one instance type"),
        ("trainingDataBuckets", ["my..bucket"], "trainingDataBuckets[0] = 'my..bucket': not an S3 bucket name"),
        (
            "volcanoQueues",
            [{"name": "q", "memory": "30GB"}],
            "volcanoQueues[0].memory = '30GB': not a Kubernetes quantity",
        ),
    ],
)
def test_bad_values_are_refused_with_key_value_and_rule(key, value, message):
    raw = raw_from_pulumi_config(
        {
            "aws:region": "us-west-2",
            f"trainium-eks:{key}": value if isinstance(value, str) else __import__("json").dumps(value),
        }
    )
    assert message in refused(raw)


@pytest.mark.parametrize(
    ("labels", "message"),
    [
        # kubernetes/kubernetes staging/src/k8s.io/apimachinery/pkg/util/validation/validation.go
        # (v1.34): label values are <= 63 characters of [A-Za-z0-9_.-], alphanumeric at both ends.
        ({"team": "ml platform"}, "labels.team = 'ml platform': a label value must be at most 63 characters"),
        ({"team": "x" * 64}, "a label value must be at most 63 characters"),
        ({"bad key": "v"}, "key 'bad key': a label name must be 1-63 characters"),
        ({"Example.com/team": "v"}, "the prefix before '/' must be a DNS subdomain"),
        # kubernetes/kubernetes pkg/kubelet/apis/well_known_labels.go (v1.34), IsKubeletLabel:
        # the kubelet refuses other kubernetes.io / k8s.io labels and the node never joins.
        ({"node-role.kubernetes.io/trainer": "true"}, "labels in the kubernetes.io and k8s.io namespaces are reserved"),
        ({"instance-type": "big"}, "labels.instance-type: set by this project"),
    ],
)
def test_node_labels_follow_kubernetes_rules(labels, message):
    assert message in refused(with_changes(acceleratorNodeGroups=[group(labels=labels)]))


def test_allowed_node_labels():
    config = parse_stack_config(
        with_changes(
            acceleratorNodeGroups=[
                group(
                    labels={
                        "team": "ml-platform",
                        "example.com/cost-center": "A1",
                        "node.kubernetes.io/lifecycle": "normal",
                    }
                )
            ]
        )
    )
    assert config.accelerator_node_groups[0].labels["team"] == "ml-platform"


def test_ami_release_version_format():
    message = refused(with_changes(acceleratorNodeGroups=[group(amiReleaseVersion="latest")]))
    assert "amiReleaseVersion = 'latest': an EKS AMI release version such as 1.34.2-20251112" in message
    config = parse_stack_config(with_changes(acceleratorNodeGroups=[group(amiReleaseVersion="1.35.6-20260625")]))
    assert config.accelerator_node_groups[0].ami_release_version == "1.35.6-20260625"


@pytest.mark.parametrize(
    ("primary", "secondary", "message"),
    [
        # Amazon VPC User Guide, "VPC CIDR blocks", IPv4 CIDR block association restrictions.
        (
            "10.0.0.0/16",
            "172.16.0.0/16",
            "AWS refuses an RFC 1918 block from 172.16.0.0/12 next to a primary in 10.0.0.0/8",
        ),
        (
            "10.0.0.0/16",
            "192.168.0.0/16",
            "AWS refuses an RFC 1918 block from 192.168.0.0/16 next to a primary in 10.0.0.0/8",
        ),
        ("10.0.0.0/16", "198.19.0.0/16", "AWS refuses 198.19.0.0/16"),
        ("172.16.0.0/16", "172.31.0.0/16", "AWS refuses 172.31.0.0/16"),
        ("10.1.0.0/16", "10.0.0.0/16", "AWS refuses a block from 10.0.0.0/16 when the primary lies in 10.0.0.0/15"),
        ("8.8.0.0/16", "100.64.0.0/16", "network.vpcCidr = '8.8.0.0/16': must lie within a private range"),
    ],
)
def test_secondary_cidr_association_restrictions(primary, secondary, message):
    assert message in refused(with_changes(network={"vpcCidr": primary, "secondaryCidr": secondary}))


@pytest.mark.parametrize(
    ("primary", "secondary"),
    [
        ("10.0.0.0/16", "100.64.0.0/16"),
        ("172.20.0.0/16", "172.21.0.0/16"),
        ("192.168.0.0/20", "100.64.0.0/16"),
        ("10.20.0.0/16", "10.30.0.0/16"),
    ],
)
def test_secondary_cidrs_aws_accepts(primary, secondary):
    assert (
        parse_stack_config(
            with_changes(network={"vpcCidr": primary, "secondaryCidr": secondary})
        ).network.secondary_cidr
        == secondary
    )


def test_namespaces_and_queues_the_cluster_software_owns():
    message = refused(
        with_changes(trainingNamespaces=["neuron-healthcheck-system"], volcanoQueues=[{"name": "default"}])
    )
    # devices.py declares neuron-healthcheck-system itself: a second declaration fails AlreadyExists.
    assert "trainingNamespaces[0] = 'neuron-healthcheck-system': a system or cluster-software namespace" in message
    assert "volcanoQueues[0].name = 'default': Volcano creates this queue itself" in message


def test_log_types_once_each():
    assert "logTypes[1] = 'api': listed twice" in refused(with_changes(logTypes=["api", "api"]))


@pytest.mark.parametrize("label", ["role", "kubernetes.io/hostname", "eks.amazonaws.com/nodegroup"])
def test_labels_set_by_the_project_the_kubelet_or_eks(label):
    # `role: core` would make Trainium nodes match the core node selector; hostname and the
    # eks.amazonaws.com keys are set per node by the kubelet and EKS.
    message = refused(with_changes(acceleratorNodeGroups=[group(labels={label: "core"})]))
    assert f"labels.{label}" in message


def test_public_cidrs_are_internet_ranges():
    message = refused(with_changes(endpointAccess={"publicCidrs": ["10.0.0.0/8", "203.0.113.0/24"]}))
    assert "publicCidrs[0] = '10.0.0.0/8': a private range never reaches a public endpoint" in message


# --- What `pulumi up` refuses and a preview only warns about (infra/config/rules.py deploy_problems) ---
# The shipped Pulumi.prod.yaml lists 198.51.100.0/24 so the offline plan works. pulumi-eks only
# logs when its API health probe fails (pulumi/pulumi-eks nodejs/eks/cluster/cluster.ts at v4.3.0 and
# at 2026-08 HEAD, the mirror has no v4.4.0 tag: when not a dry run, 60 tries of `/healthz` 5 s
# apart, each failure a pulumi.log.info, `break` on success, no throw after), so a real `up` with an allow-list
# the deployer is not in would create the VPC, control plane, node groups and file system, then
# fail every Kubernetes resource. `pulumi up` (the program run with dry_run false) refuses first.

EGRESS = "52.94.133.131"  # stands in for what https://checkip.amazonaws.com would answer


def prod_config(**access: Any):
    from offline.plan.runner import stack_config

    raw = raw_from_pulumi_config(stack_config(FIXTURE_ROOT, "prod"))
    if access:
        raw["endpointAccess"] = {"public": True, "private": True, **access}
    return parse_stack_config(raw)


class Egress:
    """A stand-in for the look-up that counts how often it is asked."""

    def __init__(self, answer: str | Exception = EGRESS) -> None:
        self.answer, self.calls = answer, 0

    def __call__(self) -> str:
        self.calls += 1
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def test_a_documentation_range_is_a_preview_warning_that_says_up_will_refuse_it(prod):
    from infra.config.rules import advisories

    # The offline plan of the shipped prod stack works (a preview) ...
    assert prod.named("cluster-eks").inputs["publicAccessCidrs"] == ["198.51.100.0/24"]
    # ... and warns, naming the key, the value, what is allowed, and that `pulumi up` refuses it.
    note = advisories(prod_config())[0]
    assert note.startswith(
        "trainium-eks:endpointAccess.publicCidrs[0] = '198.51.100.0/24': inside an RFC 5737 "
        "documentation range (192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24)"
    )
    assert "allowed: your real egress ranges" in note and note.endswith("`pulumi up` will refuse it.")
    # (The rest are the unpinned Trainium groups' Neuron warnings: tests/test_node_health.py.)
    assert not any("publicCidrs" in n for n in advisories(prod_config(publicCidrs=["52.94.133.0/24"])))


@pytest.mark.parametrize("documentation", ["192.0.2.0/24", "198.51.100.128/25", "203.0.113.7/32"])
def test_pulumi_up_refuses_every_documentation_range(documentation):
    from infra.config.rules import deploy_problems

    egress = Egress()
    problems = deploy_problems(prod_config(publicCidrs=["52.94.133.0/24", documentation]), egress)
    assert problems == [
        f"trainium-eks:endpointAccess.publicCidrs[1] = {documentation!r}: inside an RFC 5737 documentation range "
        "(192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24), from which no deployer's traffic comes, so `pulumi up` "
        "could not reach the Kubernetes API it installs the cluster software through; allowed: your real egress "
        "ranges (office or VPN, the CI runners' NAT addresses)"
    ]
    # A real range that merely contains a documentation range is not one.
    assert deploy_problems(prod_config(publicCidrs=["198.51.0.0/16"]), Egress("198.51.7.9")) == []


def test_pulumi_up_goes_ahead_from_a_listed_address_and_refuses_an_unlisted_one():
    from infra.config.rules import deploy_problems

    listed = Egress()
    assert deploy_problems(prod_config(publicCidrs=["52.94.133.0/24"]), listed) == []
    assert listed.calls == 1
    (problem,) = deploy_problems(prod_config(publicCidrs=["52.94.132.0/24", "3.5.0.0/16"]), Egress())
    assert problem.startswith(
        "trainium-eks:endpointAccess.publicCidrs = ['52.94.132.0/24', '3.5.0.0/16']: this machine's public IPv4 "
        f"address {EGRESS} is in none of them"
    )
    assert f"allowed: a list that contains {EGRESS} (for example {EGRESS}/32" in problem
    assert "endpointAccess.deployedFromVpc: true" in problem
    # The shipped file fails both rules.
    assert len(deploy_problems(prod_config(), Egress())) == 2


def test_the_address_is_not_asked_for_when_it_cannot_matter():
    from infra.config.rules import deploy_problems

    never = Egress(AssertionError("looked up"))
    # deployedFromVpc: the run reaches the API from inside; documentation ranges are still refused.
    in_vpc = prod_config(publicCidrs=["198.51.100.0/24"], deployedFromVpc=True)
    (problem,) = deploy_problems(in_vpc, never)
    assert problem.startswith("trainium-eks:endpointAccess.publicCidrs[0] = '198.51.100.0/24': inside an RFC 5737")
    # The whole internet (dev's default) and a private-only endpoint.
    assert deploy_problems(parse_stack_config(BASE), never) == []
    private = prod_config(public=False, deployedFromVpc=True)
    assert deploy_problems(private, never) == []
    assert never.calls == 0


def test_pulumi_up_refuses_when_the_address_cannot_be_found():
    from infra.config.errors import EgressLookupFailed
    from infra.config.rules import deploy_problems

    failed = EgressLookupFailed("https://checkip.amazonaws.com gave no answer within 5 s: timed out")
    (problem,) = deploy_problems(prod_config(publicCidrs=["52.94.133.0/24"]), Egress(failed))
    assert problem.startswith("trainium-eks:endpointAccess.publicCidrs = ['52.94.133.0/24']: `pulumi up` checks")
    assert "(https://checkip.amazonaws.com gave no answer within 5 s: timed out)" in problem
    # How to go on: retry, give the address, or declare an in-VPC run.
    assert "retry when the look-up answers" in problem
    assert "TRAINIUM_EKS_EGRESS_IP=<this machine's public IPv4 address>" in problem
    assert "endpointAccess.deployedFromVpc: true" in problem


def test_a_size_no_api_takes_is_refused_before_anything_is_declared():
    # The EKS NodegroupScalingConfig sizes are Ints: 10**12 would pass `ge=1` and be priced at
    # full scale, then fail at CreateNodegroup.
    groups = [{"name": "trn1-32xl-ng1", "instanceType": "trn1.32xlarge", "maxSize": 10**12}]
    message = refused(with_changes(acceleratorNodeGroups=groups))
    assert (
        "acceleratorNodeGroups[0].maxSize = 1000000000000: at most 2147483647 "
        "(the APIs these settings reach take 32-bit integers)"
    ) in message


def test_booleans_are_not_numbers_and_blank_is_not_text():
    # pydantic's lax mode reads true as 1; "   " passes a length check.
    message = refused(with_changes(network={"azCount": True}, clusterName="   "))
    assert "network.azCount = True: a number, not true/false" in message
    assert "clusterName = '   ': only whitespace" in message


def test_the_burn_in_namespace_is_never_a_training_namespace():
    from infra.specs.burn_in_objects import NAMESPACE

    message = refused(with_changes(trainingNamespaces=["default", NAMESPACE]))
    assert (
        "trainium-eks:trainingNamespaces[1] = 'neuron-burn-in': the Trainium burn-in's namespace, whose service "
        "account can lift a node's startup taint; allowed: any other namespace of your own, or default"
    ) in message


@pytest.mark.parametrize("events", [["NEW", "CHANGED", "DELETED"], ["DELETED"]])
def test_exported_deletions_are_refused(events):
    repo = {"fileSystemPath": "/default/checkpoints", "s3Path": "s3://ckpt-bucket/run", "autoExport": events}
    message = refused(with_changes(storage={"dataRepositories": [repo]}))
    assert (
        f"trainium-eks:storage.dataRepositories[0].autoExport = {events}: DELETED would delete the S3 copy whenever "
        "a file is deleted on the file system; allowed: NEW and CHANGED (prune the bucket with an S3 lifecycle rule)"
    ) in message
    parse_stack_config(with_changes(storage={"dataRepositories": [{**repo, "autoExport": ["NEW", "CHANGED"]}]}))


@pytest.mark.parametrize(
    ("ids", "message"),
    [
        (
            {"default": 20001},
            "trainium-eks:namespaceIds = {'default': 20001}: no id for training namespace 'research'; give each "
            "training namespace its own UID/GID, such as research: 20002",
        ),
        ({"default": 0, "research": 20002}, "namespaceIds.default = 0: allowed 1000-2147483647 but 65534"),
        ({"default": 65534, "research": 20002}, "namespaceIds.default = 65534: allowed 1000-2147483647 but 65534"),
        ({"default": 2**31, "research": 20002}, "namespaceIds.default = 2147483648: allowed"),
        ({"default": 20001, "research": 20001}, "namespaceIds.research = 20001: 'default' has it too"),
        (
            {"default": 20001, "research": 20002, "ops": 20003},
            "namespaceIds.ops = 20003: not a training namespace; trainingNamespaces lists ['default', 'research']",
        ),
    ],
)
def test_each_training_namespace_has_its_own_id(ids, message):
    assert message in refused(with_changes(trainingNamespaces=["default", "research"], namespaceIds=ids))


def test_the_private_subnets_must_hold_the_core_nodes_and_their_pods():
    # A /24 VPC over three zones leaves /27 private subnets (27 usable); three m6i.large core nodes and
    # two more during an update, each its own address and 29 pods (infra/facts/instances.py), and EKS's
    # 16 free addresses need 166.
    message = refused(with_changes(network={"vpcCidr": "10.0.0.0/24", "secondaryCidr": "100.64.0.0/16", "azCount": 3}))
    assert (
        "network.vpcCidr = '10.0.0.0/24': its private subnets (/27, 27 usable addresses each with azCount 3) hold "
        "the core nodes and their pods: coreNodeGroup.maxSize 3 and 2 more during an update, 30 addresses each, "
        "plus the 16 EKS keeps free there, is 166; use a larger vpcCidr"
    ) in message
    assert parse_stack_config(with_changes(network={"vpcCidr": "10.0.0.0/22", "secondaryCidr": "100.64.0.0/16"}))
