"""The build report's accuracy check: a built engine's outputs against ONNX Runtime's on the same inputs.

Comparison semantics are Polygraphy's default (NVIDIA/TensorRT `tools/Polygraphy/polygraphy/comparator/compare.py`,
`CompareFunc.simple`, commit 1637a26e; check_error_stat "elemwise", its default): an element is a mismatch only
when it exceeds *both* tolerances,

    mismatch = (|a - b| > atol or NaN) and (|a - b| / |b| > rtol or NaN)

i.e. it passes when |a - b| <= atol OR |a - b| <= rtol * |b|, with b the reference (ONNX Runtime) and zeros of b
replaced by 2.220446049250313e-16 before dividing (Polygraphy's EPSILON). Shapes must match (Polygraphy's
check_shapes default True).

Non-finite values: a NaN on either side makes |a - b| NaN, a mismatch (the formula above), even where both sides hold
NaN at the same place; matching infinities are mismatches too (Polygraphy's `infinities_compare_equal` default False:
their absdiff is NaN). The errors reported (max abs / rel) are over the finite differences only, and each output
counts its NaN and inf elements per side, so a NaN output never reads as "max abs error 0".

Integer and boolean outputs (both sides of kind int/uint/bool) compare exactly, without tolerances: OUR rule,
stricter than Polygraphy, which compares booleans by XOR but casts integers up and applies atol/rtol (a class id or
a count off by one is wrong, however small rtol * |b| is). Values are compared as integers, never through a float64
cast (which rounds int64 above 2**53).

Default tolerances per precision (`tensorrt.accuracy` overrides them per model):
- fp32: atol 1e-5, rtol 1e-5 -- cited: Polygraphy's defaults (`default_atol = 1e-5`, `default_rtol = 1e-5`, same
  file), which it applies to any comparison.
- fp16 and best: atol 1e-2, rtol 1e-2 -- OUR choice: about ten units of fp16's machine epsilon (2**-10, IEEE 754
  binary16's 10-bit fraction), for errors that accumulate through a network's layers.
- int8: atol 1e-1, rtol 1e-1 -- OUR choice: INT8 quantisation error depends on the calibration; NVIDIA documents
  no default tolerance. Set `tensorrt.accuracy` from a measured report for a real model.
The arg-max of classifier-shaped outputs ([batch, classes], classes > 1) is reported as agreement, not checked.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass

import numpy as np

from model_build.errors import ModelBuildError

EPSILON = 2.220446049250313e-16  # Polygraphy's epsilon for zero reference values
SOURCE = "Polygraphy CompareFunc.simple, check_error_stat elemwise (NVIDIA/TensorRT tools/Polygraphy)"


@dataclass(frozen=True)
class Tolerance:
    atol: float
    rtol: float
    source: str  # where the values come from (cited default, our default, or the stage config)


# precision -> (atol, rtol, source); see the module docstring for which are cited and which are ours.
DEFAULTS: dict[str, tuple[float, float, str]] = {
    "fp32": (1e-5, 1e-5, "default for fp32: Polygraphy's default atol/rtol"),
    "fp16": (1e-2, 1e-2, "default for fp16: ours (about 10 x fp16 machine epsilon 2**-10)"),
    "best": (1e-2, 1e-2, "default for best: ours (as fp16)"),
    "int8": (1e-1, 1e-1, "default for int8: ours (no NVIDIA default; depends on the calibration)"),
}


def tolerance(precision: str, atol: float | None = None, rtol: float | None = None) -> Tolerance:
    """The tolerance for `precision`, with `tensorrt.accuracy`'s atol / rtol in place of the defaults given."""
    if precision not in DEFAULTS:
        raise ModelBuildError(f"tensorrt.precision {precision!r}: no default tolerance (one of {', '.join(DEFAULTS)})")
    default_atol, default_rtol, source = DEFAULTS[precision]
    if atol is None and rtol is None:
        return Tolerance(default_atol, default_rtol, source)
    given = "tensorrt.accuracy" + ("" if atol is not None and rtol is not None else f" (rest: {source})")
    return Tolerance(default_atol if atol is None else atol, default_rtol if rtol is None else rtol, given)


@dataclass(frozen=True)
class OutputComparison:
    name: str
    shape: list[int]
    max_abs_error: float | None  # over the finite differences; None where there is none
    max_rel_error: float | None
    mismatches: int  # elements outside both tolerances (Polygraphy's elemwise), or unequal (exact)
    elements: int
    passed: bool
    argmax_agreement: float | None = None  # [batch, classes] outputs: fraction of rows with the same arg-max
    problem: str | None = None  # shape or dtype mismatch, missing output
    exact: bool = False  # integer / boolean outputs: compared exactly
    engine_nan: int = 0
    engine_inf: int = 0
    reference_nan: int = 0
    reference_inf: int = 0

    def as_dict(self) -> dict:
        return asdict(self)

    def describe(self, tol: Tolerance) -> str:
        if self.problem:
            return f"output {self.name!r}: {self.problem}"
        if self.exact:
            head = f"{self.mismatches} of {self.elements} elements differ (integer outputs compare exactly)"
        else:
            head = f"{self.mismatches} of {self.elements} elements outside atol {tol.atol:g} and rtol {tol.rtol:g}"
        details = [
            f"max abs error {_figure(self.max_abs_error)}",
            *([] if self.exact else [f"max rel error {_figure(self.max_rel_error)}"]),
        ]
        if self.engine_nan or self.engine_inf or self.reference_nan or self.reference_inf:
            details.append(
                f"non-finite elements: {self.engine_nan} NaN and {self.engine_inf} inf from the engine, "
                f"{self.reference_nan} NaN and {self.reference_inf} inf from ONNX Runtime (never a match)"
            )
        return f"output {self.name!r}: {head} ({', '.join(details)})"


