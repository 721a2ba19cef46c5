"""report.json: what the build measured of a TensorRT engine (accuracy against ONNX Runtime, speed, the host).

Written once by the build, beside the artifact under its content-addressed prefix
(`models/<name>/<digest>/report.json`, next to `model.tar.gz`), never inside the archive: the archive's bytes are
what the key names, and a report holds timings that differ from run to run. Uploaded with `model_build.upload`'s
rules (If-None-Match, SHA-256 checked): a report under a key is never replaced; a second build of the same key
(the same bytes) keeps the first report. `python -m model_build report` prints it.

Schema (REPORT_SCHEMA_VERSION 1; a reader refuses other versions; model_build.report_schema validates it on read
and before publishing; printed strings lose their control characters):
    {"schema_version": 1, "model": str, "artifact_key": str | null, "created_at": ISO-8601,
     "host": {"gpu": str ("none (CPU)" without nvidia-smi), "driver": str | null, "tensorrt": str | null,
              "triton": str | null, "trtexec_argv": [str] | null, "engine": "tensorrt" | "onnx stand-in (CPU)"},
     "accuracy": {"checked": bool (false: tensorrt.accuracy.check false), "passed": bool | null,
                  "atol": float, "rtol": float, "tolerance_source": str, "semantics": str,
                  "inputs": {name: {"shape": [int], "dtype": str}}, "input_source": "samples" | "generated",
                  "outputs": [{"name", "shape", "max_abs_error", "max_rel_error", "mismatches", "elements",
                               "passed", "argmax_agreement", "problem", "exact", "engine_nan",
                               "engine_inf", "reference_nan", "reference_inf"}]},
     "speed": [{"concurrency": int, "batch_size": int, "seconds": float, "requests": int, "errors": int,
                "requests_per_second": float, "inferences_per_second": float,
                "latency_ms": {"p50", "p90", "p95", "p99", "max", "mean"}}],
     "tuning": null | {"slo_p99_ms": float, "candidates": [...], "best": {...} | null, "config_lines": str}}
"""

from __future__ import annotations

import json
import os
import posixpath
import re
from pathlib import Path
from typing import Any

from model_build.atomic import write_atomically
from model_build.errors import ModelBuildError
from model_build.report_schema import check_artifact_key, validate_report

REPORT_SCHEMA_VERSION = 1
REPORT_NAME = "report.json"
# The build's environment variable holding `tensorrt.accuracy.samples`' s3:// address (the local file's asset, or the
# configured URI); the buildspec fetches it and passes it to the build check as --samples.
MAX_REPORT_BYTES = 4 * 1024 * 1024  # a report is a few kilobytes; refuse reading anything huge


def report_key(artifact_key: str) -> str:
    """`models/<name>/<digest>/report.json` beside `models/<name>/<digest>/model.tar.gz`."""
    if not artifact_key.endswith("/model.tar.gz"):
        raise ModelBuildError(f"artifact key {artifact_key!r} does not end in /model.tar.gz")
    return posixpath.join(posixpath.dirname(artifact_key), REPORT_NAME)


def write_report(path: Path, report: dict[str, Any]) -> Path:
    """Write `report` to `path` once: an existing file is refused (a report is never overwritten)."""
    if report.get("schema_version") != REPORT_SCHEMA_VERSION:
        raise ModelBuildError(f"report schema_version must be {REPORT_SCHEMA_VERSION}")
    if os.path.lexists(path):  # a dangling link too: it is not followed and not replaced
        raise ModelBuildError(f"{path} already exists; a build report is written once (remove it to measure again)")
    validate_report(report, f"{path} (to write)")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(path, (json.dumps(report, indent=2, sort_keys=True) + "\n").encode())
    except OSError as error:
        raise ModelBuildError(f"{path}: cannot write the report ({error.strerror or error})") from None
    return path


def parse_report(data: bytes, where: str) -> dict[str, Any]:
    if len(data) > MAX_REPORT_BYTES:
        raise ModelBuildError(f"{where}: {len(data)} bytes; a build report is at most {MAX_REPORT_BYTES}")
    try:
        report = json.loads(data)
    except (ValueError, UnicodeDecodeError) as error:
        raise ModelBuildError(f"{where}: not JSON ({error})") from None
    except RecursionError:
        raise ModelBuildError(f"{where}: not a build report (JSON nested too deeply)") from None
    if not isinstance(report, dict) or report.get("schema_version") != REPORT_SCHEMA_VERSION:
        version = report.get("schema_version") if isinstance(report, dict) else None
        raise ModelBuildError(
            f"{where}: schema_version {printable(repr(version))[:100]}; this model_build reads build reports of "
            f"version {REPORT_SCHEMA_VERSION}"
        )
    return validate_report(report, where)


def read_local_report(path: Path) -> dict[str, Any]:
    """A report.json file, or a build folder holding one."""
    file = path / REPORT_NAME if path.is_dir() else path
    try:
        with file.open("rb") as stream:
            data = stream.read(MAX_REPORT_BYTES + 1)
    except OSError as error:
        raise ModelBuildError(f"{file}: cannot read it ({error.strerror or error})") from None
    return parse_report(data, str(file))


