"""How a rule is declared: one decorated function is one policy of the pack.

``@resource_rule(...)`` / ``@stack_rule(...)`` put the name, description, enforcement level and
config schema above the check they describe, and replace the function with the ``pulumi_policy``
object the pack lists. A resource rule names the resource types it checks, so the type test does
not open every check. The objects are the SDK's own ``ResourceValidationPolicy`` and
``StackValidationPolicy`` with one callable ``validate`` (pulumi-policy v1.21.0 policy.py): the
engine's analyzer and offline/plan/policy_run.py call ``policy.validate(args, report_violation)`` on
them as on any policy.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from functools import wraps
from typing import Any, Protocol

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)

MANDATORY = EnforcementLevel.MANDATORY
ADVISORY = EnforcementLevel.ADVISORY


class Report(Protocol):
    """How a check reports a violation: the message, and the URN of the resource it concerns where a
    stack check names one. pulumi-policy's callbacks take the URN as optional (v1.21.0 policy.py:
    ``report_violation`` in ``_create_report_violation``, ``empty_report_violation``) but its
    ``ReportViolation`` alias, ``Callable[[str, Optional[str]], None]``, cannot say so: the checks
    see this signature, and ``_reporting`` adapts the SDK's callback to it."""

    def __call__(self, message: str, urn: str | None = None) -> None: ...


def _reporting(report_violation: ReportViolation) -> Report:
    def report(message: str, urn: str | None = None) -> None:
        report_violation(message, urn)

    return report


ResourceCheck = Callable[[ResourceValidationArgs, Report], None]
StackCheck = Callable[[StackValidationArgs, Report], None]
# The resource types a rule checks, or a test of the type where no list would do (every
# Kubernetes object, whatever its kind).
AppliesTo = Collection[str] | Callable[[str], bool]
# A JSON schema per setting: the properties of the policy's config schema.
Settings = Mapping[str, dict[str, Any]]


def _config_schema(settings: Settings | None) -> PolicyConfigSchema | None:
    return None if settings is None else PolicyConfigSchema(properties=dict(settings))


def _type_test(applies_to: AppliesTo) -> Callable[[str], bool]:
    if callable(applies_to):
        return applies_to
    types = frozenset(applies_to)
    return lambda resource_type: resource_type in types


def resource_rule(
    name: str,
    description: str,
    *,
    applies_to: AppliesTo,
    level: EnforcementLevel = MANDATORY,
    config_schema: Settings | None = None,
) -> Callable[[ResourceCheck], ResourceValidationPolicy]:
    """A resource policy whose check runs on the resources ``applies_to`` names; the engine hands a
    resource policy every resource of the stack, and the others are not its business."""
    applies = _type_test(applies_to)

    def declare(check: ResourceCheck) -> ResourceValidationPolicy:
        @wraps(check)
        def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
            if applies(args.resource_type):
                check(args, _reporting(report_violation))

        return ResourceValidationPolicy(
            name=name,
            description=description,
            validate=validate,
            enforcement_level=level,
            config_schema=_config_schema(config_schema),
        )

    return declare


def stack_rule(
    name: str, description: str, *, level: EnforcementLevel = MANDATORY, config_schema: Settings | None = None
) -> Callable[[StackCheck], StackValidationPolicy]:
    """A stack policy: its check sees every resource of the stack at once."""

    def declare(check: StackCheck) -> StackValidationPolicy:
        @wraps(check)
        def validate(args: StackValidationArgs, report_violation: ReportViolation) -> None:
            check(args, _reporting(report_violation))

        return StackValidationPolicy(
            name=name,
            description=description,
            validate=validate,
            enforcement_level=level,
            config_schema=_config_schema(config_schema),
        )

    return declare
