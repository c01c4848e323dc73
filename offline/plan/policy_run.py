"""Every rule of the pack over an offline plan, with a stack's policy config file.

What the Pulumi engine does for a real ``pulumi preview --policy-pack policy
--policy-pack-config policy/config.<stack>.json``, done here over the registrations the mocks
recorded (the input property names the engine passes):

- config file (pulumi/pulumi ``sdk/go/pkg/resource/analyzer/config.go``): a JSON object keyed by
  policy name or ``all``; each value an enforcement level or an object with an optional
  ``enforcementLevel`` and the policy's properties. Defaults come from each policy's schema,
  then ``all``, then the policy's own entry. Stricter than the engine: an unknown policy name
  or property is refused (the engine ignores it silently, so a typo would keep the default), and
  a level below the policy's default needs a ``justification`` (a key the engine passes through
  unread).
- per resource, each resource policy over its inputs; then each stack policy over all resources
  with the property dependencies the engine gives (pulumi-policy ``AnalyzeStack``, policy.py
  v1.21.0). The engine gives stack policies each resource's *outputs* (pulumi/pulumi
  ``pkg/resource/deploy/step_generator.go`` AnalyzeResources: "AnalyzeStack is called on the final
  outputs"): the inputs plus what the provider computes, unknown at a first preview. The mocks
  know only the inputs, so here both kinds read the inputs; the rules guard their reads of
  computed outputs (``policy.guardrails.props.known``).
- pulumi-eks's ``eks:index:Cluster`` is a remote component: in a real preview its props are
  empty and its child ``aws:eks/cluster:Cluster`` carries the settings. The mocks never run the
  component, so its child is added here from the component's inputs (``eks_cluster_child``).
- a policy at ``disabled`` does not run; ``remediate`` reports as ``mandatory``; reading a value
  that is unknown ends that policy's check with a note, never a violation.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyCustomTimeouts,
    PolicyProviderResource,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import UnknownValueError, unknown_checking_proxy

from infra.config.errors import ConfigError
from offline.plan.mocks import Registration
from policy.guardrails import PACK_NAME, POLICIES
from policy.guardrails.readiness import STACK_CONFIG
from policy.guardrails.security import EKS_CLUSTER

POLICY_DIR = Path(__file__).resolve().parents[2] / "policy"
LEVELS = [level.value for level in EnforcementLevel]
# Exit code of `make plan` when a mandatory violation exists (2 is bad configuration).
MANDATORY_EXIT_CODE = 3


def config_path(stack: str) -> Path:
    return POLICY_DIR / f"config.{stack}.json"


@dataclass(frozen=True)
class PackConfig:
    levels: dict[str, EnforcementLevel]
    properties: dict[str, dict[str, Any]]
    justifications: dict[str, str] = field(default_factory=dict)


_RANK = {
    EnforcementLevel.DISABLED: 0,
    EnforcementLevel.ADVISORY: 1,
    EnforcementLevel.MANDATORY: 2,
    EnforcementLevel.REMEDIATE: 2,
}
JUSTIFICATION = "justification"


def _justification(value: dict[str, Any], where: str, problems: list[str]) -> str | None:
    if JUSTIFICATION not in value:
        return None
    text = value.pop(JUSTIFICATION)
    if not isinstance(text, str) or not text.strip():
        problems.append(f"{where}.{JUSTIFICATION}: {json.dumps(text)} must be a sentence saying why")
        return None
    return text


@dataclass(frozen=True)
class Violation:
    policy: str
    urn: str
    type: str
    name: str
    enforcement_level: str
    message: str

    def as_json(self) -> dict[str, str]:
        return {
            "policy": self.policy,
            "urn": self.urn,
            "type": self.type,
            "name": self.name,
            "enforcementLevel": self.enforcement_level,
            "message": self.message,
        }


@dataclass
class PolicyReport:
    violations: list[Violation] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def mandatory(self) -> list[Violation]:
        return [v for v in self.violations if v.enforcement_level == "mandatory"]

    def as_json(self) -> dict[str, Any]:
        return {"violations": [v.as_json() for v in self.violations]}


# --- configuration -------------------------------------------------------------------------------

_JSON_TYPES: dict[str, type | tuple[type, ...]] = {
    "string": str,
    "number": (int, float),
    "integer": int,
    "boolean": bool,
    "array": list,
    "object": dict,
}


def schema_problems(schema: dict[str, Any], value: Any, where: str) -> list[str]:
    """The JSON-schema keywords our policies use: type, enum, minimum, items, additionalProperties."""
    expected = schema.get("type")
    if expected and (
        not isinstance(value, _JSON_TYPES[expected]) or (expected != "boolean" and isinstance(value, bool))
    ):
        return [f"{where}: {json.dumps(value)} is not of type {expected}"]
    if isinstance(value, float) and not math.isfinite(value):
        # Python's json reads Infinity and NaN, which JSON itself has no word for: a ceiling of
        # Infinity would switch the rule off without saying so.
        return [f"{where}: {value} is not a finite number"]
    problems = []
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{where}: {json.dumps(value)} is not one of {schema['enum']}")
    if "minimum" in schema and isinstance(value, (int, float)) and value < schema["minimum"]:
        problems.append(f"{where}: {value} is below the minimum {schema['minimum']}")
    if expected == "array" and "items" in schema:
        for i, item in enumerate(value):
            problems += schema_problems(schema["items"], item, f"{where}[{i}]")
    if expected == "object" and isinstance(schema.get("additionalProperties"), dict):
        for key, item in value.items():
            problems += schema_problems(schema["additionalProperties"], item, f"{where}.{key}")
    return problems


def _level(value: Any, where: str, problems: list[str]) -> EnforcementLevel | None:
    if value in LEVELS:
        return EnforcementLevel(value)
    problems.append(f"{where}: {json.dumps(value)} is not an enforcement level (allowed: {', '.join(LEVELS)})")
    return None


def parse_config(raw: Any, source: str, policies: Iterable[Policy] = POLICIES) -> PackConfig:
    policies = list(policies)
    by_name = {p.name: p for p in policies}
    problems: list[str] = []
    levels = {p.name: p.enforcement_level or EnforcementLevel.MANDATORY for p in policies}
    properties = {
        p.name: {
            k: copy.deepcopy(s["default"])
            for k, s in (p.config_schema.properties if p.config_schema else {}).items()
            if "default" in s
        }
        for p in policies
    }
    if not isinstance(raw, dict):
        raise ConfigError([f"the file must hold a JSON object keyed by policy name, not {type(raw).__name__}"], source)
    entries = dict(raw)
    justifications: dict[str, str] = {}
    if "all" in entries:
        all_value = entries.pop("all")
        if isinstance(all_value, dict):
            all_value = dict(all_value)
            if why := _justification(all_value, "all", problems):
                justifications = {name: why for name in levels}
            all_value = all_value.get("enforcementLevel")
        level = _level(all_value, "all", problems)
        if level is not None:
            levels = {name: level for name in levels}
    for name, value in entries.items():
        policy = by_name.get(name)
        if policy is None:
            problems.append(f"{name}: no such policy (policies: {', '.join(sorted(by_name))})")
            continue
        if isinstance(value, str):
            if (level := _level(value, name, problems)) is not None:
                levels[name] = level
            continue
        if not isinstance(value, dict):
            problems.append(f"{name}: {json.dumps(value)} must be an enforcement level or an object")
            continue
        value = dict(value)
        if why := _justification(value, name, problems):
            justifications[name] = why
        if "enforcementLevel" in value and (
            level := _level(value.pop("enforcementLevel"), f"{name}.enforcementLevel", problems)
        ):
            levels[name] = level
        schema = policy.config_schema.properties if policy.config_schema else {}
        for key, item in value.items():
            if key not in schema:
                allowed = ", ".join(sorted(schema)) or "none"
                problems.append(f"{name}.{key}: not a setting of this policy (settings: {allowed})")
            else:
                problems += schema_problems(schema[key], item, f"{name}.{key}")
                properties[name][key] = item
    for policy in policies:
        default = policy.enforcement_level or EnforcementLevel.MANDATORY
        if _RANK[levels[policy.name]] < _RANK[default] and policy.name not in justifications:
            problems.append(
                f"{policy.name}: lowered from {default.value} to {levels[policy.name].value} without a "
                f'justification: use {{"enforcementLevel": "{levels[policy.name].value}", '
                f'"{JUSTIFICATION}": "why"}}'
            )
    if problems:
        raise ConfigError(problems, source)
    return PackConfig(levels, properties, justifications)


def load_config(path: Path) -> PackConfig:
    shown = path.relative_to(POLICY_DIR.parent) if path.is_relative_to(POLICY_DIR.parent) else path
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError([f"{shown} does not exist"], "policy configuration") from None
    except json.JSONDecodeError as exc:
        raise ConfigError([f"not JSON: {exc}"], f"policy configuration {shown}") from None
    return parse_config(raw, f"policy configuration {shown}")


# --- the run -------------------------------------------------------------------------------------


def _options(r: Registration) -> PolicyResourceOptions:
    opts = PolicyResourceOptions(
        protect=r.protect,
        ignore_changes=list(r.lifecycle.get("ignoreChanges", [])),
        delete_before_replace=True if r.lifecycle.get("deleteBeforeReplace") else None,
        aliases=[],
        custom_timeouts=PolicyCustomTimeouts(0, 0, 0),
        additional_secret_outputs=[],
        parent=r.parent or None,
    )
    # Not in pulumi-policy's options (a real preview cannot see it); offline we can.
    opts.replace_on_changes = list(r.lifecycle.get("replaceOnChanges", []))  # type: ignore[attr-defined]
    return opts


EKS_COMPONENT = "eks:index:Cluster"


def eks_cluster_child(component: Registration) -> Registration:
    """The ``aws:eks/cluster:Cluster`` pulumi-eks declares for a ``eks:index:Cluster``, with the
    inputs the rules read, as pulumi-eks builds them (nodejs/eks/cluster/cluster.ts, v4.3.0 to
    HEAD 2026-08-12): named ``<name>-eksCluster`` under the component; ``encryptionConfig``
    ``{provider: {keyArn}, resources: ["secrets"]}`` when ``encryptionConfigKeyArn`` is set;
    ``enabledClusterLogTypes`` as given; ``vpcConfig`` with ``endpointPrivateAccess``,
    ``endpointPublicAccess`` and ``publicAccessCidrs`` as given (unset stays unset)."""
    inputs = component.inputs
    child: dict[str, Any] = {}
    if inputs.get("encryptionConfigKeyArn"):
        child["encryptionConfig"] = {"provider": {"keyArn": inputs["encryptionConfigKeyArn"]}, "resources": ["secrets"]}
    if "enabledClusterLogTypes" in inputs:
        child["enabledClusterLogTypes"] = inputs["enabledClusterLogTypes"]
    child["vpcConfig"] = {
        k: inputs[k]
        for k in ("endpointPrivateAccess", "endpointPublicAccess", "publicAccessCidrs")
        if inputs.get(k) is not None
    }
    prefix, project, qualified_type, name = component.urn.split("::", 3)
    name = f"{name}-eksCluster"
    return Registration(
        urn=f"{prefix}::{project}::{qualified_type}${EKS_CLUSTER}::{name}",
        type=EKS_CLUSTER,
        name=name,
        parent=component.urn,
        provider=component.provider,
        dependencies=[],
        protect=component.protect,
        custom=True,
        inputs=child,
        lifecycle={},
        property_dependencies={},
    )


def with_eks_children(registrations: list[Registration]) -> list[Registration]:
    """The registrations plus the AWS cluster of each pulumi-eks component that has none."""
    parents_of_clusters = {r.parent for r in registrations if r.type == EKS_CLUSTER}
    return registrations + [
        eks_cluster_child(r) for r in registrations if r.type == EKS_COMPONENT and r.urn not in parents_of_clusters
    ]


def policy_resources(registrations: list[Registration], region: str | None) -> list[PolicyResource]:
    providers = {r.urn: r for r in registrations if r.type.startswith("pulumi:providers:")}
    resources: dict[str, PolicyResource] = {}
    for r in registrations:
        explicit = providers.get(r.provider.rsplit("::", 1)[0]) if r.provider else None  # "<urn>::<id>"
        if explicit is not None:
            provider = PolicyProviderResource(
                explicit.type, unknown_checking_proxy(copy.deepcopy(explicit.inputs)), explicit.urn, explicit.name
            )
        else:
            # The default provider of the package, configured from the stack's `<package>:region`.
            package = r.type.split(":")[0]
            provider = PolicyProviderResource(
                f"pulumi:providers:{package}", {"region": region} if package == "aws" else {}, "", "default"
            )
        resources[r.urn] = PolicyResource(
            r.type, unknown_checking_proxy(copy.deepcopy(r.inputs)), r.urn, r.name, _options(r), provider, None, [], {}
        )
    for r in registrations:
        resource = resources[r.urn]
        resource.parent = resources.get(r.parent)
        resource.dependencies = [resources[u] for u in r.dependencies if u in resources]
        resource.property_dependencies = {
            k: [resources[u] for u in urns if u in resources] for k, urns in r.property_dependencies.items()
        }
    return list(resources.values())


def _reporter(
    findings: PolicyReport,
    policy: str,
    level: str,
    by_urn: dict[str, PolicyResource],
    default: PolicyResource | None,
):
    """pulumi-policy's ReportViolation: a stack policy may name a resource by urn."""

    def report_violation(message: str, urn: str | None = None) -> None:
        target = by_urn.get(urn or "") or default
        findings.violations.append(
            Violation(
                policy,
                target.urn if target else "",
                target.resource_type if target else "",
                target.name if target else "",
                level,
                message,
            )
        )

    return report_violation


