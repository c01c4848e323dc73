"""Security rules of the policy pack: one resource that passes and one that violates, per rule.

Props are the engine's input property names (camelCase), as offline/plan/mocks.py records them and
pulumi-policy passes them (pulumi/pulumi-policy sdk/python/lib/pulumi_policy/policy.py v1.21.0:
ResourceValidationArgs.props "The inputs of the resource").
"""

from __future__ import annotations

import pytest
from pulumi_policy.proxy import UNKNOWN_OBJECT_VALUE

from offline.plan.mocks import Registration
from offline.plan.policy_run import parse_config, run_policies
from policy.guardrails import POLICIES
from policy.guardrails.security import world_open
from tests.policy_helpers import engine_violations, first_preview, k8s, reg, urn, violations

EKS = "eks:index:Cluster"
EKS_AWS = "aws:eks/cluster:Cluster"
LT = "aws:ec2/launchTemplate:LaunchTemplate"
SG = "aws:ec2/securityGroup:SecurityGroup"
IN = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
OUT = "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule"
ALL_LOGS = ["api", "audit", "authenticator", "controllerManager", "scheduler"]


# pulumi-eks's Cluster is a remote component: in a real preview the engine gets its props as {}
# (pulumi-eks v4.3.0/HEAD bundles @pulumi/pulumi 3.173.0, nodejs/eks/yarn.lock; its
# sdk/nodejs/resource.ts ComponentResource sends `remote || opts?.urn ? args : {}` from inside the
# provider, "Explicitly ignore the props passed in"). The rules check its child
# aws:eks/cluster:Cluster (pulumi-eks nodejs/eks/cluster/cluster.ts), so an empty component passes.
@pytest.mark.parametrize("rule", ["eks-secrets-encryption", "eks-control-plane-logs", "eks-endpoint-not-open"])
def test_the_pulumi_eks_component_as_the_engine_sees_it_passes(rule):
    assert not engine_violations(rule, EKS, {})


def test_secrets_encryption_on_the_aws_cluster():
    good = {"encryptionConfig": {"resources": ["secrets"], "provider": {"keyArn": "arn:aws:kms:k"}}}
    assert not engine_violations("eks-secrets-encryption", EKS_AWS, good)
    assert engine_violations("eks-secrets-encryption", EKS_AWS, {"encryptionConfig": {"resources": []}})
    assert engine_violations("eks-secrets-encryption", EKS_AWS, {"name": "trn"})
    # pulumi-eks cluster.ts builds encryptionConfig in an apply over the key ARN: while the key is
    # new the whole block is unknown. Present is enough (EKS takes only "secrets", with a key).
    assert not engine_violations("eks-secrets-encryption", EKS_AWS, {"encryptionConfig": UNKNOWN_OBJECT_VALUE})


def test_control_plane_logs_all_on_by_default_and_configurable():
    assert not engine_violations("eks-control-plane-logs", EKS_AWS, {"enabledClusterLogTypes": ALL_LOGS})
    [message] = engine_violations("eks-control-plane-logs", EKS_AWS, {"enabledClusterLogTypes": ["api"]})
    assert "'audit'" in message and "'r'" in message
    assert not engine_violations(
        "eks-control-plane-logs", EKS_AWS, {"enabledClusterLogTypes": ["api"]}, config={"requiredLogTypes": ["api"]}
    )


def test_endpoint_open_to_the_world_by_default():
    # AWS defaults to a public endpoint open to 0.0.0.0/0, and pulumi-eks leaves both unset when
    # not given: unset counts as open.
    assert engine_violations("eks-endpoint-not-open", EKS_AWS, {})
    assert engine_violations("eks-endpoint-not-open", EKS_AWS, {"vpcConfig": {"publicAccessCidrs": ["0.0.0.0/0"]}})
    assert engine_violations(
        "eks-endpoint-not-open", EKS_AWS, {"vpcConfig": {"endpointPublicAccess": True, "publicAccessCidrs": ["::/0"]}}
    )
    assert not engine_violations(
        "eks-endpoint-not-open",
        EKS_AWS,
        {"vpcConfig": {"endpointPublicAccess": True, "publicAccessCidrs": ["203.0.113.0/24"]}},
    )
    assert not engine_violations("eks-endpoint-not-open", EKS_AWS, {"vpcConfig": {"endpointPublicAccess": False}})


