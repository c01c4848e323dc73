"""Every rule of the policy pack, importable without starting the policy server.

Constructing ``pulumi_policy.PolicyPack`` starts a gRPC server and blocks
(pulumi/pulumi-policy sdk/python/lib/pulumi_policy/policy.py, v1.21.0), so only
``policy/__main__.py`` does that; tests and the offline plan use ``POLICIES``.
"""

from __future__ import annotations

from policy.guardrails import cost, readiness, security, trainium

PACK_NAME = "trainium-guardrails"
POLICIES = [*security.POLICIES, *trainium.POLICIES, *readiness.POLICIES, *cost.POLICIES]
BY_NAME = {p.name: p for p in POLICIES}