def _figure(value: float | None) -> str:
    return "n/a (no finite difference)" if value is None else f"{value:.6g}"


def _finite_max(values: np.ndarray) -> float | None:
    finite = values[np.isfinite(values)]
    return float(finite.max()) if finite.size else None


def _nonfinite(array: np.ndarray) -> tuple[int, int]:
    if array.dtype.kind not in "fc":
        return 0, 0
    return int(np.isnan(array).sum()), int(np.isinf(array).sum())


def _compare_exactly(name: str, engine: np.ndarray, reference: np.ndarray) -> OutputComparison:
    """Integer / boolean outputs: equal or not, as integers (module docstring)."""
    if {engine.dtype.kind, reference.dtype.kind} == {"i", "u"}:
        differ = engine.astype(object) != reference.astype(object)  # no common integer type holds both exactly
    else:
        differ = engine != reference
    differ = np.asarray(differ, dtype=bool)
    count = int(differ.sum())
    largest = 0.0
    if count:
        a = engine[differ].astype(object)
        b = reference[differ].astype(object)
        largest = float(max(abs(int(x) - int(y)) for x, y in zip(a.ravel(), b.ravel(), strict=True)))
    return OutputComparison(
        name, list(reference.shape), largest, None, count, int(reference.size), count == 0, exact=True
    )


def compare_output(name: str, engine: np.ndarray, reference: np.ndarray, tol: Tolerance) -> OutputComparison:
    """One output, Polygraphy's elemwise check (module docstring); integer and boolean outputs exactly."""
    engine, reference = np.asarray(engine), np.asarray(reference)
    shape = list(reference.shape)
    if engine.shape != reference.shape:
        return OutputComparison(
            name, shape, None, None, reference.size, reference.size, False,
            problem=f"shape {list(engine.shape)} from the engine, {shape} from ONNX Runtime",
        )  # fmt: skip
    if reference.size == 0:
        return OutputComparison(name, shape, 0.0, 0.0, 0, 0, True)
    if engine.dtype.kind in "iub" and reference.dtype.kind in "iub":
        return _compare_exactly(name, engine, reference)
    if engine.dtype.kind in "fiub" and reference.dtype.kind in "fiub":
        with np.errstate(invalid="ignore", over="ignore"):
            absdiff = np.abs(engine.astype(np.float64) - reference.astype(np.float64))
    else:
        equal = engine == reference
        absdiff = (~equal).astype(np.float64)
    base = np.abs(reference.astype(np.float64)) if reference.dtype.kind in "fiub" else np.ones_like(absdiff)
    base = np.where(base == 0, EPSILON, base)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        reldiff = absdiff / base
    mismatch = ((absdiff > tol.atol) | np.isnan(absdiff)) & ((reldiff > tol.rtol) | np.isnan(reldiff))
    count = int(mismatch.sum())
    agreement = None
    if reference.ndim == 2 and reference.shape[1] > 1 and reference.dtype.kind == "f":
        agreement = float(np.mean(np.argmax(engine, axis=1) == np.argmax(reference, axis=1)))
    engine_nan, engine_inf = _nonfinite(engine)
    reference_nan, reference_inf = _nonfinite(reference)
    return OutputComparison(
        name,
        shape,
        _finite_max(absdiff),
        _finite_max(reldiff),
        count,
        int(reference.size),
        count == 0,
        agreement,
        engine_nan=engine_nan,
        engine_inf=engine_inf,
        reference_nan=reference_nan,
        reference_inf=reference_inf,
    )


def compare_outputs(
    engine: Mapping[str, np.ndarray], reference: Mapping[str, np.ndarray], tol: Tolerance
) -> list[OutputComparison]:
    """Every reference output, in order; an output the engine did not return fails."""
    found = []
    for name, expected in reference.items():
        if name not in engine:
            missing = OutputComparison(name, list(np.shape(expected)), None, None, 0, 0, False, problem="not returned")
            found.append(missing)
            continue
        found.append(compare_output(name, engine[name], expected, tol))
    return found


class AccuracyError(ModelBuildError):
    """The engine's outputs are outside the tolerance: the build stops before anything is uploaded."""


def check(model: str, comparisons: list[OutputComparison], tol: Tolerance) -> None:
    failed = [c for c in comparisons if not c.passed]
    if not failed:
        return
    raise AccuracyError(
        f"model {model!r}: the TensorRT engine's outputs differ from ONNX Runtime's beyond the tolerance "
        f"(atol {tol.atol:g}, rtol {tol.rtol:g}: {tol.source}; an element fails when it exceeds both, as Polygraphy "
        f"checks): " + "; ".join(c.describe(tol) for c in failed) + ". Nothing was uploaded. If the difference is "
        "expected for this precision, set tensorrt.accuracy: {atol: ..., rtol: ...} on the model in the stage config "
        "(or, where ONNX Runtime cannot be the reference, tensorrt.accuracy.check: false; docs/build.md)"
    )
