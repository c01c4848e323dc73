"""Entry point Pulumi runs for `--policy-pack policy`: build the pack, nothing else."""

import sys
from pathlib import Path

# The rules read instance facts and prices from the project's infra/ package.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pulumi_policy import EnforcementLevel, PolicyPack  # noqa: E402

from policy.guardrails import PACK_NAME, POLICIES  # noqa: E402

PolicyPack(name=PACK_NAME, policies=POLICIES, enforcement_level=EnforcementLevel.MANDATORY)
