"""What the stage-config loader refuses in a python model's folder (its config.pbtxt, files Triton or the CDK
asset would mishandle, a prebuilt environment archive) and in an ensemble (tensor names, batching), before synth
writes anything: each refusal names the file, field and the rule's source."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import yaml
from fakes import within
from test_config_file_refusals import DEV, ROOT, dumped, refused, write

from stage_config import load_config

PY_CONFIG = """\
name: "pymodel"
backend: "python"
max_batch_size: 0
input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 4 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
"""


def _python_project(tmp_path: Path, config: str = PY_CONFIG) -> Path:
    """tmp/project/pymodel: a python model's source folder (config.pbtxt, 1/model.py)."""
    folder = tmp_path / "project" / "pymodel"
    (folder / "1").mkdir(parents=True)
    (folder / "1" / "model.py").write_text("class TritonPythonModel:\n    pass\n")
    (folder / "config.pbtxt").write_text(config)
    return tmp_path / "project"


def _python_stage(tmp_path: Path, *, instance_type: str = "ml.c5.xlarge", **fields) -> Path:
    model = {
        "name": "pymodel",
        "platform": "python",
        "source": {"path": "pymodel"},
        "max_batch_size": 0,
        "dynamic_batching": {"enabled": False},
        "instance_groups": [{"count": 1, "kind": "KIND_CPU"}],
        **fields,
    }
    endpoint = {"name": "py", "mode": "single_model", "models": ["pymodel"], "instance_type": instance_type}
    return dumped(tmp_path, {**DEV, "models": [model], "endpoints": [endpoint]})


def test_python_model_folder_config_is_checked_at_synth(tmp_path):
    """The folder's config.pbtxt is what Triton loads; it used to be ignored at synth while the stage's KIND_CPU
    passed the instance-type checks. KIND_GPU on a CPU instance and a `name` other than the model's are refused
    (Triton: "directory name must equal model name"), naming the file, and so is a stage value the file
    contradicts, naming both."""
    root = _python_project(tmp_path, PY_CONFIG.replace("KIND_CPU", "KIND_GPU").replace('"pymodel"', '"other"'))
    message = refused(
        _python_stage(tmp_path, max_batch_size=8, dynamic_batching={"enabled": True}), source_roots=(root,)
    )
    assert "models[0].source.path: pymodel/config.pbtxt fails check: " in message
    assert "KIND_GPU but no GPUs are available" in message
    assert "unexpected directory name 'pymodel' for model 'other'" in message
    assert "models[0].max_batch_size: is 8 but pymodel/config.pbtxt has max_batch_size 0" in message
    assert (
        "models[0].instance_groups[0].kind: is KIND_CPU but pymodel/config.pbtxt has instance_group[0].kind KIND_GPU"
        in (message)
    )
    assert "(model 'pymodel' served by endpoints[0] on ml.c5.xlarge)" in message
    root = _python_project(tmp_path / "ok")
    assert load_config(_python_stage(tmp_path / "ok"), source_roots=(root,)).models[0].name == "pymodel"
    # Left out, the folder's values stand alone (not the schema's KIND_GPU default, refused on a CPU type).
    omitted = {"max_batch_size", "dynamic_batching", "instance_groups"}
    document = yaml.safe_load(_python_stage(tmp_path / "ok").read_text())
    document["models"][0] = {k: v for k, v in document["models"][0].items() if k not in omitted}
    assert load_config(dumped(tmp_path / "ok", document), source_roots=(root,)).models[0].name == "pymodel"


def test_python_model_folder_rules_apply_at_synth(tmp_path):
    """`model_build check` / `package` refuse these in a model folder (model_build/model_tree.py); synth let them
    through, and the CDK asset then dropped the FIFO and copied what the link pointed to."""
    root = _python_project(tmp_path)
    folder = root / "pymodel"
    (folder / "bad name.txt").write_text("")
    (folder / "1" / "weights").symlink_to(folder / "config.pbtxt")  # inside the project, still a link
    os.mkfifo(folder / "pipe")
    with within(10):
        message = refused(_python_stage(tmp_path), source_roots=(root,))
    assert "holds " in message and "pipe, which is not a regular file or folder (a FIFO, device or socket)" in message
    (folder / "pipe").unlink()
    message = refused(_python_stage(tmp_path), source_roots=(root,))
    assert "models[0].source.path: 'pymodel' holds what a model folder may not" in message
    assert "'pymodel/bad name.txt': file name 'bad name.txt' is not allowed" in message
    assert "'pymodel/1/weights': is a symbolic link" in message


