"""The cloud look-ups the program makes before declaring anything, returned as plain data.

Under the offline plan and the tests, Pulumi's mocks answer these (offline/fixtures.py).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import pulumi_aws as aws

from infra import catalog
from infra.catalog import InstanceFacts
from infra.placement import Zone


@dataclass(frozen=True)
class CloudFacts:
    zones: list[Zone]
    offerings: dict[str, set[str]]
    """instance type -> availability zone ids offering it"""
    instance_facts: dict[str, InstanceFacts]
    account_id: str
    partition: str
    deployer_arn: str
    """The IAM role/user behind the deploying session (not its STS session ARN)."""


def look_up(region: str, instance_types: list[str]) -> CloudFacts:
    azs = aws.get_availability_zones(
        state="available",
        filters=[aws.GetAvailabilityZonesFilterArgs(name="opt-in-status", values=["opt-in-not-required"])],
    )
    offerings: dict[str, set[str]] = defaultdict(set)
    if instance_types:
        found = aws.ec2.get_instance_type_offerings(
            location_type="availability-zone-id",
            filters=[aws.ec2.GetInstanceTypeOfferingsFilterArgs(name="instance-type", values=instance_types)],
        )
        for instance_type, location in zip(found.instance_types, found.locations):
            offerings[instance_type].add(location)
    caller = aws.get_caller_identity()
    return CloudFacts(
        zones=[Zone(name, zone_id) for name, zone_id in zip(azs.names, azs.zone_ids)],
        offerings=dict(offerings),
        instance_facts={t: catalog.from_ec2(t, aws.ec2.get_instance_type(instance_type=t)) for t in instance_types},
        account_id=caller.account_id,
        partition=aws.get_partition().partition,
        deployer_arn=aws.iam.get_session_context(arn=caller.arn).issuer_arn,
    )
