"""Deploy readiness: the mistakes that pass every schema check and then break `pulumi up`."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from typing import Any

from pulumi_policy import ResourceValidationArgs, StackValidationArgs
from pulumi_policy.proxy import UnknownValueError

from infra.facts.versions import MANIFEST_NAMESPACES
from policy.guardrails.declare import Report, resource_rule, stack_rule
from policy.guardrails.props import get, has, is_kubernetes_object, is_list, kind_of, object_name, of_type

HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
CONFIG_FILE = "kubernetes:yaml/v2:ConfigFile"
HELM_CHARTS = (HELM_RELEASE, "kubernetes:helm.sh/v4:Chart", "kubernetes:helm.sh/v3:Chart")
NAMESPACE = "kubernetes:core/v1:Namespace"
PVC = "kubernetes:core/v1:PersistentVolumeClaim"
STORAGE_CLASS = "kubernetes:storage.k8s.io/v1:StorageClass"
# Namespaces every Kubernetes cluster has.
BUILT_IN_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


def _namespace_overrides(values: Any) -> Iterator[str]:
    """Chart values naming a namespace the chart renders into without creating it (the Neuron
    chart's ``npd.namespaceOverride``: DESIGN §5)."""
    # Values often hold ids and ARNs unknown at preview: skip those rather than give up the rule.
    if isinstance(values, dict) or hasattr(values, "items"):
        for key in list(values):
            try:
                value = values[key]
            except UnknownValueError:
                continue
            if key == "namespaceOverride" and isinstance(value, str) and value:
                yield value
            else:
                yield from _namespace_overrides(value)
    elif is_list(values):
        for i in range(len(values)):
            try:
                value = values[i]
            except UnknownValueError:
                continue
            yield from _namespace_overrides(value)


# The stack's config as the engine gives a policy pack: pulumi-language-python starts a policy pack
# with PULUMI_CONFIG (the stack's config as JSON, key -> value text), PULUMI_PROJECT and PULUMI_STACK
# in its environment (pulumi/pulumi sdk/python/cmd/pulumi-language-python/main.go RunPlugin, from
# v3.221.0 to v3.259.0, the newest mirrored; .pulumi-version pins 3.272.0). The offline run, which
# checks several stacks in one process, sets this instead (offline/plan/policy_run.py).
STACK_CONFIG: ContextVar[Mapping[str, str] | None] = ContextVar("stack_config", default=None)


def stack_config() -> Mapping[str, str]:
    given = STACK_CONFIG.get()
    if given is not None:
        return given
    try:
        loaded = json.loads(os.environ.get("PULUMI_CONFIG") or "{}")
    except ValueError:
        return {}
    return loaded if isinstance(loaded, dict) else {}


def _stack_of(resources: list) -> tuple[str, str] | None:
    """(stack, project) of the resources' URNs (urn:pulumi:<stack>::<project>::...)."""
    for r in resources:
        head = r.urn.split("::")
        if len(head) > 2 and head[0].startswith("urn:pulumi:"):
            return head[0].removeprefix("urn:pulumi:"), head[1]
    return None


def stack_namespaces(resources: list, config: Mapping[str, str]) -> set[str]:
    """The namespaces the stack's own config names: ``<project>:namespace`` (a workload stack's, which
    its program refuses unless the cluster stack creates it: workloads/checks.py) and
    ``<project>:trainingNamespaces`` (the cluster stack's)."""
    found = _stack_of(resources)
    if found is None:
        return set()
    project = found[1]
    named: set[str] = set()
    namespace = config.get(f"{project}:namespace")
    if isinstance(namespace, str):
        named.add(namespace)
    try:
        listed = json.loads(config.get(f"{project}:trainingNamespaces") or "[]")
    except (TypeError, ValueError):
        listed = []
    if isinstance(listed, list):
        named |= {n for n in listed if isinstance(n, str)}
    return named


def _config_file(resources: list) -> str:
    found = _stack_of(resources)
    return f"policy/config.{found[0] if found else '<stack>'}.json"


@stack_rule(
    "namespace-exists",
    "Every namespace an object or chart is put in is built in, declared in the stack, or created by its chart.",
    config_schema={
        "externalNamespaces": {
            "type": "array",
            "items": {"type": "string"},
            "default": [],
            "description": "namespaces another stack creates, besides the one the stack's own config names",
        },
    },
)
def namespace_exists(args: StackValidationArgs, report: Report) -> None:
    settings = args.get_config()
    existing = set(BUILT_IN_NAMESPACES) | set(settings.get("externalNamespaces", []))
    existing |= stack_namespaces(args.resources, stack_config())
    fix = (
        f"list it under namespace-exists.externalNamespaces in {_config_file(args.resources)} if another stack owns it"
    )
    existing |= {get(n.props, "metadata", "name") for n in of_type(args.resources, NAMESPACE)}
    # A pinned release manifest applied from its URL creates its own (infra/facts/versions.py).
    existing |= {
        ns for c in of_type(args.resources, CONFIG_FILE) for ns in MANIFEST_NAMESPACES.get(get(c.props, "file"), ())
    }
    releases = of_type(args.resources, *HELM_CHARTS)
    existing |= {get(r.props, "namespace") for r in releases if get(r.props, "createNamespace") is True}
    for r in args.resources:
        if r.resource_type in HELM_CHARTS:
            wanted = [("release namespace", get(r.props, "namespace", default="default"))]
            wanted += [
                ("values namespaceOverride", ns) for ns in _namespace_overrides(get(r.props, "values", default={}))
            ]
            for what, ns in wanted:
                if ns not in existing:
                    report(
                        f"Helm release '{r.name}' puts objects in namespace '{ns}' ({what}), which is neither built in nor "
                        f"declared: declare a Namespace (or createNamespace for the release namespace), or {fix}.",
                        r.urn,
                    )
        elif is_kubernetes_object(r.resource_type) and has(get(r.props, "metadata", default={}), "namespace"):
            ns = get(r.props, "metadata", "namespace")
            if ns not in existing:
                report(
                    f"{kind_of(r.resource_type)} '{object_name(r.props)}' is in namespace '{ns}', which is neither built in "
                    f"nor declared in this stack: declare the Namespace, or {fix}.",
                    r.urn,
                )


# pulumi-kubernetes provider/pkg/await/awaiters.go (untilCoreV1PersistentVolumeClaimReady; same
# code from v4.32.0 to the newest tag mirrored): a created PVC is awaited until Bound - or only
# until Pending when its StorageClass binds WaitForFirstConsumer - with a fixed 5-minute limit
# that customTimeouts do not change; `pulumi.com/skipAwait: "true"` (exactly) skips the wait
# (provider/pkg/metadata/overrides.go SkipAwaitLogic). Dynamic FSx takes 5-15 minutes to bind.
PVC_AWAIT_MINUTES = 5


def pvc_blocking_reason(pvc: dict | Any, classes: dict[str, str]) -> str | None:
    """Why `pulumi up` would wait on this claim (and fail after 5 minutes), or None."""
    if get(pvc, "metadata", "annotations", "pulumi.com/skipAwait") == "true":
        return None
    if has(get(pvc, "spec", default={}), "volumeName"):
        return None  # bound to a named PersistentVolume (its name may be unknown at preview)
    class_name = get(pvc, "spec", "storageClassName")
    if not class_name:
        return (
            "it names neither a volume nor a storage class, so it is awaited until the cluster's default class binds it"
        )
    mode = classes.get(class_name)
    if mode == "WaitForFirstConsumer":
        return None
    if mode is None:
        return f"its storage class '{class_name}' is not declared in this stack, so nothing says it binds on first use"
    return f"its storage class '{class_name}' binds {mode}, so the claim is awaited until a volume is provisioned"


@stack_rule(
    "pvc-no-blocking-await",
    "No PersistentVolumeClaim on which `pulumi up` waits for a slow provisioner (the provider's 5-minute PVC await).",
)
def pvc_no_blocking_await(args: StackValidationArgs, report: Report) -> None:
    classes = {
        get(c.props, "metadata", "name"): get(c.props, "volumeBindingMode", default="Immediate")
        for c in of_type(args.resources, STORAGE_CLASS)
    }
    for pvc in of_type(args.resources, PVC):
        if reason := pvc_blocking_reason(pvc.props, classes):
            report(
                f"PersistentVolumeClaim '{object_name(pvc.props)}' would hold `pulumi up` for up to {PVC_AWAIT_MINUTES} minutes "
                f"and then fail: {reason}. Bind it to a declared PersistentVolume (spec.volumeName), use a "
                'WaitForFirstConsumer class, or annotate it pulumi.com/skipAwait: "true".',
                pvc.urn,
            )


# Volcano's admission webhook rejects spec updates other than minAvailable, replicas and
# priority class; finished MPIJobs and RayJobs are not re-run when patched (DESIGN §5). So a
# changed spec must replace the object: replaceOnChanges on spec, and deleteBeforeReplace
# because the replacement keeps its metadata.name.
REPLACED_KINDS = ("batch.volcano.sh/Job", "kubeflow.org/MPIJob", "ray.io/RayJob")


def _is_replaced_kind(resource_type: str) -> bool:
    return is_kubernetes_object(resource_type) and kind_of(resource_type) in REPLACED_KINDS


@resource_rule(
    "jobs-replaced-on-change",
    "Volcano Jobs, MPIJobs and RayJobs are replaced, not patched, when their spec changes.",
    applies_to=_is_replaced_kind,
)
def jobs_replaced_on_change(args: ResourceValidationArgs, report: Report) -> None:
    name = object_name(args.props)
    if has(get(args.props, "metadata", default={}), "name") and args.opts.delete_before_replace is not True:
        report(
            f"{kind_of(args.resource_type)} '{name}' is not deleteBeforeReplace: its replacement keeps the same name, so "
            "it must be deleted first. Use workloads/kube.py replacing_options()."
        )
    # pulumi-policy v1.21.0 PolicyResourceOptions carries no replaceOnChanges (policy.py), so a real
    # preview cannot see it; the offline run adds it from the registration (offline/plan/policy_run.py).
    replace_on = getattr(args.opts, "replace_on_changes", None)
    if replace_on is not None and not any(p in ("spec", "*") for p in replace_on):
        report(
            f"{kind_of(args.resource_type)} '{name}' would be patched when its spec changes: the controller rejects or "
            'ignores spec updates. Set replaceOnChanges: ["spec"] (workloads/kube.py replacing_options()).'
        )


# A chart version range or none at all resolves to whatever is newest at deploy time.
_RANGE = re.compile(r"[\^~*xX<>=| ]|\|\|")


@resource_rule("helm-release-pinned", "Helm releases pin one exact chart version.", applies_to=HELM_CHARTS)
def helm_release_pinned(args: ResourceValidationArgs, report: Report) -> None:
    version = get(args.props, "version")
    if not version:
        report(
            f"Helm release '{args.name}' pins no chart version: set version to an exact chart version (infra/facts/versions.py CHARTS)."
        )
    elif _RANGE.search(str(version)):
        report(f"Helm release '{args.name}' asks for chart version range '{version}': pin one exact version.")


POLICIES = [namespace_exists, pvc_no_blocking_await, jobs_replaced_on_change, helm_release_pinned]
