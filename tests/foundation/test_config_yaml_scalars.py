"""Scalars YAML builds but no configuration can hold: refused with file, field and line, never a traceback.

Sources: YAML 1.1's timestamp type (PyYAML resolves an unquoted `2024-02-30` to a date and its constructor
raises ValueError for an impossible one); PyYAML's SafeConstructor (`!!int abc`, `!!bool maybe`, `0x_` raise
ValueError/KeyError); a NUL ends a C string (os.stat: "embedded null byte"; execve's environment); a lone
surrogate cannot be encoded as UTF-8 (Python's str.encode; CloudFormation templates are UTF-8 JSON).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from config_edits import refusal
from synth_helpers import shipped_path

from stage_config.pipeline import load_pipeline_config

DEV_TEXT = shipped_path("config/dev.yaml").read_text()  # as shipped (`emails: []`), whatever the user set


def _dev_with(tmp_path: Path, old: str, new: str) -> Path:
    assert old in DEV_TEXT
    path = tmp_path / "dev.yaml"
    path.write_text(DEV_TEXT.replace(old, new, 1))
    return path


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ('triton_release: "24.09"', "triton_release: 2024-02-30", "triton_release: '2024-02-30' reads as a YAML date"),
        ("  emails: []", "  emails: [2024-13-01]", "notifications.emails[0]: '2024-13-01' reads as a YAML date"),
        ("max_batch_size: 32", "max_batch_size: 2024-01-01T25:00:00", "models[0].max_batch_size: '2024-01-01T25"),
        ("max_batch_size: 32", "max_batch_size: !!int abc", "models[0].max_batch_size: 'abc' cannot be read as !!int"),
        ("max_batch_size: 32", "max_batch_size: !!float x", "models[0].max_batch_size: 'x' cannot be read as !!float"),
        ("max_batch_size: 32", "max_batch_size: !!bool maybe", "'maybe' cannot be read as !!bool"),
        ("max_batch_size: 32", "max_batch_size: !!timestamp soon", "'soon' reads as a YAML date but is not one"),
        ("max_batch_size: 32", "max_batch_size: !!int ''", "cannot be read as !!int"),
        ("max_batch_size: 32", "max_batch_size: 0x_", "'0x_' cannot be read as !!int"),
        ("max_batch_size: 32", "max_batch_size: !!null 32", "'32' is tagged !!null but is not null"),
    ],
)
def test_unreadable_scalars_are_refused_with_field_and_line(tmp_path, old, new, expected):
    """An impossible unquoted date, or a scalar its explicit tag cannot read, anywhere in the file."""
    message = refusal(_dev_with(tmp_path, old, new))
    assert expected in message, message
    assert message.count("\n") == 0 and "(line " in message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('"a\\0b"', "the value holds a NUL character"),
        ('"\\ud800"', "the value holds a lone surrogate (\\ud800)"),
        ('"ok\\udfffok"', "the value holds a lone surrogate (\\udfff)"),
    ],
)
def test_nul_and_lone_surrogates_are_refused_anywhere(tmp_path, text, expected):
    """In a container variable, an e-mail address and a model's source path: one rule for every string."""
    path = _dev_with(
        tmp_path,
        "      latency_p99_ms: 500",
        f"      latency_p99_ms: 500\n    container: {{extra_environment: {{A: {text}}}}}",
    )
    message = refusal(path)
    assert f"endpoints[0].container.extra_environment.A: {expected}" in message, message
    message = refusal(_dev_with(tmp_path, "  emails: []", f"  emails: [{text}]"))
    assert f"notifications.emails[0]: {expected}" in message, message
    message = refusal(_dev_with(tmp_path, "source: {export: resnet50}", f"source: {{path: {text}}}"))
    assert f"models[0].source.path: {expected}" in message, message


def test_a_key_with_a_surrogate_is_named(tmp_path):
    path = _dev_with(tmp_path, "  emails: []", '  emails: []\n  "x\\ud800": 1')
    assert "notifications.'x\\ud800': the key holds a lone surrogate" in refusal(path)


def test_every_problem_of_this_kind_is_listed_at_once(tmp_path):
    path = _dev_with(tmp_path, "  emails: []", '  emails: ["\\0", "\\ud801"]')
    lines = refusal(path).splitlines()
    assert [line.split(": ")[1] for line in lines] == ["notifications.emails[0]", "notifications.emails[1]"]


def test_the_pipeline_file_gets_the_same_rules(tmp_path):
    text = shipped_path("config/pipeline.yaml").read_text().replace("branch: main", 'branch: "ma\\0in"')
    (tmp_path / "pipeline.yaml").write_text(text)
    with pytest.raises(Exception) as refused:
        load_pipeline_config(tmp_path / "pipeline.yaml")
    assert type(refused.value).__name__ == "ConfigError"
    assert "source.branch: the value holds a NUL character" in str(refused.value)
    shipped = shipped_path("config/pipeline.yaml").read_text()
    text = shipped.replace("max_latency_ms: 2000", "max_latency_ms: 2026-02-29")
    (tmp_path / "pipeline.yaml").write_text(text)
    with pytest.raises(Exception, match=r"smoke\.max_latency_ms: '2026-02-29' reads as a YAML date"):
        load_pipeline_config(tmp_path / "pipeline.yaml")