def test_a_fifo_config_does_not_hang_synth(tmp_path):
    root = _python_project(tmp_path)
    (root / "pymodel" / "config.pbtxt").unlink()
    os.mkfifo(root / "pymodel" / "config.pbtxt")
    with within(10):
        message = refused(_python_stage(tmp_path), source_roots=(root,))
    assert "config.pbtxt, which is not a regular file or folder (a FIFO, device or socket)" in message


def test_a_prebuilt_environment_archive_is_checked_at_synth(tmp_path):
    """`environment: {archive: ...}` was never opened at synth; `model_build check`'s archive rules now run there
    (python_backend src/pb_env.cc: libarchive's SECURE_NOABSOLUTEPATHS / NODOTDOT / SYMLINKS; bin/activate)."""
    import io
    import tarfile

    root = _python_project(tmp_path)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        link = tarfile.TarInfo("lib/passwd")
        link.type, link.linkname = tarfile.LNKTYPE, "/etc/passwd"
        archive.addfile(link)
    (root / "pymodel" / "env.tar.gz").write_bytes(buffer.getvalue())
    stage = _python_stage(tmp_path, environment={"archive": "pymodel/env.tar.gz"})
    message = refused(stage, source_roots=(root,))
    assert "models[0].environment.archive: execution environment pymodel/env.tar.gz: hard link 'lib/passwd' -> " in (
        message
    )
    assert "'/etc/passwd' is absolute" in message


def _pipeline(tmp_path: Path, edit) -> Path:
    """The ensemble fixture (tests/model_build/ensemble_fixtures.py) as a stage file, `edit`ed."""
    sys.path.insert(0, str(ROOT / "tests" / "model_build"))
    from ensemble_fixtures import write_pipeline

    write_pipeline(tmp_path)
    pipeline = yaml.safe_load((tmp_path / "stage.yaml").read_text())
    endpoint = {"name": "pipe", "mode": "single_model", "models": ["pipe"], "instance_type": "ml.c5.xlarge"}
    document = {**DEV, "models": pipeline["models"], "endpoints": [endpoint]}
    edit(document["models"][3])
    return write(tmp_path, yaml.safe_dump(document, sort_keys=False))


def test_an_ensemble_tensor_typo_is_refused_at_synth(tmp_path):
    def typo(ensemble):
        ensemble["ensemble"]["steps"][2]["input_map"] = {"logits": "logit"}

    message = refused(_pipeline(tmp_path, typo), source_roots=(tmp_path,))
    assert "models[3].ensemble: steps[2].input_map reads 'logit', which no step writes" in message
    assert "(line " in message


def test_tensor_names_are_printable_without_spaces(tmp_path):
    def blank(ensemble):
        ensemble["ensemble"]["steps"][0]["input_map"] = {"image": " "}

    message = refused(_pipeline(tmp_path, blank), source_roots=(tmp_path,))
    assert "models[3].ensemble.steps[0].input_map.image: String should match pattern '^[^\\s\\x00-\\x1f\\x7f]+$'" in (
        message
    )


def test_a_batched_ensemble_over_unbatched_steps_names_the_batch_size(tmp_path):
    def batched(ensemble):
        ensemble["max_batch_size"] = 8

    message = refused(_pipeline(tmp_path, batched), source_roots=(tmp_path,))
    assert (
        "models[3].ensemble.steps[0].input_map: ensemble 'pipe' batches (max_batch_size 8) but steps[0]'s model "
        in (message)
    )
    assert "must specify 'dims'" not in message
