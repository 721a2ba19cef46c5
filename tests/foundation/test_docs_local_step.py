"""The bring-your-own-model guide's local step (issue #27 items 6 and 8).

- `endpoint_client local` needs the CPU Triton venv (.venv-triton, mk/local.mk's stamp): `make local` depends on it,
  and where the README runs `local` by hand the stamp target comes first.
- The pages this guide uses run nothing on a fixed temporary path or on port 8080 (often taken on a shared
  machine): `LOCAL_PORT=0` / `--port 0` and folders under the ignored build/.
"""

from __future__ import annotations

import re
from pathlib import Path

from synth_helpers import PROJECT_ROOT

PAGES = [
    PROJECT_ROOT / "README.md",
    PROJECT_ROOT / "docs" / "client-and-local-endpoint.md",
    *sorted((PROJECT_ROOT / "docs").glob("model-build-*.md")),
]


def _section(page: Path, title: str) -> str:
    text = page.read_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def _commands(page: Path) -> list[str]:
    """The lines of bash/console code blocks that run something (`$ ` prompts in console blocks)."""
    commands, fence = [], None
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            fence = None if fence is not None else line[3:].strip()
            continue
        runs_in_bash = fence == "bash" and line.strip() and not line.lstrip().startswith("#")
        if runs_in_bash or (fence == "console" and line.startswith("$ ")):
            commands.append(line)
    return commands


def test_make_local_installs_the_triton_venv_first() -> None:
    makefile = (PROJECT_ROOT / "mk" / "local.mk").read_text()
    (prerequisites,) = re.findall(r"^local: (.*)$", makefile, re.MULTILINE)
    assert "$(TRITON_ENV_STAMP)" in prerequisites.split()
    assert re.search(r"^TRITON_ENV_STAMP := \$\(TRITON_VENV\)/\.stamp$", makefile, re.MULTILINE)
    assert re.search(r"^TRITON_VENV := \.venv-triton$", makefile, re.MULTILINE)


def test_the_readme_creates_the_triton_venv_before_running_local_by_hand() -> None:
    for title in ("Bring your own model", "Try a model locally"):
        lines = _section(PROJECT_ROOT / "README.md", title).splitlines()
        local = [i for i, line in enumerate(lines) if "-m endpoint_client local " in line]
        for index in local:
            assert any("make .venv-triton/.stamp" in line for line in lines[:index]), (title, lines[index])
        for line in lines:
            if line.startswith("make local"):
                assert "LOCAL_PORT=0" in line, line
        section = "\n".join(lines)
        if local or "make local" in section:
            assert ".venv-triton" in section  # says what it installs before it starts


def test_guide_commands_use_no_fixed_temporary_path_or_port_8080() -> None:
    for page in PAGES:
        for command in _commands(page):
            assert not re.search(r"(?<![\w.])/tmp/", command), f"{page.name}: {command}"
            assert ":8080" not in command and "--port 8080" not in command, f"{page.name}: {command}"
            if command.lstrip("$ ").startswith("make local"):
                assert "LOCAL_PORT=0" in command, f"{page.name}: {command}"
