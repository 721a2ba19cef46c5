"""The venv installs from requirements-dev.lock (Makefile: uv, hashes required), so the lock must hold every pin
of the files people edit, at the same version: a pin changed without `make lock` fails here, not on a fresh
machine."""

from __future__ import annotations

import re
from pathlib import Path

from synth_helpers import PROJECT_ROOT

PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?==([^\s;#\\]+)")


def _normalised(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line.startswith("-r "):
            pins.update(_pins(path.parent / line[3:].strip()))
        elif match := PIN.match(line):
            pins[_normalised(match.group(1))] = match.group(3)
    return pins


def test_the_lock_holds_every_pin_at_its_version() -> None:
    wanted = _pins(PROJECT_ROOT / "requirements-dev.txt")
    locked = _pins(PROJECT_ROOT / "requirements-dev.lock")
    assert "aws-cdk-lib" in wanted and "pytest" in wanted
    mismatched = {name: (version, locked.get(name)) for name, version in wanted.items() if locked.get(name) != version}
    assert mismatched == {}, "run `make lock` after editing requirements*.txt"


def test_every_locked_package_has_a_hash() -> None:
    text = (PROJECT_ROOT / "requirements-dev.lock").read_text()
    entries = re.split(r"\n(?=[A-Za-z0-9])", text.split("\n", 2)[2])
    assert len(entries) > 50
    assert [e.split()[0] for e in entries if "--hash=sha256:" not in e] == []