def test_offline_the_component_is_checked_through_the_child_pulumi_eks_declares():
    # The mocks never run the component (no child exists offline), so offline/plan/policy_run.py adds
    # the child from the component's inputs, the way cluster.ts builds it.
    good = {
        "encryptionConfigKeyArn": "arn:aws:kms:k",
        "enabledClusterLogTypes": ALL_LOGS,
        "endpointPublicAccess": True,
        "publicAccessCidrs": ["203.0.113.0/24"],
    }
    for rule in ("eks-secrets-encryption", "eks-control-plane-logs", "eks-endpoint-not-open"):
        assert not violations(rule, reg(EKS, "c", good)), rule
    [message] = violations("eks-secrets-encryption", reg(EKS, "c", {**good, "encryptionConfigKeyArn": None}))
    assert "'c-eksCluster'" in message
    assert violations("eks-control-plane-logs", reg(EKS, "c", {**good, "enabledClusterLogTypes": ["api"]}))
    assert violations(
        "eks-endpoint-not-open", reg(EKS, "c", {k: v for k, v in good.items() if k != "publicAccessCidrs"})
    )
    assert not violations(
        "eks-endpoint-not-open", reg(EKS, "c", {**good, "endpointPublicAccess": False, "publicAccessCidrs": None})
    )
    # A cluster that already has its AWS child is not given a second one.
    child = reg(EKS_AWS, "c-eksCluster", {"encryptionConfig": {"resources": ["secrets"], "provider": {"keyArn": "k"}}})
    child.parent = urn(EKS, "c")
    assert not violations("eks-secrets-encryption", reg(EKS, "c", {}), child)


def test_launch_template_imdsv2_encryption_no_public_ip():
    good = {
        "metadataOptions": {"httpTokens": "required", "httpPutResponseHopLimit": 1},
        "blockDeviceMappings": [{"deviceName": "/dev/xvda", "ebs": {"encrypted": "true"}}],
        "networkInterfaces": [{"deviceIndex": 0, "interfaceType": "efa"}],
    }
    assert not violations("launch-template-hardening", reg(LT, "lt", good))
    bad = {
        "metadataOptions": {"httpTokens": "optional"},
        "blockDeviceMappings": [{"deviceName": "/dev/xvdb", "ebs": {"volumeSize": 100}}],
        "networkInterfaces": [{"associatePublicIpAddress": "true"}],
    }
    messages = violations("launch-template-hardening", reg(LT, "lt", bad))
    assert len(messages) == 4 and "IMDSv1" in messages[0] and "/dev/xvdb" in messages[2] and "public IP" in messages[3]
    assert "httpPutResponseHopLimit to None" in messages[1]


@pytest.mark.parametrize("hops", [2, 3])
def test_a_metadata_hop_limit_above_one_is_refused(hops):
    # Two hops reach pods on the pod network (one more hop, the veth): they could take the node's role.
    lt = {
        "metadataOptions": {"httpTokens": "required", "httpPutResponseHopLimit": hops},
        "blockDeviceMappings": [{"deviceName": "/dev/xvda", "ebs": {"encrypted": "true"}}],
    }
    [message] = engine_violations("launch-template-hardening", LT, lt)
    assert f"httpPutResponseHopLimit to {hops}: set it to 1" in message
    lt["metadataOptions"]["httpPutResponseHopLimit"] = 1
    assert not engine_violations("launch-template-hardening", LT, lt)


