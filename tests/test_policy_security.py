"""Security rules of the policy pack: one resource that passes and one that violates, per rule.

Props are the engine's input property names (camelCase), as offline/mocks.py records them and
pulumi-policy passes them (pulumi/pulumi-policy sdk/python/lib/pulumi_policy/policy.py v1.21.0:
ResourceValidationArgs.props "The inputs of the resource").
"""

from __future__ import annotations

import pytest

from tests.policy_helpers import k8s, reg, violations

EKS = "eks:index:Cluster"
EKS_AWS = "aws:eks/cluster:Cluster"
LT = "aws:ec2/launchTemplate:LaunchTemplate"
SG = "aws:ec2/securityGroup:SecurityGroup"
IN = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
OUT = "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule"
ALL_LOGS = ["api", "audit", "authenticator", "controllerManager", "scheduler"]


def test_secrets_encryption_on_the_component_and_the_aws_cluster():
    assert not violations("eks-secrets-encryption", reg(EKS, "c", {"encryptionConfigKeyArn": "arn:aws:kms:k"}))
    assert violations("eks-secrets-encryption", reg(EKS, "c", {"name": "trn"}))
    good = {"encryptionConfig": {"resources": ["secrets"], "provider": {"keyArn": "arn:aws:kms:k"}}}
    assert not violations("eks-secrets-encryption", reg(EKS_AWS, "c", good))
    assert violations("eks-secrets-encryption", reg(EKS_AWS, "c", {"encryptionConfig": {"resources": []}}))


def test_control_plane_logs_all_on_by_default_and_configurable():
    assert not violations("eks-control-plane-logs", reg(EKS, "c", {"enabledClusterLogTypes": ALL_LOGS}))
    [message] = violations("eks-control-plane-logs", reg(EKS, "c", {"enabledClusterLogTypes": ["api"]}))
    assert "'audit'" in message and "'c'" in message
    assert not violations("eks-control-plane-logs", reg(EKS, "c", {"enabledClusterLogTypes": ["api"]}),
                          config={"requiredLogTypes": ["api"]})


def test_endpoint_open_to_the_world_by_default():
    # AWS and pulumi-eks default to a public endpoint open to 0.0.0.0/0: unset counts as open.
    assert violations("eks-endpoint-not-open", reg(EKS, "c", {}))
    assert violations("eks-endpoint-not-open", reg(EKS, "c", {"endpointPublicAccess": True, "publicAccessCidrs": ["::/0"]}))
    assert not violations("eks-endpoint-not-open", reg(EKS, "c", {"endpointPublicAccess": True, "publicAccessCidrs": ["203.0.113.0/24"]}))
    assert not violations("eks-endpoint-not-open", reg(EKS, "c", {"endpointPublicAccess": False}))
    assert violations("eks-endpoint-not-open", reg(EKS_AWS, "c", {"vpcConfig": {"publicAccessCidrs": ["0.0.0.0/0"]}}))


def test_launch_template_imdsv2_encryption_no_public_ip():
    good = {"metadataOptions": {"httpTokens": "required"},
            "blockDeviceMappings": [{"deviceName": "/dev/xvda", "ebs": {"encrypted": "true"}}],
            "networkInterfaces": [{"deviceIndex": 0, "interfaceType": "efa"}]}
    assert not violations("launch-template-hardening", reg(LT, "lt", good))
    bad = {"metadataOptions": {"httpTokens": "optional"},
           "blockDeviceMappings": [{"deviceName": "/dev/xvdb", "ebs": {"volumeSize": 100}}],
           "networkInterfaces": [{"associatePublicIpAddress": "true"}]}
    messages = violations("launch-template-hardening", reg(LT, "lt", bad))
    assert len(messages) == 3 and "IMDSv1" in messages[0] and "/dev/xvdb" in messages[1] and "public IP" in messages[2]


@pytest.mark.parametrize("type_, inputs", [
    (IN, {"cidrIpv4": "0.0.0.0/0", "ipProtocol": "tcp", "fromPort": 22, "toPort": 22}),
    (IN, {"cidrIpv6": "::/0", "ipProtocol": "-1"}),
    ("aws:ec2/securityGroupRule:SecurityGroupRule", {"type": "ingress", "cidrBlocks": ["0.0.0.0/0"]}),
    (SG, {"ingress": [{"protocol": "tcp", "fromPort": 22, "toPort": 22, "cidrBlocks": ["0.0.0.0/0"]}]}),
])
def test_no_ingress_from_anywhere(type_, inputs):
    assert violations("security-group-no-open-ingress", reg(type_, "r", inputs))


def test_ingress_from_a_group_or_egress_anywhere_is_fine():
    assert not violations("security-group-no-open-ingress", reg(IN, "r", {"referencedSecurityGroupId": "sg-1", "ipProtocol": "-1"}))
    assert not violations("security-group-no-open-ingress", reg("aws:ec2/securityGroupRule:SecurityGroupRule", "r",
                                                                {"type": "egress", "cidrBlocks": ["0.0.0.0/0"]}))


