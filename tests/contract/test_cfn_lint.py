"""cfn-lint over every template of every configuration the project ships, warnings included.

cfn-lint (aws-cloudformation/cfn-lint, the venv's pinned version) checks each template against CloudFormation's
resource specification and schemas: property names and types, allowed values and patterns, required properties,
intrinsic functions, and its own best-practice warnings. `make test` used to run it after `make synth-all` over
the cdk.out* folders the CLI wrote (dev, prod, the pipeline with its stage assemblies, examples/config/*); the
shipped assemblies here are the same apps synthesized the same way plus tests/configs and the area tests'
purpose-built stages, so this test lints a superset of those templates, once per test run.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from contract_helpers import ShippedTemplate

CFN_LINT = Path(sys.executable).parent / "cfn-lint"


def test_every_shipped_template_is_cfn_lint_clean(shipped_templates: list[ShippedTemplate]) -> None:
    """`cfn-lint --non-zero-exit-code warning` (as the Makefile's cfn-lint target runs it) over every template.
    A template byte-identical to one already listed (a pipeline stage's nested stack and the stage app's own: the
    deploy paths give the same templates) is linted once: cfn-lint reads nothing but the file."""
    by_content: dict[bytes, str] = {}
    for path in sorted({str(t.path) for t in shipped_templates}):
        by_content.setdefault(Path(path).read_bytes(), path)
    files = sorted(by_content.values())
    labels = {t.config.split(":assembly-")[0] for t in shipped_templates}
    assert {"config/dev", "config/prod", "config/pipeline"} <= labels, labels
    assert any(label.startswith("examples/config/") for label in labels), labels
    result = subprocess.run(
        [str(CFN_LINT), "--non-zero-exit-code", "warning", "--", *files],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-20000:] + result.stderr[-5000:]