def test_a_launch_template_with_the_metadata_service_off_is_not_called_imdsv1():
    # pulumi-aws LaunchTemplate metadataOptions.httpEndpoint "disabled": no metadata service, so no
    # tokens to require and no hops to count; the rest of the rule still applies.
    off = {
        "metadataOptions": {"httpEndpoint": "disabled"},
        "blockDeviceMappings": [{"deviceName": "/dev/xvda", "ebs": {"encrypted": "true"}}],
    }
    assert not engine_violations("launch-template-hardening", LT, off)
    off["blockDeviceMappings"][0]["ebs"]["encrypted"] = "false"
    [message] = engine_violations("launch-template-hardening", LT, off)
    assert "unencrypted EBS volume" in message
    on = {**off, "metadataOptions": {"httpEndpoint": "enabled", "httpPutResponseHopLimit": 2}}
    assert [m for m in engine_violations("launch-template-hardening", LT, on) if "IMDSv1" in m or "HopLimit to 2" in m]


def test_karpenter_node_classes_keep_one_metadata_hop():
    node_class = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
    meta = {"metadata": {"name": "trainium"}}
    # Unset: the CRD's defaults, one hop and tokens required (karpenter-provider-aws v1.14.1).
    assert not engine_violations("node-class-metadata", node_class, {**meta, "spec": {"amiFamily": "AL2023"}})
    [message] = engine_violations(
        "node-class-metadata", node_class, {**meta, "spec": {"metadataOptions": {"httpPutResponseHopLimit": 2}}}
    )
    assert "httpPutResponseHopLimit to 2" in message
    assert engine_violations(
        "node-class-metadata", node_class, {**meta, "spec": {"metadataOptions": {"httpTokens": "optional"}}}
    )


def test_a_launch_template_without_an_encrypted_volume_is_refused():
    # No blockDeviceMappings: the root volume takes the AMI snapshot's encryption.
    lt = {"metadataOptions": {"httpTokens": "required", "httpPutResponseHopLimit": 1}}
    [message] = engine_violations("launch-template-hardening", LT, lt)
    assert "declares no EBS volume" in message
    lt["blockDeviceMappings"] = [{"deviceName": "/dev/xvda", "ebs": {"volumeSize": 100, "encrypted": "true"}}]
    assert not engine_violations("launch-template-hardening", LT, lt)


def test_standalone_ebs_volumes_are_encrypted():
    volume = "aws:ebs/volume:Volume"
    assert engine_violations("ebs-volume-encrypted", volume, {"size": 100})
    assert engine_violations("ebs-volume-encrypted", volume, {"size": 100, "encrypted": False})
    assert not engine_violations("ebs-volume-encrypted", volume, {"size": 100, "encrypted": True})


def test_node_group_ssh_only_from_named_security_groups():
    group = "aws:eks/nodeGroup:NodeGroup"
    [message] = engine_violations("node-group-no-open-ssh", group, {"remoteAccess": {"ec2SshKey": "ops"}})
    assert "opens port 22 to 0.0.0.0/0" in message
    assert not engine_violations(
        "node-group-no-open-ssh",
        group,
        {"remoteAccess": {"ec2SshKey": "ops", "sourceSecurityGroupIds": ["sg-bastion"]}},
    )
    assert not engine_violations("node-group-no-open-ssh", group, {"nodeGroupName": "core"})


def test_node_group_without_a_launch_template_is_refused():
    # EKS generates a launch template with its default metadata options for such a group (EKS user
    # guide, launch-templates.html), and remoteAccess is accepted only there: the SSH key case of
    # node-group-no-open-ssh comes with it. Engine names: aws:eks/nodeGroup:NodeGroup inputs
    # launchTemplate {id, version} and remoteAccess {ec2SshKey, sourceSecurityGroupIds}.
    group = "aws:eks/nodeGroup:NodeGroup"
    ssh = {"nodeGroupName": "ops", "remoteAccess": {"ec2SshKey": "ops", "sourceSecurityGroupIds": ["sg-1"]}}
    [message] = engine_violations("node-group-launch-template", group, ssh)
    assert "'r' has no launch template" in message and "default metadata options" in message
    assert not engine_violations("node-group-no-open-ssh", group, ssh)  # node-group-launch-template refuses it
    # At a first preview the template is new and its id unknown: present is enough.
    assert not engine_violations(
        "node-group-launch-template", group, {"nodeGroupName": "core", "launchTemplate": UNKNOWN_OBJECT_VALUE}
    )
    assert not engine_violations(
        "node-group-launch-template", group, {"nodeGroupName": "core", "launchTemplate": {"id": "lt-1", "version": "3"}}
    )


