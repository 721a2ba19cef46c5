"""No folder named `build` holds Python code in the project's source and test trees.

Tools take a folder named `build` for build output and skip it: pytest's default `norecursedirs`,
ruff's default excludes, setuptools' and most editors' ignore lists. Python code in one would go
unlinted, and tests in one untested the day `norecursedirs` is reset (issue 13: tests/build became
tests/artifact_build, triton_cdk.build triton_cdk.artifact_build). The project root's own `build/`
(git-ignored output) is not a source tree.
"""

from __future__ import annotations

from pathlib import Path

from synth_helpers import PROJECT_ROOT

# Top-level folders that are not source: tool state, dependencies, synth and build output.
NOT_SOURCE = {"build", "node_modules", "__pycache__"}


def source_trees(root: Path) -> list[Path]:
    return sorted(
        path
        for path in root.iterdir()
        if path.is_dir()
        and not path.name.startswith(".")  # .git, .venv, .venv-triton, caches
        and not path.name.startswith("cdk.out")
        and not path.name.endswith(".egg-info")
        and path.name not in NOT_SOURCE
    )


def python_under_build_folders(root: Path) -> list[str]:
    """Each .py file below a folder named `build` in the source trees, relative to `root`."""
    return sorted(
        str(path.relative_to(root))
        for tree in source_trees(root)
        for path in tree.rglob("*.py")
        if "build" in path.relative_to(root).parts[:-1]
    )


def test_no_python_package_or_test_folder_is_named_build() -> None:
    trees = {tree.name for tree in source_trees(PROJECT_ROOT)}
    assert {"model_build", "endpoint_client", "triton_cdk", "stacks", "tests"} <= trees
    assert python_under_build_folders(PROJECT_ROOT) == []


def test_the_check_finds_a_build_package(tmp_path: Path) -> None:
    for relative in ("pkg/build/__init__.py", "tests/build/test_x.py", "pkg/model_build/ok.py", "build/lib/out.py"):
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text("")
    assert python_under_build_folders(tmp_path) == ["pkg/build/__init__.py", "tests/build/test_x.py"]
