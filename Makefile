# Two entry points for a fresh machine (Python 3.11+ and Node 20+ only):
#   make synth   bootstrap, then synthesize every stack of the default stage into cdk.out/
#   make test    bootstrap, then ruff, pytest and cfn-lint over every synthesized template
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := synth

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAGE ?= dev
STAGES := dev prod
# The default stage synthesizes into cdk.out/, others into cdk.out-<stage>/.
OUTDIR = $(if $(filter dev,$(STAGE)),cdk.out,cdk.out-$(STAGE))
CDK := node_modules/.bin/cdk
CDK_FLAGS := --no-notices --no-version-reporting --ci

# jsii prints a banner on Node 20; the CLI asks for telemetry consent and update notices.
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION := 1
export CDK_DISABLE_CLI_TELEMETRY := true
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: bootstrap synth synth-all test lint pytest cfn-lint clean

# Area-specific targets (e.g. mk/local.mk: the local Triton endpoint and its environment).
TRITON_ENV_STAMP :=
-include mk/*.mk

# Re-run pip when a requirements file changes (the stamp is older than it).
$(BIN)/.requirements.stamp: requirements.txt requirements-dev.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements-dev.txt
	@touch $@

node_modules/.package.stamp: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	@touch $@

bootstrap: $(BIN)/.requirements.stamp node_modules/.package.stamp

synth: bootstrap
	PATH="$(CURDIR)/$(BIN):$$PATH" $(CDK) synth -c stage=$(STAGE) $(CDK_FLAGS) --quiet -o $(OUTDIR)

synth-all: bootstrap
	@for s in $(STAGES); do $(MAKE) --no-print-directory synth STAGE=$$s; done

lint: bootstrap
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

pytest: bootstrap $(TRITON_ENV_STAMP)
	$(BIN)/python -m pytest

cfn-lint: synth-all
	$(BIN)/cfn-lint --non-zero-exit-code warning -- $$(find cdk.out cdk.out-* -name '*.template.json' | sort)

test: lint pytest cfn-lint

clean:
	rm -rf cdk.out cdk.out-* .pytest_cache .ruff_cache
