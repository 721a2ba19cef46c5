"""The locked requirements file of a python model's environment is read as pip reads it
(pip/_internal/req/req_file.py), so the lines checked are the lines pip installs."""

from __future__ import annotations

import pytest

from model_build.errors import InvalidModelError
from model_build.requirements_lock import (
    MAX_REQUIREMENTS_BYTES,
    read_locked_requirements,
    requirements_problems,
)

SHA = "0123abcd" * 8  # a real-length sha256 digest (64 hex digits)


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
def test_logical_lines_are_pip_s(text):
    """pip's req_file.py joins `\\` continuations (join_lines) before it strips comments (ignore_comments), with
    the backslashes stripped and nothing in between: the lock check must read the same lines."""
    from model_build.requirements_lock import _logical_lines

    assert _logical_lines(text) == pip_logical_lines(text)


def test_a_comment_ending_in_a_backslash_is_refused():
    """`numpy==1.26.4 # locked \\` + `pillow==12.0.0`: pip joins the continuation into the comment, so pillow is
    never installed; the check used to accept both lines."""
    found, problems = requirements_problems("numpy==1.26.4 # locked \\\npillow==12.0.0\n")
    assert [r.name for r in found] == ["numpy"]  # what pip installs
    assert problems == [
        "line 1: its comment ends in a backslash, so pip joins line 2 into the comment and ignores it; remove the "
        "backslash"
    ]


def test_a_tab_before_the_first_hash_is_refused_as_pip_refuses_it():
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
def test_hashes_have_their_algorithm_s_length(digest, expected):
    """sha256 is 64 hex digits, sha384 96, sha512 128 (pip's STRONG_HASHES, pip/_internal/utils/hashes.py)."""
    _, problems = requirements_problems(f"numpy==1.26.4 --hash={digest}\n")
    assert len(problems) == 1 and expected in problems[0], problems


def test_a_utf8_byte_order_mark_is_read_as_pip_reads_it(tmp_path):
    """pip's `_decode_req_file` drops a UTF-8 BOM; the check refused the file."""
    path = tmp_path / "requirements.txt"
    path.write_bytes(b"\xef\xbb\xbfnumpy==1.26.4\n")
    assert [r.name for r in read_locked_requirements(path)] == ["numpy"]
    path.write_bytes(b"# -*- coding: latin-1 -*-\nnumpy==1.26.4\n")
    with pytest.raises(InvalidModelError, match="declares coding 'latin-1', which pip would decode it with"):
        read_locked_requirements(path)


def test_the_oversize_message_is_a_whole_sentence(tmp_path):
    path = tmp_path / "requirements.txt"
    path.write_bytes(b"numpy==1.26.4\n" + b"#" * MAX_REQUIREMENTS_BYTES)
    with pytest.raises(InvalidModelError) as error:
        read_locked_requirements(path)
    assert str(error.value) == (
        f"{path}: larger than {MAX_REQUIREMENTS_BYTES} bytes; a locked requirements file is a few KB (one "
        "name==version line per package), so this is not one"
    )
