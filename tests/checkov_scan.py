"""Running checkov over what the stacks render and the training images, and judging its
findings against ``security/checkov-justifications.yaml``.

checkov 3.3.30 knows the built-in workload kinds only: a Volcano Job (kind ``Job``) is read as
a batch/v1 Job without a pod template, RayJobs and MPIJobs not at all. So each custom
resource that carries pod templates is scanned as the pods it makes (one ``Pod`` per
template, named ``<object>-<role>``), which is what the operators create from it.
"""

from __future__ import annotations

import fnmatch
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

import yaml

from offline.plan_output import kubernetes_objects, manifest_file_name
from offline.runner import REPO_ROOT, PlanResult

JUSTIFICATIONS = REPO_ROOT / "security" / "checkov-justifications.yaml"
DOCKER_DIR = REPO_ROOT / "docker"
# Scanned once the pipeline's workflows exist (checkov reads GitHub Actions only under this path).
WORKFLOWS_DIR = REPO_ROOT / ".github" / "workflows"
DEFAULT_CHECKOV = REPO_ROOT / ".venv-checkov" / "bin" / "checkov"


def pod_templates(obj: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(role, pod template) of a custom resource that makes pods; nothing for other objects."""
    spec, api = obj.get("spec", {}), obj.get("apiVersion", "")
    if api.startswith("batch.volcano.sh/"):
        for task in spec.get("tasks", []):
            yield task["name"], task["template"]
    elif api.startswith("ray.io/") and obj["kind"] == "RayJob":
        cluster = spec.get("rayClusterSpec", {})
        yield "head", cluster["headGroupSpec"]["template"]
        for group in cluster.get("workerGroupSpecs", []):
            yield group["groupName"], group["template"]
    elif api.startswith("kubeflow.org/") and obj["kind"] == "MPIJob":
        for role, replica in spec.get("mpiReplicaSpecs", {}).items():
            yield role.lower(), replica["template"]


def scanned_objects(result: PlanResult) -> Iterator[dict[str, Any]]:
    """The plan's Kubernetes objects as checkov should see them (custom resources as their pods)."""
    for obj in kubernetes_objects(result):
        templates = list(pod_templates(obj))
        if not templates:
            yield obj
            continue
        meta = obj["metadata"]
        for role, template in templates:
            pod_meta = {"name": f"{meta['name']}-{role}", "namespace": meta.get("namespace", "default")}
            pod_meta.update({k: v for k, v in template.get("metadata", {}).items() if k == "labels"})
            yield {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": template["spec"]}


def render(results: Iterable[PlanResult], out: Path) -> Path:
    """One YAML file per scanned object, a folder per project and stack."""
    for result in results:
        folder = out / result.project / result.stack
        folder.mkdir(parents=True, exist_ok=True)
        for obj in scanned_objects(result):
            (folder / manifest_file_name(obj)).write_text(yaml.safe_dump(obj, sort_keys=False))
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


def run_checkov(manifests: Path, dockerfiles: Path = DOCKER_DIR, workflows: Iterable[Path] = (WORKFLOWS_DIR,)) -> list[Finding]:
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
            findings.add(Finding(failed["check_id"], object_key(report["check_type"], failed["resource"], failed["file_path"])))
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


def load_justifications(path: Path = JUSTIFICATIONS) -> list[Justification]:
    entries = yaml.safe_load(path.read_text()) or []
    justifications = []
    for entry in entries:
        if not (entry.get("check") and entry.get("objects") and str(entry.get("reason", "")).strip()):
            raise ValueError(f"{path.name}: every entry needs check, objects and a reason: {entry}")
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
