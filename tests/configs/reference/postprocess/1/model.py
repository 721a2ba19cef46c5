"""Post-processing of the reference detection + segmentation pipeline (tests/configs/reference.yaml).

`detections` FP32 [1, 25200, 85] (YOLOv5 layout: x, y, w, h, objectness, 80 class scores per box, in
640 x 640 pixels) and `masks` FP32 [1, 21, 160, 160] (class scores per pixel at a quarter of the size) in;
`result` BYTES [1] out: JSON {"boxes": [{"box", "score", "class", "mask_pixels"}], "segment_classes"}, the
boxes above the score threshold after greedy non-maximum suppression, each with the number of mask pixels
inside it that the segmenter gives to a foreground class.
"""

import json

import numpy as np
import triton_python_backend_utils as pb_utils

SCORE_THRESHOLD = 0.25
IOU_THRESHOLD = 0.45
MAX_BOXES = 100
MASK_SCALE = 4  # 640 / 160


def _nms(boxes: np.ndarray, scores: np.ndarray) -> list[int]:
    order = np.argsort(-scores, kind="stable")
    kept: list[int] = []
    area = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    while order.size and len(kept) < MAX_BOXES:
        best, order = order[0], order[1:]
        kept.append(int(best))
        x1 = np.maximum(boxes[best, 0], boxes[order, 0])
        y1 = np.maximum(boxes[best, 1], boxes[order, 1])
        x2 = np.minimum(boxes[best, 2], boxes[order, 2])
        y2 = np.minimum(boxes[best, 3], boxes[order, 3])
        overlap = np.clip(x2 - x1, 0, None) * np.clip(y2 - y1, 0, None)
        order = order[overlap / (area[best] + area[order] - overlap + 1e-9) <= IOU_THRESHOLD]
    return kept


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            detections = pb_utils.get_input_tensor_by_name(request, "detections").as_numpy()[0]
            classes = np.argmax(pb_utils.get_input_tensor_by_name(request, "masks").as_numpy()[0], axis=0)
            scores = detections[:, 4] * detections[:, 5:].max(axis=1)
            chosen = scores >= SCORE_THRESHOLD
            xywh, scores, labels = detections[chosen, :4], scores[chosen], detections[chosen, 5:].argmax(axis=1)
            boxes = np.concatenate([xywh[:, :2] - xywh[:, 2:] / 2, xywh[:, :2] + xywh[:, 2:] / 2], axis=1)
            found = []
            for index in _nms(boxes, scores):
                x1, y1, x2, y2 = (np.clip(boxes[index], 0, 640) / MASK_SCALE).astype(int).tolist()
                found.append(
                    {
                        "box": [round(float(v), 1) for v in boxes[index]],
                        "score": round(float(scores[index]), 4),
                        "class": int(labels[index]),
                        "mask_pixels": int(np.count_nonzero(classes[y1:y2, x1:x2])),
                    }
                )
            document = {"boxes": found, "segment_classes": sorted(int(c) for c in np.unique(classes) if c)}
            result = np.array([json.dumps(document).encode()], dtype=np.object_)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("result", result)]))
        return responses