def test_every_shipped_node_group_names_its_launch_template(dev, prod):
    # The property the rule reads is the one the components set (infra/components/cluster.py,
    # accelerators.py: launch_template=NodeGroupLaunchTemplateArgs), recorded under the engine's name.
    for result in (dev, prod):
        groups = result.of_type("aws:eks/nodeGroup:NodeGroup")
        assert groups and all(set(g.inputs["launchTemplate"]) == {"id", "version"} for g in groups)
        assert not violations("node-group-launch-template", *result.registrations)


@pytest.mark.parametrize(
    "type_",
    ["aws:lb/loadBalancer:LoadBalancer", "aws:alb/loadBalancer:LoadBalancer", "aws:elb/loadBalancer:LoadBalancer"],
)
def test_aws_load_balancers_are_internal(type_):
    # pulumi-aws: `internal` unset is an internet-facing load balancer.
    assert engine_violations("load-balancer-internal", type_, {"loadBalancerType": "application"})
    assert engine_violations("load-balancer-internal", type_, {"internal": False})
    assert not engine_violations("load-balancer-internal", type_, {"internal": True})
    assert not engine_violations("load-balancer-internal", type_, {"internal": False}, config={"allowedNames": ["r"]})


@pytest.mark.parametrize(
    "sources",
    [
        ["0.0.0.0/1", "128.0.0.0/1"],
        ["::/1", "8000::/1"],
        ["2000::/3"],
        ["2000::/4", "3000::/4"],
        ["0.0.0.0/2", "64.0.0.0/2", "128.0.0.0/2", "192.0.0.0/2"],
    ],
)
def test_the_world_in_slices_is_the_world(sources):
    assert world_open(sources)
    assert violations(
        "security-group-no-open-ingress",
        reg("aws:ec2/securityGroupRule:SecurityGroupRule", "r", {"type": "ingress", "cidrBlocks": sources}),
    )
    assert violations("security-group-no-open-ingress", reg(SG, "r", {"ingress": [{"cidrBlocks": sources}]}))
    assert violations(
        "load-balancer-restricted",
        _service({"service.beta.kubernetes.io/aws-load-balancer-ssl-cert": "arn:acm"}, sources),
    )
    assert engine_violations("eks-endpoint-not-open", EKS_AWS, {"vpcConfig": {"publicAccessCidrs": sources}})


def test_listed_networks_are_not_the_world():
    assert not world_open(["203.0.113.0/24", "198.51.100.0/24"])
    assert not world_open(["0.0.0.0/1"])  # half the internet is too much, but not this rule's finding
    assert not world_open(["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"])
    # Only 2000::/3 is routed on the internet: a slice of it, or private IPv6, is not the world.
    assert not world_open(["2000::/4"])
    assert not world_open(["fc00::/7", "fe80::/10", "::/8", "4000::/2"])


def test_separate_ingress_rules_adding_up_to_the_world_are_refused():
    group = (SG, "web")
    halves = [
        reg(IN, f"half-{i}", {"cidrIpv4": cidr, "ipProtocol": "tcp"}, {"securityGroupId": [group]})
        for i, cidr in enumerate(("0.0.0.0/1", "128.0.0.0/1"))
    ]
    [message] = violations("security-group-no-sliced-open-ingress", reg(SG, "web", {}), *halves)
    assert "'web'" in message and "the whole" in message
    # One half alone, or the two halves on different groups, is not the world.
    assert not violations("security-group-no-sliced-open-ingress", reg(SG, "web", {}), halves[0])
    other = reg(IN, "half-1", {"cidrIpv4": "128.0.0.0/1", "ipProtocol": "tcp"}, {"securityGroupId": [(SG, "other")]})
    assert not violations(
        "security-group-no-sliced-open-ingress", reg(SG, "web", {}), reg(SG, "other", {}), halves[0], other
    )


