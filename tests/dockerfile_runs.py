"""Run one RUN instruction of a Dockerfile on this machine, with stand-ins for the commands
it calls (curl, pip...), to see how its shell treats failures. No Docker needed.

Docker joins continuation lines, drops comment lines, runs the instruction with the last
SHELL before it (default ``/bin/sh -c``) and passes ARGs as environment variables.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

ARG = re.compile(r"^ARG (\w+)=(\S+)$")


def instructions(dockerfile: Path) -> list[tuple[str, str]]:
    result, current = [], ""
    for line in dockerfile.read_text().splitlines():
        if line.lstrip().startswith("#"):
            continue
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        current += line
        if current.strip():
            keyword, _, rest = current.strip().partition(" ")
            result.append((keyword.upper(), rest.strip()))
        current = ""
    return result


def run_step(
    dockerfile: Path, containing: str, fakes: dict[str, str], workdir: Path, **args: str
) -> subprocess.CompletedProcess[str]:
    """Run the first RUN instruction containing ``containing``; ``fakes`` maps command names to
    shell scripts put first on PATH; ``args`` override the Dockerfile's ARG defaults."""
    shell, env = ["/bin/sh", "-c"], {}
    for keyword, rest in instructions(dockerfile):
        if keyword == "SHELL":
            shell = json.loads(rest)
        elif keyword == "ARG" and (m := ARG.match(f"ARG {rest}")):
            env[m.group(1)] = m.group(2)
        elif keyword == "RUN" and containing in rest:
            command = rest
            break
    else:
        raise AssertionError(f"no RUN instruction in {dockerfile} contains {containing!r}")
    bin_dir = workdir / "fake-bin"
    bin_dir.mkdir(exist_ok=True)
    for name, script in fakes.items():
        (bin_dir / name).write_text("#!/bin/sh\n" + script)
        (bin_dir / name).chmod(0o755)
    env = {**env, **args, "PATH": f"{bin_dir}:{os.environ['PATH']}", "HOME": str(workdir)}
    return subprocess.run([*shell, command], cwd=workdir, env=env, capture_output=True, text=True)
