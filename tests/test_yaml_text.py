"""The plan writes its manifests with offline/yaml_text.py's PlanDumper: the text must be what
``yaml.safe_dump`` (PyYAML 6.0.3, pure-Python emitter) writes, character for character."""

from __future__ import annotations

import random

import pytest
import yaml

from offline import yaml_text
from offline.plan_output import kubernetes_objects

# Characters each rule of emitter.py's analyze_scalar and write_double_quoted turns on: indicators,
# whitespace and breaks (ASCII and Unicode), quotes and escapes, non-printables, BMP and astral
# characters, and the byte-order mark.
ALPHABET = list("ab  ::##--??,,[]{}&*!|>'\"%@`\\\n\n\t\r\0.") + ["\x85", "\xa0", "é", "\u2028", "\u2029", "\ufeff",
                                                                     "\ud7ff", "\ue000", "\ufffd", "😀", "\x7f"]


def _safe_dump(data, **options) -> str:
    return yaml.dump(data, Dumper=yaml.SafeDumper, sort_keys=False, **options)


def _plan_dump(data, **options) -> str:
    return yaml.dump(data, Dumper=yaml_text.PlanDumper, sort_keys=False, **options)


@pytest.mark.parametrize("plans", [("dev", "workloads_dev"), ("prod", "workloads_prod")])
def test_every_manifest_of_the_shipped_plans_is_written_as_safe_dump_writes_it(plans, request):
    objects = [obj for name in plans for obj in kubernetes_objects(request.getfixturevalue(name))]
    assert len(objects) > 40
    assert [yaml_text.dump(obj) for obj in objects] == [yaml.safe_dump(obj, sort_keys=False) for obj in objects]


def _strings(seed: int, count: int) -> list[str]:
    draw = random.Random(seed)
    strings = []
    for _ in range(count):
        length = draw.choice((1, 2, 3, 5, 30, 90, 200))
        # Mostly plain words, so lines grow long enough to fold, with the special characters strewn in.
        strings.append("".join(draw.choice(ALPHABET) if draw.random() < 0.3 else draw.choice(("word", "x", " "))
                               for _ in range(length)))
    return strings + ["", "---x", "...", "- a", "-a", "? x", ":x", "x:", "a: b", "a #b", "a#b", " lead", "trail ", "\nx", "x\n",
                      "a \nb", "a\n b", "a" * 200 + " " + "b" * 5, ("w " * 60) + '"' + ("v " * 60), "a\tb", "x\x7fy",
                      "é", "a\x85b", "a\u2028b", "😀", "x,y", "x[y", "x}y", "x?y"]


@pytest.mark.parametrize("allow_unicode", [False, True])
def test_generated_strings_are_written_as_safe_dump_writes_them(allow_unicode):
    strings = _strings(seed=17, count=150)
    for text in strings:
        # At the top, nested (a deeper indent folds elsewhere), as a key, and at a narrow width.
        for data in (text, {"key": text}, {"a": {"b": [text, {"c": text}]}}, {text: 1}):
            assert _plan_dump(data, allow_unicode=allow_unicode) == _safe_dump(data, allow_unicode=allow_unicode), repr(text)
        # A narrow width, and flow style (where the flow indicators decide).
        for options in ({"width": 20}, {"default_flow_style": True}):
            assert _plan_dump([text], allow_unicode=allow_unicode, **options) == _safe_dump(
                [text], allow_unicode=allow_unicode, **options), (repr(text), options)


def test_a_dump_to_bytes_takes_pyyaml_s_own_writer():
    text = "a \"quoted\" line " * 10
    assert _plan_dump({"k": text}, encoding="utf-8") == _safe_dump({"k": text}, encoding="utf-8")
