# Load test of an example model on the local CPU Triton (docs/performance.md, "Load tests"; figures in bench/README.md).
#   make loadtest                              add_sub, concurrency 1,2,4,8, 20 s per level after 3 s of warm-up
#   make loadtest LOCAL_MODEL=image_cnn        inputs generated from the model's config.pbtxt
#   make loadtest LOCAL_MODEL=image_classifier the image ensemble, sent examples/images/cat.jpg (TYPE_STRING input)
#   make loadtest LOADTEST_LEVELS=1,4,16 LOADTEST_DURATION=60 LOADTEST_ARGS="--slo-p99-ms 100 --plot x.png"
#
# It packages the model as `make local` does, starts the local endpoint on a free loopback port, runs
# `python -m endpoint_client loadtest` against it (JSON in build/loadtest/<model>.json) and stops the endpoint,
# also when the load test fails.

LOADTEST_OUT ?= build/loadtest
LOADTEST_LEVELS ?= 1,2,4,8
LOADTEST_DURATION ?= 20
LOADTEST_WARMUP ?= 3
LOADTEST_ARGS ?=
# Models whose inputs cannot be generated from their config (bytes only the model understands) name theirs here.
LOADTEST_INPUTS_image_classifier := --raw image=examples/images/cat.jpg --output labels
LOADTEST_INPUTS ?= $(or $(LOADTEST_INPUTS_$(LOCAL_MODEL)),--model-config $(LOCAL_MODEL_REPO)/$(LOCAL_MODEL))

.PHONY: loadtest

# The Triton venv's stamp is made in the recipe: mk/local.mk, which names it, may be read after this file.
loadtest: $(BIN)/.requirements.stamp
	@$(MAKE) --no-print-directory $(TRITON_ENV_STAMP)
	@mkdir -p $(LOADTEST_OUT)/$(LOCAL_MODEL)
	$(BIN)/python -m model_build package $(LOCAL_MODEL_REPO) --model $(LOCAL_MODEL) --layout single \
		--environment-python $(TRITON_VENV)/bin/python --out $(LOADTEST_OUT)/$(LOCAL_MODEL)
	@rm -f $(LOADTEST_OUT)/$(LOCAL_MODEL).url; \
	$(BIN)/python -m endpoint_client local $(LOADTEST_OUT)/$(LOCAL_MODEL)/model.tar.gz --model-name $(LOCAL_MODEL) \
		--port 0 --env SAGEMAKER_TRITON_LOG_VERBOSE=false \
		> $(LOADTEST_OUT)/$(LOCAL_MODEL).url 2> $(LOADTEST_OUT)/$(LOCAL_MODEL).log & server=$$!; \
	trap 'kill $$server 2>/dev/null; wait $$server 2>/dev/null || true' EXIT; \
	for _ in $$(seq 600); do \
		test -s $(LOADTEST_OUT)/$(LOCAL_MODEL).url && break; \
		kill -0 $$server 2>/dev/null || { cat $(LOADTEST_OUT)/$(LOCAL_MODEL).log; exit 1; }; \
		sleep 0.5; \
	done; \
	url=$$(head -n 1 $(LOADTEST_OUT)/$(LOCAL_MODEL).url); \
	test -n "$$url" || { echo "the local endpoint did not start in 300 s"; cat $(LOADTEST_OUT)/$(LOCAL_MODEL).log; exit 1; }; \
	$(BIN)/python -m endpoint_client loadtest --local $$url --model-name $(LOCAL_MODEL) $(LOADTEST_INPUTS) \
		--concurrency $(LOADTEST_LEVELS) --duration $(LOADTEST_DURATION) --warmup $(LOADTEST_WARMUP) \
		--json $(LOADTEST_OUT)/$(LOCAL_MODEL).json $(LOADTEST_ARGS)
