"""Running the root Jobs' scripts (infra/components/storage.py) for real, as their containers run them.

As root (CI, `.ci/run`), a script runs under setpriv with exactly the capabilities its Job's manifest
adds, root's others dropped from every set, so a missing capability fails the run as it would in the
pod, and chown really changes owners. A recording wrapper in front of chown writes each call's
arguments to a file and runs the real one, so a test can also tell what a run changed.

As any other user, chown to another UID is not allowed: the wrapper records and changes nothing
(ownership and capability tests skip), and everything else in the scripts still runs for real.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

AS_ROOT = os.geteuid() == 0


def _setpriv_works() -> bool:
    setpriv = shutil.which("setpriv")
    if not AS_ROOT or setpriv is None:
        return False
    probe = [setpriv, "--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-all,+chown", "true"]
    return subprocess.run(probe, capture_output=True, check=False).returncode == 0


CAPABILITIES_ENFORCED = _setpriv_works()
needs_root = pytest.mark.skipif(
    not CAPABILITIES_ENFORCED, reason="owners and capabilities need root with setpriv (.ci/run runs as root)"
)


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    chowns: list[list[str]]
    """Each chown call's arguments, in order."""


def run_script(script: str, capabilities: tuple[str, ...] | list[str], scratch: Path) -> Run:
    """``sh -c script`` as the Job's container runs it: root with only ``capabilities`` (as root), or
    the test user with chown recorded and skipped (otherwise)."""
    bin_dir = scratch / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    record = scratch / "chown-calls"
    record.write_text("")
    real = shutil.which("chown") if AS_ROOT else None
    run_real = f'exec {real} "$@"' if real else "exit 0"
    wrapper = bin_dir / "chown"
    wrapper.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> "{record}"\n{run_real}\n')
    wrapper.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    command = ["sh", "-c", script]
    if CAPABILITIES_ENFORCED:
        keep = ",".join(f"+{c.lower()}" for c in capabilities)
        bounding = "-all" + (f",{keep}" if keep else "")
        command = ["setpriv", "--inh-caps=-all", "--ambient-caps=-all", f"--bounding-set={bounding}", *command]
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    calls = [line.split() for line in record.read_text().splitlines()]
    return Run(done.returncode, done.stdout, done.stderr, calls)
