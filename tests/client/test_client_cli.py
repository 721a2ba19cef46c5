"""`python -m endpoint_client`: exit codes and messages of refusals, without a server."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from endpoint_client.cli import format_report, main, save_outputs
from endpoint_client.local_endpoint import free_port

URL = "http://127.0.0.1:1"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ((), "the following arguments are required: COMMAND"),
        (("invoke", "--tensor", "A=FP32:1:1"), "one of the arguments --endpoint-name --url is required"),
        (("invoke", "--url", "http://127.0.0.1:1", "--endpoint-name", "e"), "not allowed with argument"),
        (("invoke", "--url", "http://127.0.0.1:1", "--attempts", "0"), "'0' is not a whole number >= 1"),
        (("local", "--env", "NOEQUALS"), "'NOEQUALS' is not KEY=VALUE"),
        (("invoke", "--url", URL, "--inference-component", "add_sub"), "'add_sub' is not an inference component name"),
        (
            ("invoke", "--url", URL, "--target-model", "m.tar.gz", "--inference-component", "c"),
            "argument --inference-component: not allowed with argument --target-model",
        ),
    ],
)
def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], message: str) -> None:
    with pytest.raises(SystemExit) as raised:
        main(list(argv))
    assert raised.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("invoke", "--url", URL), "ERROR: no inputs given"),
        (("invoke", "--url", URL, "--tensor", "INPUT0=FP32:1x4:1,2"), "ERROR: tensor 'INPUT0': 2 values do not fill"),
        (("invoke", "--url", URL, "--preset", "resnet50"), "ERROR: --preset resnet50 takes --image (and no --text)"),
        (("invoke", "--url", URL, "--preset", "bert_base"), "ERROR: --preset bert_base takes --text (and no --image)"),
        (("invoke", "--url", URL, "--text", "hi"), "ERROR: --image and --text go with --preset"),
        (
            ("invoke", "--url", URL, "--tensor", "A=FP32:1:1", "--rename", "B=C"),
            "ERROR: --rename B=C: there is no input 'B' (inputs: A)",
        ),
        (("invoke", "--url", "127.0.0.1:8080", "--tensor", "A=FP32:1:1"), "ERROR: --url must look like http://"),
        (("local",), "ERROR: give an ARCHIVE, or --multi-model"),
        (("local", "x.tar.gz", "--load", "a=b"), "ERROR: --load is for --multi-model endpoints"),
        (("local", "--multi-model", "--inference-component", "c"), "ERROR: --inference-component is for single-model"),
        (("invoke", "--url", URL, "--raw", "x=/nonexistent"), "ERROR: input 'x': cannot read /nonexistent"),
        (("invoke", "--url", URL, "--raw", "x=a", "--raw-shape", "2"), "ERROR: --raw-shape 2 holds 2 elements, not 1"),
        (("local", "--multi-model", "--triton-env", "/nonexistent"), "ERROR: no Triton server in /nonexistent"),
        (("local", "missing.tar.gz"), "ERROR: archive missing.tar.gz does not exist"),
    ],
)
def test_user_errors_exit_1_with_a_message(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], message: str
) -> None:
    code, out, err = run(capsys, *argv)

    assert code == 1
    assert err.startswith(message)
    assert out == ""


def test_an_unreachable_endpoint_is_reported(capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there

    code, _, err = run(capsys, "invoke", "--url", url, "--tensor", "A=FP32:1:1")

    assert code == 1
    assert err.startswith(f"ERROR: model 'default model at {url}': cannot reach {url}/invocations: ")
    assert "(is `make local` running?)" in err


def test_report_prints_small_outputs_whole_and_large_ones_cut(tmp_path: Path) -> None:
    outputs = {"small": np.array([[1.5, 2.5]], dtype=np.float32), "big": np.arange(100, dtype=np.int64)}

    report = format_report("add_sub", outputs)

    assert report.splitlines()[3] == '    "small": {"dtype": "float32", "shape": [1, 2], "data": [1.5, 2.5]},'
    assert '"big": {"dtype": "int64", "shape": [100], "first_64": [0, 1, 2,' in report
    save_outputs(outputs, tmp_path / "out")
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "big.npy"), outputs["big"])
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["big.npy", "small.npy"]


def test_a_missing_region_is_reported(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/config")  # no region from a profile either

    code, _, err = run(capsys, "invoke", "--endpoint-name", "my-endpoint", "--tensor", "A=FP32:1:1")

    assert code == 1
    assert err.startswith("ERROR: endpoint my-endpoint: You must specify a region. (give --region or set AWS_REGION)")


def test_the_pillow_hint_is_one_text_in_the_cli_the_readme_and_the_docs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue #27 item 6: the CLI's hint installs pyproject.toml's optional extra `images` (Pillow), and README.md and
    docs/client-and-local-endpoint.md give the same command."""
    import sys
    import tomllib

    from endpoint_client.errors import InvalidInputError
    from endpoint_client.presets import PILLOW_INSTALL_HINT, load_image

    root = Path(__file__).resolve().parents[2]
    extras = tomllib.loads((root / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert PILLOW_INSTALL_HINT == ".venv/bin/pip install -e '.[images]'"
    assert any(requirement.lower().startswith("pillow") for requirement in extras["images"])
    for page in (root / "README.md", root / "docs" / "client-and-local-endpoint.md"):
        assert PILLOW_INSTALL_HINT in page.read_text(), page
    monkeypatch.setitem(sys.modules, "PIL", None)  # `from PIL import Image` raises ImportError
    image = tmp_path / "cat.jpg"
    image.write_bytes(b"\xff\xd8\xff\xe0 not really a jpeg")
    with pytest.raises(InvalidInputError, match=re.escape(f"needs Pillow (`{PILLOW_INSTALL_HINT}`)")):
        load_image(image)
