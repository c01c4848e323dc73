"""Launch template settings every node shares: IMDSv2 and an encrypted gp3 root volume."""

from __future__ import annotations

import pulumi_aws as aws

ROOT_DEVICE = "/dev/xvda"  # AL2023 EKS AMIs
# Two hops so containers that still read instance metadata (CloudWatch agent, CSI node
# plugins) reach it; tokens are required either way.
IMDS_HOP_LIMIT = 2


def metadata_options() -> aws.ec2.LaunchTemplateMetadataOptionsArgs:
    return aws.ec2.LaunchTemplateMetadataOptionsArgs(
        http_endpoint="enabled",
        http_tokens="required",
        http_put_response_hop_limit=IMDS_HOP_LIMIT,
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