@pytest.mark.parametrize(
    "type_, inputs",
    [
        (IN, {"cidrIpv4": "0.0.0.0/0", "ipProtocol": "tcp", "fromPort": 22, "toPort": 22}),
        (IN, {"cidrIpv6": "::/0", "ipProtocol": "-1"}),
        ("aws:ec2/securityGroupRule:SecurityGroupRule", {"type": "ingress", "cidrBlocks": ["0.0.0.0/0"]}),
        (SG, {"ingress": [{"protocol": "tcp", "fromPort": 22, "toPort": 22, "cidrBlocks": ["0.0.0.0/0"]}]}),
    ],
)
def test_no_ingress_from_anywhere(type_, inputs):
    assert violations("security-group-no-open-ingress", reg(type_, "r", inputs))


def test_ingress_from_a_group_or_egress_anywhere_is_fine():
    assert not violations(
        "security-group-no-open-ingress", reg(IN, "r", {"referencedSecurityGroupId": "sg-1", "ipProtocol": "-1"})
    )
    assert not violations(
        "security-group-no-open-ingress",
        reg("aws:ec2/securityGroupRule:SecurityGroupRule", "r", {"type": "egress", "cidrBlocks": ["0.0.0.0/0"]}),
    )


def _efa_stack(extra_rule):
    efa = (SG, "efa")
    return [
        reg(SG, "efa", {"description": "EFA"}),
        reg(LT, "lt", {"networkInterfaces": [{"interfaceType": "efa"}]}, {"networkInterfaces": [efa]}),
        reg(
            IN,
            "in-self",
            {"ipProtocol": "-1", "referencedSecurityGroupId": "sg-efa"},
            {"securityGroupId": [efa], "referencedSecurityGroupId": [efa]},
        ),
        reg(
            OUT,
            "out-self",
            {"ipProtocol": "-1", "referencedSecurityGroupId": "sg-efa"},
            {"securityGroupId": [efa], "referencedSecurityGroupId": [efa]},
        ),
        *extra_rule(efa),
    ]


def test_efa_group_allows_only_itself():
    # The group is found through the launch template's EFA interfaces (property dependencies, which
    # the engine passes to stack policies even while the group's id is unknown at preview).
    assert not violations("efa-security-group-self-only", *_efa_stack(lambda efa: []))
    [message] = violations("efa-security-group-self-only", *_efa_stack(_ssh_rule))
    assert "'ssh'" in message and "'efa'" in message

    def other(efa: tuple[str, str]) -> list[Registration]:
        return [
            reg(SG, "other", {}),
            reg(
                IN,
                "from-other",
                {"ipProtocol": "-1"},
                {"securityGroupId": [efa], "referencedSecurityGroupId": [(SG, "other")]},
            ),
        ]

    assert violations("efa-security-group-self-only", *_efa_stack(other))


def _ssh_rule(efa: tuple[str, str]) -> list[Registration]:
    """SSH from 10.0.0.0/8 into the EFA group: a rule reaching beyond the group."""
    return [reg(IN, "ssh", {"cidrIpv4": "10.0.0.0/8", "ipProtocol": "tcp"}, {"securityGroupId": [efa]})]


def test_efa_group_checked_while_its_inline_rules_are_unknown():
    # Stack rules read outputs; aws_security_group's inline ingress/egress are computed
    # (pulumi_aws SecurityGroup.ingress/egress are non-optional outputs), unknown at the first
    # preview of a new group. The separate rule resources are still checked.
    rule = [p for p in POLICIES if p.name == "efa-security-group-self-only"]
    report = run_policies(
        [first_preview(r, outputs=True) for r in _efa_stack(_ssh_rule)], parse_config({}, "t"), "us-west-2", rule
    )
    assert not report.notes and len(report.violations) == 1 and "'ssh'" in report.violations[0].message


