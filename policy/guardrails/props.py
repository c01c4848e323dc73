"""Reading resource properties the way the policy engine passes them.

Resource rules get a resource's *inputs*; stack rules get each resource's *outputs* (pulumi/pulumi
pkg/resource/deploy/step_generator.go AnalyzeResources: "AnalyzeStack is called on the final
outputs"), which are the inputs plus what the provider computes. Names are camelCase
(``metadataOptions.httpTokens``), as ``offline/plan/mocks.py`` records the inputs. During ``pulumi
preview`` a value that depends on another resource's output is unknown, and so is every computed
output of a resource about to be created. pulumi-policy wraps props in ``unknown_checking_proxy``
(pulumi/pulumi-policy sdk/python/lib/pulumi_policy/proxy.py, v1.21.0): reading such a value raises
``UnknownValueError``, which the SDK turns into an advisory "can't run during preview" note
instead of a violation (policy.py ``Analyze``/``AnalyzeStack``) - for a stack rule, for the whole
stack. So the rules read only what they need, never treat a value they could not read as bad,
and read computed outputs through ``known``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from pulumi_policy import PolicyResource
from pulumi_policy.proxy import UnknownValueError


def is_list(value: Any) -> bool:
    """Lists as the SDK passes them: a ``Sequence`` proxy, not a ``list``."""
    return isinstance(value, Sequence) and not isinstance(value, str)


def has(props: Any, key: str) -> bool:
    """Whether a key is set, without reading its (perhaps unknown) value: the proxy's ``in``
    goes through ``__getitem__`` and would raise for an unknown value."""
    return isinstance(props, Mapping) and any(k == key for k in iter(props))


def get(props: Any, *path: str | int, default: Any = None) -> Any:
    """``props[a][b]...`` or ``default`` where a step is missing (not where it is unknown)."""
    value = props
    for step in path:
        if isinstance(step, int):
            if not is_list(value) or step >= len(value):
                return default
        elif not isinstance(value, Mapping) or step not in value:
            return default
        value = value[step]
    return default if value is None else value


def known(read: Callable[..., Any], *args: Any, unknown: Any = None) -> Any:
    """``read(*args)``, or ``unknown`` where it reads a value that is unknown in this preview.

    For a stack rule's read of an output the provider computes when it is not set (a security
    group's inline ``ingress``, a bucket's ``serverSideEncryptionConfiguration``, a node group's
    ``instanceTypes``): at the first preview that output is unknown, and one unguarded read would
    end the whole rule for every resource of the stack."""
    try:
        return read(*args)
    except UnknownValueError:
        return unknown


def truthy(value: Any) -> bool:
    """Booleans the AWS provider takes as strings (``encrypted: "true"``) or as booleans."""
    return value is True or (isinstance(value, str) and value.lower() == "true")


def as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if is_list(value) else [value]


# --- Kubernetes objects ------------------------------------------------------------------------

# Kubernetes provider types that are not one object (charts, manifest files, providers).
_NOT_OBJECTS = ("kubernetes:helm.sh/", "kubernetes:yaml/", "kubernetes:kustomize/", "pulumi:providers:")


def is_kubernetes_object(resource_type: str) -> bool:
    return resource_type.startswith("kubernetes:") and not resource_type.startswith(_NOT_OBJECTS)


def kind_of(resource_type: str) -> str:
    """``kubernetes:batch.volcano.sh/v1alpha1:Job`` -> ``batch.volcano.sh/Job``; core kinds keep ``core/``."""
    _, group_version, kind = resource_type.split(":", 2)
    return f"{group_version.split('/')[0]}/{kind}"


def _template_spec(template: Any) -> Mapping[str, Any] | None:
    spec = get(template, "spec")
    return spec if isinstance(spec, Mapping) else None


def pod_specs(resource_type: str, props: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every pod spec an object carries, with where it sits (for messages)."""
    kind = kind_of(resource_type)
    spec = get(props, "spec", default={})
    if kind == "core/Pod":
        yield "spec", spec
    elif kind in (
        "apps/Deployment",
        "apps/StatefulSet",
        "apps/DaemonSet",
        "apps/ReplicaSet",
        "batch/Job",
        "core/ReplicationController",
        "core/PodTemplate",
    ):
        template = get(props, "template") if kind == "core/PodTemplate" else get(spec, "template")
        if (s := _template_spec(template)) is not None:
            yield "spec.template.spec", s
    elif kind == "batch/CronJob":
        if (s := _template_spec(get(spec, "jobTemplate", "spec", "template"))) is not None:
            yield "spec.jobTemplate.spec.template.spec", s
    elif kind == "batch.volcano.sh/Job":
        for i, task in enumerate(get(spec, "tasks", default=[])):
            if (s := _template_spec(get(task, "template"))) is not None:
                yield f"spec.tasks[{i}].template.spec", s
    elif kind == "kubeflow.org/MPIJob":
        for role, replica in get(spec, "mpiReplicaSpecs", default={}).items():
            if (s := _template_spec(get(replica, "template"))) is not None:
                yield f"spec.mpiReplicaSpecs.{role}.template.spec", s
    elif kind in ("ray.io/RayCluster", "ray.io/RayJob", "ray.io/RayService"):
        cluster, where = spec, "spec"
        if kind == "ray.io/RayJob":
            cluster, where = get(spec, "rayClusterSpec", default={}), "spec.rayClusterSpec"
            if (s := _template_spec(get(spec, "submitterPodTemplate"))) is not None:
                yield "spec.submitterPodTemplate.spec", s
        elif kind == "ray.io/RayService":
            cluster, where = get(spec, "rayClusterConfig", default={}), "spec.rayClusterConfig"
        if (s := _template_spec(get(cluster, "headGroupSpec", "template"))) is not None:
            yield f"{where}.headGroupSpec.template.spec", s
        for i, group in enumerate(get(cluster, "workerGroupSpecs", default=[])):
            if (s := _template_spec(get(group, "template"))) is not None:
                yield f"{where}.workerGroupSpecs[{i}].template.spec", s


def containers(pod_spec: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for field in ("initContainers", "containers", "ephemeralContainers"):
        for c in get(pod_spec, field, default=[]):
            yield f"{field}[{get(c, 'name', default='?')}]", c


def object_name(props: Mapping[str, Any]) -> str:
    try:
        namespace, name = get(props, "metadata", "namespace"), get(props, "metadata", "name")
    except UnknownValueError:
        return "(name known after deploy)"
    return f"{namespace}/{name}" if namespace else str(name)


# --- stack-level resolution --------------------------------------------------------------------


def of_type(resources: Iterable[PolicyResource], *types: str) -> list[PolicyResource]:
    return [r for r in resources if r.resource_type in types]


def dependencies_of(resource: PolicyResource, prop: str, *types: str) -> list[PolicyResource]:
    """The stack's resources a property's value came from (the engine's property dependencies),
    known even during a preview where the value itself (an id) is still unknown."""
    return [r for r in resource.property_dependencies.get(prop, []) if not types or r.resource_type in types]
