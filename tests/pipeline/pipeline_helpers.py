"""Helpers of the pipeline tests: stage configs written to a temp folder (synthesis: tests/synth_helpers.py)."""

from __future__ import annotations

import copy
from pathlib import Path

import yaml
from synth_helpers import config_folder, read_shipped_config

PIPELINE_ACCOUNT, DEV_ACCOUNT, PROD_ACCOUNT = "111111111111", "222222222222", "333333333333"
DEV_BUCKET = "triton-models-dev-example"


def read_config(name: str) -> dict:
    """The shipped config/<name>.yaml (tests/shipped_config/), not the user's: these folders are test inputs whose
    values the pipeline tests assert (`owner/repo`, one account); the user's own config/ is the pipeline_app's."""
    return read_shipped_config(name)


def promoted_documents() -> dict[str, dict]:
    """The shipped dev/prod configs with promotion set up as docs/pipeline.md describes."""
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


def default_pipeline_folder() -> Path:
    """The shipped config/pipeline.yaml with its dev/prod configs, promotion set up."""
    return config_folder("tests/pipeline:default", promoted_documents())


def cross_account_folder() -> Path:
    """A cross-account promotion with a prod wave and a CodeCommit source (shared with the contract tests)."""
    return config_folder("tests/pipeline:cross-account", cross_account_documents())
