"""Regression tests for the hostile review of ensembles and Python execution environments.

Each test reproduces one finding (H1, M1-M11, LOW1-LOW13 of the review) and names the rule's source where
the rule is Triton's, the python backend's or pip's. The synth-level cases (a stage config refused at
`make synth`) are in tests/foundation/test_config_hostile.py.
"""

from __future__ import annotations

import gzip
import io
import os
import shutil
import signal
import stat
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
import yaml
from ensemble_fixtures import PRE_CONFIG, pipeline_repository, write_pipeline
from fakes import within
from google.protobuf import text_format
from model_fixtures import conda_pack_like
from pydantic import ValidationError
from tritonclient.grpc import model_config_pb2 as mc

from model_build import cli
from model_build.check import check_repository
from model_build.check.ensemble import MAX_ENSEMBLE_DEPTH, nesting_message
from model_build.check.environment import (
    MAX_UNPACK_RATIO,
    MAX_UNPACKED_BYTES,
    RATIO_FLOOR_BYTES,
    archive_problems,
)
from model_build.ensemble_config import build_ensemble_config, composing_closure, parse_composing
from model_build.errors import InvalidModelError, MissingToolError, ModelBuildError
from model_build.execution_env import parameter_block
from model_build.model_tree import MAX_CONFIG_BYTES, read_config_text
from model_build.package import EnvironmentOptions, package_repository
from model_build.preflight import preflight_problems
from model_build.python_env import cache_key, interpreter, packed_environment
from model_build.requirements_lock import (
    MAX_REQUIREMENTS_BYTES,
    read_locked_requirements,
    requirements_problems,
)
from model_build.settings import MAX_STEP_TENSORS, TENSOR_NAME_PATTERN, ModelSettings

PROJECT_ROOT = Path(__file__).resolve().parents[2]
SHA = "0123abcd" * 8  # a real-length sha256 digest (64 hex digits)


