"""The configuration reference and the editors' JSON Schemas, generated from the config models.

Every key (camelCase, as in the stack file), its type, default, allowed values or bounds and
description come from the pydantic models (``infra/config/models.py``, ``workloads/settings.py``);
the outputs' from ``infra/contract.py``. Nothing here is written by hand twice.
"""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Sequence
from typing import Any, Literal, Optional, get_args, get_origin

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from typing_extensions import is_typeddict

from infra.config.base import PROVIDER_KEYS

# draft-07: what redhat's yaml-language-server (the VS Code YAML extension) validates; its 2019-09
# and 2020-12 support is still an open request (redhat-developer/yaml-language-server#856). The
# schema uses nothing newer ($defs is only reached through "#/$defs/..." JSON pointers).
SCHEMA_DRAFT = "http://json-schema.org/draft-07/schema#"

# `pulumi config set KEY VALUE` without --type stores an untyped value, which it writes as a YAML
# string (pulumi v3 pkg/cmd/pulumi/config/config.go makes a string value; sdk/go/common/resource/
# config/value.go and object.go MarshalYAML write it back as that string), and the engine hands every scalar
# to the program as text anyway (infra/config/base.py), which pydantic then reads as the type.
# So a scalar key also takes the text form of its type; bounds are checked by the program.
TEXT_FORM = {
    int: {"type": "string", "pattern": "^[+-]?[0-9]+$"},
    float: {"type": "string", "pattern": "^[+-]?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][+-]?[0-9]+)?$"},
    bool: {"type": "string", "pattern": "^(true|false|True|False)$"},
}
# `pulumi config set --secret` works on any key and writes `{secure: <ciphertext>}` in its place.
SECURE = {
    "type": "object",
    "properties": {"secure": {"type": "string"}},
    "required": ["secure"],
    "additionalProperties": False,
}


# --- reading the models -----------------------------------------------------------------------


def _unwrap(annotation: Any) -> tuple[Any, bool, bool]:
    """(inner type, optional?, list?)"""
    optional = False
    # `Optional[X]` and `X | None` are different objects (typing.Union, types.UnionType).
    if get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        optional, annotation = True, args[0]
    is_list = get_origin(annotation) is list
    if is_list:
        annotation = get_args(annotation)[0]
    return annotation, optional, is_list


def _is_model(t: Any) -> bool:
    return isinstance(t, type) and issubclass(t, BaseModel)


def type_text(annotation: Any) -> str:
    inner, optional, is_list = _unwrap(annotation)
    if _is_model(inner) or is_typeddict(inner):
        base = "object"
    elif get_origin(inner) is Literal:
        base = "string" if all(isinstance(v, str) for v in get_args(inner)) else "value"
    elif get_origin(inner) is dict:
        base = "map of " + type_text(get_args(inner)[1])
    else:
        base = {str: "string", int: "integer", bool: "boolean", float: "number"}.get(inner, str(inner))
    return f"list of {base}" if is_list else base


# A field's bounds as the reference shows them: the constraint, its text, the attribute with the value.
_BOUNDS = (
    (annotated_types.Ge, "≥", "ge"),
    (annotated_types.Gt, ">", "gt"),
    (annotated_types.Le, "≤", "le"),
    (annotated_types.Lt, "<", "lt"),
    (annotated_types.MinLen, "length ≥", "min_length"),
    (annotated_types.MaxLen, "length ≤", "max_length"),
)


def _constraints(field: FieldInfo) -> list[str]:
    parts: list[str] = []
    inner, _, _ = _unwrap(field.annotation)
    if get_origin(inner) is Literal:
        parts.append("one of " + ", ".join(f"`{v}`" for v in get_args(inner)))
    for meta in field.metadata:
        bound = next(((text, attribute) for kind, text, attribute in _BOUNDS if isinstance(meta, kind)), None)
        if bound is not None:
            parts.append(f"{bound[0]} {getattr(meta, bound[1])}")
        elif getattr(meta, "pattern", None):
            parts.append(f"matches `{meta.pattern}`")
    return parts


def _default_text(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    value = field.get_default(call_default_factory=True)
    if value is None:
        return "unset"
    if isinstance(value, BaseModel):
        return "see its keys"
    if isinstance(value, list) and value and isinstance(value[0], BaseModel):
        names = [getattr(v, "name", None) for v in value]
        return f"{len(value)}: " + ", ".join(f"`{n}`" for n in names if n) if all(names) else f"{len(value)} items"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, (list, dict)):
        return f"`{json.dumps(value)}`"
    return f"`{value}`"


