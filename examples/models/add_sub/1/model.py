"""Triton Python-backend model: OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1 (FP32, [batch, 4]).

Runs inside Triton's Python backend stub, which provides `triton_python_backend_utils` and hands
tensors over as numpy arrays (numpy comes from the server's environment). With dynamic batching
Triton may hand `execute` several requests at once: each gets its own response, in order.
"""

import json

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args: dict) -> None:
        config = json.loads(args["model_config"])
        self.output_dtypes = {
            name: pb_utils.triton_string_to_numpy(pb_utils.get_output_config_by_name(config, name)["data_type"])
            for name in ("OUTPUT0", "OUTPUT1")
        }

    def execute(self, requests: list) -> list:
        responses = []
        for request in requests:
            in0 = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            in1 = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            out0 = pb_utils.Tensor("OUTPUT0", (in0 + in1).astype(self.output_dtypes["OUTPUT0"]))
            out1 = pb_utils.Tensor("OUTPUT1", (in0 - in1).astype(self.output_dtypes["OUTPUT1"]))
            responses.append(pb_utils.InferenceResponse(output_tensors=[out0, out1]))
        return responses
