"""Command-line tools a target needs, and where to get each when the machine lacks it.

`make images` (tools/push_images.py) and the workload preflight call `missing` before running
anything, so a machine without Docker, the Pulumi CLI, the AWS CLI or kubectl gets one message
naming the tool and how to install it instead of a FileNotFoundError traceback.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

# Not offline.plan.runner's: that import loads pulumi, and this runs before anything heavy.
REPO_ROOT = Path(__file__).resolve().parent.parent

MISSING_TOOL_EXIT = 4


def _pulumi_version() -> str:
    path = REPO_ROOT / ".pulumi-version"
    return path.read_text().strip() if path.exists() else "the version in .pulumi-version"


HOW_TO_GET = {
    "pulumi": lambda: (
        f"the Pulumi CLI {_pulumi_version()} (.pulumi-version): "
        f"curl -fsSL https://get.pulumi.com | sh -s -- --version {_pulumi_version()}"
    ),
    "docker": lambda: "Docker Engine or Docker Desktop: https://docs.docker.com/get-started/get-docker/",
    "aws": lambda: "the AWS CLI v2: https://docs.aws.amazon.com/cli/latest/userguide/getting-started-install.html",
    "kubectl": lambda: "kubectl within one minor version of the cluster: https://kubernetes.io/docs/tasks/tools/",
}


def missing(tools: list[str]) -> list[str]:
    """A line per tool of ``tools`` that is not on PATH: what it is and how to get it."""
    return [f"{tool}: not found on PATH; install {HOW_TO_GET[tool]()}" for tool in tools if shutil.which(tool) is None]


def report(what: str, tools: list[str]) -> int:
    """0 when every tool is there; else print what is missing and return MISSING_TOOL_EXIT."""
    lines = missing(tools)
    if not lines:
        return 0
    print(f"{what} needs {', '.join(tools)}; missing:\n" + "\n".join(f"  - {line}" for line in lines), file=sys.stderr)
    return MISSING_TOOL_EXIT
