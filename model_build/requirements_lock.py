"""A Python model's locked requirements file: every line `name==version`, `--hash` options allowed.

The packed environment is content-addressed on these bytes (model_build.python_env), so the file must
say exactly what is installed: an open range (`numpy>=1.26`), a URL, an editable install, an include
(`-r other.txt`) or an index option would let the same bytes give different environments over time.
The form is the one `pip-compile --generate-hashes` and `pip freeze` write. pip's hash-checking mode
("Secure installs", pip documentation) needs a hash on every requirement once one has one, so a
file mixing both is refused here rather than by pip in the build.

numpy must be listed: the python backend's stub imports `triton_python_backend_utils`, whose first
lines `import numpy as np` (triton-inference-server/python_backend
`src/resources/triton_python_backend_utils.py`), inside the environment's own interpreter, so a
model whose environment lacks numpy fails to load however little it uses it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from model_build.config_yaml import clip
from model_build.errors import InvalidModelError

# A locked file of a real pipeline has tens of lines; bounded so a hostile file is refused, not parsed.
MAX_REQUIREMENTS_BYTES = 1 << 20
MAX_REQUIREMENTS = 2_000
STUB_NEEDS = "numpy"

# PEP 508 names, optional extras, `==` an exact PEP 440 version (no wildcard), then hash options only.
_REQUIREMENT = re.compile(
    r"^(?P<name>[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)"
    r"(?:\[(?P<extras>[A-Za-z0-9._,\s-]*)\])?"
    r"\s*==\s*(?P<version>[A-Za-z0-9][A-Za-z0-9.+!_-]*)"
    r"(?P<hashes>(?:\s+--hash[=\s](?:sha256|sha384|sha512):[0-9a-fA-F]+)*)\s*$"
)
_HASH = re.compile(r"--hash[=\s]((?:sha256|sha384|sha512):[0-9a-fA-F]+)")


@dataclass(frozen=True)
class Requirement:
    name: str  # as written
    version: str
    hashes: tuple[str, ...]
    line: int

    @property
    def normalized(self) -> str:
        """PEP 503 normalised name: `Pillow` and `pillow`, `typing_extensions` and `typing-extensions` agree."""
        return re.sub(r"[-_.]+", "-", self.name).lower()


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first physical line number, text) with `\\` continuations joined and comments removed (pip's rules)."""
    lines: list[tuple[int, str]] = []
    pending, start = "", 0
    for number, raw in enumerate(text.splitlines(), start=1):
        # pip: a comment starts with '#' at the line start or after whitespace.
        line = re.sub(r"(^|\s)#.*$", "", raw)
        if not pending:
            start = number
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        pending += line
        if pending.strip():
            lines.append((start, pending.strip()))
        pending = ""
    if pending.strip():
        lines.append((start, pending.strip()))
    return lines


def requirements_problems(text: str) -> tuple[list[Requirement], list[str]]:
    """The requirements and every problem as `line N: ...`; a file is usable when there are no problems."""
    found: list[Requirement] = []
    problems: list[str] = []
    for number, line in _logical_lines(text):
        match = _REQUIREMENT.match(line)
        if match is None:
            problems.append(f"line {number}: {clip(line, 120)!r} is not locked; {_hint(line)}")
            continue
        hashes = tuple(_HASH.findall(match.group("hashes") or ""))
        found.append(Requirement(match.group("name"), match.group("version"), hashes, number))
    if len(found) > MAX_REQUIREMENTS:
        problems.append(f"{len(found)} requirements; at most {MAX_REQUIREMENTS} are accepted")
    seen: dict[str, int] = {}
    for requirement in found:
        if requirement.normalized in seen:
            problems.append(
                f"line {requirement.line}: {requirement.name} is listed again (first on line "
                f"{seen[requirement.normalized]}); list each package once"
            )
        seen.setdefault(requirement.normalized, requirement.line)
    hashed = [r for r in found if r.hashes]
    if hashed and len(hashed) != len(found):
        unhashed = ", ".join(f"{r.name} (line {r.line})" for r in found if not r.hashes)
        problems.append(
            f"some requirements have --hash and some do not ({clip(unhashed, 200)}): pip's hash-checking mode needs "
            "a hash on every requirement; regenerate with pip-compile --generate-hashes"
        )
    if found and STUB_NEEDS not in seen:
        problems.append(
            f"{STUB_NEEDS} is not listed: the python backend stub imports triton_python_backend_utils, which imports "
            f"numpy, inside this environment; add {STUB_NEEDS}==<version> (numpy<2 for Triton releases before 24.08)"
        )
    if not found and not problems:
        problems.append(f"no requirements; list at least {STUB_NEEDS}==<version>")
    return found, problems


def _hint(line: str) -> str:
    if line.startswith("-"):
        return (
            "options (-r, -c, -e, --index-url, --find-links, ...) are not accepted: the file alone must "
            "determine the environment"
        )
    if "://" in line or line.startswith(("/", ".")) or " @ " in line:
        return "URLs and paths are not accepted; pin a released version as name==version"
    if ";" in line:
        return "environment markers are not accepted: the environment is built for one interpreter; drop the marker"
    return "write name==version (an exact version, e.g. pillow==11.0.0), optionally followed by --hash=sha256:..."


def read_locked_requirements(path: Path, shown: str | None = None) -> list[Requirement]:
    """The requirements of `path`; raises InvalidModelError naming the file and every bad line."""
    shown = shown or str(path)
    try:
        with open(path, "rb") as file:
            data = file.read(MAX_REQUIREMENTS_BYTES + 1)
    except OSError as error:
        raise InvalidModelError(f"{shown}: cannot be read ({error.strerror or error})") from None
    if len(data) > MAX_REQUIREMENTS_BYTES:
        raise InvalidModelError(f"{shown}: larger than {MAX_REQUIREMENTS_BYTES} bytes; a locked requirements file is")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InvalidModelError(f"{shown}: not UTF-8 text ({error.reason} at byte {error.start})") from None
    found, problems = requirements_problems(text)
    if problems:
        lines = "\n".join(f"{shown}: {problem}" for problem in problems[:50])
        raise InvalidModelError(f"{lines}\n(the environment is packed from a locked requirements file)")
    return found
