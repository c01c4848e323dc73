"""What every project's configuration shares: the model base, how the engine hands values
over, and how a refusal names the key.

Both Pulumi projects in this repository (the cluster stack and the workload stacks) read
their keys the same way and refuse bad values with the same message shape:
``<project>:<key.path> = <value>: <what is allowed>``.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable
from typing import Any, TypeVar, get_args

from pydantic import BaseModel, ConfigDict, ValidationError, ValidationInfo, field_validator
from pydantic.alias_generators import to_camel

from infra.config.errors import ConfigError

REGION_KEY = "aws:region"
PROFILE_KEY = "aws:profile"
INT32_MAX = 2**31 - 1
# Model fields that hold the AWS provider's own settings rather than the project's.
PROVIDER_KEYS = {"region": REGION_KEY, "profile": PROFILE_KEY}
# The Pulumi projects of this repository, and where each keeps its stack files.
PROJECT_STACK_FILES = {
    "trainium-eks": "Pulumi.<stack>.yaml",
    "trainium-workloads": "workloads/Pulumi.<stack>.yaml",
    "trainium-bootstrap": "bootstrap/Pulumi.<stack>.yaml",
}
# Namespaces someone else reads: the engine (`pulumi:`) and the default providers of the packages
# these programs use, which take their settings from `<package>:<key>`.
ENGINE_NAMESPACES = frozenset({"pulumi", "aws", "eks", "kubernetes", "random"})


class ConfigModel(BaseModel):
    """camelCase keys in the stack file, snake_case in Python; unknown keys are refused, and so
    is an empty string anywhere (no API this project feeds takes one as a meaningful value)."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        str_min_length=1,
        # `inf` would pass every lower bound and no API (nor a bandwidth floor) has a use for it.
        allow_inf_nan=False,
    )

    @field_validator("*", mode="before")
    @classmethod
    def _no_surprising_coercion(cls, value: Any, info: ValidationInfo) -> Any:
        """pydantic would read `true` as the number 1 and accept "   " as text."""
        annotation = cls.model_fields[info.field_name].annotation if info.field_name else None
        if isinstance(value, bool) and annotation in (int, int | None, float, float | None):
            raise ValueError("a number, not true/false")
        if isinstance(value, str) and value and not value.strip():
            raise ValueError("only whitespace; give a value or leave the key out")
        return value

    @field_validator("*", mode="after")
    @classmethod
    def _fits_an_int32(cls, value: Any) -> Any:
        """Every count, size and timeout here lands in a 32-bit field (Kubernetes int32 such as a
        Volcano Job's maxRetry or a RayJob's activeDeadlineSeconds, the EKS scaling config's Int):
        a larger number would pass our bounds and fail only when the API refuses it mid-deploy."""
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > INT32_MAX:
            raise ValueError(f"at most {INT32_MAX} (the APIs these settings reach take 32-bit integers)")
        return value


Model = TypeVar("Model", bound=ConfigModel)


def decode(value: str) -> Any:
    """Pulumi hands structured config over as JSON text and scalars as plain text.

    Text that merely starts like JSON (``[oops``) and the empty string stay text, so the
    model refuses them with the key's name instead of a decoding traceback.
    """
    if value and value[0] in "[{":
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def project_values(all_config: dict[str, str], project: str) -> dict[str, Any]:
    """The keys under ``<project>:`` in the engine's flat config map, decoded."""
    return {key.split(":", 1)[1]: decode(value) for key, value in all_config.items() if key.startswith(f"{project}:")}


def stray_keys(all_config: dict[str, str], project: str) -> list[str]:
    """A refusal for each key no program of this stack reads: another project's setting (the
    engine hands a program every key of its stack file, so one pasted from a sibling stack would
    otherwise be ignored in silence), or a namespace nobody reads."""
    problems = []
    for key in sorted(all_config):
        namespace = key.partition(":")[0]
        if namespace == project or namespace in ENGINE_NAMESPACES:
            continue
        if namespace in PROJECT_STACK_FILES:
            problems.append(
                f"{key}: a setting of the {namespace} project, which this {project} stack never reads; "
                f"move it to {namespace}'s stack file ({PROJECT_STACK_FILES[namespace]})"
            )
        else:
            readers = ", ".join(f"{n}:" for n in sorted({project, *ENGINE_NAMESPACES}))
            problems.append(f"{key}: nothing in this stack reads the namespace {namespace!r} (read here: {readers})")
    return problems


Parsed = TypeVar("Parsed")


def with_stray_keys_refused(all_config: dict[str, str], project: str, parse: Callable[[], Parsed]) -> Parsed:
    """``parse()``'s result, or one ``ConfigError`` listing the stray keys together with what
    ``parse`` refused, so a stack file's mistakes are all named in one run."""
    stray = stray_keys(all_config, project)
    try:
        parsed = parse()
    except ConfigError as error:
        raise ConfigError(stray + error.problems, error.source) from None
    if stray:
        raise ConfigError(stray)
    return parsed