def key_rows(model: type[BaseModel], prefix: str = "") -> list[tuple[str, str, str, str, str]]:
    """(key, type, default, allowed, description) for every key of ``model``, nested ones included."""
    rows = []
    for name, field in model.model_fields.items():
        alias = field.alias or name
        key = PROVIDER_KEYS[name] if not prefix and name in PROVIDER_KEYS else prefix + alias
        rows.append(
            (
                key,
                type_text(field.annotation),
                _default_text(field),
                "; ".join(_constraints(field)),
                field.description or "",
            )
        )
        inner, _, is_list = _unwrap(field.annotation)
        if _is_model(inner):
            rows += key_rows(inner, key + ("[]." if is_list else "."))
    return rows


def missing_descriptions(model: type[BaseModel]) -> list[str]:
    return [row[0] for row in key_rows(model) if not row[4].strip()]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_table(rows: Sequence[Sequence[str]], heads: Sequence[str]) -> str:
    lines = ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def config_table(model: type[BaseModel]) -> str:
    rows = [(f"`{k}`", t, d, a, desc) for k, t, d, a, desc in key_rows(model)]
    return markdown_table(rows, ("key", "type", "default", "allowed", "description"))


def output_rows(model: type[BaseModel], prefix: str = "") -> list[tuple[str, str, str]]:
    """(key, type, description) for every key of a stack's outputs, nested ones included."""
    rows = []
    for name, field in model.model_fields.items():
        key = prefix + (field.alias or name)
        inner, optional, is_list = _unwrap(field.annotation)
        rows.append((key, type_text(field.annotation) + (" or null" if optional else ""), field.description or ""))
        if _is_model(inner):
            rows += output_rows(inner, key + ("[]." if is_list else "."))
    return rows


def outputs_table(outputs: type[BaseModel] | dict[str, str]) -> str:
    """A model's outputs with their types, or outputs described in prose only."""
    if isinstance(outputs, dict):
        return markdown_table([(f"`{k}`", v) for k, v in outputs.items()], ("output", "what"))
    rows = [(f"`{key}`", type_, description) for key, type_, description in output_rows(outputs)]
    return markdown_table(rows, ("output", "type", "what"))


# --- JSON Schema for editors ------------------------------------------------------------------


def stack_file_schema(
    model: type[BaseModel], project: str, secret_keys: frozenset[str] = frozenset()
) -> dict[str, Any]:
    """A JSON Schema of ``Pulumi.<stack>.yaml``: values nest under ``config:`` as ``project:key``
    (the provider's own ``aws:region``/``aws:profile`` as such); other namespaces pass."""
    inner = model.model_json_schema(by_alias=True)
    props: dict[str, Any] = {}
    required = []
    for name, field in model.model_fields.items():
        alias = field.alias or name
        key = PROVIDER_KEYS.get(name, f"{project}:{alias}")
        schema = dict(inner["properties"][alias])
        description = field.description or schema.get("description", "")
        schema.pop("description", None)
        value_type, _, is_list = _unwrap(field.annotation)
        forms = [schema] + ([TEXT_FORM[value_type]] if not is_list and value_type in TEXT_FORM else [])
        if alias in secret_keys:
            description += " Keep it encrypted: `pulumi config set --secret`."
        props[key] = {"description": description, "anyOf": [*forms, SECURE]}
        if field.is_required():
            required.append(key)
    return {
        "$schema": SCHEMA_DRAFT,
        "title": f"Pulumi stack file of {project}",
        "description": f"Generated by `make docs` from the config models; {project} keys are checked, others pass.",
        "type": "object",
        "properties": {
            "config": {
                "type": "object",
                "properties": props,
                "required": required,
                # Keys of other namespaces (providers) are the engine's business; unknown keys of
                # this project are refused, as the program itself refuses them.
                "patternProperties": {f"^(?!{project}:)": {}},
                "additionalProperties": False,
            },
            "secretsprovider": {"type": "string"},
            "encryptedkey": {"type": "string"},
            "encryptionsalt": {"type": "string"},
            "environment": {},
        },
        "$defs": inner.get("$defs", {}),
    }


def schema_text(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def optional_model_fields(model: type[BaseModel]) -> list[str]:
    return [f.alias or n for n, f in model.model_fields.items() if not f.is_required()]


__all__ = [
    "config_table",
    "key_rows",
    "missing_descriptions",
    "output_rows",
    "outputs_table",
    "stack_file_schema",
    "schema_text",
    "type_text",
    "optional_model_fields",
    "Optional",
]
