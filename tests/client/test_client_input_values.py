"""Values the client refuses instead of sending something else (issue 22 D).

- `--tensor NAME=BYTES:SHAPE:VALUES` with bytes that are not UTF-8: Linux hands them to Python as lone
  surrogates (PEP 383, os.fsdecode), which `str.encode()` refused with a UnicodeEncodeError traceback.
  BYTES values on the command line are text; binary data comes from a file (--raw, .npy).
- KServe v2 JSON (`--inputs-json`): Python's bool is an int and numpy turns null into nan, so `true`,
  `false` and `null` in a number tensor went out as 1, 0 and nan. The KServe v2 protocol's JSON tensor data
  holds numbers for number types and booleans for BOOL ("Tensor Data" of the REST protocol); the same rule
  as the local endpoint's front (request_check.json_value_test).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from endpoint_client.cli import main
from endpoint_client.errors import InvalidInputError
from endpoint_client.inputs import inputs_from_v2_json, load_v2_json_file, parse_tensor_spec


def request(datatype: str, data: list) -> dict:
    return {"inputs": [{"name": "X", "datatype": datatype, "shape": [len(data)], "data": data}]}


@pytest.mark.parametrize("raw", [b"X=BYTES:1:\xff\xfe", b"X=BYTES:2:ok,caf\xe9"])
def test_non_utf8_bytes_on_the_command_line_are_a_clean_error(raw: bytes) -> None:
    spec = os.fsdecode(raw)  # what sys.argv holds for these bytes

    with pytest.raises(InvalidInputError, match=r"is not UTF-8 text .*send binary data from a file instead"):
        parse_tensor_spec(spec)


def test_the_cli_says_so_without_a_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["invoke", "--url", "http://127.0.0.1:9", "--tensor", os.fsdecode(b"X=BYTES:1:\xff")])

    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    assert "ERROR: tensor 'X': value 1 is not UTF-8 text" in err


def test_utf8_text_is_sent_as_its_bytes() -> None:
    _, array = parse_tensor_spec("X=BYTES:2:café,ok")

    assert array.tolist() == ["café".encode(), b"ok"]


@pytest.mark.parametrize(
    ("datatype", "data", "shown"),
    [
        ("FP32", [1.0, True], "true"),
        ("FP32", [False], "false"),
        ("FP32", [None], "null"),
        ("INT32", [1, None], "null"),
        ("INT64", [True], "true"),
        ("UINT8", [False], "false"),
        ("FP16", ["1.5"], '"1.5"'),
        ("INT32", [1.7], "1.7"),  # was truncated to 1
        ("UINT8", [300], "300"),  # was wrapped to 44
        ("BOOL", [1], "1"),
        ("BOOL", [None], "null"),
        ("BYTES", [1], "1"),
    ],
)
def test_json_values_of_another_type_are_refused(datatype: str, data: list, shown: str) -> None:
    with pytest.raises(InvalidInputError, match=f"data holds {shown}, not a {datatype} value"):
        inputs_from_v2_json(request(datatype, data), "req.json")


def test_true_and_null_name_the_rule() -> None:
    with pytest.raises(InvalidInputError, match=r"true/false are for BOOL tensors; null is no value"):
        inputs_from_v2_json(request("FP32", [None]), "req.json")


def test_booleans_numbers_and_text_of_the_right_type_pass() -> None:
    tensors = inputs_from_v2_json(
        {
            "inputs": [
                {"name": "B", "datatype": "BOOL", "shape": [2], "data": [True, False]},
                {"name": "F", "datatype": "FP32", "shape": [2], "data": [1, 2.5]},
                {"name": "I", "datatype": "INT8", "shape": [2], "data": [-128, 127]},
                {"name": "S", "datatype": "BYTES", "shape": [1], "data": ["é"]},
            ]
        },
        "req.json",
    )

    assert tensors["B"].dtype == np.bool_ and tensors["B"].tolist() == [True, False]
    assert tensors["F"].tolist() == [1.0, 2.5] and tensors["I"].tolist() == [-128, 127]
    assert tensors["S"].tolist() == ["é".encode()]


def test_a_lone_surrogate_in_json_bytes_is_a_clean_error(tmp_path: Path) -> None:
    path = tmp_path / "req.json"
    path.write_text('{"inputs": [{"name": "X", "datatype": "BYTES", "shape": [1], "data": ["\\ud800"]}]}')

    with pytest.raises(InvalidInputError, match="value 1 is not UTF-8 text"):
        load_v2_json_file(path)


def test_the_cli_refuses_null_in_a_number_tensor(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "req.json"
    path.write_text(json.dumps(request("FP32", [1.0, None])))

    code = main(["invoke", "--url", "http://127.0.0.1:9", "--inputs-json", str(path)])

    assert code == 1 and "data holds null, not a FP32 value" in capsys.readouterr().err
