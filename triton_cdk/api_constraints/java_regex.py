"""botocore's `pattern`s are Java regular expressions (the SDKs' models are written for Java's `Pattern`, which
AWS matches against the whole value): compiled here for Python's `re.fullmatch`, with ASCII `\\w\\d\\s` as in
Java. Java's `\\p{..}` classes (Unicode general categories, POSIX names) and UTF-16 surrogate pairs in ranges are
translated; a pattern Python still cannot compile comes back as the reason, never an exception.
"""

from __future__ import annotations

import functools
import re
import unicodedata

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


@functools.cache
def _unicode_categories() -> dict[str, str]:
    """Java's `\\p{L}`-style classes as Python character-class bodies: two-letter general category -> ranges.
    Computed once, and only when a pattern that needs it is first matched."""
    ranges: dict[str, list[tuple[int, int]]] = {}
    start, current = 0, unicodedata.category("\0")
    for code in range(1, 0x110000):
        category = unicodedata.category(chr(code))
        if category != current:
            ranges.setdefault(current, []).append((start, code - 1))
            start, current = code, category
    ranges.setdefault(current, []).append((start, 0x10FFFF))
    return {name: "".join(f"\\U{a:08x}-\\U{b:08x}" for a, b in spans) for name, spans in ranges.items()}


def _class_body(name: str) -> str | None:
    if name in _POSIX:
        return _POSIX[name]
    name = name.removeprefix("Is")
    categories = _unicode_categories()
    if name in categories:
        return categories[name]
    if len(name) == 1 and name in "LMNPSZC":
        return "".join(body for category, body in categories.items() if category.startswith(name))
    return None


_SURROGATE_PAIR = re.compile(r"\\u(d[89ab][0-9a-f]{2})\\u(d[c-f][0-9a-f]{2})", re.IGNORECASE)
_PROPERTY = re.compile(r"\\([pP])(?:\{(\w+)\}|([A-Z]))")


def _java_to_python(pattern: str) -> str:
    """Translate what Java's regex syntax has and Python's lacks; raise re.error for what cannot be."""

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
                body = _class_body(match[2] or match[3])
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
def compiled_pattern(pattern: str) -> re.Pattern | str:
    """`pattern` (Java syntax, as botocore states it) compiled for `fullmatch`, or why it cannot be."""
    try:
        return re.compile(_java_to_python(pattern), re.ASCII)
    except re.error as error:
        return f"not checked: Python cannot compile it ({error})"
