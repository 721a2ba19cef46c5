"""`package` refuses what `check` refuses, and what would reach outside the packaged model (issue #22 B7).

Sources:
- Triton core `src/model_repository_manager/model_lifecycle.cc` VersionsToLoad: version folders are read with
  std::stoll, catching only std::invalid_argument (so out_of_range escapes, and "12abc" is version 12);
- core `src/backend_model.cc` GetBackendLibraryProperties: "backend library name ... escapes backend directory
  ... check model config runtime field";
- core `src/backend_model_instance.cc`: warm-up data is read from `<model>/warmup/<input_data_file>`;
- python_backend EXECUTION_ENV_PATH: only the model folder is packaged (model_build.check.environment);
- model_build.model_tree: hard links shared with paths outside the model folder.
"""

from __future__ import annotations

import os
import tarfile
import time
import zlib
from pathlib import Path

import pytest

from model_build.check import check_repository
from model_build.check.environment import archive_problems
from model_build.errors import InvalidModelError
from model_build.package import package_repository

PYTHON_CONFIG = 'name: "m"\nbackend: "python"\nmax_batch_size: 0\n'
TENSORS = (
    'input { name: "x" data_type: TYPE_FP32 dims: [ 1 ] }\noutput { name: "y" data_type: TYPE_FP32 dims: [ 1 ] }\n'
)


def python_model(repo: Path, config: str = PYTHON_CONFIG + TENSORS) -> Path:
    folder = repo / "m"
    (folder / "1").mkdir(parents=True)
    (folder / "1" / "model.py").write_text("class TritonPythonModel:\n    pass\n")
    (folder / "config.pbtxt").write_text(config)
    return folder


def refused(repo: Path, tmp_path: Path, pattern: str) -> None:
    """check reports it and package refuses it, writing nothing."""
    assert any(pattern in str(problem) for problem in check_repository(repo)), check_repository(repo)
    with pytest.raises(InvalidModelError, match="nothing was packaged"):
        package_repository(repo, tmp_path / "out", models=["m"])
    assert not (tmp_path / "out").exists()


def test_a_config_whose_name_differs_from_its_folder_is_not_packaged(tmp_path):
    """Problems carry the config's model name: package must still attribute them to the folder."""
    python_model(tmp_path / "repo", PYTHON_CONFIG.replace('"m"', '"other"') + TENSORS)
    refused(tmp_path / "repo", tmp_path, "directory name must equal model name")


@pytest.mark.parametrize("text", ["", "\n  \n", "# only a comment\n"])
def test_an_empty_config_is_not_packaged(tmp_path, text):
    """Triton auto-completes an empty config from the files (SageMaker's serve script passes no
    --strict-model-config): nothing checked would be what it serves."""
    python_model(tmp_path / "repo", text)
    refused(tmp_path / "repo", tmp_path, "config.pbtxt: is empty (no field set)")


@pytest.mark.parametrize(
    ("folder", "pattern"),
    [
        ("9223372036854775808", "Triton's std::stoll throws out_of_range"),
        ("99999999999999999999999", "Triton's std::stoll throws out_of_range"),
        ("12abc", "read by Triton as version 12"),
        ("+3", "read by Triton as version 3"),
    ],
)
def test_version_folders_triton_cannot_parse_as_we_do_are_refused(tmp_path, folder, pattern):
    model = python_model(tmp_path / "repo")
    (model / folder).mkdir()
    refused(tmp_path / "repo", tmp_path, pattern)


def test_the_largest_int64_version_is_a_version(tmp_path):
    model = python_model(tmp_path / "repo")
    (model / "9223372036854775807").mkdir()
    (model / "9223372036854775807" / "model.py").write_text("class TritonPythonModel:\n    pass\n")
    assert check_repository(tmp_path / "repo") == []


def test_warmup_folder_is_not_a_version_folder(tmp_path):
    """core VersionsToLoad skips `warmup` (kWarmupDataFolder)."""
    model = python_model(tmp_path / "repo")
    (model / "warmup").mkdir()
    (model / "warmup" / "x.bin").write_bytes(b"\0" * 4)
    assert check_repository(tmp_path / "repo") == []