def run_policies(
    registrations: list[Registration],
    config: PackConfig,
    region: str | None = None,
    policies: Iterable[Policy] = POLICIES,
    stack_config: Mapping[str, str] | None = None,
) -> PolicyReport:
    """The findings of ``policies`` on the planned stack; ``stack_config`` is the stack's config (key ->
    value text), which the engine hands a real pack in its environment (policy/guardrails/readiness.py)."""
    token = STACK_CONFIG.set(stack_config)
    try:
        return _run_policies(registrations, config, region, policies)
    finally:
        STACK_CONFIG.reset(token)


def _run_policies(
    registrations: list[Registration], config: PackConfig, region: str | None, policies: Iterable[Policy]
) -> PolicyReport:
    findings = PolicyReport()
    resources = [
        r
        for r in policy_resources(with_eks_children(registrations), region)
        if not r.resource_type.startswith("pulumi:providers:")
    ]
    by_urn = {r.urn: r for r in resources}
    for policy in policies:
        level = config.levels.get(policy.name, policy.enforcement_level or EnforcementLevel.MANDATORY)
        if level == EnforcementLevel.DISABLED:
            continue
        shown = "mandatory" if level in (EnforcementLevel.MANDATORY, EnforcementLevel.REMEDIATE) else "advisory"
        settings = config.properties.get(policy.name, {})
        try:
            if isinstance(policy, ResourceValidationPolicy):
                for r in resources:
                    args = ResourceValidationArgs(
                        r.resource_type, r.props, r.urn, r.name, r.opts, r.provider, settings, {}
                    )
                    try:
                        policy.validate(args, _reporter(findings, policy.name, shown, by_urn, r))
                    except UnknownValueError as exc:
                        findings.notes.append(f"{policy.name} could not check {r.name}: {exc.message}")
            elif isinstance(policy, StackValidationPolicy):
                policy.validate(
                    StackValidationArgs(resources, settings, {}), _reporter(findings, policy.name, shown, by_urn, None)
                )
        except UnknownValueError as exc:
            findings.notes.append(f"{policy.name} could not run: {exc.message}")
    return findings


def render_report(project: str, stack: str, report: PolicyReport) -> str:
    lines = [
        f"Policy pack {PACK_NAME} over {project} / {stack}: "
        f"{len(report.mandatory)} mandatory, {len(report.violations) - len(report.mandatory)} advisory violation(s)"
    ]
    for v in sorted(report.violations, key=lambda v: (v.enforcement_level != "mandatory", v.policy, v.name)):
        lines.append(f"  [{v.enforcement_level}] {v.policy}: {v.name or '(stack)'}\n      {v.message}")
    lines += [f"  note: {n}" for n in report.notes]
    return "\n".join(lines)
