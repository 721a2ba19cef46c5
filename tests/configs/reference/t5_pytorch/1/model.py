"""Shape stand-in of the reference T5 model (tests/configs/reference.yaml): the same tensors, no T5.

The reference model loads T5 with transformers in `initialize` and runs `generate` on `input_ids` and
`attention_mask`; this one answers each request with its input ids where the mask is set, so the
deployment around it (batching, tensors, environment) can be tried without the weights.
"""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            ids = pb_utils.get_input_tensor_by_name(request, "input_ids").as_numpy()
            mask = pb_utils.get_input_tensor_by_name(request, "attention_mask").as_numpy()
            if ids.shape != mask.shape:
                error = pb_utils.TritonError(
                    f"input_ids {ids.shape} and attention_mask {mask.shape} differ", pb_utils.TritonError.INVALID_ARG
                )
                responses.append(pb_utils.InferenceResponse(error=error))
                continue
            output = np.where(mask != 0, ids, 0).astype(np.int32)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("output", output)]))
        return responses
