# Two entry points for a fresh machine (Python 3.11+ and Node 20+ only):
#   make synth   bootstrap, then synthesize every stack of the default stage into cdk.out/
#   make test    bootstrap, then ruff, pytest and cfn-lint over every synthesized template
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := synth

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# uv installs both venvs (the lock below; mk/local.mk's Triton venv).
UV_VERSION := 0.13.8
UV := $(BIN)/uv
STAGE ?= dev
STAGES := dev prod
# The folder of the stage files: `make synth-stage STAGE=ensemble CONFIG_DIR=examples/config` (-c config_dir=...).
CONFIG_DIR ?= config
override CONFIG_DIR := $(patsubst %/,%,$(CONFIG_DIR))
# The default stage synthesizes into cdk.out/, others into cdk.out-<stage>/; a stage of examples/config/ into
# cdk.out-example-<stage>/, of another folder into cdk.out-<folder>-<stage>/.
OUTDIR = $(if $(filter config,$(CONFIG_DIR)),$(if $(filter dev,$(STAGE)),cdk.out,cdk.out-$(STAGE)),$\
	$(if $(filter examples/config,$(CONFIG_DIR)),cdk.out-example-$(STAGE),cdk.out-$(subst /,-,$(CONFIG_DIR))-$(STAGE)))
# The promotion pipeline (config/pipeline.yaml) is its own app: `app.py -c pipeline=true`.
PIPELINE_OUTDIR ?= cdk.out-pipeline
CDK := node_modules/.bin/cdk
CDK_FLAGS := --no-notices --no-version-reporting --ci

# jsii prints a banner on Node 20; the CLI asks for telemetry consent and update notices.
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION := 1
export CDK_DISABLE_CLI_TELEMETRY := true
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: bootstrap lock synth synth-stage synth-pipeline synth-all test lint pytest cfn-lint clean deploy diff destroy \
	deploy-pipeline stale-stacks

