"""Helpers of the pipeline tests: stage configs written to a temp folder, the pipeline app synthesized."""

from __future__ import annotations

import copy
import json
import os
from dataclasses import dataclass
from pathlib import Path

import yaml

# Before aws_cdk loads (tests/conftest.py sets it too; this module may be imported first).
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

from stacks.app_factory import create_pipeline_app
from stacks.pipeline_stack import PipelineStack
from triton_cdk.config.pipeline import load_pipeline

REPO_ROOT = Path(__file__).resolve().parents[2]
CONFIG_DIR = REPO_ROOT / "config"
PIPELINE_ACCOUNT, DEV_ACCOUNT, PROD_ACCOUNT = "111111111111", "222222222222", "333333333333"
DEV_BUCKET = "triton-models-dev-example"


def read_config(name: str) -> dict:
    return yaml.safe_load((CONFIG_DIR / f"{name}.yaml").read_text())


def promoted_documents() -> dict[str, dict]:
    """The repository's dev/prod configs with promotion set up as docs/pipeline.md describes."""
    dev, prod = read_config("dev"), read_config("prod")
    dev.setdefault("artifacts", {})["bucket_name"] = DEV_BUCKET
    prod["promote_from"] = "dev"
    return {"dev": dev, "prod": prod, "pipeline": read_config("pipeline")}


def cross_account_documents() -> dict[str, dict]:
    documents = promoted_documents()
    documents["dev"].update(account=DEV_ACCOUNT, region="us-east-1")
    documents["dev"]["artifacts"]["reader_accounts"] = [PROD_ACCOUNT]
    documents["prod"].update(account=PROD_ACCOUNT, region="us-east-1")
    pipeline = documents["pipeline"]
    pipeline.update(account=PIPELINE_ACCOUNT, region="us-east-1")
    pipeline["source"] = {"codecommit_repository": "triton-sagemaker", "branch": "release"}
    pipeline["stages"][1]["regions"] = ["us-east-1", "us-west-2"]
    pipeline["smoke"]["endpoint_max_latency_ms"] = {"triton-bert": 300}
    return documents


def write_documents(folder: Path, documents: dict[str, dict]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, document in documents.items():
        (folder / f"{name}.yaml").write_text(yaml.safe_dump(copy.deepcopy(document), sort_keys=False))
    return folder / "pipeline.yaml"


@dataclass
class SynthesizedPipeline:
    stack: PipelineStack
    directory: Path  # the cloud assembly

    @property
    def template(self) -> dict:
        return json.loads((self.directory / f"{self.stack.artifact_id}.template.json").read_text())

    def resources(self, resource_type: str) -> dict[str, dict]:
        return {k: v for k, v in self.template["Resources"].items() if v["Type"] == resource_type}

    def pipeline_stages(self) -> list[dict]:
        (pipeline,) = self.resources("AWS::CodePipeline::Pipeline").values()
        return pipeline["Properties"]["Stages"]

    def stage_templates(self, stage_id: str) -> dict[str, dict]:
        """Every template of a pipeline stage's nested assembly, by stack name."""
        folder = self.directory / f"assembly-{self.stack.stack_name}-{stage_id}"
        manifest = json.loads((folder / "manifest.json").read_text())
        templates = {}
        for artifact in manifest["artifacts"].values():
            if artifact["type"] == "aws:cloudformation:stack":
                name = artifact["properties"].get("stackName")
                templates[name] = json.loads((folder / artifact["properties"]["templateFile"]).read_text())
        return templates


def synthesize(folder: Path) -> SynthesizedPipeline:
    """The pipeline app (with cdk-nag and Guard, as `make synth-pipeline` runs app.py), from the configs in `folder`."""
    outdir = folder / "cdk.out"
    # cdk.json's feature flags, as the CDK CLI passes them to `make synth`.
    context = json.loads((REPO_ROOT / "cdk.json").read_text())["context"]
    app, stack = create_pipeline_app(*load_pipeline(folder / "pipeline.yaml"), outdir=str(outdir), context=context)
    app.synth()
    return SynthesizedPipeline(stack, outdir)
