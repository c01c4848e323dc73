"""Every pinned version a stack deploys, each with the support row it answers to (infra/facts/support.py).

The pins are read from where they are set, never restated: infra/facts/versions.py (charts, manifests,
images, the DLC tags, which name their Neuron SDK, PyTorch, Python and Ubuntu), the stack file
(kubernetesVersion, amiReleaseVersion), requirements.txt and .pulumi-version (the Pulumi engine and
packages, TorchX), and the workflows' ``uses:`` lines. ``verdicts`` turns them into the plan's
refusals and warnings, for the cluster stack (infra/config/rules.py) and the workload stack
(workloads/pins.py) alike.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from infra.facts import versions
from infra.facts.support import WARN_DAYS, row_names, support

REPO_ROOT = Path(__file__).resolve().parents[2]
# What `make plan` prints fits a terminal this wide.
TERMINAL_COLUMNS = 80


@dataclass(frozen=True)
class Pin:
    key: str
    """Where it is set: a stack-file key, or a file (and constant) of this repository."""
    value: str
    row: str
    """Its row in infra/facts/support.py, the name ``endOfSupportAcknowledged`` keeps it by."""


def minor(version: str) -> str:
    """1.15.1 -> 1.15, v0.5.30 -> 0.5."""
    return ".".join(version.lstrip("v").split(".")[:2])


def constant_name(value: str) -> str:
    """The infra/facts/versions.py constant holding ``value``."""
    names = [n for n, v in vars(versions).items() if n.isupper() and v == value]
    if not names:
        raise ValueError(f"{value!r} is no constant of infra/facts/versions.py")
    return names[0]


# Neuron deep learning containers name their framework, Python, SDK and Ubuntu in the tag:
# pytorch-training-neuronx:2.9.0-neuronx-py312-sdk2.30.0-ubuntu24.04.
_DLC = re.compile(r"/pytorch-training-neuronx:(\d+\.\d+)\.\d+-neuronx-py3(\d+)-sdk(\d+\.\d+)\.\d+-ubuntu(\d+\.\d+)$")
_PYTHON_SLIM = re.compile(r"/python:(3\.\d+)\.\d+-slim-(\w+)$")
_DEBIAN = {"bookworm": "12", "trixie": "13"}
_NGINX = re.compile(r"/nginx-unprivileged:(\d+\.\d+)\.\d+-alpine$")
_NEURON_MONITOR = re.compile(r"/neuron/neuron-monitor:(\d+\.\d+)\.\d+$")


def image_rows(image: str) -> list[str]:
    """The support rows an image reference answers to; ValueError for an image no rule reads."""
    if found := _DLC.search(image):
        torch, py, sdk, ubuntu = found.groups()
        return [f"neuron-sdk-{sdk}", f"pytorch-xla-{torch}", f"python-3.{py}", f"ubuntu-{ubuntu}"]
    if found := _PYTHON_SLIM.search(image):
        return [f"python-{found.group(1)}", f"debian-{_DEBIAN[found.group(2)]}"]
    if found := _NGINX.search(image):
        return [f"nginx-{found.group(1)}"]
    if found := _NEURON_MONITOR.search(image):
        return [f"neuron-monitor-{found.group(1)}"]
    raise ValueError(f"{image}: no rule in infra/facts/pins.py reads its versions")


def image_pins(image: str, used_by: str) -> list[Pin]:
    key = f"infra/facts/versions.py {constant_name(image)} ({used_by})"
    return [Pin(key, image.rsplit("/", 1)[-1], row) for row in image_rows(image)]


def ray_row(ray_version: str) -> str:
    return f"ray-{minor(ray_version)}"


# The charts the cluster stack installs, by the `features` switch that installs them, and their rows.
CHART_FEATURES = {
    "neuron": "neuron_device_plugin",
    "efa-device-plugin": "efa_device_plugin",
    "fsx-csi-driver": "fsx_csi",
    "volcano": "volcano",
    "kuberay-operator": "kuberay",
    "metrics-server": "metrics_server",
}
CHART_ROWS = {
    "neuron": "neuron-helm-chart",
    "efa-device-plugin": "efa-device-plugin",
    "aws-dranet": "aws-dranet",
    "fsx-csi-driver": "aws-fsx-csi-driver",
    "efs-csi-driver": "aws-efs-csi-driver",
    "volcano": "volcano",
    "kuberay-operator": "kuberay",
    "metrics-server": "metrics-server",
    "kube-state-metrics": "kube-state-metrics",
    "prometheus": "prometheus-chart",
    "grafana": "grafana-chart",
    "prometheus-node-exporter": "prometheus-node-exporter",
    "karpenter": "karpenter",
    "karpenter-crd": "karpenter",
}


def chart_pin(name: str) -> Pin:
    chart = versions.CHARTS[name]
    return Pin(f"infra/facts/versions.py CHARTS[{name!r}]", chart.version, f"{CHART_ROWS[name]}-{minor(chart.version)}")


def mpi_operator_pin() -> Pin:
    return Pin(
        "infra/facts/versions.py MPI_OPERATOR_VERSION",
        versions.MPI_OPERATOR_VERSION,
        f"mpi-operator-{minor(versions.MPI_OPERATOR_VERSION)}",
    )


def requirement_pins(root: Path = REPO_ROOT) -> list[Pin]:
    """The Pulumi packages and TorchX of requirements.txt's direct pins (the part above the resolved
    transitive dependencies), each by major (by minor below 1.0)."""
    direct = (root / "requirements.txt").read_text().split("# --- resolved transitive dependencies ---")[0]
    pins = []
    for name, version in re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)$", direct, re.M):
        if name.startswith("pulumi") or name == "torchx":
            line = version.split(".")[0] if not version.startswith("0.") else minor(version)
            pins.append(Pin(f"requirements.txt {name}", version, f"{name.lower()}-{line}"))
    return pins


def engine_pin(root: Path = REPO_ROOT) -> Pin:
    version = (root / ".pulumi-version").read_text().strip()
    return Pin(".pulumi-version", version, f"pulumi-{version.split('.')[0]}")


_USES = re.compile(r"uses:\s*([\w.-]+/[\w.-]+)@[0-9a-f]{40}\s*#\s*(v\d+)[\w.]*")


def action_pins(root: Path = REPO_ROOT) -> list[Pin]:
    """Each action the workflows use, once, by its SHA pin's version comment (`# v7.0.1`)."""
    seen: dict[str, Pin] = {}
    for workflow in sorted((root / ".github" / "workflows").glob("*.yml")):
        for line in workflow.read_text().splitlines():
            if found := _USES.search(line):
                action, major = found.groups()
                comment = line.split("#", 1)[1].strip()
                seen.setdefault(
                    f"{action}-{major}",
                    Pin(f".github/workflows/{workflow.name} {action}", comment, f"{action}-{major}"),
                )
    return list(seen.values())