def run_cli(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """The real command line: its stderr is what a user sees (and any traceback)."""
    return subprocess.run(
        [sys.executable, "-m", "model_build", *argv], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=timeout
    )


def assert_one_error(result: subprocess.CompletedProcess, *expected: str) -> None:
    assert result.returncode == 1, result.stderr
    assert result.stderr.startswith("ERROR: "), result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    for text in expected:
        assert text in result.stderr, result.stderr


def stage_settings(stage: Path, name: str) -> ModelSettings:
    document = yaml.safe_load(stage.read_text())
    return ModelSettings.model_validate(next(m for m in document["models"] if m["name"] == name))


# --- H1: a python model's folder config against the stage settings and the instance type ---------------


def python_folder(root: Path, config: str, name: str = "pre") -> Path:
    folder = root / "models" / name
    (folder / "1").mkdir(parents=True)
    (folder / "1" / "model.py").write_text("class TritonPythonModel:\n    pass\n")
    (folder / "config.pbtxt").write_text(config)
    return folder


def python_settings(**fields) -> ModelSettings:
    return ModelSettings.model_validate(
        {"name": "pre", "platform": "python", "source": {"path": "models/pre"}, **fields}
    )


def test_h1_folder_config_is_checked_for_the_endpoint_s_instance_type(tmp_path):
    """The folder's config.pbtxt is what Triton loads: a KIND_GPU group there on a CPU instance type fails at load
    (core instance groups: no GPU), so it is refused at synth even though the stage says KIND_CPU (it did pass)."""
    python_folder(tmp_path, PRE_CONFIG.replace("KIND_CPU", "KIND_GPU"))
    settings = python_settings(
        max_batch_size=0, dynamic_batching={"enabled": False}, instance_groups=[{"count": 1, "kind": "KIND_CPU"}]
    )
    found = preflight_problems(settings, instance_type_name="ml.c5.xlarge", triton_release="24.09", base_dir=tmp_path)
    messages = dict(found)
    assert "models/pre/config.pbtxt fails check" in messages["source.path"]
    assert "KIND_GPU but no GPUs are available" in messages["source.path"]
    assert messages["instance_groups[0].kind"].startswith(
        "is KIND_CPU but models/pre/config.pbtxt has instance_group[0].kind KIND_GPU"
    )


def test_h1_folder_config_name_must_be_the_stage_model_name(tmp_path):
    """Triton: "unexpected directory name ... directory name must equal model name" (the folder is the stage's
    model name in the package)."""
    python_folder(tmp_path, PRE_CONFIG.replace('name: "pre"', 'name: "other"'))
    settings = python_settings(max_batch_size=0, dynamic_batching={"enabled": False})
    found = preflight_problems(settings, instance_type_name="ml.c5.xlarge", triton_release="24.09", base_dir=tmp_path)
    assert any("unexpected directory name 'pre' for model 'other'" in message for _, message in found), found


def test_h1_stage_values_that_contradict_the_folder_config_are_refused_naming_both(tmp_path):
    python_folder(tmp_path, PRE_CONFIG)  # max_batch_size 0, no dynamic_batching, one KIND_CPU instance
    settings = python_settings(
        max_batch_size=8,
        dynamic_batching={"max_queue_delay_microseconds": 50},
        instance_groups=[{"count": 2, "kind": "KIND_CPU"}],
    )
    found = dict(
        preflight_problems(settings, instance_type_name="ml.c5.xlarge", triton_release="24.09", base_dir=tmp_path)
    )
    assert found["max_batch_size"].startswith("is 8 but models/pre/config.pbtxt has max_batch_size 0")
    assert found["dynamic_batching.enabled"].startswith("is true but models/pre/config.pbtxt has dynamic_batching")
    assert found["instance_groups[0].count"].startswith(
        "is 2 but models/pre/config.pbtxt has instance_group[0].count 1"
    )
    assert "Triton loads the folder's config.pbtxt" in found["max_batch_size"]


def test_h1_keys_the_stage_leaves_out_are_the_folder_s_alone(tmp_path):
    python_folder(tmp_path, PRE_CONFIG)
    settings = python_settings(instance_groups=[{"kind": "KIND_CPU"}])  # count, batching: not stated
    assert (
        preflight_problems(settings, instance_type_name="ml.c5.xlarge", triton_release="24.09", base_dir=tmp_path) == []
    )


def test_h1_the_example_pipelines_agree_with_their_folders():
    for stage, name in (
        ("examples/config/ensemble.yaml", "image_preprocess"),
        ("examples/config/ensemble.yaml", "image_postprocess"),
        ("tests/configs/ensemblemme.yaml", "add_sub"),
    ):
        settings = stage_settings(PROJECT_ROOT / stage, name)
        found = preflight_problems(
            settings, instance_type_name="ml.g5.xlarge", triton_release="24.09", base_dir=PROJECT_ROOT
        )
        assert found == [], (stage, name, found)


# --- M1 / LOW6: the lock check reads the file as pip does -------------------------------------------------


def pip_logical_lines(text: str) -> list[tuple[int, str]]:
    """pip's own reading (pip/_internal/req/req_file.py `preprocess`: join_lines, ignore_comments, ...)."""
    from pip._internal.req.req_file import preprocess

    return list(preprocess(text))


@pytest.mark.parametrize(
    "text",
    [
        "numpy==1.26.4 # locked \\\npillow==12.0.0\n",
        f"numpy==1.26.4 \\\n    --hash=sha256:{SHA}\npillow==12.0.0\n",
        f"numpy==1.26.4\\\n--hash=sha256:{SHA}\n",
        "# comment \\\nnumpy==1.26.4\n",
        "numpy==1.26.4 \\\n# comment \\\npillow==12.0.0\n",
        "numpy==1.26.4 \\\n",
        "\\\\numpy==1.26.4\\\\\\\npillow==1\n",
        "numpy==1.26.4\r\npillow==12.0.0 #x\n",
    ],
)
def test_m1_logical_lines_are_pip_s(text):
    """pip's req_file.py joins `\\` continuations (join_lines) before it strips comments (ignore_comments), with
    the backslashes stripped and nothing in between: the lock check must read the same lines."""
    from model_build.requirements_lock import _logical_lines

    assert _logical_lines(text) == pip_logical_lines(text)


def test_m1_a_comment_ending_in_a_backslash_is_refused():
    """`numpy==1.26.4 # locked \\` + `pillow==12.0.0`: pip joins the continuation into the comment, so pillow is
    never installed; the check used to accept both lines."""
    found, problems = requirements_problems("numpy==1.26.4 # locked \\\npillow==12.0.0\n")
    assert [r.name for r in found] == ["numpy"]  # what pip installs
    assert problems == [
        "line 1: its comment ends in a backslash, so pip joins line 2 into the comment and ignores it; remove the "
        "backslash"
    ]


def test_low6_a_tab_before_the_first_hash_is_refused_as_pip_refuses_it():
    """pip's break_args_options splits the requirement from its options at spaces only (`line.split(" ")`), so
    `numpy==1.26.4<TAB>--hash=...` leaves the option in the requirement, which packaging refuses."""
    from packaging.requirements import InvalidRequirement, Requirement
    from pip._internal.req.req_file import break_args_options

    line = f"numpy==1.26.4\t--hash=sha256:{SHA}"
    requirement, _ = break_args_options(line)
    with pytest.raises(InvalidRequirement):
        Requirement(requirement)
    _, problems = requirements_problems(line + "\n")
    assert problems and "separate the requirement from its first --hash with spaces" in problems[0]
    # Between options any whitespace does (pip shlex-splits them).
    _, problems = requirements_problems(f"numpy==1.26.4 --hash=sha256:{SHA}\t--hash=sha256:{SHA}\n")
    assert problems == []


@pytest.mark.parametrize(
    ("digest", "expected"),
    [
        ("sha256:abc", "a sha256 hash is 64 hex digits, not 'abc' (3)"),
        ("sha256:" + "a" * 65, "a sha256 hash is 64 hex digits"),
        ("sha384:" + "a" * 64, "a sha384 hash is 96 hex digits"),
        ("md5:" + "a" * 32, "--hash md5: is not one pip accepts"),
    ],
)
def test_low6_hashes_have_their_algorithm_s_length(digest, expected):
    """sha256 is 64 hex digits, sha384 96, sha512 128 (pip's STRONG_HASHES, pip/_internal/utils/hashes.py)."""
    _, problems = requirements_problems(f"numpy==1.26.4 --hash={digest}\n")
    assert len(problems) == 1 and expected in problems[0], problems


def test_low6_a_utf8_byte_order_mark_is_read_as_pip_reads_it(tmp_path):
    """pip's `_decode_req_file` drops a UTF-8 BOM; the check refused the file."""
    path = tmp_path / "requirements.txt"
    path.write_bytes(b"\xef\xbb\xbfnumpy==1.26.4\n")
    assert [r.name for r in read_locked_requirements(path)] == ["numpy"]
    path.write_bytes(b"# -*- coding: latin-1 -*-\nnumpy==1.26.4\n")
    with pytest.raises(InvalidModelError, match="declares coding 'latin-1', which pip would decode it with"):
        read_locked_requirements(path)


def test_low6_the_oversize_message_is_a_whole_sentence(tmp_path):
    path = tmp_path / "requirements.txt"
    path.write_bytes(b"numpy==1.26.4\n" + b"#" * MAX_REQUIREMENTS_BYTES)
    with pytest.raises(InvalidModelError) as error:
        read_locked_requirements(path)
    assert str(error.value) == (
        f"{path}: larger than {MAX_REQUIREMENTS_BYTES} bytes; a locked requirements file is a few KB (one "
        "name==version line per package), so this is not one"
    )


def fake_python(folder: Path, pip: str) -> Path:
    """An interpreter stand-in: the real Python for everything but `-m pip`, which runs the shell `pip` given
    ($1... are pip's arguments; MARKS is a folder for what it records)."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "python"
    script.write_text(
        "#!/bin/bash\n"
        f'MARKS="{folder}"\n'
        'if [ "$1" = "-m" ] && [ "$2" = "pip" ]; then\n'
        "  shift 2\n"
        f"{pip}\n"
        "  exit $?\n"
        "fi\n"
        f'exec "{sys.executable}" "$@"\n'
    )
    script.chmod(0o755)
    return script


def test_low6_pip_installs_the_bytes_that_were_checked(tmp_path):
    """The file was read twice (the check, then the bytes for pip): changed in between, pip got unchecked pins.
    Here the interpreter, asked about itself after the check, rewrites the file; pip still gets the checked bytes."""
    requirements = tmp_path / "requirements.txt"
    checked = b"numpy==1.26.4\n"
    requirements.write_bytes(checked)
    marks = tmp_path / "py"
    python = fake_python(
        marks,
        'for a in "$@"; do if [ "$prev" = "-r" ]; then cp "$a" "$MARKS/seen.txt"; fi; prev="$a"; done\n'
        "  echo 'ERROR: stop here' >&2; exit 1",
    )
    # The facts query (`-I -c ...`) comes after the check: make it change the file first.
    text = python.read_text().replace(
        f'exec "{sys.executable}"', f'echo "evil==6.6.6" >> "{requirements}"\nexec "{sys.executable}"'
    )
    python.write_text(text)
    with pytest.raises(ModelBuildError, match="pip install"):
        packed_environment(requirements, str(python), cache_dir=tmp_path / "cache")
    assert requirements.read_bytes() != checked  # the file did change meanwhile
    assert (marks / "seen.txt").read_bytes() == checked


# --- M2: FIFOs and other special files never block a reader ------------------------------------------------


def test_m2_a_fifo_config_is_refused_by_every_reader(tmp_path):
    repo = tmp_path / "repo"
    (repo / "pre").mkdir(parents=True)
    os.mkfifo(repo / "pre" / "config.pbtxt")
    with within(10):
        with pytest.raises(InvalidModelError, match="is not a regular file"):
            read_config_text(repo / "pre" / "config.pbtxt")
        # package: the closure of the requested models reads every config first (pending_environments after it).
        with pytest.raises(InvalidModelError, match=r"config.pbtxt: is not a regular file .*nothing was packaged"):
            composing_closure(repo, ["pre"])
        with pytest.raises(ModelBuildError, match="is not a regular file"):
            package_repository(repo, tmp_path / "out")
        # check: reported as a problem of the folder.
        problems = [str(p) for p in check_repository(repo, configs_only=True)]
        assert any("is not a regular file or folder (device, FIFO or socket)" in p for p in problems), problems


def test_m2_synth_does_not_wait_on_a_fifo_config(tmp_path):
    """model_build.preflight read a python folder's config.pbtxt with read_text (for EXECUTION_ENV_PATH and an
    ensemble's composing configs): a FIFO there hung `make synth`."""
    python_folder(tmp_path, PRE_CONFIG)
    (tmp_path / "models" / "pre" / "config.pbtxt").unlink()
    os.mkfifo(tmp_path / "models" / "pre" / "config.pbtxt")
    settings = python_settings(environment={"requirements": "models/pre/requirements.txt"})
    with within(10):
        found = preflight_problems(
            settings, instance_type_name="ml.c5.xlarge", triton_release="24.09", base_dir=tmp_path
        )
    assert ("source.path", "models/pre/config.pbtxt: is not a regular file (a FIFO, device or socket); replace it "
            "with the file itself") in found, found  # fmt: skip


def test_m2_model_build_config_does_not_wait_on_a_fifo_composing_config(tmp_path):
    stage = write_pipeline(tmp_path)
    repo = pipeline_repository(tmp_path)
    (repo / "post" / "config.pbtxt").unlink()
    os.mkfifo(repo / "post" / "config.pbtxt")
    result = run_cli("config", "--config", str(stage), "--model", "pipe", "--repository", str(repo), timeout=30)
    assert_one_error(result, "post/config.pbtxt: is not a regular file")
    assert not (repo / "pipe").exists()


def test_m2_special_requirements_and_environment_files_do_not_block(tmp_path):
    os.mkfifo(tmp_path / "requirements.txt")
    with within(10):
        with pytest.raises(InvalidModelError, match="is not a regular file"):
            read_locked_requirements(tmp_path / "requirements.txt")
        os.mkfifo(tmp_path / "env.tar.gz")
        [message] = archive_problems(tmp_path / "env.tar.gz", "env.tar.gz")
        assert "not a regular file" in message


def test_m2_config_size_is_bounded(tmp_path):
    """Triton configs are a few KB; a bigger file is refused before the protobuf parser sees it."""
    repo = tmp_path / "repo"
    (repo / "m" / "1").mkdir(parents=True)
    (repo / "m" / "config.pbtxt").write_bytes(b'name: "m"\n' + b"#" * MAX_CONFIG_BYTES)
    [problem] = [p for p in check_repository(repo, configs_only=True) if p.field == "config.pbtxt"]
    assert problem.rule == "schema" and f"at most {MAX_CONFIG_BYTES} are read" in problem.message


# --- M4 / LOW13: what an environment archive may hold -------------------------------------------------------


def environment_archive(*members: tarfile.TarInfo | tuple[tarfile.TarInfo, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        activate = tarfile.TarInfo("bin/activate")
        activate.size = 2
        archive.addfile(activate, io.BytesIO(b"#\n"))
        for member in members:
            info, data = member if isinstance(member, tuple) else (member, None)
            archive.addfile(info, io.BytesIO(data) if data is not None else None)
    return buffer.getvalue()


def member(name: str, kind: bytes = tarfile.REGTYPE, *, link: str = "", mode: int = 0o644, data: bytes = b""):
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode = kind, link, mode
    if kind == tarfile.REGTYPE:
        info.size = len(data)
        return info, data
    return info


def judged(tmp_path: Path, archive: bytes) -> list[str]:
    path = tmp_path / "env.tar.gz"
    path.write_bytes(archive)
    return archive_problems(path, "env.tar.gz")


@pytest.mark.parametrize(
    ("members", "expected"),
    [
        ([member("lib/passwd", tarfile.LNKTYPE, link="/etc/passwd")], "is absolute"),
        ([member("lib/shadow", tarfile.LNKTYPE, link="../../etc/shadow")], "contains '..'"),
        (
            [member("lib/etc", tarfile.SYMTYPE, link="../.."), member("lib/x", tarfile.LNKTYPE, link="lib/etc/passwd")],
            "goes through a symbolic link of the archive",
        ),
        ([member("lib/x", tarfile.LNKTYPE, link="lib/later"), member("lib/later", data=b"x")], "stored before it"),
        ([member("lib", tarfile.DIRTYPE, mode=0o755), member("lib/x", tarfile.LNKTYPE, link="lib")], "stored before"),
        ([member("dev/sda", tarfile.BLKTYPE)], "is a block device"),
        ([member("dev/mem", tarfile.CHRTYPE)], "is a character device"),
        ([member("run/pipe", tarfile.FIFOTYPE)], "is a FIFO"),
        ([member("bin/su", mode=0o4755, data=b"x")], "is setuid (mode 4755)"),
        ([member("bin/sg", mode=0o2755, data=b"x")], "is setgid (mode 2755)"),
    ],
    ids=["hardlink-absolute", "hardlink-dotdot", "hardlink-through-symlink", "hardlink-forward", "hardlink-to-dir",
         "block-device", "char-device", "fifo", "setuid", "setgid"],
)  # fmt: skip
def test_m4_links_devices_and_privileged_files_are_refused(tmp_path, members, expected):
    """python_backend src/pb_env.cc extracts with libarchive (ARCHIVE_EXTRACT_SECURE_NODOTDOT,
    _NOABSOLUTEPATHS, _SYMLINKS); a hard link must name a regular file stored earlier in the archive (tar's own
    rule), and devices, FIFOs and setuid/setgid files have no place in an environment (our rule)."""
    messages = judged(tmp_path, environment_archive(*members))
    assert any(expected in message for message in messages), messages


def test_m4_a_hard_link_to_an_earlier_file_passes(tmp_path):
    archive = environment_archive(member("lib/a.so", data=b"x"), member("lib/b.so", tarfile.LNKTYPE, link="lib/a.so"))
    assert judged(tmp_path, archive) == []
    assert judged(tmp_path, conda_pack_like()) == []


def test_low13_declared_sizes_over_the_bound_are_refused_without_reading_them(tmp_path):
    """A header declaring more than MAX_UNPACKED_BYTES is refused as soon as it is read (the bytes are not there)."""
    huge = tarfile.TarInfo("lib/huge.bin")
    huge.size = MAX_UNPACKED_BYTES + 1
    path = tmp_path / "env.tar.gz"
    path.write_bytes(gzip.compress(huge.tobuf(tarfile.GNU_FORMAT)))
    [message] = archive_problems(path, "env.tar.gz")
    assert f"more than {MAX_UNPACKED_BYTES} bytes ({MAX_UNPACKED_BYTES >> 30} GiB) unpacked" in message


def test_low13_an_archive_bomb_is_refused_by_ratio(tmp_path):
    """The review's 9 MB archive unpacking to 2 GiB passed; zeros compress ~1000x, an environment 2-5x."""
    size = RATIO_FLOOR_BYTES + (16 << 20)
    path = tmp_path / "env.tar.gz"
    info = tarfile.TarInfo("lib/zeros.bin")
    info.size = size
    with path.open("wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=1) as out:
        activate = tarfile.TarInfo("bin/activate")
        out.write(activate.tobuf(tarfile.GNU_FORMAT))
        out.write(info.tobuf(tarfile.GNU_FORMAT))
        block = b"\0" * (1 << 20)
        for _ in range(size >> 20):
            out.write(block)
        out.write(b"\0" * 1024)
    assert path.stat().st_size * MAX_UNPACK_RATIO < size
    [message] = archive_problems(path, "env.tar.gz")
    assert f"unpacks to {size} bytes" in message and f"at most {MAX_UNPACK_RATIO}x" in message


# --- M6 / LOW8: the ensemble's interface and tensor names -------------------------------------------------------


def pipe_settings(**ensemble) -> dict:
    steps = [
        {"model": "pre", "input_map": {"image": "image"}, "output_map": {"pixels": "pixels"}},
        {"model": "cnn", "input_map": {"input": "pixels"}, "output_map": {"output": "logits"}},
        {"model": "post", "input_map": {"logits": "logits"}, "output_map": {"labels": "labels"}},
    ]
    return {"name": "pipe", "platform": "ensemble", "max_batch_size": 0, "ensemble": {"steps": steps, **ensemble}}


def test_m6_a_one_letter_typo_is_refused_not_made_an_input():
    document = pipe_settings()
    document["ensemble"]["steps"][2]["input_map"] = {"logits": "logit"}
    with pytest.raises(ValidationError) as error:
        ModelSettings.model_validate(document)
    assert (
        "steps[2].input_map reads 'logit', which no step writes, so it would become an ensemble input; steps[1] "
        "writes 'logits'"
    ) in str(error.value)


def test_m6_a_declared_interface_must_be_what_the_steps_make():
    document = pipe_settings(inputs=["image"], outputs=["labels"])
    settings = ModelSettings.model_validate(document)
    assert (settings.ensemble.inputs, settings.ensemble.outputs) == (["image"], ["labels"])
    assert ModelSettings.model_validate(settings.model_dump(mode="json")) == settings  # the build's document
    document["ensemble"]["steps"][2]["input_map"] = {"logits": "logit"}
    with pytest.raises(ValidationError, match=r"the steps also make \['logit'\] an ensemble input"):
        ModelSettings.model_validate(document)
    # Declared on purpose, an input near a written tensor is accepted, and the declared order is the config's.
    document["ensemble"]["inputs"] = ["logit", "image"]
    document["ensemble"]["outputs"] = ["labels", "logits"]
    assert ModelSettings.model_validate(document).ensemble.inputs == ["logit", "image"]


def test_m6_undeclared_ensembles_dump_as_before():
    """No `inputs`/`outputs` key appears in the build document of an ensemble that does not declare them, so
    its artifact digest is unchanged."""
    assert set(ModelSettings.model_validate(pipe_settings()).model_dump(mode="json")["ensemble"]) == {"steps"}


@pytest.mark.parametrize("name", ["a\x00b", "a\nb", " ", "\t", "x y", "\x7f"])
def test_low8_tensor_names_without_control_characters_or_whitespace(name):
    document = pipe_settings()
    document["ensemble"]["steps"][0]["input_map"] = {"image": name}
    with pytest.raises(ValidationError) as error:
        ModelSettings.model_validate(document)
    assert f"String should match pattern '{TENSOR_NAME_PATTERN}'" in str(error.value)


# --- M9 / LOW1: `model_build config` writes only into the repository's own folders --------------------------


def test_m9_a_symlinked_model_folder_is_refused_and_nothing_is_written_outside(tmp_path):
    stage = write_pipeline(tmp_path)
    repo = pipeline_repository(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (repo / "pipe").symlink_to(outside)
    result = run_cli("config", "--config", str(stage), "--model", "pipe", "--repository", str(repo))
    assert_one_error(result, "pipe: is a symbolic link", "nothing was written")
    assert list(outside.iterdir()) == []
    # A python model with `environment:` (EXECUTION_ENV_PATH is added to its config) too.
    shutil.move(repo / "pre", outside / "pre")
    (repo / "pre").symlink_to(outside / "pre")
    before = (outside / "pre" / "config.pbtxt").read_bytes()
    result = run_cli("config", "--config", str(stage), "--model", "pre", "--repository", str(repo))
    assert_one_error(result, "pre: is a symbolic link")
    assert (outside / "pre" / "config.pbtxt").read_bytes() == before


@pytest.mark.parametrize(("path", "make"), [("1", "file"), ("config.pbtxt", "folder")])
def test_low1_a_version_file_or_a_config_folder_is_a_clear_error(tmp_path, path, make):
    stage = write_pipeline(tmp_path)
    repo = pipeline_repository(tmp_path)
    (repo / "pipe").mkdir()
    if make == "file":
        (repo / "pipe" / path).write_text("")
    else:
        (repo / "pipe" / path).mkdir()
    result = run_cli("config", "--config", str(stage), "--model", "pipe", "--repository", str(repo))
    assert_one_error(result, f"pipe/{path}: is not a", "nothing was written")


# --- M10: check is linear in the tensors of a hand-written ensemble ---------------------------------------------


def hand_written_ensemble(root: Path, tensors: int, steps: int = 1) -> Path:
    model = mc.ModelConfig(name="m", backend="python", max_batch_size=0)
    for i in range(tensors):
        model.input.add(name=f"in{i}", data_type=mc.TYPE_FP32, dims=[1])
        model.output.add(name=f"out{i}", data_type=mc.TYPE_FP32, dims=[1])
    model.instance_group.add(kind=mc.ModelInstanceGroup.KIND_CPU, count=1)
    ensemble = mc.ModelConfig(name="e", platform="ensemble", max_batch_size=0)
    for i in range(tensors):
        ensemble.input.add(name=f"t0_{i}", data_type=mc.TYPE_FP32, dims=[1])
        ensemble.output.add(name=f"t{steps}_{i}", data_type=mc.TYPE_FP32, dims=[1])
    for s in range(steps):
        step = ensemble.ensemble_scheduling.step.add(model_name="m", model_version=-1)
        for i in range(tensors):
            step.input_map[f"in{i}"] = f"t{s}_{i}"
            step.output_map[f"out{i}"] = f"t{s + 1}_{i}"
    for config in (model, ensemble):
        (root / config.name).mkdir(parents=True)
        (root / config.name / "config.pbtxt").write_text(text_format.MessageToString(config))
    return root


def test_m10_a_step_over_the_tensor_limit_is_refused_fast(tmp_path):
    """N=4000 inputs took 77 s and 600 MB (a map scan per input, every output linked to every input)."""
    repo = hand_written_ensemble(tmp_path / "repo", 4000)
    started = time.monotonic()
    problems = check_repository(repo, configs_only=True)
    assert time.monotonic() - started < 15
    assert [(p.field, p.rule) for p in problems] == [("ensemble_scheduling.step[0].input_map", "ensemble-mapping")]
    assert f"maps 4000 tensors in its input_map; at most {MAX_STEP_TENSORS} are checked" in problems[0].message


def test_m10_steps_at_the_limit_are_checked_in_linear_time(tmp_path):
    """16 steps of 256 inputs and 256 outputs each: 65,536 input-output pairs per step for Triton's graph."""
    repo = hand_written_ensemble(tmp_path / "repo", MAX_STEP_TENSORS, steps=16)
    started = time.monotonic()
    assert check_repository(repo, configs_only=True) == []
    assert time.monotonic() - started < 15


# --- LOW9: one nesting limit ----------------------------------------------------------------------------------


def ensemble_chain(root: Path, length: int) -> Path:
    """e0 -> e1 -> ... -> e<length-1> -> m: `length` nested ensembles over one python model."""
    model = mc.ModelConfig(name="m", backend="python", max_batch_size=0)
    model.input.add(name="x", data_type=mc.TYPE_FP32, dims=[1])
    model.output.add(name="y", data_type=mc.TYPE_FP32, dims=[1])
    model.instance_group.add(kind=mc.ModelInstanceGroup.KIND_CPU, count=1)
    configs = [model]
    for i in range(length):
        ensemble = mc.ModelConfig(name=f"e{i}", platform="ensemble", max_batch_size=0)
        ensemble.input.add(name="x", data_type=mc.TYPE_FP32, dims=[1])
        ensemble.output.add(name="y", data_type=mc.TYPE_FP32, dims=[1])
        step = ensemble.ensemble_scheduling.step.add(model_name=f"e{i + 1}" if i + 1 < length else "m")
        step.model_version = -1
        step.input_map["x"] = "x"
        step.output_map["y"] = "y"
        configs.append(ensemble)
    for config in configs:
        (root / config.name / "1").mkdir(parents=True)
        (root / config.name / "config.pbtxt").write_text(text_format.MessageToString(config))
    return root


def test_low9_check_and_package_share_one_nesting_limit(tmp_path):
    deep = ensemble_chain(tmp_path / "deep", MAX_ENSEMBLE_DEPTH + 1)
    problems = [p for p in check_repository(deep, configs_only=True) if p.rule == "ensemble-depth"]
    assert [(p.model, p.message) for p in problems] == [("e0", nesting_message("e0"))]
    with pytest.raises(InvalidModelError) as error:
        composing_closure(deep, ["e0"])
    assert str(error.value).endswith(nesting_message("e0"))
    limit = ensemble_chain(tmp_path / "limit", MAX_ENSEMBLE_DEPTH)
    assert not [p for p in check_repository(limit, configs_only=True) if p.rule == "ensemble-depth"]
    assert len(composing_closure(limit, ["e0"])) == MAX_ENSEMBLE_DEPTH + 1


def test_low9_a_long_chain_does_not_exhaust_the_recursion_limit(tmp_path):
    repo = ensemble_chain(tmp_path / "repo", 1100)  # deeper than Python's recursion limit (1000)
    problems = check_repository(repo, configs_only=True)
    assert any(p.rule == "ensemble-depth" and p.model == "e0" for p in problems)


# --- LOW10: a batched ensemble over unbatched steps ---------------------------------------------------------


def test_low10_the_batch_size_is_named_as_the_cause():
    """Triton takes an unbatched model's first dim as the batching ensemble's batch axis (core ensemble_utils.cc
    ValidateTensorConsistency compares the full shapes); with a single dim nothing is left for the ensemble."""
    document = pipe_settings()
    document["max_batch_size"] = 8
    settings = ModelSettings.model_validate(document)
    composing = {"pre": parse_composing(PRE_CONFIG, "pre", "pre/config.pbtxt")}
    composing["cnn"] = parse_composing(
        'name: "cnn"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 0\n'
        'input [{name: "input" data_type: TYPE_FP32 dims: [1, 3]}]\n'
        'output [{name: "output" data_type: TYPE_FP32 dims: [1, 3]}]\n',
        "cnn",
        "cnn/config.pbtxt",
    )
    composing["post"] = parse_composing(PRE_CONFIG.replace('"pre"', '"post"'), "post", "post/config.pbtxt")
    with pytest.raises(InvalidModelError) as error:
        build_ensemble_config(settings, composing)
    assert error.value.step == 0 and error.value.field == "input_map"
    assert "ensemble 'pipe' batches (max_batch_size 8) but steps[0]'s model 'pre' does not" in str(error.value)
    assert "must specify 'dims'" not in str(error.value)


# --- LOW3 / LOW4 / LOW5: the interpreter, the cache folder, damaged cache entries ---------------------------------


def test_low3_an_interpreter_that_is_not_python_is_a_clear_error():
    with pytest.raises(MissingToolError, match=r"/bin/echo: did not answer as a Python 3 interpreter"):
        interpreter("/bin/echo")


def python_env_repository(tmp_path: Path) -> Path:
    """REPO/pre: a python model whose EXECUTION_ENV_PATH names the environment `package` packs."""
    write_pipeline(tmp_path)
    repo = tmp_path / "repo"
    shutil.copytree(tmp_path / "models" / "pre", repo / "pre")
    config = repo / "pre" / "config.pbtxt"
    config.write_text(config.read_text() + parameter_block("$$TRITON_MODEL_DIRECTORY/python_env.tar.gz"))
    (repo / "pre" / "requirements.txt").write_text("numpy==1.26.4\n")
    return repo


def test_low3_on_the_command_line(tmp_path):
    repo = python_env_repository(tmp_path)
    result = run_cli("package", str(repo), "--out", str(tmp_path / "out"), "--environment-python", "/bin/echo",
                     "--environment-cache", str(tmp_path / "cache"))  # fmt: skip
    assert_one_error(result, "did not answer as a Python 3 interpreter")
    assert len(result.stderr.splitlines()) == 1


def test_low4_a_cache_inside_the_repository_is_refused(tmp_path):
    repo = python_env_repository(tmp_path)
    options = EnvironmentOptions(python=sys.executable, cache_dir=repo / "pre" / "cache")
    with pytest.raises(ModelBuildError, match="lies inside the repository being packaged"):
        package_repository(repo, tmp_path / "out", environments=options)
    assert not (repo / "pre" / "cache").exists() and not (tmp_path / "out").exists()


@pytest.mark.parametrize("damage", ["empty", "garbage", "symlink", "folder"])
def test_low5_a_damaged_cache_entry_is_named_discarded_and_rebuilt(tmp_path, capsys, damage):
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("numpy==1.26.4\n")
    python = fake_python(tmp_path / "py", "  exit 0")  # pip installs nothing: a valid (empty) environment
    cache = tmp_path / "cache"
    cache.mkdir()
    entry = cache / f"{cache_key(requirements.read_bytes(), interpreter(str(python)))}.tar.gz"
    victim = tmp_path / "victim.tar.gz"
    victim.write_bytes(b"do not touch")
    if damage == "empty":
        entry.write_bytes(b"")
    elif damage == "garbage":
        entry.write_bytes(b"\x1f\x8bnot really gzip")
    elif damage == "symlink":
        entry.symlink_to(victim)
    else:
        entry.mkdir()
    archive = packed_environment(requirements, str(python), cache_dir=cache)
    assert archive == entry and entry.is_file() and not entry.is_symlink()
    assert archive_problems(entry, entry.name) == []
    note = capsys.readouterr().err
    assert f"note: {entry}: damaged cache entry" in note and "discarded, packing it again" in note
    assert victim.read_bytes() == b"do not touch"
    assert packed_environment(requirements, str(python), cache_dir=cache) == entry  # now used as it is
    assert capsys.readouterr().err == ""


# --- M11: SIGTERM during package --------------------------------------------------------------------------------


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError, ProcessLookupError):
        return False
    return state != "Z"


def wait_for(predicate, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.01)


def start_package(repo: Path, out: Path, python: Path, cache: Path) -> subprocess.Popen:
    argv = [sys.executable, "-m", "model_build", "package", str(repo), "--out", str(out),
            "--environment-python", str(python), "--environment-cache", str(cache)]  # fmt: skip
    return subprocess.Popen(argv, cwd=PROJECT_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_m11_sigterm_during_pip_ends_pip_and_leaves_nothing(tmp_path):
    """SIGTERM used to end the CLI on the spot: pip (and what pip started) kept running, the `python-env-*` work
    folder stayed in the cache. Now it is handled like Ctrl-C: pip's process group is killed and every `finally`
    runs. pip here sleeps in a child of its own, as pip's `--python` re-execution does."""
    repo = python_env_repository(tmp_path)
    marks = tmp_path / "py"
    python = fake_python(marks, '  echo $$ > "$MARKS/pip.pid"\n  sleep 600 &\n  echo $! > "$MARKS/child.pid"\n  wait')
    cache, out = tmp_path / "cache", tmp_path / "out"
    process = start_package(repo, out, python, cache)
    try:
        wait_for(lambda: (marks / "child.pid").is_file() and (marks / "child.pid").read_text().strip())
        pip, child = (int((marks / name).read_text()) for name in ("pip.pid", "child.pid"))
        assert list(cache.glob("python-env-*"))  # the work folder exists while pip runs
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 128 + signal.SIGTERM, stderr
    assert stderr.startswith("ERROR: terminated (SIGTERM)") and "Traceback" not in stderr, stderr
    wait_for(lambda: not alive(pip) and not alive(child), 10)
    assert list(cache.iterdir()) == []
    assert not out.exists() or list(out.iterdir()) == []


def test_m11_sigterm_while_an_archive_is_written_removes_the_temporary_file(tmp_path):
    """The environment archive (and the package) are written to `.<name>.<random>.tmp` beside the target
    (model_build.atomic): interrupted, the temporary file is removed, the target never appears.

    The packer is stopped (SIGSTOP) as soon as the temporary file appears and signalled only while the file is
    still there, so a loaded machine cannot let the write finish first; if it did anyway, the run is repeated."""
    for attempt in range(3):
        work = tmp_path / str(attempt)
        repo = python_env_repository(work)
        # pip "installs" 192 MiB of random bytes (stored, not deflated): writing the archive takes a while.
        # Its arguments: --python <env>/bin/python install|check ...
        python = fake_python(
            work / "py",
            '  env="$(dirname "$(dirname "$2")")"\n'
            '  if [ "$3" = install ]; then head -c 201326592 /dev/urandom > "$env/lib/big.bin"; fi\n'
            "  exit 0",
        )
        cache, out = work / "cache", work / "out"
        process = start_package(repo, out, python, cache)
        try:
            wait_for(lambda: list(cache.glob(".*.tar.gz.*.tmp")), 120)  # noqa: B023 (called in this iteration)
            process.send_signal(signal.SIGSTOP)
            mid_write = bool(list(cache.glob(".*.tar.gz.*.tmp")))
            process.send_signal(signal.SIGTERM)
            process.send_signal(signal.SIGCONT)
            _, stderr = process.communicate(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
        if mid_write:
            break
    assert mid_write, "the archive was written before the signal in every attempt"
    assert process.returncode == 128 + signal.SIGTERM, stderr
    assert "Traceback" not in stderr, stderr
    assert list(cache.iterdir()) == []  # no temporary archive, no work folder, no half entry
    assert not out.exists() or list(out.iterdir()) == []


def test_m11_the_handler_is_the_cli_s_only_while_a_command_runs():
    before = signal.getsignal(signal.SIGTERM)
    assert cli.main(["check", str(PROJECT_ROOT / "examples" / "models"), "--configs-only"]) == 0
    assert signal.getsignal(signal.SIGTERM) == before


# --- the stand-in interpreter the tests above rely on ------------------------------------------------------------


def test_the_fake_interpreter_is_a_real_python_to_the_packer(tmp_path):
    python = fake_python(tmp_path / "py", "  exit 0")
    assert interpreter(str(python)).facts == interpreter(sys.executable).facts
    assert stat.S_IMODE(python.stat().st_mode) & 0o100
