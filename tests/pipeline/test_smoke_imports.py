"""The pipeline's smoke step installs only the invocation client's packages (stacks/pipeline_steps.py: boto3,
numpy, tritonclient at requirements.txt's pins) and runs `python -m endpoint_client.smoke` from the source: the
smoke program must import nothing else that is not in the standard library or this repository."""

from __future__ import annotations

import json
import subprocess
import sys

from synth_helpers import PROJECT_ROOT

# requirements.txt's packages that the step does not install (it installs boto3, numpy and tritonclient[grpc,http],
# which bring their own dependencies from PyPI), as the modules they provide.
NOT_INSTALLED_BY_THE_STEP = {
    "aws_cdk",
    "constructs",
    "jsii",
    "cdk_nag",
    "cdklabs",
    "pydantic",
    "yaml",
    "sagemaker",
    "onnx",
    "onnxruntime",
    "tzdata",
    "aiohttp",
}

PROBE = """
import json, sys
before = set(sys.modules)
import endpoint_client.smoke  # noqa: F401
print(json.dumps(sorted({m.split('.')[0] for m in set(sys.modules) - before})))
"""


def test_the_smoke_program_imports_only_what_its_step_installs() -> None:
    result = subprocess.run([sys.executable, "-c", PROBE], cwd=PROJECT_ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    loaded = set(json.loads(result.stdout.strip().splitlines()[-1]))
    assert "tritonclient" in loaded and "endpoint_client" in loaded
    assert sorted(NOT_INSTALLED_BY_THE_STEP & loaded) == []
