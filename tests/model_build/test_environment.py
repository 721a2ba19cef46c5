"""Python-backend execution environments (issue #11.6), judged the way the python backend loads them.

triton-inference-server/python_backend: `src/python_be.cc` replaces `$$TRITON_MODEL_DIRECTORY` with the
model folder; `src/pb_env.cc` ExtractIfNotExtracted uses a folder as it is and unpacks anything else
with libarchive (gzip filter, tar format) under ARCHIVE_EXTRACT_SECURE_NODOTDOT / _NOABSOLUTEPATHS /
_SYMLINKS ("Failed to get the canonical path for <path>." when it does not exist);
`src/stub_launcher.cc` requires `<env>/bin/activate` ("Path <env>/bin/activate does not exist. The
Python environment should contain an 'activate' script.").
"""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest
from model_fixtures import conda_pack_like, tar_gz

from model_build.check import check_repository
from model_build.errors import InvalidModelError
from model_build.package import package_repository

PACKED = conda_pack_like()
CONFIG = """
name: "t5"
backend: "python"
max_batch_size: 0
input [ {{ name: "text" data_type: TYPE_STRING dims: [ 1 ] }} ]
output [ {{ name: "summary" data_type: TYPE_STRING dims: [ 1 ] }} ]
instance_group [ {{ kind: KIND_CPU }} ]
parameters {{ key: "EXECUTION_ENV_PATH" value: {{ string_value: "{env}" }} }}
"""


def python_model(repo: Path, env: str) -> Path:
    folder = repo / "t5"
    (folder / "1").mkdir(parents=True)
    (folder / "1" / "model.py").write_text("class TritonPythonModel:\n    pass\n")
    (folder / "config.pbtxt").write_text(CONFIG.format(env=env))
    return folder


def env_problems(repo: Path) -> list[str]:
    return [p.message for p in check_repository(repo) if p.field == "parameters.EXECUTION_ENV_PATH"]


def test_a_conda_pack_archive_passes_and_is_packaged(tmp_path: Path) -> None:
    folder = python_model(tmp_path / "repo", "$$TRITON_MODEL_DIRECTORY/t5-env.tar.gz")
    (folder / "t5-env.tar.gz").write_bytes(conda_pack_like())
    assert check_repository(tmp_path / "repo") == []
    [artifact] = package_repository(tmp_path / "repo", tmp_path / "out")
    with tarfile.open(artifact.path) as archive:
        assert "t5/t5-env.tar.gz" in archive.getnames()


def test_an_uncompressed_tar_is_read_too(tmp_path: Path) -> None:
    """libarchive reads a plain tar with the gzip filter enabled (no filter applies)."""
    folder = python_model(tmp_path / "repo", "$$TRITON_MODEL_DIRECTORY/env.tar")
    buffer = io.BytesIO()
    with (
        tarfile.open(fileobj=io.BytesIO(conda_pack_like()), mode="r:gz") as packed,
        tarfile.open(fileobj=buffer, mode="w") as plain,
    ):
        for member in packed.getmembers():
            plain.addfile(member, packed.extractfile(member) if member.isfile() else None)
    (folder / "env.tar").write_bytes(buffer.getvalue())
    assert env_problems(tmp_path / "repo") == []


def test_an_unpacked_environment_folder_is_valid(tmp_path: Path) -> None:
    """pb_env.cc: 'Returning canonical path since EXECUTION_ENV_PATH does not contain compressed path'."""
    folder = python_model(tmp_path / "repo", "$$TRITON_MODEL_DIRECTORY/env")
    (folder / "env" / "bin").mkdir(parents=True)
    (folder / "env" / "bin" / "activate").write_text("# activate\n")
    assert check_repository(tmp_path / "repo") == []
    (folder / "env" / "bin" / "activate").unlink()
    [message] = env_problems(tmp_path / "repo")
    assert message.startswith(
        f"Path {folder / 'env'}/bin/activate does not exist. The Python environment should contain an 'activate' "
        "script."
    )


