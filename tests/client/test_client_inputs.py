"""Input loaders (.npy/.npz, inline tensor specs, KServe v2 JSON) and the default models' presets."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from endpoint_client import presets
from endpoint_client.errors import InvalidInputError
from endpoint_client.inputs import (
    inputs_from_v2_json,
    load_array_file,
    load_v2_json_file,
    merge,
    parse_tensor_spec,
)


def test_tensor_spec_gives_dtype_shape_and_values() -> None:
    name, array = parse_tensor_spec("INPUT0=FP32:2x2:1,2,3.5,4")

    assert name == "INPUT0"
    assert array.dtype == np.float32
    np.testing.assert_array_equal(array, [[1, 2], [3.5, 4]])


def test_tensor_spec_keeps_int64_exact_and_reads_bool_and_bytes() -> None:
    assert parse_tensor_spec("X=INT64:1:9007199254740993")[1][0] == 9007199254740993
    np.testing.assert_array_equal(parse_tensor_spec("B=BOOL:3:true,0,False")[1], [True, False, False])
    assert parse_tensor_spec("S=BYTES:1x2:hi,there")[1].tolist() == [[b"hi", b"there"]]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("INPUT0", r"'INPUT0' is not NAME=\.\.\. \(example: INPUT0=FP32:1x4:1,2,3,4\)"),
        ("INPUT0=FP32:1x4", "is not DTYPE:SHAPE:VALUES"),
        ("INPUT0=FLOAT:1:1", "unknown datatype 'FLOAT'; use one of BOOL, UINT8"),
        ("INPUT0=FP32:1x4:1,2,3", r"3 values do not fill shape \[1, 4\] \(4 needed\)"),
        ("INPUT0=INT32:2:1.5,2", "values '1.5,2' are not all INT32 numbers"),
        ("INPUT0=FP32:ax4:1", "shape 'ax4' is not dimensions joined by 'x'"),
        ("INPUT0=BOOL:1:yes", "BOOL values must be true/false/1/0"),
    ],
)
def test_bad_tensor_specs_are_refused(spec: str, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        parse_tensor_spec(spec)


def test_npy_and_npz_files(tmp_path: Path) -> None:
    np.save(tmp_path / "a.npy", np.arange(4, dtype=np.float32))
    np.savez(tmp_path / "both.npz", INPUT0=np.ones(2, np.float32), INPUT1=np.zeros(2, np.int8))

    assert list(load_array_file(f"INPUT0={tmp_path / 'a.npy'}")) == ["INPUT0"]
    both = load_array_file(str(tmp_path / "both.npz"))
    assert sorted(both) == ["INPUT0", "INPUT1"]
    assert both["INPUT1"].dtype == np.int8


def test_bad_array_files_are_refused(tmp_path: Path) -> None:
    (tmp_path / "broken.npy").write_bytes(b"not numpy")
    with pytest.raises(InvalidInputError, match=r"input 'X': .*broken\.npy is not a readable \.npy file"):
        load_array_file(f"X={tmp_path / 'broken.npy'}")
    with pytest.raises(InvalidInputError, match=r"data\.csv is not a \.npy file"):
        load_array_file("X=data.csv")


def test_kserve_v2_json_request(tmp_path: Path) -> None:
    request = {
        "inputs": [
            {"name": "INPUT0", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]},
            {"name": "TEXT", "datatype": "BYTES", "shape": [1], "data": ["hello"]},
        ]
    }
    path = tmp_path / "request.json"
    path.write_text(json.dumps(request))

    tensors = load_v2_json_file(path)

    assert tensors["INPUT0"].dtype == np.float32
    assert tensors["INPUT0"].shape == (1, 4)
    assert tensors["TEXT"].tolist() == [b"hello"]


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ([1, 2], "expected a KServe v2 request"),
        ({"inputs": [{"name": "A", "shape": [1]}]}, r"inputs\[0\] lacks datatype, data"),
        (
            {"inputs": [{"name": "A", "datatype": "INT8", "shape": [2], "data": [1, "x"]}]},
            'data holds "x", not a INT8 value',
        ),
        ({"inputs": [{"name": "A", "datatype": "FP32", "shape": [3], "data": [1]}]}, "1 values do not fill shape"),
    ],
)
def test_bad_v2_json_is_refused(document: object, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        inputs_from_v2_json(document, "request.json")


def test_invalid_json_file_is_refused_with_its_path(tmp_path: Path) -> None:
    path = tmp_path / "request.json"
    path.write_text("{not json")
    with pytest.raises(InvalidInputError, match=r"request\.json: not valid JSON"):
        load_v2_json_file(path)


def test_the_same_input_twice_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="input 'A' is given twice"):
        merge({"A": np.ones(1)}, {"A": np.zeros(1)})


def _gradient_image(height: int, width: int) -> np.ndarray:
    ys, xs = np.mgrid[0:height, 0:width]
    return np.stack([xs * 255 // max(width - 1, 1), ys * 255 // max(height - 1, 1), np.full_like(xs, 128)], -1).astype(
        np.uint8
    )


def test_resnet50_preset_is_normalised_nchw_224() -> None:
    image = np.full((300, 400, 3), 255, dtype=np.uint8)
    image[..., 1] = 0

    tensor = presets.resnet50_inputs(image)["input"]

    assert tensor.shape == (1, 3, 224, 224)
    assert tensor.dtype == np.float32
    np.testing.assert_allclose(
        tensor[0, :, 0, 0], (np.array([1.0, 0.0, 1.0]) - presets.IMAGENET_MEAN) / presets.IMAGENET_STD, rtol=1e-5
    )


def test_yolov5s_preset_letterboxes_to_640_with_grey_padding() -> None:
    tensor = presets.yolov5s_inputs(np.zeros((320, 640, 3), dtype=np.uint8))["images"]

    assert tensor.shape == (1, 3, 640, 640)
    assert tensor.dtype == np.float32
    assert tensor.min() >= 0.0 and tensor.max() <= 1.0
    np.testing.assert_allclose(tensor[0, :, 0, 0], 114 / 255)  # top band is padding
    np.testing.assert_allclose(tensor[0, :, 320, 320], 0.0)  # the image sits in the middle


def test_bilinear_resize_keeps_a_linear_gradient_linear() -> None:
    image = _gradient_image(10, 10)
    resized = presets.resize_bilinear(image, 20, 20)

    assert resized.shape == (20, 20, 3)
    assert np.all(np.diff(resized[0, :, 0]) >= 0)  # monotonic along x
    assert resized[0, 0, 0] == pytest.approx(0) and resized[0, -1, 0] == pytest.approx(255)


def test_images_load_from_ppm_and_npy(tmp_path: Path) -> None:
    image = _gradient_image(3, 5)
    (tmp_path / "a.ppm").write_bytes(b"P6\n# made by a test\n5 3\n255\n" + image.tobytes())
    np.save(tmp_path / "a.npy", image)

    np.testing.assert_array_equal(presets.load_image(tmp_path / "a.ppm"), image)
    np.testing.assert_array_equal(presets.load_image(tmp_path / "a.npy"), image)


def test_bad_images_are_refused(tmp_path: Path) -> None:
    np.save(tmp_path / "gray.npy", np.zeros((4, 4), dtype=np.uint8))
    with pytest.raises(InvalidInputError, match=r"expected HxWx3 uint8 RGB, got shape \(4, 4\) uint8"):
        presets.load_image(tmp_path / "gray.npy")
    with pytest.raises(InvalidInputError, match="does not exist"):
        presets.load_image(tmp_path / "missing.jpg")


def test_fallback_tokenizer_is_deterministic_and_bert_shaped() -> None:
    tokens = presets.fallback_tokenize("Hello, Triton!")

    assert tokens.ids.shape == tokens.mask.shape == (1, 128)
    assert tokens.ids.dtype == tokens.mask.dtype == np.int32
    ids = tokens.ids[0, :6].tolist()
    assert ids[0] == presets.BERT_CLS and ids[5] == presets.BERT_SEP  # [CLS] hello , triton ! [SEP]
    assert all(1000 <= i < presets.BERT_VOCAB_SIZE for i in ids[1:5])
    assert tokens.mask[0].tolist() == [1] * 6 + [0] * 122
    np.testing.assert_array_equal(presets.fallback_tokenize("hello , TRITON !").ids, tokens.ids)


def test_fallback_tokenizer_truncates_to_128_keeping_sep() -> None:
    tokens = presets.fallback_tokenize("word " * 500)

    assert tokens.ids[0, -1] == presets.BERT_SEP
    assert int(tokens.mask.sum()) == 128


def test_bert_preset_names_and_reports_its_tokenizer() -> None:
    tensors, tokenizer = presets.bert_base_inputs("a short sentence")

    assert sorted(tensors) == ["attention_mask", "input_ids"]
    assert tokenizer in ("fallback", "transformers:bert-base-uncased")
