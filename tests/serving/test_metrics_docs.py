"""docs/serving.md's `metrics:` table states the defaults the endpoint really gets (review of issue #26, item 9)."""

from __future__ import annotations

import botocore.session
from synth_helpers import PROJECT_ROOT

from stage_config.endpoint import MetricsSettings


def test_the_detailed_observability_default_names_both_cases():
    """botocore's MetricsConfig.EnableDetailedObservability: "The default value for new endpoint configurations is
    True". The project writes MetricsConfig only with a `metrics:` block (then false unless set), so the docs' row
    names both cases."""
    documentation = (
        botocore.session.get_session()
        .get_service_model("sagemaker")
        .shape_for("MetricsConfig")
        .members["EnableDetailedObservability"]
        .documentation
    )
    assert "default value for new endpoint configurations is <code>True</code>" in documentation
    assert MetricsSettings().detailed_observability is False
    (row,) = [
        line
        for line in (PROJECT_ROOT / "docs" / "serving.md").read_text().splitlines()
        if line.startswith("| `detailed_observability` |")
    ]
    default, meaning = row.split("|")[2].strip(), row.split("|")[4]
    assert default == "`false`"  # the schema's default, as tests/foundation/test_readme_config_tables.py checks
    assert "With a `metrics:` block: `false` unless set" in meaning
    assert "Without one, SageMaker's default applies (`true` for a new endpoint config)" in meaning
