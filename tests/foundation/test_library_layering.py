"""The construct library does not reach back into the app: importing its modules loads neither `stacks/`
nor the app's config schema (`triton_cdk.config`). The app maps its config to the constructs' props."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIBRARY_MODULES = [
    "triton_cdk.serving",
    "triton_cdk.artifacts",
    "triton_cdk.roles",
    "triton_cdk.notifications",
    "triton_cdk.images",
    "triton_cdk.guard",
]


@pytest.mark.parametrize("module", LIBRARY_MODULES)
def test_library_module_loads_no_app_module(module):
    probe = (
        f"import sys, {module}; "
        "print(sorted(m for m in sys.modules if m == 'stacks' or m.startswith(('stacks.', 'triton_cdk.config'))))"
    )
    env = {**os.environ, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}
    result = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "[]"
