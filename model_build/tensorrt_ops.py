"""Which ONNX operators TensorRT's ONNX parser cannot import: a graph with one never becomes an engine.

Source: onnx/onnx-tensorrt `docs/operators.md` ("Supported ONNX Operators"), branches 8.6-GA and 10.0-GA
(fetched mirror, read 2026-11-27). The matrix covers the default ONNX domain only: no ONNX-ML
(`ai.onnx.ml`) operator is listed, and onnx-tensorrt registers importers for default-domain operators
alone (an unknown operator is looked up as a TensorRT plugin of that name, which no stock image has for
ONNX-ML operators such as TreeEnsembleClassifier or LinearRegressor). So:

- every Triton release: an `ai.onnx.ml` operator is refused for `tensorrt_plan`;
- the releases whose TensorRT minor has a public matrix (8.6: Triton 23.12-24.03; 10.0: Triton 24.05):
  the operators the matrix marks "N" are refused as well. Later TensorRT minors' matrices are not in the
  reference mirror, so only the ONNX-ML rule applies to them (a wrong "N" would refuse a model that builds).

The answer is always the same: serve the model with `onnxruntime_onnx` (ONNX Runtime runs ONNX-ML).
"""

from __future__ import annotations

from collections.abc import Iterable

from model_build.onnx_inspect import DEFAULT_DOMAIN, ML_DOMAIN

# operators.md "Supported" column "N", per TensorRT major.minor.
_NOT_IN_8_6 = frozenset(
    [
        "Bernoulli",
        "BitShift",
        "BlackmanWindow",
        "Compress",
        "ConcatFromSequence",
        "ConvInteger",
        "DFT",
        "Det",
        "DynamicQuantizeLinear",
        "HammingWindow",
        "HannWindow",
        "Hardmax",
        "MatMulInteger",
        "MaxRoiPool",
        "MaxUnpool",
        "MelWeightMatrix",
        "Multinomial",
        "NegativeLogLikelihoodLoss",
        "Optional",
        "OptionalGetElement",
        "OptionalHasElement",
        "QLinearConv",
        "QLinearMatMul",
        "STFT",
        "SequenceAt",
        "SequenceConstruct",
        "SequenceEmpty",
        "SequenceErase",
        "SequenceInsert",
        "SequenceLength",
        "SequenceMap",
        "SoftmaxCrossEntropyLoss",
        "SplitToSequence",
        "StringNormalizer",
        "TfIdfVectorizer",
        "Unique",
    ]
)
_NOT_IN_10_0 = frozenset(
    [
        "AffineGrid",
        "Bernoulli",
        "BitShift",
        "BitwiseAnd",
        "BitwiseNot",
        "BitwiseOr",
        "BitwiseXor",
        "BlackmanWindow",
        "Col2Im",
        "CenterCropPad",
        "Compress",
        "ConcatFromSequence",
        "ConvInteger",
        "DFT",
        "Det",
        "DynamicQuantizeLinear",
        "HammingWindow",
        "HannWindow",
        "ImageDecoder",
        "MatMulInteger",
        "MaxRoiPool",
        "MaxUnpool",
        "MelWeightMatrix",
        "Multinomial",
        "NegativeLogLikelihoodLoss",
        "Optional",
        "OptionalGetElement",
        "OptionalHasElement",
        "QLinearConv",
        "QLinearMatMul",
        "RegexFullMatch",
        "STFT",
        "SequenceAt",
        "SequenceConstruct",
        "SequenceEmpty",
        "SequenceErase",
        "SequenceInsert",
        "SequenceLength",
        "SequenceMap",
        "SoftmaxCrossEntropyLoss",
        "SplitToSequence",
        "StringConcat",
        "StringNormalizer",
        "StringSplit",
        "TfIdfVectorizer",
        "Unique",
    ]
)
NOT_SUPPORTED: dict[str, frozenset[str]] = {"8.6": _NOT_IN_8_6, "10.0": _NOT_IN_10_0}


def unsupported_operators(
    operators: Iterable[tuple[str, str]], tensorrt_version: str | None
) -> list[tuple[str, str, str]]:
    """(domain, op_type, why) for each operator TensorRT `tensorrt_version` ("10.0.1.6"; None: any) cannot import."""
    minor = ".".join(tensorrt_version.split(".")[:2]) if tensorrt_version else None
    refused = NOT_SUPPORTED.get(minor or "", frozenset())
    found = []
    for domain, op_type in sorted(set(operators)):
        if domain == ML_DOMAIN:
            found.append((domain, op_type, "an ONNX-ML operator, which TensorRT's ONNX parser cannot import"))
        elif domain == DEFAULT_DOMAIN and op_type in refused:
            why = f"marked unsupported in onnx-tensorrt's operator matrix for TensorRT {minor}"
            found.append((domain, op_type, why))
    return found


def unsupported_message(found: list[tuple[str, str, str]]) -> str:
    listed = "; ".join(f"{op_type} ({domain}): {why}" for domain, op_type, why in found)
    return (
        f"TensorRT cannot build an engine from this graph: {listed} (onnx/onnx-tensorrt docs/operators.md); "
        "serve it with platform: onnxruntime_onnx"
    )
