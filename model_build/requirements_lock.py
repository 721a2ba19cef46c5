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
UTF8_BOM = "\ufeff"

# pip's own patterns (pip/_internal/req/req_file.py): COMMENT_RE, and PEP263_ENCODING_RE for a coding declaration.
_COMMENT = re.compile(r"(^|\s+)#.*$")
_CODING = re.compile(r"coding[:=]\s*([-\w.]+)")
# The hash lengths of the algorithms pip accepts (pip/_internal/utils/hashes.py STRONG_HASHES), in hex digits.
HASH_HEX_DIGITS = {"sha256": 64, "sha384": 96, "sha512": 128}
_ONE_HASH = "(?:" + "|".join(f"{name}:[0-9a-fA-F]{{{digits}}}" for name, digits in HASH_HEX_DIGITS.items()) + ")"
# PEP 508 names, optional extras, `==` an exact PEP 440 version (no wildcard), then hash options only. pip splits
# the requirement from its options at the first space-separated token starting with '-' (req_file.py
# break_args_options: `line.split(" ")`), so only spaces may come before the first --hash (a tab there leaves the
# option inside the requirement, which pip refuses); between options any whitespace (shlex) does.
_REQUIREMENT = re.compile(
    r"^(?P<name>[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)"
    r"(?:\[(?P<extras>[A-Za-z0-9._,\s-]*)\])?"
    r"\s*==\s*(?P<version>[A-Za-z0-9][A-Za-z0-9.+!_-]*)"
    rf"(?P<hashes>(?: +--hash[=\s]{_ONE_HASH}(?:\s+--hash[=\s]{_ONE_HASH})*)?)\s*$"
)
_HASH = re.compile(rf"--hash[=\s]({_ONE_HASH})")
_ANY_HASH = re.compile(r"--hash[=\s]+(\w+):(\S*)")


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


def _swallowing_comments(text: str) -> list[str]:
    """A comment ending in `\\` continues onto the next line for pip (join_lines runs before ignore_comments), so
    whatever that line says is never installed: refused rather than guessed at."""
    problems = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.endswith("\\") and not _COMMENT.match(line) and _COMMENT.search(line):
            problems.append(
                f"line {number}: its comment ends in a backslash, so pip joins line {number + 1} into the comment and "
                "ignores it; remove the backslash"
            )
    return problems


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first physical line number, text) as pip reads a requirements file (pip/_internal/req/req_file.py
    `preprocess`): `join_lines` first joins a line ending in `\\` with the next (unless the line is a comment
    from its start), the backslashes stripped and nothing put between the parts; only then `ignore_comments`
    removes `#` comments (COMMENT_RE: at the line start or after whitespace) and blank lines. So a comment
    ending in a backslash swallows the next line, as it does for pip."""
    joined: list[tuple[int, str]] = []
    pending: list[str] = []
    start = 0
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.endswith("\\") or _COMMENT.match(line):
            if _COMMENT.match(line):
                line = " " + line  # pip: "this ensures comments are always matched later"
            if pending:
                pending.append(line)
                joined.append((start, "".join(pending)))
                pending = []
            else:
                joined.append((number, line))
        else:
            if not pending:
                start = number
            pending.append(line.strip("\\"))
    if pending:
        joined.append((start, "".join(pending)))
    lines = []
    for number, line in joined:
        line = _COMMENT.sub("", line).strip()
        if line:
            lines.append((number, line))
    return lines


def requirements_problems(text: str) -> tuple[list[Requirement], list[str]]:
    """The requirements and every problem as `line N: ...`; a file is usable when there are no problems."""
    found: list[Requirement] = []
    problems: list[str] = _swallowing_comments(text)
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
    hashes = _ANY_HASH.findall(line)
    for name, digest in hashes:
        if name not in HASH_HEX_DIGITS:
            return f"--hash {name}: is not one pip accepts; use {', '.join(HASH_HEX_DIGITS)}"
        if len(digest) != HASH_HEX_DIGITS[name] or not re.fullmatch(r"[0-9a-fA-F]*", digest):
            return f"a {name} hash is {HASH_HEX_DIGITS[name]} hex digits, not {clip(digest, 20)!r} ({len(digest)})"
    if hashes and re.search(r"[^ ]--hash", line.split("--hash", 1)[0] + "--hash"):
        return (
            "separate the requirement from its first --hash with spaces: pip splits them at a space (a tab leaves "
            "the option inside the requirement, which pip refuses)"
        )
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
    return read_locked_file(path, shown)[1]


def read_locked_file(path: Path, shown: str | None = None) -> tuple[bytes, list[Requirement]]:
    """(the file's bytes, its requirements), read once: whoever installs from it should use these bytes, so
    what pip reads is what was checked. A regular file only (a FIFO is refused, not waited on)."""
    from model_build.model_tree import read_regular_file  # deferred: model_tree imports the settings schema

    shown = shown or str(path)
    try:
        data = read_regular_file(Path(path), max_bytes=MAX_REQUIREMENTS_BYTES, shown=shown)
    except FileNotFoundError:
        raise InvalidModelError(f"{shown}: cannot be read (No such file or directory)") from None
    except InvalidModelError as error:
        if "bytes; at most" in str(error) or "grew past" in str(error):
            raise InvalidModelError(
                f"{shown}: larger than {MAX_REQUIREMENTS_BYTES} bytes; a locked requirements file is a few KB "
                "(one name==version line per package), so this is not one"
            ) from None
        raise
    return data, locked_requirements(data, shown)


def locked_requirements(data: bytes, shown: str) -> list[Requirement]:
    """The requirements of a file's bytes, decoded as pip decodes them (req_file.py `_decode_req_file`: a UTF-8
    byte-order mark is dropped; without a BOM or coding declaration, UTF-8)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InvalidModelError(
            f"{shown}: not UTF-8 text ({error.reason} at byte {error.start}); save it as UTF-8"
        ) from None
    text = text.removeprefix(UTF8_BOM)
    for line in text.splitlines()[:2]:
        coding = _CODING.search(line) if line.startswith("#") else None
        if coding and coding.group(1).lower().replace("_", "-") not in ("utf-8", "utf8", "ascii"):
            raise InvalidModelError(
                f"{shown}: declares coding {coding.group(1)!r}, which pip would decode it with (PEP 263); remove the "
                "declaration and save the file as UTF-8"
            )
    found, problems = requirements_problems(text)
    if problems:
        lines = "\n".join(f"{shown}: {problem}" for problem in problems[:50])
        raise InvalidModelError(f"{lines}\n(the environment is packed from a locked requirements file)")
    return found
