"""Every documented command that runs offline is run here, so a page cannot go stale.

A fenced block right after a `<!-- doctest -->` line in README.md or docs/*.md is a doc test: its lines
run in order with bash, from a sandbox project (the code linked, config/ copied as shipped from
tests/shipped_config/, so a command may edit it and meets a fresh clone's config whatever the user set) with
HOME holding `my_model.onnx` (a small dynamic-batch model); every line must exit 0. `/tmp/` in a command is the
sandbox's own tmp folder.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from synth_helpers import PROJECT_ROOT, SHIPPED_CONFIG_DIR

sys.path.insert(0, str(PROJECT_ROOT / "tests" / "model_build"))
from onnx_fixtures import dynamic_batch_model

MARKER = "<!-- doctest -->"
LINKED = ("serving_facts", "model_build", "triton_cdk", "stacks", "endpoint_client", "app.py", "cdk.json", ".venv")
PAGES = [PROJECT_ROOT / "README.md", *sorted((PROJECT_ROOT / "docs").glob("*.md"))]


def doc_blocks(page: Path) -> list[tuple[int, list[str]]]:
    """(line number, commands) of each doc-test block; `\\` continuations joined, comment lines dropped."""
    lines = page.read_text().splitlines()
    blocks = []
    for index, line in enumerate(lines):
        if line.strip() != MARKER:
            continue
        assert index + 1 < len(lines) and lines[index + 1].startswith("```"), f"{page}:{index + 1}: no block"
        body = []
        for raw in lines[index + 2 :]:
            if raw.startswith("```"):
                break
            body.append(raw)
        commands = [c.strip() for c in "\n".join(body).replace("\\\n", " ").splitlines()]
        blocks.append((index + 1, [c for c in commands if c and not c.startswith("#")]))
    return blocks


BLOCKS = [(page, line, commands) for page in PAGES for line, commands in doc_blocks(page)]


def test_the_newcomer_path_is_covered():
    """README's "Bring your own model" steps are doc tests (issue: a page must not go stale again)."""
    readme = [commands for page, _, commands in BLOCKS if page.name == "README.md"]
    assert any(any("model_build init" in c for c in commands) for commands in readme)


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("doc-sandbox")
    project = root / "project"
    project.mkdir()
    for name in LINKED:
        (project / name).symlink_to(PROJECT_ROOT / name)
    subprocess.run(["cp", "-r", str(SHIPPED_CONFIG_DIR), str(project / "config")], check=True)
    # Copied, not linked: stage_config's loader takes the project root from its own resolved path, and model
    # sources must resolve inside it: a stage file a doc command edited (README's `init --append`) names
    # models/my_model.onnx in the sandbox, the example stages name examples/models/.
    for name in ("stage_config", "examples"):
        shutil.copytree(PROJECT_ROOT / name, project / name, ignore=shutil.ignore_patterns("__pycache__"))
    (root / "home").mkdir()
    (root / "tmp").mkdir()
    dynamic_batch_model(root / "home" / "my_model.onnx")
    return project


@pytest.mark.parametrize(("page", "line", "commands"), BLOCKS, ids=[f"{p.name}:{n}" for p, n, _ in BLOCKS])
def test_doc_block_runs(page, line, commands, sandbox):
    root = sandbox.parent
    env = {"HOME": str(root / "home"), "PATH": f"{PROJECT_ROOT / '.venv' / 'bin'}:/usr/bin:/bin", "LANG": "C.UTF-8"}
    for command in commands:
        command = re.sub(r"(?<![\w.])/tmp/", f"{root}/tmp/", command)
        result = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", command], cwd=sandbox, env=env, capture_output=True, text=True
        )
        assert result.returncode == 0, f"{page.name}:{line}: `{command}` failed:\n{result.stdout}{result.stderr}"
