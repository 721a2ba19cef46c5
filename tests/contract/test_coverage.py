"""The contract tests see every configuration the project ships; otherwise a rule could pass vacuously."""

from __future__ import annotations

from synth_helpers import PROJECT_ROOT


def test_every_shipped_config_is_synthesized(shipped_configs):
    expected = {f"config/{p.stem}" for p in (PROJECT_ROOT / "config").glob("*.yaml") if p.stem != "pipeline"}
    for folder in ("examples/config", "tests/configs"):
        expected |= {f"{folder}/{p.stem}" for p in (PROJECT_ROOT / folder).glob("*.yaml") if p.stem != "pipeline"}
    assert expected <= shipped_configs


def test_pipeline_stage_assemblies_are_included(shipped_templates):
    """`make synth` writes the pipeline's stages as nested assemblies: their stacks are what the pipeline deploys."""
    nested = {t.config for t in shipped_templates if ":assembly-" in t.config}
    assert any(label.startswith("config/pipeline:") for label in nested), nested
    assert any(t.stack.startswith("Triton-prod") or "prod" in t.config for t in shipped_templates)
