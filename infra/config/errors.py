"""The one error type for refused configuration."""

from __future__ import annotations

import pulumi


class ConfigError(pulumi.RunError):
    """Bad stack configuration, found before any resource is declared.

    A ``pulumi.RunError`` so that ``pulumi up`` prints the message without a traceback;
    the offline plan turns it into exit code 2.
    """

    def __init__(self, problems: list[str], source: str = "stack configuration") -> None:
        self.problems = problems
        self.source = source
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"Invalid {source}:\n{lines}")


# Gives the deployer's public IPv4 address instead of looking it up (infra/lookups.py); it is
# still checked against endpointAccess.publicCidrs (infra/config/rules.py deploy_problems).
EGRESS_IP_ENV = "TRAINIUM_EKS_EGRESS_IP"


class EgressLookupFailed(Exception):
    """The deployer's public IPv4 address could not be found (infra/lookups.py); the message says
    what was asked and what went wrong."""
