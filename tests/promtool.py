"""Prometheus' own promtool, which the monitoring tests run: the rules and alerts are unit-tested with
`promtool test rules`, the exporter's output with `promtool check metrics`, every dashboard query with
`promtool check rules`. A missing promtool fails those tests with what to install, never skips them."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.fail(
            "the monitoring tests run Prometheus' promtool (`promtool test rules`, `check rules`, `check metrics`); "
            "missing: promtool: install it (Debian/Ubuntu: apt-get install prometheus; .ci/run does it when it runs "
            "as root)"
        )
    return found


def run(*args: str | Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool(), *map(str, args)], input=stdin, capture_output=True, text=True, timeout=120)
