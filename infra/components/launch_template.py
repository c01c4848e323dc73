"""Launch template settings every node shares: IMDSv2 and an encrypted gp3 root volume."""

from __future__ import annotations

import pulumi_aws as aws

from infra.specs.node_security import IMDS_HOP_LIMIT, IMDS_IPV6, IMDS_TOKENS

ROOT_DEVICE = "/dev/xvda"  # AL2023 EKS AMIs


def metadata_options() -> aws.ec2.LaunchTemplateMetadataOptionsArgs:
    """IMDSv2 only, one hop: the node and its host-network pods reach the metadata service, pods on
    the pod network do not (infra/specs/node_security.py; what each node component needs from it
    is in tests/test_node_credentials.py)."""
    return aws.ec2.LaunchTemplateMetadataOptionsArgs(
        http_endpoint="enabled",
        http_tokens=IMDS_TOKENS,
        http_put_response_hop_limit=IMDS_HOP_LIMIT,
        http_protocol_ipv6=IMDS_IPV6,
    )


def root_volume(size_gib: int) -> aws.ec2.LaunchTemplateBlockDeviceMappingArgs:
    return aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
        device_name=ROOT_DEVICE,
        ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
            volume_size=size_gib,
            volume_type="gp3",
            encrypted="true",
            delete_on_termination="true",
        ),
    )


def tag_specifications(tags: dict[str, str]) -> list[aws.ec2.LaunchTemplateTagSpecificationArgs]:
    return [
        aws.ec2.LaunchTemplateTagSpecificationArgs(resource_type=kind, tags=tags)
        for kind in ("instance", "volume", "network-interface")
    ]
