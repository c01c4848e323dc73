"""Small stacks of registrations for the policy tests, run the way offline/plan/policy_run.py runs them."""

from __future__ import annotations

from typing import Any

from offline.plan.mocks import Registration
from offline.plan.policy_run import parse_config, run_policies
from policy.guardrails import BY_NAME


def urn(type_: str, name: str) -> str:
    return f"urn:pulumi:test::trainium-eks::{type_}::{name}"


def reg(
    type_: str,
    name: str,
    inputs: dict[str, Any],
    deps: dict[str, list[tuple[str, str]]] | None = None,
    **lifecycle: Any,
) -> Registration:
    """A registration; ``deps`` maps a property to the (type, name) of the resources it came from."""
    return Registration(
        urn=urn(type_, name),
        type=type_,
        name=name,
        parent="",
        provider="",
        dependencies=[],
        protect=False,
        custom=True,
        inputs=inputs,
        lifecycle=dict(lifecycle),
        property_dependencies={k: [urn(*d) for d in v] for k, v in (deps or {}).items()},
    )


def violations(
    policy: str, *registrations: Registration, config: dict[str, Any] | None = None, region: str = "us-west-2"
) -> list[str]:
    """The messages one policy reports over these resources."""
    pack_config = parse_config({policy: config} if config else {}, "test policy config")
    report = run_policies(list(registrations), pack_config, region, [BY_NAME[policy]])
    return [v.message for v in report.violations]


def k8s(kind_type: str, name: str, manifest: dict[str, Any], **lifecycle: Any) -> Registration:
    api_group, kind = kind_type.rsplit(":", 1)[0].split(":", 1)[1], kind_type.rsplit(":", 1)[1]
    api_version = api_group.split("/", 1)[1] if api_group.startswith("core/") else api_group
    return reg(kind_type, name, {"apiVersion": api_version, "kind": kind, **manifest}, **lifecycle)


def engine_violations(
    policy: str, type_: str, props: dict[str, Any], config: dict[str, Any] | None = None
) -> list[str]:
    """One resource policy over one resource exactly as the engine hands it over (no offline
    additions such as offline/plan/policy_run.py's EKS child)."""
    from pulumi_policy import PolicyCustomTimeouts, PolicyResourceOptions, ResourceValidationArgs
    from pulumi_policy.proxy import unknown_checking_proxy

    found: list[str] = []
    settings = parse_config({policy: config} if config else {}, "test policy config").properties[policy]
    opts = PolicyResourceOptions(False, [], None, [], PolicyCustomTimeouts(0, 0, 0), [], None)
    BY_NAME[policy].validate(
        ResourceValidationArgs(type_, unknown_checking_proxy(props), urn(type_, "r"), "r", opts, None, settings, {}),
        lambda message, urn=None: found.append(message),
    )
    return found


# --- a first preview, as the engine sees it ---------------------------------------------------------

# Packages bridged from Terraform providers (pulumi-terraform-bridge). pulumi-kubernetes is not:
# its preview returns the object as given or as the API server's dry run fills it in, known.
BRIDGED = {"aws": "pulumi_aws", "random": "pulumi_random"}


def _sdk_class(type_: str) -> type | None:
    """The Python SDK class of a bridged resource type (``aws:ec2/securityGroup:SecurityGroup`` ->
    ``pulumi_aws.ec2.SecurityGroup``), or None."""
    import importlib

    package, module, name = type_.split(":", 2)
    module = module.split("/")[0]
    if package not in BRIDGED:
        return None
    path = BRIDGED[package]
    return getattr(importlib.import_module(path if module == "index" else f"{path}.{module}"), name)


def computed_outputs(type_: str) -> set[str]:
    """The outputs a resource always has (the provider computes them when they are not set).

    The SDK is generated from the provider schema: an output the schema lists as required is
    typed ``pulumi.Output[T]``, any other ``pulumi.Output[Optional[T]]``. pulumi-terraform-bridge
    makes an output non-optional when its attribute is required, computed or has a default
    (pkg/tfgen/generate.go ``isOptional``, HEAD 2026-08-05). A computed attribute the program
    does not set is unknown in the plan of a resource about to be created, which is what a first
    preview shows (a default would be known: counting it too only makes the test stricter)."""
    import inspect

    from pulumi._types import _PULUMI_NAME

    cls = _sdk_class(type_)
    if cls is None:
        return set()
    names = set()
    for _, prop in inspect.getmembers(cls, lambda m: isinstance(m, property)):
        name = getattr(prop.fget, _PULUMI_NAME, None)
        if name and "Optional[" not in str(prop.fget.__annotations__.get("return")):
            names.add(name)
    return names


def as_at_first_preview(value: Any) -> Any:
    """Every value AWS assigns (the plan's placeholders) unknown, as in a preview from zero."""
    from pulumi_policy.proxy import UNKNOWN_STRING_VALUE

    if isinstance(value, dict):
        return {k: as_at_first_preview(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_at_first_preview(v) for v in value]
    return UNKNOWN_STRING_VALUE if isinstance(value, str) and "placeholder" in value else value


def first_preview(registration: Registration, outputs: bool) -> Registration:
    """A registration as a first preview gives it to resource policies (its inputs) or, with
    ``outputs``, to stack policies (its outputs: the inputs plus every computed output, unknown)."""
    import copy

    from pulumi_policy.proxy import UNKNOWN_STRING_VALUE

    r = copy.deepcopy(registration)
    r.inputs = as_at_first_preview(r.inputs)
    if outputs:
        r.inputs.update({name: UNKNOWN_STRING_VALUE for name in computed_outputs(r.type) if name not in r.inputs})
    return r
