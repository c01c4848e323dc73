"""Check rendered custom objects against the field paths their pinned CRDs define.

The lists in ``crd_paths/`` are generated from the CRDs of the pinned releases by
``tools/crd_paths.py`` (notation explained there). A field a CRD does not define would be
pruned or refused by the API server, so the tests require there are none.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

PATHS_DIR = Path(__file__).parent / "crd_paths"
FILES = {
    ("ray.io/v1", "RayCluster"): "raycluster.txt",
    ("ray.io/v1", "RayJob"): "rayjob.txt",
    ("kubeflow.org/v2beta1", "MPIJob"): "mpijob.txt",
    ("batch.volcano.sh/v1alpha1", "Job"): "volcano-job.txt",
    ("karpenter.sh/v1", "NodePool"): "nodepool.txt",
    ("karpenter.k8s.aws/v1", "EC2NodeClass"): "ec2nodeclass.txt",
}


@dataclass(frozen=True)
class FieldTree:
    paths: frozenset[str]
    references: dict[str, str]
    sections: dict[str, frozenset[str]]


@cache
def load(api_version: str, kind: str) -> FieldTree:
    paths: set[str] = set()
    references: dict[str, str] = {}
    sections: dict[str, set[str]] = {}
    current = paths
    for line in (PATHS_DIR / FILES[(api_version, kind)]).read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        if line.startswith("@"):
            current = sections.setdefault(line[1:], set())
        elif " = @" in line:
            path, name = line.split(" = @")
            current.add(path)
            references[path] = name
        else:
            current.add(line)
    return FieldTree(frozenset(paths), references, {k: frozenset(v) for k, v in sections.items()})


def undefined_fields(obj: dict[str, Any]) -> list[str]:
    tree = load(obj["apiVersion"], obj["kind"])
    return sorted(_walk(obj, "", "", tree.paths, tree))


def _walk(value: Any, path: str, shown: str, allowed: frozenset[str], tree: FieldTree) -> list[str]:
    """``path`` is relative to the section being checked; ``shown`` is the full path."""
    if path in tree.references and allowed is tree.paths:
        return _walk(value, "", shown, tree.sections[tree.references[path]], tree)
    if f"{path}*" in allowed:
        return []
    if isinstance(value, list):
        return [p for item in value for p in _walk(item, f"{path}[]", f"{shown}[]", allowed, tree)]
    if not isinstance(value, dict):
        return []
    problems = []
    for key, child in value.items():
        is_map = f"{path}{{}}" in allowed
        child_path = f"{path}{{}}" if is_map else (f"{path}.{key}" if path else key)
        child_shown = f"{shown}{{{key}}}" if is_map else (f"{shown}.{key}" if shown else key)
        if child_path not in allowed and f"{child_path}*" not in allowed:
            problems.append(child_shown)
            continue
        problems += _walk(child, child_path, child_shown, allowed, tree)
    return problems