def test_ecr_immutable_and_scanned():
    good = {"imageTagMutability": "IMMUTABLE", "imageScanningConfiguration": {"scanOnPush": True}}
    assert not violations("ecr-immutable-scanned", reg("aws:ecr/repository:Repository", "r", good))
    assert len(violations("ecr-immutable-scanned", reg("aws:ecr/repository:Repository", "r", {}))) == 2


def test_kms_keys_rotate_unless_asymmetric():
    assert not violations("kms-key-rotation", reg("aws:kms/key:Key", "k", {"enableKeyRotation": True}))
    assert violations("kms-key-rotation", reg("aws:kms/key:Key", "k", {}))
    assert not violations("kms-key-rotation", reg("aws:kms/key:Key", "k", {"customerMasterKeySpec": "RSA_2048"}))


def test_s3_bucket_blocks_public_access_encrypted_versioned():
    bucket = ("aws:s3/bucket:Bucket", "state")
    block = {k: True for k in ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")}
    stack = [
        reg(*bucket, {}),
        reg("aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock", "pab", block, {"bucket": [bucket]}),
        reg(
            "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
            "sse",
            {"rules": [{"applyServerSideEncryptionByDefault": {"sseAlgorithm": "aws:kms"}}]},
            {"bucket": [bucket]},
        ),
        reg(
            "aws:s3/bucketVersioning:BucketVersioning",
            "ver",
            {"versioningConfiguration": {"status": "Enabled"}},
            {"bucket": [bucket]},
        ),
    ]
    assert not violations("s3-bucket-protected", *stack)
    assert len(violations("s3-bucket-protected", stack[0])) == 3
    half_blocked = reg(
        "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock",
        "pab",
        {**block, "restrictPublicBuckets": False},
        {"bucket": [bucket]},
    )
    assert violations("s3-bucket-protected", stack[0], half_blocked, *stack[2:])
    # The bucket's own serverSideEncryptionConfiguration and versioning are computed outputs
    # (pulumi_aws Bucket: non-optional), unknown at the first preview: the separate resources
    # decide, an unknown inline value is no finding, and the rule still runs for the rest.
    rule = [p for p in POLICIES if p.name == "s3-bucket-protected"]
    preview = [first_preview(r, outputs=True) for r in stack]
    assert not run_policies(preview, parse_config({}, "t"), "us-west-2", rule).notes
    assert not run_policies(preview, parse_config({}, "t"), "us-west-2", rule).violations
    alone = run_policies([preview[0]], parse_config({}, "t"), "us-west-2", rule)
    assert not alone.notes and ["public access" in v.message for v in alone.violations] == [True]


def _service(annotations, ranges):
    spec = {"type": "LoadBalancer", "ports": [{"port": 443}]}
    if ranges is not None:
        spec["loadBalancerSourceRanges"] = ranges
    return k8s(
        "kubernetes:core/v1:Service",
        "svc",
        {"metadata": {"name": "tb", "namespace": "default", "annotations": annotations}, "spec": spec},
    )


def test_load_balancer_internal_or_restricted_with_tls():
    # cloud-provider-aws v1.34 pkg/providers/v1/aws.go: the internal annotation set to anything
    # but "false" makes the ELB internal (as workloads/load_balancer_rules.py cites).
    internal = "service.beta.kubernetes.io/aws-load-balancer-internal"
    cert = "service.beta.kubernetes.io/aws-load-balancer-ssl-cert"
    assert not violations("load-balancer-restricted", _service({internal: "true"}, None))
    assert not violations(
        "load-balancer-restricted", _service({internal: "false", cert: "arn:acm"}, ["203.0.113.0/24"])
    )
    assert len(violations("load-balancer-restricted", _service({internal: "false"}, None))) == 2
    assert len(violations("load-balancer-restricted", _service({cert: "arn:acm"}, ["0.0.0.0/0"]))) == 1


def _pod(image, **extra):
    return k8s(
        "kubernetes:core/v1:Pod",
        "p",
        {
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": image}], **extra},
        },
    )


@pytest.mark.parametrize("image", ["registry.k8s.io/pause", "python:latest", "localhost:5000/pause"])
def test_unpinned_images(image):
    assert violations("image-pinned-tag", _pod(image))


@pytest.mark.parametrize(
    "image", ["registry.k8s.io/pause:3.10", "localhost:5000/pause:3.10", "python@sha256:" + "a" * 64]
)
def test_pinned_images(image):
    assert not violations("image-pinned-tag", _pod(image))


def test_images_inside_job_templates_are_found():
    job = k8s(
        "kubernetes:batch.volcano.sh/v1alpha1:Job",
        "j",
        {
            "metadata": {"name": "j", "namespace": "default"},
            "spec": {
                "tasks": [{"name": "w", "template": {"spec": {"containers": [{"name": "c", "image": "bert:latest"}]}}}]
            },
        },
    )
    [message] = violations("image-pinned-tag", job)
    assert "spec.tasks[0].template.spec.containers[c]" in message


def test_privileged_and_host_path_only_where_allowed():
    privileged = k8s(
        "kubernetes:core/v1:Pod",
        "p",
        {
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {
                "containers": [{"name": "c", "image": "x:1", "securityContext": {"privileged": True}}],
                "volumes": [{"name": "dev", "hostPath": {"path": "/dev"}}],
            },
        },
    )
    assert len(violations("no-privileged-or-host-path", privileged)) == 2
    assert not violations("no-privileged-or-host-path", privileged, config={"allowedObjects": ["default/p"]})
    assert not violations(
        "no-privileged-or-host-path", _pod("x:1", volumes=[{"name": "shm", "emptyDir": {"medium": "Memory"}}])
    )


@pytest.mark.parametrize("spec", [{"hostNetwork": True}, {"hostPID": True}, {"hostIPC": True}])
def test_host_namespaces_only_where_allowed(spec):
    [message] = violations("no-privileged-or-host-path", _pod("x:1", **spec))
    assert next(iter(spec)) in message
    assert not violations("no-privileged-or-host-path", _pod("x:1", **spec), config={"allowedObjects": ["default/p"]})


def test_host_ports_only_where_allowed():
    # Pod Security baseline: hostPort unset or 0 (pod-security-admission v0.34.9 check_hostPorts.go).
    init = {"initContainers": [{"name": "i", "image": "x:1", "ports": [{"containerPort": 22, "hostPort": 2222}]}]}
    [message] = violations("no-privileged-or-host-path", _pod("x:1", **init))
    assert "initContainers[i] binds host ports [2222]" in message
    assert not violations("no-privileged-or-host-path", _pod("x:1", **init), config={"allowedObjects": ["default/p"]})
    init["initContainers"][0]["ports"][0]["hostPort"] = 0
    assert not violations("no-privileged-or-host-path", _pod("x:1", **init))


def test_capabilities_beyond_the_runtime_default_set_are_refused():
    def pod(add):
        return k8s(
            "kubernetes:kubeflow.org/v2beta1:MPIJob",
            "m",
            {
                "metadata": {"name": "m", "namespace": "default"},
                "spec": {
                    "mpiReplicaSpecs": {
                        "Worker": {
                            "template": {
                                "spec": {
                                    "containers": [
                                        {
                                            "name": "w",
                                            "image": "x:1",
                                            "securityContext": {"capabilities": {"drop": ["ALL"], "add": add}},
                                        }
                                    ]
                                }
                            }
                        }
                    }
                },
            },
        )

    [message] = violations("no-privileged-or-host-path", pod(["SYS_ADMIN", "SETUID"]))
    assert "['SYS_ADMIN']" in message and "spec.mpiReplicaSpecs.Worker.template.spec" in message
    # A root sshd's five (privilege separation, PAM, port 22) are in the default set Pod Security baseline admits.
    assert not violations(
        "no-privileged-or-host-path", pod(["AUDIT_WRITE", "NET_BIND_SERVICE", "SETGID", "SETUID", "SYS_CHROOT"])
    )


def test_controller_made_pods_are_checked_too():
    # A RayJob's submitter template is a pod KubeRay creates as given.
    rayjob = k8s(
        "kubernetes:ray.io/v1:RayJob",
        "r",
        {
            "metadata": {"name": "r", "namespace": "default"},
            "spec": {
                "submitterPodTemplate": {"spec": {"hostNetwork": True, "containers": [{"name": "s", "image": "x:1"}]}}
            },
        },
    )
    [message] = violations("no-privileged-or-host-path", rayjob)
    assert "spec.submitterPodTemplate.spec" in message and "hostNetwork" in message


LUSTRE = "aws:fsx/lustreFileSystem:LustreFileSystem"


def _protected_file_system(protect: bool, **props):
    # The engine hands the rule the resource's `protect` option (pulumi-policy v1.21.0 policy.py
    # PolicyResourceOptions.protect); offline/plan/policy_run.py passes the recorded one.
    registration = reg(LUSTRE, "fsx-training", {"deploymentType": "PERSISTENT_2", **props})
    registration.protect = protect
    return registration


def test_a_retained_persistent_file_system_keeps_automatic_backups():
    # FSx CreateFileSystem: AutomaticBackupRetentionDays defaults to 0, no backups; `protect` stops
    # only `pulumi destroy`, so a retained file system without backups is the only copy of its data.
    [message] = violations("fsx-retained-backups", _protected_file_system(True))
    assert "'fsx-training' is retained (protected) but keeps no day(s)" in message
    assert "storage.backupRetentionDays" in message
    assert violations("fsx-retained-backups", _protected_file_system(True, automaticBackupRetentionDays=0))
    assert not violations("fsx-retained-backups", _protected_file_system(True, automaticBackupRetentionDays=1))
    # Prod asks for a week (policy/config.prod.json).
    week = {"minimumRetentionDays": 7}
    [message] = violations(
        "fsx-retained-backups", _protected_file_system(True, automaticBackupRetentionDays=3), config=week
    )
    assert "keeps 3 day(s)" in message and "set automaticBackupRetentionDays to 7-90" in message
    assert not violations(
        "fsx-retained-backups", _protected_file_system(True, automaticBackupRetentionDays=14), config=week
    )


def test_only_retained_persistent_file_systems_must_keep_backups():
    # An unprotected (dev) file system may go without; SCRATCH types take no backups at all, and
    # terraform-provider-aws defaults deploymentType to SCRATCH_1.
    assert not violations("fsx-retained-backups", _protected_file_system(False))
    assert not violations("fsx-retained-backups", _protected_file_system(True, deploymentType="SCRATCH_2"))
    registration = reg(LUSTRE, "fsx-training", {})
    registration.protect = True
    assert not violations("fsx-retained-backups", registration)
    assert not violations(
        "fsx-retained-backups", _protected_file_system(True, automaticBackupRetentionDays=UNKNOWN_OBJECT_VALUE)
    )


def test_the_shipped_stacks_keep_backups_where_they_retain(dev, prod):
    prod_fs = prod.named("fsx-training", LUSTRE)
    assert prod_fs.protect and prod_fs.inputs["automaticBackupRetentionDays"] == 14
    pack = parse_config({"fsx-retained-backups": {"minimumRetentionDays": 7}}, "prod")
    report = run_policies(
        prod.registrations, pack, "us-east-2", [p for p in POLICIES if p.name == "fsx-retained-backups"]
    )
    assert not report.violations
    # The same file system with backups off is refused by the prod pack.
    prod_fs_off = _protected_file_system(True, automaticBackupRetentionDays=0)
    report = run_policies([prod_fs_off], pack, "us-east-2", [p for p in POLICIES if p.name == "fsx-retained-backups"])
    assert [v.policy for v in report.mandatory] == ["fsx-retained-backups"]
