"""Entry point Pulumi runs for `--policy-pack policy`: build the pack, nothing else.

`policy.guardrails` and `infra` come from the repository's virtualenv, where `make` installs
this repository editable (pyproject.toml), so nothing here touches the import path.
"""

from pulumi_policy import EnforcementLevel, PolicyPack

from policy.guardrails import PACK_NAME, POLICIES

PolicyPack(name=PACK_NAME, policies=POLICIES, enforcement_level=EnforcementLevel.MANDATORY)
