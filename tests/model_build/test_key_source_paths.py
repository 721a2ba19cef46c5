"""`model_build key` hashes only sources inside the project (absolute paths, ../ and symlinks out are refused),
with the CDK config loader's rule (model_build.source_paths, shared with the stage config)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from cli_runner import run_cli


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "models").mkdir(parents=True)
    (root / "models" / "ok.onnx").write_bytes(b"onnx bytes")
    (tmp_path / "outside.onnx").write_bytes(b"not the project's")
    (root / "models" / "etc").symlink_to("/etc")
    (root / "models" / "link.onnx").symlink_to(tmp_path / "outside.onnx")
    return root


def run_key(project: Path, path: str, *extra: str, platform: str = "onnxruntime_onnx") -> tuple[int, str]:
    model = {"name": "m", "source": {"path": path}, "platform": platform, "instance_groups": [{"kind": "KIND_CPU"}]}
    config = project / "test.yaml"  # the app's loader: a stage's file is named after it
    config.write_text(yaml.safe_dump({"stage": "test", "triton_release": "24.09", "models": [model]}))
    argv = ["key", "--config", str(config), "--model", "m", "--gpu-target", "portable", *extra]
    result = run_cli(*argv, cwd=Path.cwd())  # where the test put it: --base-dir defaults to it
    return result.returncode, result.stderr


@pytest.mark.parametrize(
    ("path", "platform", "expected"),
    [
        ("/etc/hostname", "onnxruntime_onnx", "resolves to /etc/hostname, outside the project root"),
        ("../outside.onnx", "onnxruntime_onnx", "outside.onnx, outside the project root"),
        ("models/link.onnx", "onnxruntime_onnx", "outside.onnx, outside the project root"),
        ("models/etc", "python", "resolves to /etc, outside the project root"),
    ],
)
def test_key_refuses_sources_outside_the_base_dir(project: Path, path: str, platform: str, expected: str) -> None:
    """The CDK config loader's rule (model_build.source_paths, shared with stage_config)."""
    code, err = run_key(project, path, "--base-dir", str(project), platform=platform)
    assert code == 1 and "Traceback" not in err
    assert err.startswith(f"ERROR: {project / 'test.yaml'}: models[0].source.path: ") and expected in err, err


def test_key_base_dir_defaults_to_the_current_folder(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(project)
    assert run_key(project, "models/ok.onnx") == (0, "")
    code, err = run_key(project, "../outside.onnx")
    assert code == 1 and f"outside the project root {project}" in err
