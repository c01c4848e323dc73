"""Declaring rendered Kubernetes objects as Pulumi resources."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import pulumi
import pulumi_kubernetes as k8s

from workloads import step_gate

# Built-in kinds get their typed resource (so pulumi-kubernetes applies its await logic);
# everything else is a custom resource.
_BUILT_IN = {
    ("v1", "Secret"): k8s.core.v1.Secret,
    ("v1", "ConfigMap"): k8s.core.v1.ConfigMap,
    ("v1", "Service"): k8s.core.v1.Service,
    ("v1", "Pod"): k8s.core.v1.Pod,
    ("v1", "ServiceAccount"): k8s.core.v1.ServiceAccount,
    ("rbac.authorization.k8s.io/v1", "Role"): k8s.rbac.v1.Role,
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): k8s.rbac.v1.RoleBinding,
    ("apps/v1", "Deployment"): k8s.apps.v1.Deployment,
    ("apps/v1", "DaemonSet"): k8s.apps.v1.DaemonSet,
    ("batch/v1", "Job"): k8s.batch.v1.Job,
    ("networking.k8s.io/v1", "NetworkPolicy"): k8s.networking.v1.NetworkPolicy,
}


Layout = TypeVar("Layout")


@dataclass(frozen=True)
class LayoutArgs(Generic[Layout]):
    """A workload component's arguments: its layout (everything its objects are rendered from) and
    what its first object waits for (a staging Job, the Hugging Face token)."""

    layout: Layout
    after: tuple[pulumi.Resource, ...] = ()


# Top-level manifest keys whose Python argument name differs.
_PYTHON_NAMES = {"stringData": "string_data", "roleRef": "role_ref"}


def resource_name(manifest: dict[str, Any]) -> str:
    return f"{manifest['kind'].lower()}-{manifest['metadata']['name']}"


def replacing_options(paths: Sequence[str] = ("spec",)) -> pulumi.ResourceOptions:
    """Options for a run-to-completion job: a changed spec replaces it, old object first.

    In place, a change would be refused (Volcano's Job admission webhook allows only
    minAvailable, task replicas and priority class to change) or ignored (a finished MPIJob
    or RayJob is not run again, and its old status still satisfies `pulumi.com/waitFor`).
    pulumi-kubernetes diffs the new inputs against the old inputs only (provider.go Diff:
    live state pruned to the old inputs), so status changes never trigger a replacement and
    an unchanged job is left alone. Its provider asks for delete-before-replace only for its
    own forced replacements, not for `replaceOnChanges`; the name is kept, so the old object
    must go first - which also frees its Trainium nodes for the new run.
    """
    return pulumi.ResourceOptions(replace_on_changes=list(paths), delete_before_replace=True)


def declare(
    manifest: dict[str, Any],
    parent: pulumi.Resource,
    after: Sequence[pulumi.Resource] = (),
    replace_on_change: bool = False,
    replace_on: Sequence[str] = ("spec",),
) -> pulumi.CustomResource:
    """``manifest`` as a resource under ``parent``, created only once ``after`` are ready."""
    opts = pulumi.ResourceOptions(parent=parent, depends_on=list(after))
    if replace_on_change:
        opts = pulumi.ResourceOptions.merge(opts, replacing_options(replace_on))
    body = {k: v for k, v in manifest.items() if k not in ("apiVersion", "kind")}
    cls = _BUILT_IN.get((manifest["apiVersion"], manifest["kind"]))
    if cls is not None:
        return cls(resource_name(manifest), opts=opts, **{_PYTHON_NAMES.get(k, k): v for k, v in body.items()})
    return k8s.apiextensions.CustomResource(
        resource_name(manifest), api_version=manifest["apiVersion"], kind=manifest["kind"], opts=opts, **body
    )


# The annotation that ties a job to the one before it in its chain: that job's UID, in the pod
# templates of this one's spec (see ``follow``).
FOLLOWS = "trainium.workloads/follows-uid"


def pod_templates(value: Any) -> list[dict[str, Any]]:
    """Every pod template inside an object's spec (`template` with a `spec`): a Volcano Job's
    tasks, an MPIJob's replicas, a RayJob's head and worker groups, a batch Job's template."""
    found: list[dict[str, Any]] = []
    if isinstance(value, dict):
        for key, child in value.items():
            if key == "template" and isinstance(child, dict) and "spec" in child:
                found.append(child)
            found += pod_templates(child)
    elif isinstance(value, list):
        for child in value:
            found += pod_templates(child)
    return found


