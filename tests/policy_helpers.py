"""Small stacks of registrations for the policy tests, run the way policy/offline.py runs them."""

from __future__ import annotations

from typing import Any

from offline.mocks import Registration
from policy.guardrails import BY_NAME
from policy.offline import parse_config, run_policies


def urn(type_: str, name: str) -> str:
    return f"urn:pulumi:test::trainium-eks::{type_}::{name}"


def reg(type_: str, name: str, inputs: dict[str, Any], deps: dict[str, list[tuple[str, str]]] | None = None,
        **lifecycle: Any) -> Registration:
    """A registration; ``deps`` maps a property to the (type, name) of the resources it came from."""
    return Registration(
        urn=urn(type_, name), type=type_, name=name, parent="", provider="", dependencies=[], protect=False,
        custom=True, inputs=inputs, lifecycle=dict(lifecycle),
        property_dependencies={k: [urn(*d) for d in v] for k, v in (deps or {}).items()},
    )


def violations(policy: str, *registrations: Registration, config: dict[str, Any] | None = None,
               region: str = "us-west-2") -> list[str]:
    """The messages one policy reports over these resources."""
    pack_config = parse_config({policy: config} if config else {}, "test policy config")
    report = run_policies(list(registrations), pack_config, region, [BY_NAME[policy]])
    return [v.message for v in report.violations]


def k8s(kind_type: str, name: str, manifest: dict[str, Any], **lifecycle: Any) -> Registration:
    api_group, kind = kind_type.rsplit(":", 1)[0].split(":", 1)[1], kind_type.rsplit(":", 1)[1]
    api_version = api_group.split("/", 1)[1] if api_group.startswith("core/") else api_group
    return reg(kind_type, name, {"apiVersion": api_version, "kind": kind, **manifest}, **lifecycle)
