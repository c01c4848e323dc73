"""Refusals of what AWS itself would refuse part-way through `pulumi up`, and the plan can know from
the stack file: each names the key, the value, what is allowed and the reason (infra/config/aws_limits.py,
workloads/load_balancer_rules.py, workloads/checks.py, bootstrap/settings.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bootstrap.settings import parse_bootstrap_config
from infra.config.aws_limits import MAX_TAGS_PER_RESOURCE, PROGRAM_TAGS_PER_RESOURCE
from infra.config.errors import ConfigError
from infra.validate import parse_stack_config
from offline.plan.runner import run_program, stack_config
from tests.fixture_project import FIXTURE_ROOT
from tests.test_config import group, with_changes
from workloads.load_balancer_rules import cluster_region, load_balancer_problems
from workloads.settings import LoadBalancerSettings, parse_workloads_config

KEY_ID = "1234abcd-12ab-34cd-56ef-1234567890ab"
BLOCK = {"id": "cr-0123456789abcdef0", "type": "capacity-block"}
CERTIFICATE = "arn:{partition}:acm:{region}:111122223333:certificate/" + KEY_ID


def problems(raw: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_stack_config(raw)
    return caught.value.problems


CLUSTER_CASES = [
    # ARNs of another region or partition.
    (
        {"storage": {"kmsKeyId": f"arn:aws:kms:us-east-1:111122223333:key/{KEY_ID}"}},
        f"trainium-eks:storage.kmsKeyId = 'arn:aws:kms:us-east-1:111122223333:key/{KEY_ID}': in us-east-1, but "
        "the cluster is in us-west-2; a KMS key encrypts only in its own Region",
    ),
    (
        {"storage": {"kmsKeyId": f"arn:aws-cn:kms:us-west-2:111122223333:key/{KEY_ID}"}},
        "trainium-eks:storage.kmsKeyId = 'arn:aws-cn:kms:us-west-2:111122223333:key/"
        f"{KEY_ID}': a KMS key of the 'aws-cn' partition, but us-west-2 is in 'aws'",
    ),
    (
        {"clusterAdmins": ["arn:aws-us-gov:iam::111122223333:role/Admin"]},
        "trainium-eks:clusterAdmins[0] = 'arn:aws-us-gov:iam::111122223333:role/Admin': the partition "
        "'aws-us-gov' is not us-west-2's ('aws')",
    ),
    # Two ARNs YAML folded into one item (the second indented under the first).
    (
        {"clusterAdmins": ["arn:aws:iam::111122223333:role/A - arn:aws:iam::111122223333:role/B"]},
        "trainium-eks:clusterAdmins[0] = 'arn:aws:iam::111122223333:role/A - arn:aws:iam::111122223333:role/B': must "
        "be an IAM role or user ARN (arn:aws:iam::<account>:role/<name>); it holds more than one ARN",
    ),
    # An add-on build for another Kubernetes minor.
    (
        {"addonVersions": {"kube-proxy": "v1.33.3-eksbuild.6"}},
        "trainium-eks:addonVersions.kube-proxy = 'v1.33.3-eksbuild.6': a kube-proxy build for Kubernetes 1.33, "
        "but kubernetesVersion is 1.35",
    ),
    # Quotas the plan can know.
    (
        {"acceleratorNodeGroups": [group(maxSize=451)]},
        "trainium-eks:acceleratorNodeGroups[0].maxSize = 451: more than EKS's default quota \"Nodes per managed "
        'node group" (450)',
    ),
    (
        {"coreNodeGroup": {"maxSize": 500}},
        "trainium-eks:coreNodeGroup.maxSize = 500: more than EKS's default quota",
    ),
    (
        {"jobNodeGroup": {"maxSize": 1000}, "serviceQuotas": {"nodesPerManagedNodeGroup": 600}},
        "trainium-eks:jobNodeGroup.maxSize = 1000: more than the quota serviceQuotas.nodesPerManagedNodeGroup "
        "declares (600)",
    ),
    (
        {"tags": {f"team{i}": "ml" for i in range(MAX_TAGS_PER_RESOURCE - PROGRAM_TAGS_PER_RESOURCE + 1)}},
        f"trainium-eks:tags: {MAX_TAGS_PER_RESOURCE - PROGRAM_TAGS_PER_RESOURCE + 1} tags; with the program's own",
    ),
    # EKS "Public endpoint access CIDR ranges per cluster": 40, not adjustable.
    (
        {"endpointAccess": {"publicCidrs": [f"198.18.{i}.0/24" for i in range(41)]}},
        "trainium-eks:endpointAccess.publicCidrs: 41 blocks; EKS accepts at most 40",
    ),
    # Sizes and types a Capacity Block group cannot have.
    (
        {"acceleratorNodeGroups": [group(maxSize=65, capacityReservation=BLOCK)]},
        "trainium-eks:acceleratorNodeGroups[0].maxSize = 65: the group launches into one Capacity Block "
        "(cr-0123456789abcdef0), and a Capacity Block holds at most 64 instances",
    ),
    (
        {
            "nodeProvisioner": "karpenter",
            "acceleratorNodeGroups": [
                group(maxSize=300, capacityReservation={"tags": {"team": "ml"}, "type": "capacity-block"})
            ],
        },
        "trainium-eks:acceleratorNodeGroups[0].maxSize = 300: the group launches into the Capacity Blocks its tags "
        "select, and an account holds at most 256 instances across Capacity Blocks",
    ),
    (
        {"acceleratorNodeGroups": [group(instanceType="trn1n.32xlarge", capacityReservation=BLOCK)]},
        "trainium-eks:acceleratorNodeGroups[0].capacityReservation.type = 'capacity-block': Capacity Blocks for "
        "ML offer no trn1n.32xlarge",
    ),
    # A provisioner left with nothing to scale.
    (
        {"features": {"clusterAutoscaler": False}},
        "trainium-eks:features.clusterAutoscaler = false: nothing would scale trainium-eks:acceleratorNodeGroups[0] "
        "(desiredSize 0, maxSize 4)",
    ),
    (
        {"nodeProvisioner": "karpenter", "features": {"clusterAutoscaler": False}},
        "trainium-eks:features.clusterAutoscaler = false: nothing would scale trainium-eks:jobNodeGroup",
    ),
    (
        {"nodeProvisioner": "karpenter", "acceleratorNodeGroups": []},
        "trainium-eks:acceleratorNodeGroups = []: with nodeProvisioner karpenter each group becomes a NodePool",
    ),
    # A duration in the wrong unit.
    (
        {"nodeProvisioner": "karpenter", "karpenter": {"expireAfter": "30m"}},
        "trainium-eks:karpenter.expireAfter = '30m': a Trainium node lives 1800 s",
    ),
    (
        {"nodeProvisioner": "karpenter", "karpenter": {"expireAfter": "720s"}},
        "trainium-eks:karpenter.expireAfter = '720s': a Trainium node lives 720 s",
    ),
]


@pytest.mark.parametrize(("changes", "expected"), CLUSTER_CASES)
def test_the_cluster_stack_refuses_what_aws_would(changes, expected):
    assert any(expected in p for p in problems(with_changes(**changes))), problems(with_changes(**changes))


@pytest.mark.parametrize(
    "changes",
    [
        {"storage": {"kmsKeyId": f"arn:aws:kms:us-west-2:111122223333:key/{KEY_ID}"}},
        {"addonVersions": {"kube-proxy": "v1.35.0-eksbuild.2", "vpc-cni": "v1.20.5-eksbuild.1"}},
        {"acceleratorNodeGroups": [group(maxSize=450)]},
        {"acceleratorNodeGroups": [group(maxSize=600)], "serviceQuotas": {"nodesPerManagedNodeGroup": 600}},
        # Under Karpenter a Trainium group's maxSize is a NodePool's limit, no managed group's.
        {"nodeProvisioner": "karpenter", "acceleratorNodeGroups": [group(maxSize=600)]},
        {"tags": {f"team{i}": "ml" for i in range(MAX_TAGS_PER_RESOURCE - PROGRAM_TAGS_PER_RESOURCE)}},
        {"acceleratorNodeGroups": [group(maxSize=64, capacityReservation=BLOCK)]},
        {
            "nodeProvisioner": "karpenter",
            "acceleratorNodeGroups": [
                group(
                    maxSize=256, azId="usw2-az4", capacityReservation={"tags": {"team": "ml"}, "type": "capacity-block"}
                )
            ],
        },
        {
            "features": {"clusterAutoscaler": False},
            "acceleratorNodeGroups": [group(minSize=0, desiredSize=2, maxSize=2)],
            "jobNodeGroup": {"desiredSize": 1, "maxSize": 1},
        },
        {"nodeProvisioner": "karpenter", "karpenter": {"expireAfter": "1h"}},
        {"nodeProvisioner": "karpenter", "karpenter": {"expireAfter": "Never"}},
    ],
)
def test_the_same_keys_within_the_limits_are_accepted(changes):
    parse_stack_config(with_changes(**changes))


def test_a_type_error_does_not_hide_a_rule_error():
    # azCount fails its type, the region its rule: both are named in one run.
    found = problems(with_changes(region="us-west-3x", network={"azCount": 5}))
    assert "trainium-eks:network.azCount = 5: Input should be less than or equal to 4" in found
    assert any(p.startswith("aws:region = 'us-west-3x': not an AWS region name (for example us-west-2)") for p in found)
    # A rule about a key that failed its type would judge the default instead: not reported.
    found = problems(
        with_changes(nodeProvisioner="karpentr", acceleratorNodeGroups=[group(spot=True)], clusterName="X")
    )
    assert found[0].startswith("trainium-eks:nodeProvisioner = 'karpentr': Input should be")
    assert any(p.startswith("trainium-eks:clusterName = 'X': must be 2-39 characters") for p in found)
    assert not any("spot" in p for p in found)
    # A required key that fails leaves nothing to judge the rest against: the type errors alone.
    with pytest.raises(ConfigError) as caught:
        parse_stack_config({"network": {"azCount": 5}, "clusterName": "X"})
    assert caught.value.problems == [
        "aws:region: required but not set",
        "trainium-eks:network.azCount = 5: Input should be less than or equal to 4",
    ]


def test_the_program_adds_at_most_its_allowance_of_tags_to_any_resource():
    # Every tags map of the offline plan, under either provisioner: the program's own keys beside the
    # stack's `tags` never exceed PROGRAM_TAGS_PER_RESOURCE, so the allowance the refusal leaves holds.
    most = 0
    for provisioner in ("cluster-autoscaler", "karpenter"):
        config = stack_config(FIXTURE_ROOT, "dev")
        config["trainium-eks:nodeProvisioner"] = provisioner
        config["trainium-eks:tags"] = json.dumps({"costCenter": "ml"})
        plan = run_program(FIXTURE_ROOT, "dev", config)
        for resource in plan.registrations:
            inputs = resource.inputs or {}
            maps = [inputs.get("tags")] + [s.get("tags") for s in inputs.get("tagSpecifications") or []]
            for tags in maps:
                if isinstance(tags, dict) and "costCenter" in tags:
                    most = max(most, len([k for k in tags if k != "costCenter"]))
    assert most == PROGRAM_TAGS_PER_RESOURCE


# --- the workload stacks -----------------------------------------------------------------------


def workload_problems(**settings: Any) -> list[str]:
    config = stack_config(FIXTURE_ROOT / "workloads", "dev")
    config.update({f"trainium-workloads:{k}": v if isinstance(v, str) else json.dumps(v) for k, v in settings.items()})
    with pytest.raises(ConfigError) as caught:
        parse_workloads_config(config)
    return caught.value.problems


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        # Minutes written as seconds.
        (
            {"bertPretraining": {"nodeGroup": "trn1-32xl-ng1", "pendingTimeoutMinutes": 2700}},
            "trainium-workloads:bertPretraining.pendingTimeoutMinutes = 2700: Input should be less than or equal "
            "to 1440",
        ),
        (
            {"clusterCheck": {"nodeGroup": "trn1-32xl-ng1", "timeoutMinutes": 3600}},
            "trainium-workloads:clusterCheck.timeoutMinutes = 3600: Input should be less than or equal to 1440",
        ),
        # A namespace name, said in words rather than as a regular expression.
        (
            {"namespace": "Research"},
            "trainium-workloads:namespace = 'Research': must be 1-63 characters of lower-case letters, digits and '-'",
        ),
        # Shorter than a job-support node's start from zero.
        (
            {"dataStaging": {"timeoutMinutes": 5}},
            "trainium-workloads:dataStaging.timeoutMinutes = 5: Input should be greater than or equal to 15",
        ),
    ],
)
def test_the_workload_stacks_refuse_waits_in_the_wrong_unit_and_say_names_in_words(settings, expected):
    assert any(p.startswith(expected) for p in workload_problems(**settings))


def test_a_staging_timeout_shorter_than_the_staging_is_refused(workloads_with):
    with pytest.raises(ConfigError) as caught:
        workloads_with(dataStaging={"wikicorpus": True, "redpajama": True, "timeoutMinutes": 120})
    assert (
        "trainium-workloads:dataStaging.timeoutMinutes = 120: shorter than the RedPajama staging Job it waits for "
        "(about 175 minutes"
    ) in str(caught.value)


LOAD_BALANCER = {
    "allowedCidrs": ["10.0.0.0/16"],
    "certificateArn": CERTIFICATE.format(partition="aws", region="us-west-2"),
}


def lb_problems(region: str | None = "us-west-2", **changes: Any) -> list[str]:
    lb = LoadBalancerSettings.model_validate({**LOAD_BALANCER, **changes})
    return load_balancer_problems(lb, lambda *rest: ".".join(["lb", *map(str, rest)]), region)


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        (
            {"certificateArn": CERTIFICATE.format(partition="aws", region="us-east-1")},
            f"lb.certificateArn = '{CERTIFICATE.format(partition='aws', region='us-east-1')}': in us-east-1, but the "
            "cluster is in us-west-2; the load balancer is in the cluster's region",
        ),
        (
            {"certificateArn": CERTIFICATE.format(partition="aws-cn", region="us-west-2")},
            "an ACM certificate of the 'aws-cn' partition, but us-west-2 is in 'aws'",
        ),
        (
            {"allowedCidrs": [f"10.{i}.0.0/16" for i in range(31)]},
            "lb.allowedCidrs: 31 ranges become 62 inbound rules of the load balancer's security group",
        ),
    ],
)
def test_the_load_balancer_refuses_what_aws_would(changes, expected):
    assert any(expected in p for p in lb_problems(**changes))


def test_the_load_balancer_within_the_limits_is_accepted():
    assert lb_problems(allowedCidrs=[f"10.{i}.0.0/16" for i in range(30)]) == []
    assert lb_problems(region=None, certificateArn=CERTIFICATE.format(partition="aws", region="eu-west-1")) == []


def test_the_clusters_region_comes_from_its_ecr_repositories():
    assert cluster_region(["111122223333.dkr.ecr.us-east-2.amazonaws.com/trn-dev/cmd-shell"]) == "us-east-2"
    assert cluster_region(["111122223333.dkr.ecr.cn-north-1.amazonaws.com.cn/x"]) == "cn-north-1"
    assert cluster_region(["registry.example.com/x"]) is None


def test_a_certificate_of_another_region_is_refused_through_the_workload_stack(workloads_with):
    arn = CERTIFICATE.format(partition="aws", region="eu-west-1")
    with pytest.raises(ConfigError) as caught:
        workloads_with(
            tensorboard={"loadBalancer": {**LOAD_BALANCER, "certificateArn": arn}},
        )
    assert (
        f"trainium-workloads:tensorboard.loadBalancer.certificateArn = '{arn}': in eu-west-1, but the cluster is in us-west-2"
        in str(caught.value)
    )


# --- the bootstrap stack -----------------------------------------------------------------------


def test_an_oidc_provider_of_another_partition_is_refused():
    config = stack_config(FIXTURE_ROOT / "bootstrap", "dev")
    arn = "arn:aws-cn:iam::111122223333:oidc-provider/token.actions.githubusercontent.com"
    config["trainium-bootstrap:existingOidcProviderArn"] = arn
    with pytest.raises(ConfigError) as caught:
        parse_bootstrap_config(config)
    assert caught.value.problems == [
        f"trainium-bootstrap:existingOidcProviderArn = '{arn}': of the 'aws-cn' partition, but aws:region us-west-2 "
        "is in 'aws'; allowed: arn:aws:iam::<account>:oidc-provider/token.actions.githubusercontent.com"
    ]


def test_a_workload_type_error_does_not_hide_a_rule_error():
    from workloads.checks import config_problems

    config = stack_config(FIXTURE_ROOT / "workloads", "dev")
    config["trainium-workloads:clusterCheck"] = json.dumps({"nodeGroup": "trn1-32xl-ng1", "timeoutMinutes": 10})
    config["trainium-workloads:dataStaging"] = json.dumps({"redpajama": True, "timeoutMinutes": 60})
    config["trainium-workloads:hfToken"] = "hf_test_token"
    with pytest.raises(ConfigError) as caught:
        parse_workloads_config(config, config_problems)
    found = caught.value.problems
    assert (
        found[0] == "trainium-workloads:clusterCheck.timeoutMinutes = 10: Input should be greater than or equal to 30"
    )
    assert any(
        p.startswith("trainium-workloads:dataStaging.timeoutMinutes = 60: shorter than the RedPajama") for p in found
    )
    # Without the rules (as the tests that parse settings alone call it), the type errors only.
    with pytest.raises(ConfigError) as caught:
        parse_workloads_config(config)
    assert caught.value.problems == found[:1]