def _uid(resource: Any) -> pulumi.Output[str]:
    """The UID of ``resource``, any pulumi_kubernetes resource: each class has its own ``metadata``
    output, and their only common base, ``pulumi.CustomResource``, has none."""
    return resource.metadata.apply(lambda m: (m.get("uid") if isinstance(m, dict) else getattr(m, "uid", None)) or "")


def follow(manifest: dict[str, Any], before: pulumi.Output[str]) -> dict[str, Any]:
    """``manifest`` with ``before`` (the previous job's UID) in its pod templates' annotations.

    A property dependency, not `depends_on`: with deleteBeforeReplace, pulumi deletes a dependent
    before the resource it depends on is replaced only when one of its input properties comes from
    that resource; it then asks the provider to diff the dependent with those properties unknown
    and applies its replaceOnChanges (pulumi/pulumi v3.259.0 pkg/resource/deploy/step_generator.go
    calculateDependentReplacements). The UID sits in `spec`, which replaceOnChanges names, so a
    replaced precompile or compile job first takes the training job that follows it down: never two
    runs on one compile cache and one node group at once. A new UID also means a new training run
    after every new precompile, which is what the chain is for.
    """
    linked = copy.deepcopy(manifest)
    for template in pod_templates(linked["spec"]):
        metadata = template.setdefault("metadata", {})
        metadata["annotations"] = {**(metadata.get("annotations") or {}), FOLLOWS: before}
    return linked


def declare_in_order(
    manifests: Sequence[dict[str, Any]],
    parent: pulumi.Resource,
    after: Sequence[pulumi.Resource] = (),
    replace_on_change: bool = False,
    replace_on: Sequence[str] = ("spec",),
) -> list[pulumi.CustomResource]:
    """Each manifest created only once the one before it is ready; with ``replace_on_change``, each
    job also follows the job before it (see ``follow``). A step gate (workloads/step_gate.py) follows
    the job it waits for, is replaced whenever it changes or failed, and is what the next job waits
    for; that job still follows the gated job, so replacing a gate never replaces a job."""
    declared: list[pulumi.CustomResource] = []
    job: pulumi.CustomResource | None = None  # the latest job that is not a gate
    for manifest in manifests:
        if step_gate.is_gate(manifest) and job is not None:
            declared.append(declare(follow(manifest, _uid(job)), parent, declared[-1:], True, step_gate.REPLACE_ON))
            continue
        if job is not None and replace_on_change:
            manifest = follow(manifest, _uid(job))
        job = declare(manifest, parent, declared[-1:] or after, replace_on_change, replace_on)
        declared.append(job)
    return declared


class JobChain(pulumi.ComponentResource):
    """A workload that is a NetworkPolicy and jobs run one after another: the policy and the
    ``config`` the pods mount first (pods started before the policy exists would accept anything),
    then each job once the one before it is ready, each replaced when its ``replace_on`` fields
    change and following the one before it."""

    jobs: list[pulumi.CustomResource]

    def __init__(
        self,
        type_: str,
        name: str,
        policy: dict[str, Any],
        manifests: Sequence[dict[str, Any]],
        after: Sequence[pulumi.Resource] = (),
        opts: pulumi.ResourceOptions | None = None,
        replace_on: Sequence[str] = ("spec",),
        config: Sequence[dict[str, Any]] = (),
    ) -> None:
        super().__init__(type_, name, None, opts)
        declared_policy = declare(policy, self)
        # What the jobs' pods use (a ConfigMap of scripts, the step gates' account), in place when it changes.
        declared_config = [declare(manifest, self) for manifest in config]
        self.jobs = declare_in_order(
            manifests, self, [*after, declared_policy, *declared_config], replace_on_change=True, replace_on=replace_on
        )
        self.register_outputs({})
