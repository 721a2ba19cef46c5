"""Hostile review of `invoke`'s inputs, second round: M8 (a .npy header, or an .npz member's, declaring more
than the file holds: a 128-byte file made numpy allocate 37.3 GiB) and LOW12 (values that do not fit their
datatype, e.g. FP16 1e10, became inf with only a RuntimeWarning). Limits: SageMaker's payload limit is
botocore's sagemaker-runtime BodyBlob max, 6291456 bytes.
"""

from __future__ import annotations

import io
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pytest

from endpoint_client.cli import main
from endpoint_client.errors import InvalidInputError
from endpoint_client.inputs import inputs_from_v2_json, load_array_file, load_v2_json_file, parse_tensor_spec
from endpoint_client.limits import MAX_PAYLOAD_BYTES

# --- M8: a .npy header declaring more than the file holds ------------------------------------------------------


def npy_bytes(shape: tuple[int, ...], descr: str = "<f4", data: bytes = b"") -> bytes:
    """A .npy file whose header says `shape` and `descr`, followed by `data` (whatever the header says)."""
    stream = io.BytesIO()
    np.lib.format.write_array_header_1_0(stream, {"descr": descr, "fortran_order": False, "shape": shape})
    return stream.getvalue() + data


def test_a_128_byte_npy_declaring_37_gib_is_an_error_not_an_allocation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    huge = tmp_path / "huge.npy"
    huge.write_bytes(npy_bytes((10**10,)).ljust(128, b"\0"))
    assert huge.stat().st_size == 128

    code = main(["invoke", "--url", "http://127.0.0.1:9", "--input", f"x={huge}"])

    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    assert f"ERROR: input 'x': {huge}: shape [10000000000] holds over 6291456 elements" in err


@pytest.mark.parametrize(
    ("header", "message"),
    [
        (((1000,), "<f4", b"\0" * 16), r"declares shape \(1000,\) of float32 \(4000 bytes\) but only 16 bytes follow"),
        (((1_000_000, 2), "<f8", b""), r"\(16000000 bytes\); a request carries at most 6291456 bytes"),
        (((4,), "|O", b"\0" * 32), r"an array of Python objects"),
    ],
)
def test_an_npy_header_is_checked_against_the_bytes_present_and_the_payload_limit(
    tmp_path: Path, header: tuple, message: str
) -> None:
    forged = tmp_path / "forged.npy"
    forged.write_bytes(npy_bytes(*header))

    with pytest.raises(InvalidInputError, match=message):
        load_array_file(f"x={forged}")


def test_an_npz_member_is_checked_by_its_header_not_only_its_size(tmp_path: Path) -> None:
    """The inflated-size check trusted each member's real size; a small member may declare a huge shape."""
    for name, member, message in [
        ("huge", npy_bytes((10**10,)).ljust(128, b"\0"), r"member 'a\.npy': shape \[10000000000\] holds"),
        ("forged", npy_bytes((1000,), "<f4", b"\0" * 16), r"member 'a\.npy': its header declares shape \(1000,\)"),
        ("not_npy", b"plain bytes", r"member 'a\.txt' is not a \.npy array"),
    ]:
        path = tmp_path / f"{name}.npz"
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
            archive.writestr("a.txt" if name == "not_npy" else "a.npy", member)
        with pytest.raises(InvalidInputError, match=message):
            load_array_file(str(path))

    # Several members, each under the limit, over it together: refused before any is loaded.
    together = tmp_path / "together.npz"
    half = npy_bytes((MAX_PAYLOAD_BYTES // 2 + 1,), "|u1", b"\0" * (MAX_PAYLOAD_BYTES // 2 + 1))
    with zipfile.ZipFile(together, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("a.npy", half)
        archive.writestr("b.npy", half)
    with pytest.raises(InvalidInputError, match=r"its arrays take \d+ bytes; more than a request"):
        load_array_file(str(together))


def test_good_npy_and_npz_files_still_load(tmp_path: Path) -> None:
    np.save(tmp_path / "a.npy", np.arange(6, dtype=np.float32).reshape(2, 3))
    np.savez_compressed(tmp_path / "b.npz", INPUT0=np.ones((1, 4), np.float16), INPUT1=np.array([b"x"]))

    assert load_array_file(f"x={tmp_path / 'a.npy'}")["x"].tolist() == [[0, 1, 2], [3, 4, 5]]
    both = load_array_file(str(tmp_path / "b.npz"))
    assert (both["INPUT0"].dtype, both["INPUT1"].tolist()) == (np.float16, [b"x"])


def test_running_out_of_memory_while_loading_is_an_input_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    np.save(tmp_path / "a.npy", np.zeros(4, np.float32))

    def out_of_memory(*args: object, **kwargs: object) -> None:
        raise MemoryError

    monkeypatch.setattr(np, "load", out_of_memory)
    with pytest.raises(InvalidInputError, match="not enough memory to load it"):
        load_array_file(f"x={tmp_path / 'a.npy'}")


# --- LOW12: values that do not fit the datatype ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("x=FP16:1:1e10", r"tensor 'x': 1e10 is outside FP16's range -65504\.\.65504"),
        ("x=FP16:2:1,-70000", r"-70000 is outside FP16's range"),
        ("x=FP32:1:1e39", r"1e39 is outside FP32's range -3\.4028235e\+38\.\.3\.4028235e\+38"),
        ("x=FP64:1:1e400", r"1e400 is outside FP64's range"),
        ("x=INT8:1:300", r"300 is outside INT8's range -128\.\.127"),
        ("x=UINT16:1:-1", r"-1 is outside UINT16's range 0\.\.65535"),
    ],
)
def test_a_value_that_does_not_fit_its_datatype_is_refused(spec: str, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        parse_tensor_spec(spec)


def test_values_that_fit_pass_without_a_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the overflow used to be only a RuntimeWarning
        _, largest = parse_tensor_spec("x=FP16:3:65504,-65504,1e-10")
        _, written = parse_tensor_spec("x=FP32:3:inf,-Infinity,nan")  # infinity and NaN written as such
    assert largest.tolist() == [65504.0, -65504.0, 0.0]
    assert np.isinf(written[:2]).all() and np.isnan(written[2])


def test_the_invoke_command_refuses_an_overflowing_tensor_before_sending(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["invoke", "--url", "http://127.0.0.1:9", "--tensor", "x=FP16:1:1e10"])

    err = capsys.readouterr().err
    assert code == 1 and err.startswith("ERROR: tensor 'x': 1e10 is outside FP16's range") and "Warning" not in err


def test_kserve_json_values_that_do_not_fit_are_refused(tmp_path: Path) -> None:
    entry = {"name": "x", "datatype": "FP16", "shape": [1], "data": [1e10]}
    with pytest.raises(InvalidInputError, match=r"input 'x': 10000000000\.0 is outside FP16's range"):
        inputs_from_v2_json({"inputs": [entry]}, "request")
    path = tmp_path / "request.json"
    path.write_text('{"inputs": [{"name": "x", "datatype": "FP64", "shape": [1], "data": [1e400]}]}')
    with pytest.raises(InvalidInputError, match=r"the number 1e400 is too large for a double"):
        load_v2_json_file(path)
