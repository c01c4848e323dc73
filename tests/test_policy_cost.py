"""The cost rule: Trainium groups at maxSize against a ceiling; prices only from infra/facts/instances.py and prices.py."""

from __future__ import annotations

from infra.facts.instances import instance_hourly
from tests.policy_helpers import reg, violations

NG = "aws:eks/nodeGroup:NodeGroup"
LT = "aws:ec2/launchTemplate:LaunchTemplate"


def group(name, instance_type, max_size):
    return reg(NG, name, {"instanceTypes": [instance_type], "scalingConfig": {"minSize": 0, "maxSize": max_size}})


def test_a_max_size_typo_is_flagged():
    # The example: maxSize 400 trn1.32xlarge is 400 x $21.50 = $8,600/h.
    assert instance_hourly("us-west-2", "trn1.32xlarge").usd == 21.50
    [message] = violations("trainium-hourly-ceiling", group("trn", "trn1.32xlarge", 400), config={"maxHourlyUsd": 500})
    assert "$8,600.00/h" in message and "$500.00/h" in message


def test_under_the_ceiling_passes_and_core_groups_do_not_count():
    stack = [group("trn", "trn1.32xlarge", 4), group("core", "m6i.4xlarge", 400)]
    assert not violations("trainium-hourly-ceiling", *stack, config={"maxHourlyUsd": 100})  # 4 x 21.50 = 86


def test_an_unknown_price_is_reported_not_counted_as_zero():
    [message] = violations("trainium-hourly-ceiling", group("trn2", "trn2.48xlarge", 4))
    assert "unknown" in message and "trn2.48xlarge" in message
    # A region the table does not know is unknown too.
    assert violations("trainium-hourly-ceiling", group("trn", "trn1.32xlarge", 1), region="eu-north-1")


def test_capacity_block_groups_are_priced_through_their_launch_template():
    stack = [
        reg(LT, "lt", {"instanceType": "trn1.32xlarge"}),
        reg(
            NG,
            "cb",
            {"capacityType": "CAPACITY_BLOCK", "scalingConfig": {"maxSize": 10}},
            {"launchTemplate": [(LT, "lt")]},
        ),
    ]
    [message] = violations("trainium-hourly-ceiling", *stack, config={"maxHourlyUsd": 100})
    assert "$215.00/h" in message
