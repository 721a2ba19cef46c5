# Local SageMaker-compatible Triton endpoint (docs/client-and-local-endpoint.md).
#   make local                 package examples/models/add_sub and serve it on http://127.0.0.1:8080
#   make local LOCAL_MODEL=image_classifier
#                              the example image pipeline: an ensemble (Python pre-processing with its own packed
#                              environment, an ONNX CNN on ONNX Runtime, Python post-processing), served whole
#   make local LOCAL_CONFIG=examples/config/ensemble.yaml LOCAL_MODEL=image_classifier
#                              a model as a stage config describes it, TensorRT models included: configs generated
#                              as the build generates them, each TensorRT model run from the ONNX its engine is
#                              built from (on ONNX Runtime, named as substituted when the endpoint starts), held
#                              to the shape ranges of the engine the stage config builds (--stage-config)
#   make local LOCAL_PORT=0    any free loopback port (the address is printed once /ping answers)
#   make local LOCAL_HOST=...  another loopback address (::1); others are refused: no authentication
#   make .venv-triton/.stamp   only (re)create the Triton venv (make test's pytest step needs it)
#
# The server comes from the nvidia-pytriton wheel (CPU tritonserver 2.51, Python backend only), which
# needs numpy<2, so it lives in its own venv beside the main one (../shared/README.md, "Tooling facts").

TRITON_VENV := .venv-triton
TRITON_ENV_STAMP := $(TRITON_VENV)/.stamp
LOCAL_MODEL_REPO ?= examples/models
LOCAL_MODEL ?= add_sub
LOCAL_CONFIG ?=
LOCAL_OUT ?= build/local
LOCAL_PORT ?= 8080
LOCAL_HOST ?= 127.0.0.1

.PHONY: local

# (Re)create when missing, broken (e.g. its Python moved) or older than requirements-triton.txt.
$(TRITON_ENV_STAMP): requirements-triton.txt | $(UV)
	@$(TRITON_VENV)/bin/python -c 'import sys' 2>/dev/null || { rm -rf $(TRITON_VENV) && $(PYTHON) -m venv $(TRITON_VENV); }
	$(UV) pip install --quiet --compile-bytecode --python $(TRITON_VENV)/bin/python -r requirements-triton.txt
	$(TRITON_VENV)/bin/python -c 'import numpy, pytriton; assert numpy.__version__ < "2"'
	@touch $@

# A Python model's requirements.txt is packed into its python_env.tar.gz by the project's one packer, with the
# Python of the local Triton (the backend stub's: same version and ABI), cached in build/python-envs. The
# archive may hold several model folders (an ensemble and its steps): SAGEMAKER_TRITON_DEFAULT_MODEL_NAME
# (--model-name) names the one to serve, as the endpoint stack sets it. With LOCAL_CONFIG the model folders
# come from the stage config (`model_build package --config`, model_build/stage_repository.py), not LOCAL_MODEL_REPO.
local: $(BIN)/.requirements.stamp $(TRITON_ENV_STAMP)
	$(BIN)/python -m model_build package $(if $(LOCAL_CONFIG),--config $(LOCAL_CONFIG),$(LOCAL_MODEL_REPO)) \
		--model $(LOCAL_MODEL) --layout single \
		--environment-python $(TRITON_VENV)/bin/python --out $(LOCAL_OUT)
	$(BIN)/python -m endpoint_client local $(LOCAL_OUT)/model.tar.gz --model-name $(LOCAL_MODEL) \
		--port $(LOCAL_PORT) --host $(LOCAL_HOST) $(if $(LOCAL_CONFIG),--stage-config $(LOCAL_CONFIG))
