"""Running checkov over what the stacks render and the training images, and judging its
findings against ``security/checkov-justifications.yaml``.

checkov 3.3.30 knows the built-in workload kinds only: a Volcano Job (kind ``Job``) is read as
a batch/v1 Job without a pod template, RayJobs and MPIJobs not at all. So each other object
that carries pod templates, wherever in it they sit, is scanned as the pods it makes (one
``Pod`` per template, named ``<object>-<role>``), which is what the operators create from it.
"""

from __future__ import annotations

import fnmatch
import json
import os
import subprocess
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from offline.plan.runner import REPO_ROOT, PlanResult
from offline.report.plan_output import kubernetes_objects, manifest_file_name

JUSTIFICATIONS = REPO_ROOT / "security" / "checkov-justifications.yaml"
DOCKER_DIR = REPO_ROOT / "docker"
# Scanned once the pipeline's workflows exist (checkov reads GitHub Actions only under this path).
WORKFLOWS_DIR = REPO_ROOT / ".github" / "workflows"
DEFAULT_CHECKOV = REPO_ROOT / ".venv-checkov" / "bin" / "checkov"


# Kinds checkov 3.3.30 reads with their pod templates (checkov/kubernetes/checks/resource/
# base_root_container_check.py supported_kind, base_container_check.py): scanned as they are. Anything else holding pod
# templates - Volcano Jobs (batch.volcano.sh, kind Job), RayJobs, RayClusters, MPIJobs, and any
# custom resource added later - is scanned as the pods it makes.
CHECKOV_WORKLOADS = {
    ("v1", "Pod"), ("apps/v1", "Deployment"), ("apps/v1", "DaemonSet"), ("apps/v1", "StatefulSet"),
    ("apps/v1", "ReplicaSet"), ("v1", "ReplicationController"), ("batch/v1", "Job"), ("batch/v1", "CronJob"),
}  # fmt: skip


def is_pod_template(value: Any) -> bool:
    """A pod template (or a Pod): a mapping whose `spec` lists containers."""
    return (
        isinstance(value, dict)
        and isinstance(value.get("spec"), dict)
        and isinstance(value["spec"].get("containers"), list)
    )