def read_s3_report(client: Any, bucket: str, key: str) -> dict[str, Any]:
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    where = f"s3://{bucket}/{key}"
    try:
        reply = client.get_object(Bucket=bucket, Key=key)
        data = reply["Body"].read(MAX_REPORT_BYTES + 1)
    except ClientError as error:
        code = str(error.response.get("Error", {}).get("Code", ""))
        if code in {"NoSuchKey", "404", "NotFound"}:
            raise ModelBuildError(
                f"{where}: no build report; it is written by a TensorRT model's build (docs/build.md, "
                '"Build report"). Was the model built with this config and GPU target?'
            ) from None
        raise ModelBuildError(f"{where}: {error}") from None
    except NoCredentialsError:
        raise ModelBuildError(f"no AWS credentials to read {where}; set AWS_PROFILE") from None
    except BotoCoreError as error:
        raise ModelBuildError(f"{where}: {error}") from None
    return parse_report(data, where)


def publish_report(path: Path, bucket: str, artifact_key: str, *, client: Any) -> str:
    """Upload a local report.json beside `artifact_key`, never replacing one: model_build.upload's conditional write
    (If-None-Match) puts it only where none exists; an existing report (of an earlier build of the same key, whose
    timings differ) is kept. Returns what happened, for the log."""
    from model_build.upload import ConflictingObjectError, upload_file

    report = read_local_report(path)  # only a report of this schema goes up
    check_artifact_key(artifact_key, report["model"])
    if report["artifact_key"] != artifact_key:
        raise ModelBuildError(
            f"{path}: the report is of artifact {printable(str(report['artifact_key']))[:200]!r}, not {artifact_key!r}"
        )
    key = report_key(artifact_key)
    try:
        result = upload_file(path, bucket, key, client=client)
    except ConflictingObjectError:
        return f"s3://{bucket}/{key}: a report is already there (an earlier build of this key); kept as it is"
    return f"{result.uri}: {result.status}"


def _number(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}g}" if abs(value) < 1e-3 and value else f"{value:.{digits}f}".rstrip("0").rstrip(".")
    return str(value)


def format_report(report: dict[str, Any]) -> str:
    """The report as text: host, accuracy per output, speed per concurrency, tuning."""
    host = report.get("host") or {}
    lines = [
        f"build report of {report.get('model')} ({report.get('artifact_key') or 'local build'}), "
        f"{report.get('created_at')}",
        f"  GPU {host.get('gpu')}, driver {host.get('driver') or '-'}, TensorRT {host.get('tensorrt') or '-'}, "
        f"Triton {host.get('triton') or '-'} ({host.get('engine')})",
    ]
    if host.get("trtexec_argv"):
        lines.append("  trtexec " + " ".join(host["trtexec_argv"][1:]))
    accuracy = report.get("accuracy") or {}
    if accuracy.get("checked", True):
        verdict = "PASSED" if accuracy.get("passed") else "FAILED"
        lines.append(
            f"accuracy {verdict}: atol {accuracy.get('atol')}, rtol {accuracy.get('rtol')} "
            f"({accuracy.get('tolerance_source')}); inputs {accuracy.get('input_source')}"
        )
    else:
        lines.append(f"accuracy NOT CHECKED ({accuracy.get('skipped_because')}); inputs {accuracy.get('input_source')}")
    for output in accuracy.get("outputs") or []:
        agreement = output.get("argmax_agreement")
        extra = f", arg-max agreement {agreement:.1%}" if agreement is not None else ""
        problem = f" ({output['problem']})" if output.get("problem") else ""
        nonfinite = sum(output.get(k) or 0 for k in ("engine_nan", "engine_inf", "reference_nan", "reference_inf"))
        if nonfinite:
            problem += (
                f" (NaN/inf: engine {output.get('engine_nan')}/{output.get('engine_inf')}, ONNX Runtime "
                f"{output.get('reference_nan')}/{output.get('reference_inf')})"
            )
        if output.get("exact"):
            problem += " (compared exactly)"
        lines.append(
            f"  {output.get('name')} {output.get('shape')}: max abs {_number(output.get('max_abs_error'), 4)}, "
            f"max rel {_number(output.get('max_rel_error'), 4)}, {output.get('mismatches')} of "
            f"{output.get('elements')} outside{extra}{problem}"
        )
    if report.get("speed"):
        lines.append("speed (Triton HTTP, one build host):")
        lines.append("  concurrency  batch  inferences/s  p50 ms  p99 ms  errors")
        for level in report["speed"]:
            latency = level.get("latency_ms") or {}
            lines.append(
                f"  {level.get('concurrency'):>11}  {level.get('batch_size'):>5}  "
                f"{_number(level.get('inferences_per_second'), 1):>12}  {_number(latency.get('p50')):>6}  "
                f"{_number(latency.get('p99')):>6}  {level.get('errors'):>6}"
            )
    tuning = report.get("tuning")
    if tuning:
        lines.append(f"tuning (p99 <= {tuning.get('slo_p99_ms')} ms):")
        for candidate in tuning.get("candidates") or []:
            if candidate.get("failed"):
                lines.append(
                    f"  # {candidate.get('instance_count')} instances, delay "
                    f"{candidate.get('max_queue_delay_microseconds')} us: failed to load: {candidate['failed']}"
                )
        lines.extend("  " + line for line in str(tuning.get("config_lines") or "").splitlines())
    return "\n".join(printable(line) for line in lines)


CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """`text` without control characters (a report's strings must not drive the terminal: escapes, \\r)."""
    return CONTROL.sub("?", text)