def test_a_path_leaving_the_model_folder_is_refused_not_silently_dropped(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    python_model(repo, "$$TRITON_MODEL_DIRECTORY/../shared-env.tar.gz")
    (repo / "shared-env.tar.gz").write_bytes(conda_pack_like())  # beside the model: never packaged
    [message] = env_problems(repo)
    assert "leaves the model folder t5/: only the model folder is packaged" in message


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"", "is not a tar.gz archive"),
        (os.urandom(4096), "is not a tar.gz archive"),
        (PACKED[: len(PACKED) // 2], "is not a tar.gz archive"),  # a truncated download
    ],
)
def test_a_file_that_is_not_an_archive_is_refused(tmp_path: Path, content: bytes, expected: str) -> None:
    folder = python_model(tmp_path / "repo", "$$TRITON_MODEL_DIRECTORY/env.tar.gz")
    (folder / "env.tar.gz").write_bytes(content)
    [message] = env_problems(tmp_path / "repo")
    assert expected in message


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({"lib/python3.11/os.py": ("symlink", "/opt/conda/lib/python3.11/os.py")}, "is absolute: it names a file"),
        ({"lib/escape": ("symlink", "../../etc/passwd")}, "points outside the environment"),
        ({"../evil.sh": b"x"}, "contains '..' (refused by ARCHIVE_EXTRACT_SECURE_NODOTDOT)"),
        ({"/etc/cron.d/evil": b"x"}, "has an absolute path (refused by ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS)"),
        (
            {"lib/dir": ("symlink", "python3.11"), "lib/dir/through.py": b"x"},
            "lies under a symbolic link of the archive (ARCHIVE_EXTRACT_SECURE_SYMLINKS)",
        ),
    ],
)
def test_archive_entries_the_backend_refuses_or_that_break_on_the_server(tmp_path: Path, extra, expected) -> None:
    folder = python_model(tmp_path / "repo", "$$TRITON_MODEL_DIRECTORY/env.tar.gz")
    (folder / "env.tar.gz").write_bytes(conda_pack_like(extra))
    [message] = env_problems(tmp_path / "repo")
    assert expected in message


def test_an_archive_without_activate_is_refused(tmp_path: Path) -> None:
    folder = python_model(tmp_path / "repo", "$$TRITON_MODEL_DIRECTORY/env.tar.gz")
    (folder / "env.tar.gz").write_bytes(tar_gz({"lib/python3.11/site.py": b"x"}))
    [message] = env_problems(tmp_path / "repo")
    assert "has no bin/activate" in message


def test_missing_and_relative_paths(tmp_path: Path) -> None:
    folder = python_model(tmp_path / "repo", "$$TRITON_MODEL_DIRECTORY/env.tar.gz")
    [message] = env_problems(tmp_path / "repo")
    assert f'"Failed to get the canonical path for {folder / "env.tar.gz"}."' in message
    (folder / "config.pbtxt").write_text(CONFIG.format(env="envs/t5.tar.gz"))
    [message] = env_problems(tmp_path / "repo")
    assert "is relative without $$TRITON_MODEL_DIRECTORY" in message
    # Issue #22 B7: an absolute path is outside the packaged model folder (the local endpoint ran an activate
    # script from outside the archive): refused.
    (folder / "config.pbtxt").write_text(CONFIG.format(env="/opt/envs/t5.tar.gz"))
    [message] = env_problems(tmp_path / "repo")
    assert "'/opt/envs/t5.tar.gz' is an absolute path, outside the packaged model folder" in message


def test_package_refuses_what_check_refuses(tmp_path: Path) -> None:
    """The environment file itself is shipped by the same rules as every file: a link is refused by both."""
    folder = python_model(tmp_path / "repo", "$$TRITON_MODEL_DIRECTORY/env.tar.gz")
    (tmp_path / "real-env.tar.gz").write_bytes(conda_pack_like())
    os.symlink(tmp_path / "real-env.tar.gz", folder / "env.tar.gz")
    rules = {p.rule for p in check_repository(tmp_path / "repo")}
    assert rules == {"no-symlinks", "execution-env"}
    with pytest.raises(InvalidModelError, match=r"t5/env.tar.gz: is a symbolic link"):
        package_repository(tmp_path / "repo", tmp_path / "out")