def _efa_stack(extra_rule):
    efa = (SG, "efa")
    return [
        reg(SG, "efa", {"description": "EFA"}),
        reg(LT, "lt", {"networkInterfaces": [{"interfaceType": "efa"}]}, {"networkInterfaces": [efa]}),
        reg(IN, "in-self", {"ipProtocol": "-1", "referencedSecurityGroupId": "sg-efa"},
            {"securityGroupId": [efa], "referencedSecurityGroupId": [efa]}),
        reg(OUT, "out-self", {"ipProtocol": "-1", "referencedSecurityGroupId": "sg-efa"},
            {"securityGroupId": [efa], "referencedSecurityGroupId": [efa]}),
        *extra_rule(efa),
    ]


def test_efa_group_allows_only_itself():
    # The group is found through the launch template's EFA interfaces (property dependencies, which
    # the engine passes to stack policies even while the group's id is unknown at preview).
    assert not violations("efa-security-group-self-only", *_efa_stack(lambda efa: []))
    ssh = lambda efa: [reg(IN, "ssh", {"cidrIpv4": "10.0.0.0/8", "ipProtocol": "tcp"}, {"securityGroupId": [efa]})]
    [message] = violations("efa-security-group-self-only", *_efa_stack(ssh))
    assert "'ssh'" in message and "'efa'" in message
    other = lambda efa: [reg(SG, "other", {}),
                         reg(IN, "from-other", {"ipProtocol": "-1"}, {"securityGroupId": [efa], "referencedSecurityGroupId": [(SG, "other")]})]
    assert violations("efa-security-group-self-only", *_efa_stack(other))


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
        reg("aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration", "sse",
            {"rules": [{"applyServerSideEncryptionByDefault": {"sseAlgorithm": "aws:kms"}}]}, {"bucket": [bucket]}),
        reg("aws:s3/bucketVersioning:BucketVersioning", "ver", {"versioningConfiguration": {"status": "Enabled"}},
            {"bucket": [bucket]}),
    ]
    assert not violations("s3-bucket-protected", *stack)
    assert len(violations("s3-bucket-protected", stack[0])) == 3
    half_blocked = reg("aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock", "pab", {**block, "restrictPublicBuckets": False},
                       {"bucket": [bucket]})
    assert violations("s3-bucket-protected", stack[0], half_blocked, *stack[2:])


def _service(annotations, ranges):
    spec = {"type": "LoadBalancer", "ports": [{"port": 443}]}
    if ranges is not None:
        spec["loadBalancerSourceRanges"] = ranges
    return k8s("kubernetes:core/v1:Service", "svc", {"metadata": {"name": "tb", "namespace": "default",
                                                                "annotations": annotations}, "spec": spec})


def test_load_balancer_internal_or_restricted_with_tls():
    # cloud-provider-aws v1.34 pkg/providers/v1/aws.go: the internal annotation set to anything
    # but "false" makes the ELB internal (as workloads/load_balancer_rules.py cites).
    internal = "service.beta.kubernetes.io/aws-load-balancer-internal"
    cert = "service.beta.kubernetes.io/aws-load-balancer-ssl-cert"
    assert not violations("load-balancer-restricted", _service({internal: "true"}, None))
    assert not violations("load-balancer-restricted", _service({internal: "false", cert: "arn:acm"}, ["203.0.113.0/24"]))
    assert len(violations("load-balancer-restricted", _service({internal: "false"}, None))) == 2
    assert len(violations("load-balancer-restricted", _service({cert: "arn:acm"}, ["0.0.0.0/0"]))) == 1


def _pod(image, **extra):
    return k8s("kubernetes:core/v1:Pod", "p", {"metadata": {"name": "p", "namespace": "default"},
                                               "spec": {"containers": [{"name": "c", "image": image}], **extra}})


@pytest.mark.parametrize("image", ["registry.k8s.io/etcd", "python:latest", "localhost:5000/etcd"])
def test_unpinned_images(image):
    assert violations("image-pinned-tag", _pod(image))


@pytest.mark.parametrize("image", ["registry.k8s.io/etcd:3.5.24-0", "localhost:5000/etcd:3.5", "python@sha256:" + "a" * 64])
def test_pinned_images(image):
    assert not violations("image-pinned-tag", _pod(image))


def test_images_inside_job_templates_are_found():
    job = k8s("kubernetes:batch.volcano.sh/v1alpha1:Job", "j", {"metadata": {"name": "j", "namespace": "default"}, "spec": {
        "tasks": [{"name": "w", "template": {"spec": {"containers": [{"name": "c", "image": "bert:latest"}]}}}]}})
    [message] = violations("image-pinned-tag", job)
    assert "spec.tasks[0].template.spec.containers[c]" in message


def test_privileged_and_host_path_only_where_allowed():
    privileged = k8s("kubernetes:core/v1:Pod", "p", {"metadata": {"name": "p", "namespace": "default"}, "spec": {
        "containers": [{"name": "c", "image": "x:1", "securityContext": {"privileged": True}}],
        "volumes": [{"name": "dev", "hostPath": {"path": "/dev"}}]}})
    assert len(violations("no-privileged-or-host-path", privileged)) == 2
    assert not violations("no-privileged-or-host-path", privileged, config={"allowedObjects": ["default/p"]})
    assert not violations("no-privileged-or-host-path", _pod("x:1", volumes=[{"name": "shm", "emptyDir": {"medium": "Memory"}}]))