def pod_templates(obj: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(role, pod template) of every pod an object makes, found by walking the whole object, so a
    template at a path nobody listed is found too: a Pod is its own template ("pod"), a
    Deployment's or Job's is "pod", a custom resource's is named by where it sits - the list
    item's name or groupName (Volcano tasks, Ray worker groups), the map key (MPIJob Launcher,
    Worker), or the field (headGroupSpec: head, submitterPodTemplate: submitter)."""
    if is_pod_template(obj):
        yield "pod", {"metadata": obj.get("metadata", {}), "spec": obj["spec"]}
        return
    yield from _walk(obj.get("spec"), "pod")


def _walk(value: Any, role: str) -> Iterator[tuple[str, dict[str, Any]]]:
    if is_pod_template(value):
        yield role, value
    elif isinstance(value, dict):
        for key, child in value.items():
            yield from _walk(child, _role(key, role))
    elif isinstance(value, list):
        for item in value:
            named = item.get("groupName") or item.get("name") if isinstance(item, dict) else None
            yield from _walk(item, named or role)


def _role(key: str, role: str) -> str:
    if key[:1].isupper():  # a map of replica types: MPIJob mpiReplicaSpecs.Launcher
        return key.lower()
    for suffix in ("GroupSpec", "PodTemplate"):
        if key.endswith(suffix):
            return key[: -len(suffix)].lower()
    return role


def scanned_objects(result: PlanResult) -> Iterator[dict[str, Any]]:
    """The plan's Kubernetes objects as checkov should see them (custom resources as their pods)."""
    for obj in kubernetes_objects(result):
        templates = list(pod_templates(obj))
        if not templates or (obj["apiVersion"], obj["kind"]) in CHECKOV_WORKLOADS:
            yield obj
            continue
        meta = obj["metadata"]
        for role, template in templates:
            pod_meta = {"name": f"{meta['name']}-{role}", "namespace": meta.get("namespace", "default")}
            pod_meta.update({k: v for k, v in template.get("metadata", {}).items() if k == "labels"})
            yield {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": template["spec"]}


def render(results: Iterable[PlanResult], out: Path) -> Path:
    """One file per scanned object, a folder per project and stack. JSON, which checkov 3.3.30
    takes as it takes YAML (checkov/kubernetes/parser/parser.py: .yaml/.yml and .json, the same
    definitions and graph): its pure-Python loader reads JSON text faster than YAML, and the
    findings are the same. (k8_json.py rewrites a raw `}{` to `},{`: json.dumps with
    an indent puts one only inside a string value, and none of the objects has one.)"""
    for result in results:
        folder = out / result.project / result.stack
        folder.mkdir(parents=True, exist_ok=True)
        for obj in scanned_objects(result):
            (folder / manifest_file_name(obj)).with_suffix(".json").write_text(json.dumps(obj, indent=2))
    return out


@dataclass(frozen=True, order=True)
class Finding:
    check: str
    object: str  # Kind/namespace/name for manifests, Dockerfile/<image>, Workflow/<file>/<part>

    def __str__(self) -> str:
        return f"{self.check} {self.object}"


def object_key(check_type: str, resource: str, file_path: str) -> str:
    if check_type == "dockerfile":
        return f"Dockerfile/{Path(file_path).parent.name}"
    if check_type == "github_actions":
        return f"Workflow/{Path(file_path).name}/{resource}"
    # checkov names a Kubernetes resource Kind.namespace.name.
    kind, _, rest = resource.partition(".")
    namespace, _, name = rest.partition(".")
    return f"{kind}/{namespace}/{name}"


def checkov_command() -> Path:
    path = Path(os.environ.get("CHECKOV", DEFAULT_CHECKOV))
    if not path.is_absolute():
        path = REPO_ROOT / path
    if not path.exists():
        raise RuntimeError(f"checkov not found at {path}: run `make test`, which installs it into .venv-checkov")
    return path


def run_checkov(
    manifests: Path, dockerfiles: Path = DOCKER_DIR, workflows: Iterable[Path] = (WORKFLOWS_DIR,)
) -> list[Finding]:
    """checkov's failed checks over the manifests, the Dockerfiles and the workflow folders
    that exist (no network: --skip-download)."""
    folders, frameworks = [manifests, dockerfiles], ["kubernetes", "dockerfile"]
    existing = [folder for folder in workflows if folder.is_dir()]
    if existing:
        folders += existing
        frameworks.append("github_actions")
    command = [str(checkov_command())]
    for folder in folders:
        command += ["-d", str(folder)]
    command += ["--framework", *frameworks, "--output", "json", "--quiet", "--compact", "--skip-download"]
    env = {**os.environ, "BC_SKIP_MAPPING": "TRUE", "CHECKOV_EXPERIMENTAL_IMAGE_REFERENCING": "False"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    if done.returncode not in (0, 1):  # 1: some check failed
        raise RuntimeError(f"checkov exited {done.returncode}: {done.stderr[-2000:]}")
    findings = set()
    for report in json_reports(done.stdout):
        for failed in report.get("results", {}).get("failed_checks", []):
            findings.add(
                Finding(failed["check_id"], object_key(report["check_type"], failed["resource"], failed["file_path"]))
            )
    return sorted(findings)


def json_reports(output: str) -> Iterator[dict[str, Any]]:
    """checkov prints one JSON document per scanned directory: a report, or a list of them."""
    decoder, position = json.JSONDecoder(), 0
    while position < len(output.rstrip()):
        document, end = decoder.raw_decode(output, position)
        yield from document if isinstance(document, list) else [document]
        position = end
        while position < len(output) and output[position].isspace():
            position += 1


@dataclass(frozen=True)
class Justification:
    check: str
    objects: tuple[str, ...]
    reason: str

    def covers(self, finding: Finding) -> bool:
        return finding.check == self.check and any(fnmatch.fnmatchcase(finding.object, p) for p in self.objects)


WILDCARDS = set("*?[]!")


def blanket_pattern(pattern: str) -> bool:
    """A pattern that names no object: its kind (first part) or its name (last part) is only
    wildcards, so it covers whatever is added later (`Pod/*/*`, `*/default/*`, `Dockerfile/*`)."""
    parts = pattern.split("/")
    return len(parts) < 2 or any(set(part) <= WILDCARDS for part in (parts[0], parts[-1]))


def load_justifications(path: Path = JUSTIFICATIONS) -> list[Justification]:
    entries = yaml.safe_load(path.read_text()) or []
    justifications = []
    for entry in entries:
        if not (entry.get("check") and entry.get("objects") and str(entry.get("reason", "")).strip()):
            raise ValueError(f"{path.name}: every entry needs check, objects and a reason: {entry}")
        blanket = [p for p in entry["objects"] if blanket_pattern(p)]
        if blanket:
            raise ValueError(f"{path.name}: {entry['check']}: {blanket} name no object; list the objects it covers")
        justifications.append(Justification(entry["check"], tuple(entry["objects"]), entry["reason"].strip()))
    return justifications


def unjustified(findings: Iterable[Finding], justifications: list[Justification]) -> list[Finding]:
    return [f for f in findings if not any(j.covers(f) for j in justifications)]


def stale(findings: Iterable[Finding], justifications: list[Justification]) -> list[str]:
    """Every (check, object pattern) of the file that matches no finding any more."""
    findings = list(findings)
    return [
        f"{j.check} {pattern}"
        for j in justifications
        for pattern in j.objects
        if not any(f.check == j.check and fnmatch.fnmatchcase(f.object, pattern) for f in findings)
    ]