def qualified_key(project: str, loc: tuple[Any, ...]) -> str:
    """``("groups", 0, "name")`` -> ``project:groups[0].name``; the region is ``aws:region``."""
    if loc and loc[0] in PROVIDER_KEYS:
        return PROVIDER_KEYS[loc[0]]
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return f"{project}:{path}"


def keys_at(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """The stack-file keys of the mapping ``loc`` (a key path, list indices and map keys included)
    sits in, read from the models' fields; empty where the path leaves the models."""

    def is_model(annotation: Any) -> bool:
        return isinstance(annotation, type) and issubclass(annotation, BaseModel)

    def unoptional(annotation: Any) -> Any:
        args = [a for a in get_args(annotation) if a is not type(None)]
        return args[0] if len(args) == 1 and type(None) in get_args(annotation) else annotation

    current: Any = model
    for part in loc[:-1]:
        current = unoptional(current)
        if is_model(current):
            fields = {f.alias or name: f for name, f in current.model_fields.items()}
            if part not in fields:
                return []
            current = fields[part].annotation
        else:  # a list index or a map key: the element's type
            args = get_args(current)
            if not args:
                return []
            current = args[-1]
    current = unoptional(current)
    return [f.alias or name for name, f in current.model_fields.items()] if is_model(current) else []


def describe(
    err: Any,
    key_of: Callable[[tuple[Any, ...]], str],
    secret_keys: frozenset[str] = frozenset(),
    model: type[BaseModel] | None = None,
) -> str:
    """One pydantic error as a line naming the key, the value (never a secret's) and what is allowed;
    an unknown key gets the known one it is closest to (``model``: where to look)."""
    key = key_of(tuple(err["loc"]))
    # pydantic prefixes our own validators' messages with "Value error, ": noise to a reader.
    message = err["msg"].removeprefix("Value error, ")
    if err["loc"] and err["loc"][-1] in secret_keys:
        return f"{key} = [secret]: {message}"
    if err["type"] == "missing":
        return f"{key}: required but not set"
    if err["type"] == "extra_forbidden":
        loc = tuple(err["loc"])
        close = difflib.get_close_matches(str(loc[-1]), keys_at(model, loc), n=1) if model and loc else []
        hint = f"did you mean {close[0]}? " if close else ""
        return f"{key}: unknown key ({hint}check the spelling against docs/configuration.md)"
    value = err.get("input")
    shown = "" if isinstance(value, (dict, list)) else f" = {value!r}"
    return f"{key}{shown}: {message}"


def validated(
    model: type[Model],
    raw: dict[str, Any],
    key_of: Callable[[tuple[Any, ...]], str],
    secret_keys: frozenset[str] = frozenset(),
) -> Model:
    """``model`` from ``raw``, or ``ConfigError`` listing every shape problem at once."""
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError([describe(err, key_of, secret_keys, model) for err in exc.errors()]) from None


def validated_with_rules(
    model: type[Model],
    raw: dict[str, Any],
    key_of: Callable[[tuple[Any, ...]], str],
    rules: Callable[[Model], list[str]],
    secret_keys: frozenset[str] = frozenset(),
) -> Model:
    """``model`` from ``raw`` that also passes ``rules``, or one ``ConfigError`` listing every problem:
    where some keys fail their types, the rules' refusals about the rest come with them
    (``rules_beside_type_errors``)."""
    try:
        parsed = model.model_validate(raw)
    except ValidationError as exc:
        problems = [describe(err, key_of, secret_keys, model) for err in exc.errors()]
        raise ConfigError(problems + rules_beside_type_errors(model, raw, exc, key_of, rules)) from None
    problems = rules(parsed)
    if problems:
        raise ConfigError(problems)
    return parsed


def rules_beside_type_errors(
    model: type[Model],
    raw: dict[str, Any],
    error: ValidationError,
    key_of: Callable[[tuple[Any, ...]], str],
    rules: Callable[[Model], list[str]],
) -> list[str]:
    """What ``rules`` refuse about the keys that passed their types, where ``error`` stopped ``raw``.

    pydantic stops at type errors, so the rules run on the rest: the top-level keys that failed are
    left out (their defaults stand in), and the rules' refusals that mention none of them are
    returned, to be reported beside the type errors. A fix then takes one run, not one per kind of
    mistake. A refusal that names a left-out key is dropped: it would judge the default, not what
    the stack file says. Nothing when a required key failed: there is nothing to judge the rest by."""
    broken = {str(err["loc"][0]) for err in error.errors() if err["loc"]}
    try:
        partial = model.model_validate({k: v for k, v in raw.items() if k not in broken})
    except ValidationError:
        return []
    names = [key_of((name,)) for name in broken] + list(broken)
    return [p for p in rules(partial) if not any(re.search(rf"(?<![\w.]){re.escape(n)}\b", p) for n in names)]