# Area-specific targets (e.g. mk/local.mk: the local Triton endpoint and its environment).
TRITON_ENV_STAMP :=
-include mk/*.mk

# The venv is installed by uv from requirements-dev.lock: every package, direct or not, pinned with its hashes,
# so nothing is resolved at install time (bench/README.md "Bootstrap": 372 s with pip on a fresh machine, 24 s
# with uv). requirements.txt / requirements-dev.txt stay the files people edit; `make lock` regenerates the lock
# from them, and a test fails while the two disagree. Re-run when the lock changes (the stamp is older than it).
# The project itself is installed editable without dependencies: it only adds the console scripts
# model-build and triton-endpoint (pyproject.toml).
# --compile-bytecode: uv (unlike pip) leaves the packages uncompiled, and where PYTHONDONTWRITEBYTECODE is set (it
# is on the machines this project is tested on) every Python process compiles what it imports again: botocore,
# onnx, numpy... in each of the hundreds of processes `make test` starts (bench/README.md, make test).
LOCK_FLAGS := --universal --python-version 3.11 --generate-hashes --quiet

$(UV):
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet uv==$(UV_VERSION)

$(BIN)/.requirements.stamp: requirements-dev.lock pyproject.toml | $(UV)
	$(UV) pip install --quiet --compile-bytecode --python $(BIN)/python --require-hashes -r requirements-dev.lock
	$(UV) pip install --quiet --python $(BIN)/python --no-deps -e .
	@touch $@

lock: | $(UV)
	$(UV) pip compile requirements-dev.txt $(LOCK_FLAGS) -o requirements-dev.lock

node_modules/.package.stamp: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	@touch $@

bootstrap: $(BIN)/.requirements.stamp node_modules/.package.stamp

# `make synth`: the stage's stacks (cdk.out/) and the pipeline (cdk.out-pipeline/).
synth: synth-stage
	@if $(BIN)/python -m stacks.deploy_preflight pipeline-configured --config-dir config; then \
		$(MAKE) --no-print-directory synth-pipeline; fi

# synth-stage records a fingerprint of its inputs beside the assembly (stacks/assembly_fingerprint.py);
# deploy/diff/destroy synthesize again only when an input changed since (ASSEMBLY below).
STAGE_ARGS = --stage $(STAGE) --config-dir $(CONFIG_DIR)
FINGERPRINT := $(BIN)/python -m stacks.assembly_fingerprint

synth-stage: bootstrap
	@$(FINGERPRINT) begin --app $(OUTDIR) $(STAGE_ARGS)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(CDK) synth -c stage=$(STAGE) -c config_dir=$(CONFIG_DIR) $(CDK_FLAGS) --quiet \
		-o $(OUTDIR)
	@$(FINGERPRINT) record --app $(OUTDIR) $(STAGE_ARGS)

synth-pipeline: bootstrap
	PATH="$(CURDIR)/$(BIN):$$PATH" $(CDK) synth -c pipeline=true $(CDK_FLAGS) --quiet -o $(PIPELINE_OUTDIR)

# Every stage of examples/config/ too, with the same gates (cdk-nag, Guard, cfn-lint).
EXAMPLE_STAGES := $(basename $(notdir $(wildcard examples/config/*.yaml)))

synth-all: bootstrap
	@for s in $(STAGES); do $(MAKE) --no-print-directory synth-stage STAGE=$$s; done
	@$(MAKE) --no-print-directory synth-pipeline
	@for s in $(EXAMPLE_STAGES); do \
		$(MAKE) --no-print-directory synth-stage STAGE=$$s CONFIG_DIR=examples/config || exit 1; \
	done

# One stage's stacks only (Triton-<stage>-*), from the assembly `synth-stage` wrote and gated; the pipeline
# stack is never selected here (deploy it with `make deploy-pipeline`). CDK asks before it widens IAM or
# security groups; pass CDK_ARGS=... for more CLI options (e.g. --profile NAME).
# Before anything reaches AWS, PREFLIGHT refuses a config placeholder (deploy, deploy-pipeline) and a missing
# credential (all four), with one message each (stacks/deploy_preflight.py); then ASSEMBLY synthesizes the
# stage again only when an input changed since its assembly was written.
STAGE_STACKS = 'Triton-$(STAGE)-*'
CDK_ARGS ?=
PREFLIGHT = $(BIN)/python -m stacks.deploy_preflight --config-dir $(CONFIG_DIR) --cdk-args='$(CDK_ARGS)'
ASSEMBLY = $(FINGERPRINT) check --app $(OUTDIR) $(STAGE_ARGS) || \
	$(MAKE) --no-print-directory synth-stage STAGE=$(STAGE) CONFIG_DIR=$(CONFIG_DIR)

deploy: bootstrap
	@$(PREFLIGHT) deploy --stage $(STAGE)
	@$(ASSEMBLY)
	$(CDK) deploy --app $(OUTDIR) $(STAGE_STACKS) $(CDK_FLAGS) --require-approval broadening $(CDK_ARGS)
	@$(BIN)/python -m stacks.stale_stacks --app $(OUTDIR) --stage $(STAGE) $(STALE_ARGS)

# Deployed Triton-<stage>-* stacks the app no longer has (an endpoint removed from the config): `cdk deploy`
# never deletes them and `cdk destroy` cannot; this lists them with the command that deletes each (it deletes
# nothing). Needs AWS credentials (AWS_PROFILE=... make stale-stacks); says so and skips without them.
# STALE_ARGS=--fail-on-stale exits 1 when it finds one (CI); --region/--profile as for the AWS CLI.
STALE_ARGS ?=

stale-stacks: bootstrap
	@$(ASSEMBLY)
	$(BIN)/python -m stacks.stale_stacks --app $(OUTDIR) --stage $(STAGE) $(STALE_ARGS)

diff: bootstrap
	@$(PREFLIGHT) diff --stage $(STAGE)
	@$(ASSEMBLY)
	$(CDK) diff --app $(OUTDIR) $(STAGE_STACKS) $(CDK_FLAGS) $(CDK_ARGS)

# Retained on destroy (README, "Tear down"): the stage's KMS key, artifact and access-log buckets.
# A config that no longer synthesizes (a model file removed) does not block a teardown: the stage's last
# assembly names its stacks; without one, stacks/stage_teardown.py deletes the deployed Triton-<stage>-*
# stacks found in CloudFormation, endpoints first. Both ask first (CDK_ARGS=--force does not ask).
destroy: bootstrap
	@$(PREFLIGHT) destroy --stage $(STAGE)
	@$(ASSEMBLY) || echo "destroy: the config does not synthesize (above); using the stage's last assembly" \
		"($(OUTDIR)) or, without one, its deployed stacks" >&2
	@if test -f $(OUTDIR)/manifest.json; then \
		$(CDK) destroy --app $(OUTDIR) $(STAGE_STACKS) $(CDK_FLAGS) $(CDK_ARGS); \
	else $(BIN)/python -m stacks.stage_teardown $(STAGE_ARGS) --cdk-args='$(CDK_ARGS)'; fi

# The pipeline app reads config/ only (CONFIG_DIR is for stages).
deploy-pipeline: bootstrap
	@$(PREFLIGHT) deploy-pipeline --config-dir config
	@$(MAKE) --no-print-directory synth-pipeline
	$(CDK) deploy --app $(PIPELINE_OUTDIR) Triton-Pipeline $(CDK_FLAGS) --require-approval broadening $(CDK_ARGS)

lint: bootstrap
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# pytest-xdist workers: `auto` is one per core plus one (tests/conftest.py: a fifth of the time the tests wait on
# Triton); a file's tests stay on one worker, so its session fixtures (the synthesized apps) are built once per
# worker. PYTEST_WORKERS=0 runs in one process. --no-loadscope-reorder: files go out in collection order, which
# tests/conftest.py starts with the slowest (xdist would sort them by test count).
# PYTHONDONTWRITEBYTECODE is emptied for the run: where it is set, each of the hundreds of processes the tests start
# (app.py, the CLIs, buildspec steps) compiled the project's modules again, and each worker rewrote every test
# module's asserts again; the bytecode goes to __pycache__ folders git ignores (bench/README.md, make test).
PYTEST_WORKERS ?= auto
pytest: bootstrap $(TRITON_ENV_STAMP)
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder

# cfn-lint over what `make synth-all` wrote. `make test` lints every shipped template inside pytest instead
# (tests/contract/test_cfn_lint.py: the same apps plus the test configs, synthesized once for all the contract
# tests), so it does not synthesize everything a second time through the CLI.
cfn-lint: synth-all
	$(BIN)/cfn-lint --non-zero-exit-code warning -- $$(find cdk.out cdk.out-* -name '*.template.json' | sort)

test: lint pytest

clean:
	rm -rf cdk.out cdk.out-* .pytest_cache .ruff_cache
