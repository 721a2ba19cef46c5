"""botocore's `pattern`s are Java regular expressions (the SDKs' models are written for Java's `Pattern`, which
AWS matches against the whole value): compiled here for Python's `re.fullmatch`, with ASCII `\\w\\d\\s` as in
Java. Java's `\\p{..}` classes (Unicode general categories, POSIX names) and UTF-16 surrogate pairs in ranges are
translated; a pattern Python still cannot compile comes back as the reason, never an exception.
"""

from __future__ import annotations

import functools
import re
import unicodedata

__all__ = ["compiled_pattern", "full_match"]

_POSIX = {
    "Alnum": "A-Za-z0-9",
    "Alpha": "A-Za-z",
    "Digit": "0-9",
    "Upper": "A-Z",
    "Lower": "a-z",
    "Punct": re.escape("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"),
    "Graph": "\\x21-\\x7e",
    "Print": "\\x20-\\x7e",
    "Space": " \\t\\n\\x0b\\f\\r",
    "ASCII": "\\x00-\\x7f",
    "XDigit": "0-9a-fA-F",
}


# Unicode's general categories (Java's `\\p{Lu}`; `\\p{L}` is every category starting with L).
_MINOR = {"L": "ultmo", "M": "nce", "N": "dlo", "P": "cdseifo", "S": "mcko", "Z": "slp", "C": "cfson"}
_CATEGORIES = frozenset(major + minor for major, minors in _MINOR.items() for minor in minors)
_NEVER = "\\uffff"  # stands in for an empty class in the ASCII-only form: no ASCII value holds it


@functools.cache
def _unicode_categories(limit: int) -> dict[str, str]:
    """Java's `\\p{Lu}`-style classes as Python character-class bodies, for code points below `limit`: general
    category -> ranges. The full table (0x110000) takes a pass over every code point, once per process and only
    for a value that is not ASCII; ASCII values use the 128-code-point table."""
    ranges: dict[str, list[tuple[int, int]]] = {}
    start, current = 0, unicodedata.category("\0")
    for code in range(1, limit):
        category = unicodedata.category(chr(code))
        if category != current:
            ranges.setdefault(current, []).append((start, code - 1))
            start, current = code, category
    ranges.setdefault(current, []).append((start, limit - 1))
    return {name: "".join(f"\\U{a:08x}-\\U{b:08x}" for a, b in spans) for name, spans in ranges.items()}


def _class_body(name: str, limit: int) -> str | None:
    if name in _POSIX:
        return _POSIX[name]
    name = name.removeprefix("Is")
    selected = {c for c in _CATEGORIES if c == name or (len(name) == 1 and c.startswith(name))}
    if not selected:
        return None
    categories = _unicode_categories(limit)
    return "".join(categories.get(c, "") for c in sorted(selected)) or _NEVER


_SURROGATE_PAIR = re.compile(r"\\u(d[89ab][0-9a-f]{2})\\u(d[c-f][0-9a-f]{2})", re.IGNORECASE)
_PROPERTY = re.compile(r"\\([pP])(?:\{(\w+)\}|([A-Z]))")


def _java_to_python(pattern: str, limit: int) -> str:
    """Translate what Java's regex syntax has and Python's lacks, its Unicode classes for code points below
    `limit`; raise re.error for what cannot be translated."""

    def pair(match: re.Match) -> str:  # a UTF-16 surrogate pair is one supplementary code point
        high, low = int(match[1], 16), int(match[2], 16)
        return f"\\U{0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00):08x}"

    pattern = _SURROGATE_PAIR.sub(pair, pattern)
    out: list[str] = []
    index, in_class = 0, False
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            match = _PROPERTY.match(pattern, index)
            if match:
                body = _class_body(match[2] or match[3], limit)
                if body is None:
                    raise re.error(f"unknown Java character class {match[0]}")
                if match[1] == "P":
                    if in_class:
                        raise re.error(f"negated class {match[0]} inside a character class")
                    out.append(f"[^{body}]")
                else:
                    out.append(body if in_class else f"[{body}]")
                index = match.end()
                continue
            out.append(pattern[index : index + 2])
            index += 2
            continue
        if char == "[" and not in_class:
            in_class = True
        elif char == "]" and in_class:
            in_class = False
        out.append(char)
        index += 1
    return "".join(out)


@functools.cache
def compiled_pattern(pattern: str, *, ascii_only: bool = False) -> re.Pattern | str:
    """`pattern` (Java syntax, as botocore states it) compiled for `fullmatch`, or why it cannot be.
    `ascii_only`: a form that is exact for ASCII values only (its Unicode classes cut at U+007F), cheap to build."""
    try:
        return re.compile(_java_to_python(pattern, 0x80 if ascii_only else 0x110000), re.ASCII)
    except re.error as error:
        return f"not checked: Python cannot compile it ({error})"


def full_match(pattern: str, value: str) -> bool | str:
    """Whether `value` matches the whole of `pattern` (Java syntax), or why the pattern cannot be checked."""
    compiled = compiled_pattern(pattern, ascii_only=value.isascii())
    return compiled if isinstance(compiled, str) else compiled.fullmatch(value) is not None
