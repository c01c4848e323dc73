"""The plan's manifests as ``yaml.safe_dump`` writes them, in a third of the time.

PyYAML's emitter (6.0.3, ``yaml/emitter.py``) examines every character of every string in a
Python loop twice: ``analyze_scalar`` to choose a style, ``write_double_quoted`` to write it. The
workload manifests carry whole scripts as strings (``resilience.py``, the check scripts), so
those two loops were most of the time the plan spent writing files. ``PlanDumper`` is
``yaml.SafeDumper`` with both methods doing the same work through regular expressions:

- ``analyze_scalar`` computes each flag the loop computes (indicators, line breaks, special
  characters, leading/trailing and break/space combinations) with one search apiece;
- ``write_double_quoted`` runs PyYAML's own loop, but skips, in one step, each stretch of
  characters at which that loop does nothing: up to the next character it escapes, or the first
  space at which the line is long enough to fold, whichever comes first. It never skips the
  character right after an escape or a fold, where the loop may fold without a space.

The C emitter (``CSafeDumper``) is faster still but folds long quoted strings elsewhere, which
would change every manifest. ``tests/test_yaml_text.py`` compares ``PlanDumper`` with
``SafeDumper`` on every manifest of the shipped plans and on generated strings.
"""

from __future__ import annotations

import re
from typing import Any

import yaml
from yaml.emitter import ScalarAnalysis

WHITESPACE = "\0 \t\r\n\x85\u2028\u2029"
BREAKS = "\n\x85\u2028\u2029"
LEADING_INDICATORS = "#,[]{}&*!|>'\"%@`"
INNER_FLOW_INDICATOR = re.compile(r"[,?\[\]{}:]")
COLON_BEFORE_WHITESPACE = re.compile(r":(?=[\0 \t\r\n\x85\u2028\u2029]|\Z)")
HASH_AFTER_WHITESPACE = re.compile(r"(?<=[\0 \t\r\n\x85\u2028\u2029])#")
LINE_BREAK = re.compile("[\n\x85\u2028\u2029]")
BREAK_SPACE = re.compile("[\n\x85\u2028\u2029] ")
SPACE_BREAK = re.compile(" [\n\x85\u2028\u2029]")
# Characters outside printable ASCII: special unless allow_unicode admits them (emitter.py,
# analyze_scalar: "\x85", "\xA0"-"\uD7FF", "\uE000"-"\uFFFD", "\U00010000"-"\U0010FFFE", not "\uFEFF").
SPECIAL = re.compile(r"[^\n\x20-\x7E]")
SPECIAL_UNLESS_UNICODE = re.compile("[^\n\x20-\x7E\x85\xA0-\uD7FF\uE000-\uFFFD\U00010000-\U0010FFFE]|\uFEFF")
# The characters write_double_quoted escapes.
ESCAPED = re.compile("[\"\\\\\x85\u2028\u2029\uFEFF]|[^\x20-\x7E]")
ESCAPED_UNLESS_UNICODE = re.compile("[\"\\\\\x85\u2028\u2029\uFEFF]|[^\x20-\x7E\xA0-\uD7FF\uE000-\uFFFD]")


class PlanDumper(yaml.SafeDumper):
    """``yaml.SafeDumper``, faster on long strings, writing the same text."""

    def analyze_scalar(self, scalar: str) -> ScalarAnalysis:
        if not scalar:
            return super().analyze_scalar(scalar)
        first, followed = scalar[0], len(scalar) == 1 or scalar[1] in WHITESPACE
        flow = block = scalar.startswith(("---", "..."))
        if first in LEADING_INDICATORS or (first == "-" and followed):
            flow = block = True
        if first in "?:":
            flow = True
            block = block or followed
        if INNER_FLOW_INDICATOR.search(scalar, 1):
            flow = True
        if COLON_BEFORE_WHITESPACE.search(scalar, 1):
            block = True
        if HASH_AFTER_WHITESPACE.search(scalar, 1):
            flow = block = True
        line_breaks = LINE_BREAK.search(scalar) is not None
        special = (SPECIAL_UNLESS_UNICODE if self.allow_unicode else SPECIAL).search(scalar) is not None
        leading_space, trailing_space = first == " ", scalar[-1] == " "
        leading_break, trailing_break = first in BREAKS, scalar[-1] in BREAKS
        break_space = BREAK_SPACE.search(scalar) is not None
        space_break = SPACE_BREAK.search(scalar) is not None

        # The decisions, as emitter.py makes them from the same flags.
        flow_plain = block_plain = single_quoted = block_style = True
        if leading_space or leading_break or trailing_space or trailing_break:
            flow_plain = block_plain = False
        if trailing_space:
            block_style = False
        if break_space:
            flow_plain = block_plain = single_quoted = False
        if space_break or special:
            flow_plain = block_plain = single_quoted = block_style = False
        if line_breaks:
            flow_plain = block_plain = False
        if flow:
            flow_plain = False
        if block:
            block_plain = False
        return ScalarAnalysis(scalar=scalar, empty=False, multiline=line_breaks, allow_flow_plain=flow_plain,
                              allow_block_plain=block_plain, allow_single_quoted=single_quoted,
                              allow_double_quoted=True, allow_block=block_style)

    def write_double_quoted(self, text: str, split: bool = True) -> None:
        # emitter.py's loop, line for line, with the fast-forward marked below, for a dump to a
        # string (a dump to bytes goes the original way).
        if self.encoding:
            return super().write_double_quoted(text, split)
        escapes = ESCAPED_UNLESS_UNICODE if self.allow_unicode else ESCAPED
        self.write_indicator('"', True)
        start = end = 0
        length = len(text)
        while end <= length:
            if start < end < length:
                # Fast-forward: nothing happens before the next escape, or before the first space
                # at which the line is long enough to fold.
                found = escapes.search(text, end)
                stop = found.start() if found else length
                space = text.find(" ", max(end, start + self.best_width - self.column + 1), stop) if split else -1
                end = stop if space == -1 else space
            ch = text[end] if end < length else None
            if ch is None or ch in '"\\\x85\u2028\u2029\uFEFF' or not (
                    "\x20" <= ch <= "\x7E" or (self.allow_unicode and ("\xA0" <= ch <= "\uD7FF" or "\uE000" <= ch <= "\uFFFD"))):
                if start < end:
                    data = text[start:end]
                    self.column += len(data)
                    self.stream.write(data)
                    start = end
                if ch is not None:
                    if ch in self.ESCAPE_REPLACEMENTS:
                        data = "\\" + self.ESCAPE_REPLACEMENTS[ch]
                    elif ch <= "\xFF":
                        data = "\\x%02X" % ord(ch)
                    elif ch <= "\uFFFF":
                        data = "\\u%04X" % ord(ch)
                    else:
                        data = "\\U%08X" % ord(ch)
                    self.column += len(data)
                    self.stream.write(data)
                    start = end + 1
            if 0 < end < length - 1 and (ch == " " or start >= end) and self.column + (end - start) > self.best_width and split:
                data = text[start:end] + "\\"
                if start < end:
                    start = end
                self.column += len(data)
                self.stream.write(data)
                self.write_indent()
                self.whitespace = False
                self.indention = False
                if text[start] == " ":
                    data = "\\"
                    self.column += len(data)
                    self.stream.write(data)
            end += 1
        self.write_indicator('"', False)


def dump(data: Any) -> str:
    """``yaml.safe_dump(data, sort_keys=False)``, the same text."""
    return yaml.dump(data, Dumper=PlanDumper, sort_keys=False)
