"""ImageNet class scores -> the names of the five best classes, best first (Triton Python backend).

`logits` FP32 [1000] in, `labels` BYTES [5] out. The names come from ../imagenet_labels.txt (Triton's
own densenet example labels, BSD-3-Clause; see config.pbtxt), read once at load: a file that does not
hold exactly 1000 names fails the load, not a request.
"""

import os

import numpy as np
import triton_python_backend_utils as pb_utils

CLASSES = 1000
TOP_K = 5
LABELS_FILE = "imagenet_labels.txt"


class TritonPythonModel:
    def initialize(self, args):
        path = os.path.join(args["model_repository"], LABELS_FILE)
        with open(path, encoding="utf-8") as labels:
            names = [line.strip() for line in labels if line.strip()]
        if len(names) != CLASSES:
            raise pb_utils.TritonModelException(f"{LABELS_FILE}: {len(names)} names, expected {CLASSES}")
        self.names = np.array([name.encode("utf-8") for name in names], dtype=np.object_)

    def execute(self, requests):
        responses = []
        for request in requests:
            scores = pb_utils.get_input_tensor_by_name(request, "logits").as_numpy().reshape(-1)
            if scores.size != CLASSES or not np.all(np.isfinite(scores)):
                message = f"logits: expected {CLASSES} finite scores, got {scores.size} values"
                error = pb_utils.TritonError(message, pb_utils.TritonError.INVALID_ARG)
                responses.append(pb_utils.InferenceResponse(error=error))
                continue
            best = np.argsort(-scores, kind="stable")[:TOP_K]  # ties: the lower class index first
            labels = pb_utils.Tensor("labels", self.names[best])
            responses.append(pb_utils.InferenceResponse(output_tensors=[labels]))
        return responses
