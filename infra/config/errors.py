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
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"Invalid {source}:\n{lines}")
