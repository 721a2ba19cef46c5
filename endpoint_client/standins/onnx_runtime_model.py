"""Python-backend stand-in for an ONNX Runtime model on the local endpoint (endpoint_client.onnx_standin).

The local Triton (the nvidia-pytriton wheel) has the Python backend only. This model.py runs the model's
own ONNX file with ONNX Runtime on the CPU, with the inputs, outputs and data types of its config.pbtxt,
so a client written against it works unchanged against the real onnxruntime backend on SageMaker.
Runs inside the Triton stub's Python (.venv-triton); ONNX_FILE_PARAMETER names the file in the version folder.
"""

import json
import os

import numpy as np
import onnxruntime as ort
import triton_python_backend_utils as pb_utils

ONNX_FILE_PARAMETER = "LOCAL_ENDPOINT_ONNX_FILE"
# A TensorRT model's engine profile (endpoint_client.onnx_standin): {input: {"min": [...], "max": [...]}}.
SHAPE_RANGES_PARAMETER = "LOCAL_ENDPOINT_SHAPE_RANGES"
# A TensorRT model's config may declare a narrower type than its ONNX file (TensorRT 8.6 turned INT64 inputs
# into INT32): inputs are cast to what the ONNX graph takes, as the engine's build did.
ONNX_TYPES = {
    "tensor(float)": np.float32,
    "tensor(float16)": np.float16,
    "tensor(double)": np.float64,
    "tensor(int64)": np.int64,
    "tensor(int32)": np.int32,
    "tensor(int16)": np.int16,
    "tensor(int8)": np.int8,
    "tensor(uint8)": np.uint8,
    "tensor(bool)": np.bool_,
}


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        name = config["parameters"][ONNX_FILE_PARAMETER]["string_value"]
        path = os.path.join(args["model_repository"], args["model_version"], name)
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1  # one Triton model instance, one core: predictable on a laptop
        self.session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        self.inputs = [tensor["name"] for tensor in config["input"]]
        self.input_types = {i.name: ONNX_TYPES.get(i.type) for i in self.session.get_inputs()}
        self.outputs = [tensor["name"] for tensor in config["output"]]
        self.output_types = {t["name"]: pb_utils.triton_string_to_numpy(t["data_type"]) for t in config["output"]}
        ranges = config["parameters"].get(SHAPE_RANGES_PARAMETER, {}).get("string_value")
        self.shape_ranges = json.loads(ranges) if ranges else {}

    def execute(self, requests):
        responses = []
        for request in requests:
            feeds = {}
            for name in self.inputs:
                tensor = pb_utils.get_input_tensor_by_name(request, name)
                if tensor is not None:  # optional inputs may be left out
                    array = tensor.as_numpy()
                    expected = self.input_types.get(name)
                    feeds[name] = array if expected is None or array.dtype == expected else array.astype(expected)
            refusal = next((r for r in (self._out_of_range(n, a.shape) for n, a in feeds.items()) if r), None)
            if refusal is not None:
                responses.append(pb_utils.InferenceResponse(error=_invalid_argument(refusal)))
                continue
            try:
                results = self.session.run(self.outputs, feeds)
            except Exception as error:  # ONNX Runtime's own message, as the onnxruntime backend reports it
                responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError(f"onnxruntime: {error}")))
                continue
            tensors = [
                pb_utils.Tensor(name, np.ascontiguousarray(result, dtype=self.output_types[name]))
                for name, result in zip(self.outputs, results, strict=True)
            ]
            responses.append(pb_utils.InferenceResponse(output_tensors=tensors))
        return responses

    def _out_of_range(self, name, shape):
        """The TensorRT backend's refusal of a shape outside the engine's profile, or None
        (tensorrt_backend src/tensorrt_utils.h ValidateDimension: its messages, word for word)."""
        profile = self.shape_ranges.get(name)
        if profile is None:
            return None
        low, high = profile["min"], profile["max"]
        if len(shape) != len(high):
            return f"model expected {len(high)} dimensions but received {len(shape)} dimensions"
        for index, (dim, least, most) in enumerate(zip(shape, low, high, strict=True)):
            if dim < least or dim > most:
                return (
                    f"model expected the shape of dimension {index} to be between {least} and {most} but received {dim}"
                )
        return None


def _invalid_argument(message):
    """TRITONSERVER_ERROR_INVALID_ARG, as the TensorRT backend answers (HTTP 400)."""
    code = getattr(pb_utils.TritonError, "INVALID_ARG", None)
    return pb_utils.TritonError(message, code) if code is not None else pb_utils.TritonError(message)
