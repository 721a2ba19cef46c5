"""The construct library does not reach back into the app: importing its modules loads neither `stacks/`
nor the app's config schema (`triton_cdk.config`). The app maps its config to the constructs' props."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIBRARY_MODULES = [
    "triton_cdk.serving",
    "triton_cdk.artifacts",
    "triton_cdk.roles",
    "triton_cdk.notifications",
    "triton_cdk.images",
    "triton_cdk.guard",
    "triton_cdk.artifact_build",
    "triton_cdk.artifact_build.build_project",
    "triton_cdk.artifact_build.ensure_artifact",
    "triton_cdk.artifact_build.gpu_regions",
]
# Not listed: triton_cdk.artifact_keys, triton_cdk.promotion and triton_cdk.artifact_build.requests map the
# app's `AppConfig` / `EndpointSettings` to artifacts (they type their input with the config schema).


@pytest.mark.parametrize("module", LIBRARY_MODULES)
def test_library_module_loads_no_app_module(module):
    probe = (
        f"import sys, {module}; "
        "print(sorted(m for m in sys.modules if m == 'stacks' or m.startswith(('stacks.', 'triton_cdk.config'))))"
    )
    env = {**os.environ, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}
    result = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "[]"


def _imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_nothing_in_the_library_imports_the_app():
    """The only arrow goes from the app (`stacks/`) to the library (`triton_cdk/`), never back, also in
    imports a probe would not load (inside functions, under TYPE_CHECKING)."""
    offenders = {
        str(path.relative_to(ROOT)): sorted(
            m for m in _imported_modules(path) if m == "stacks" or m.startswith("stacks.")
        )
        for path in sorted((ROOT / "triton_cdk").rglob("*.py"))
    }
    assert {path: modules for path, modules in offenders.items() if modules} == {}


def test_every_command_error_is_a_tool_error():
    """One hierarchy: `run_cli` prints a ToolError as one line (no traceback); model_build's value-style errors
    are ModelBuildErrors too, and endpoint_client's share the neutral base, not model_build's."""
    probe = (
        "import inspect, model_build, endpoint_client.errors as e, model_build.errors as m\n"
        "import model_build.catalogue, model_build.drivers, model_build.key, model_build.matching, "
        "model_build.onnx_external, model_build.releases\n"
        "mods = [model_build.catalogue, model_build.drivers, model_build.key, model_build.matching, "
        "model_build.onnx_external, model_build.releases]\n"
        "bad = [c.__name__ for mod in mods for _, c in inspect.getmembers(mod, inspect.isclass) "
        "if c.__module__ == mod.__name__ and issubclass(c, Exception) and not issubclass(c, m.ModelBuildError)]\n"
        "client = e.EndpointClientError\n"
        "print(bad, issubclass(client, m.ToolError), issubclass(client, m.ModelBuildError))"
    )
    env = {**os.environ, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}
    result = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "[] True False"