def test_a_runtime_with_a_folder_is_refused(tmp_path):
    python_model(tmp_path / "repo", PYTHON_CONFIG + 'runtime: "../../../tmp/evil.so"\n' + TENSORS)
    refused(tmp_path / "repo", tmp_path, "escapes backend directory")


@pytest.mark.parametrize("data_file", ["../../../etc/passwd", "/etc/passwd", "..", "a/../../x"])
def test_warmup_files_outside_the_warmup_folder_are_refused(tmp_path, data_file):
    warmup = (
        'model_warmup { name: "w" batch_size: 1 inputs { key: "x" value { data_type: TYPE_FP32 dims: [ 1 ] '
        f'input_data_file: "{data_file}" }} }} }}\n'
    )
    python_model(tmp_path / "repo", PYTHON_CONFIG + TENSORS + warmup)
    refused(tmp_path / "repo", tmp_path, "is not a path inside the model's warmup/ folder")


def test_warmup_files_must_be_in_the_warmup_folder(tmp_path):
    """core backend_model_instance.cc reads <model>/warmup/<input_data_file>; a missing one fails the load."""
    warmup = (
        'model_warmup { name: "w" batch_size: 1 inputs { key: "x" value { data_type: TYPE_FP32 dims: [ 1 ] '
        'input_data_file: "x.bin" } } }\n'
    )
    model = python_model(tmp_path / "repo", PYTHON_CONFIG + TENSORS + warmup)
    refused(tmp_path / "repo", tmp_path, "warmup/x.bin is not a file in the model folder")
    (model / "warmup").mkdir()
    (model / "warmup" / "x.bin").write_bytes(b"\0" * 4)
    assert check_repository(tmp_path / "repo") == []
    assert package_repository(tmp_path / "repo", tmp_path / "out", models=["m"])


def test_an_absolute_execution_env_path_is_refused(tmp_path):
    env = 'parameters { key: "EXECUTION_ENV_PATH" value { string_value: "/opt/env.tar.gz" } }\n'
    python_model(tmp_path / "repo", PYTHON_CONFIG + TENSORS + env)
    refused(tmp_path / "repo", tmp_path, "is an absolute path, outside the packaged model folder")


def test_a_hard_link_to_a_file_outside_the_model_is_refused(tmp_path):
    model = python_model(tmp_path / "repo")
    outside = tmp_path / "secret.txt"
    outside.write_text("not for shipping")
    os.link(outside, model / "1" / "data.txt")
    refused(tmp_path / "repo", tmp_path, "is a hard link shared with 1 path(s) outside the model folder")


def test_hard_links_inside_the_model_folder_are_packed(tmp_path):
    model = python_model(tmp_path / "repo")
    (model / "1" / "a.txt").write_text("same")
    os.link(model / "1" / "a.txt", model / "1" / "b.txt")
    assert check_repository(tmp_path / "repo") == []
    assert package_repository(tmp_path / "repo", tmp_path / "out", models=["m"])


def test_an_environment_with_a_huge_member_count_is_refused_in_seconds(tmp_path):
    """model_build.check.bounded_tar: the member count is bounded while iterating, before anything else."""
    from model_build.check.bounded_tar import MAX_MEMBERS

    # One valid header repeated (names need not differ for the count), compressed as it is made: a few MB.
    header = tarfile.TarInfo("f").tobuf(format=tarfile.GNU_FORMAT)
    compressor = zlib.compressobj(1, zlib.DEFLATED, 31)
    path = tmp_path / "env.tar.gz"
    with path.open("wb") as stream:
        for _ in range(MAX_MEMBERS // 10_000 + 1):
            stream.write(compressor.compress(header * 10_000))
        stream.write(compressor.compress(bytes(1024)) + compressor.flush())

    # This process's CPU time, not the wall clock: other work on a shared machine must not fail the bound.
    started = time.process_time()
    messages = archive_problems(path, "env.tar.gz")
    elapsed = time.process_time() - started

    assert any(f"more than {MAX_MEMBERS} entries" in message for message in messages), messages
    assert elapsed < 10, elapsed