def repository_pins(root: Path = REPO_ROOT) -> list[Pin]:
    """What every deploy runs with, whichever stack: the Pulumi engine and packages, TorchX, the actions."""
    return [engine_pin(root), *requirement_pins(root), *action_pins(root)]


def verdicts(
    pins: Iterable[Pin], acknowledged: Mapping[str, str], ack_key: str, today: date, extended: bool = False
) -> tuple[list[str], list[str]]:
    """(refusals, warnings): a pin past its row's end is refused unless ``acknowledged`` keeps the row
    by name with a reason (then warned); one within WARN_DAYS of it is warned. A refusal cites the row's
    source; a warning leaves it to the pins table (docs/architecture.md), and a kept pin's reason to the
    stack file, to stay short. An acknowledgement the
    plan does not know, or without a reason, is refused; one this stack does not need is warned, so a
    stack file's list shrinks with its pins. ``extended``: Kubernetes rows end with extended support."""
    known = row_names()
    wrong = [
        f"{ack_key}.{name} = {reason!r}: "
        + (f"not a pin the plan knows; allowed: {', '.join(known)}" if name not in known else "needs a reason")
        for name, reason in acknowledged.items()
        if name not in known or not reason.strip()
    ]
    if wrong:
        return wrong, []
    by_row: dict[str, list[Pin]] = {}
    for pin in pins:
        by_row.setdefault(pin.row, []).append(pin)
    refusals, warnings = [], []
    # Kept rows, merged per pin and step forward: an image's SDK, framework, Python and OS in one message.
    kept_ended: dict[tuple[str, str], list[str]] = {}
    for name, group in by_row.items():
        pinned = "; ".join(f"{p.key} = {p.value!r}" for p in dict.fromkeys(group))
        if name not in known:
            # A new line (a Ray minor, a chart's next minor) nobody has looked up yet.
            refusals.append(
                f"{pinned}: no row {name} in infra/facts/support.py, so nothing says when its support ends; "
                "allowed: a pin with a row, or add the row (its end date or None, the source, the step forward)"
            )
            continue
        row = support(name, extended)
        if row.ends is None:
            continue
        ends = row.ends.isoformat()
        if today > row.ends and name in acknowledged:
            kept_ended.setdefault((pinned, row.forward), []).append(f"{row.what} ({name}) ended {ends}")
        elif today > row.ends:
            refusals.append(
                f"{pinned}: {row.what} ({name}) ended {ends} ({row.source}){row.after}; allowed: {row.forward}, "
                f"or keep it with a reason in {ack_key} ({name}: <why>)"
            )
        elif (row.ends - today).days <= WARN_DAYS:
            warnings.append(
                f"{pinned}: {row.what} ({name}) ends {ends}, in {(row.ends - today).days} days; "
                f"step forward: {row.forward}"
            )
    warnings = [
        f"{pinned}: {', '.join(ended)}; kept by {ack_key}; step forward: {forward}"
        for (pinned, forward), ended in kept_ended.items()
    ] + warnings
    kept = [
        f"{ack_key}.{name}: kept, but nothing this stack deploys is past {name}'s end; drop it"
        for name in acknowledged
        if name not in by_row or (ends_at := support(name, extended).ends) is None or today <= ends_at
    ]
    return refusals, warnings + kept


def for_terminal(text: str, width: int = TERMINAL_COLUMNS) -> str:
    """``text`` in lines of at most ``width`` columns, continuation lines indented, long words broken."""
    return "\n".join(
        textwrap.wrap(text, width=width, subsequent_indent="  ", break_long_words=True, break_on_hyphens=False)
    )
