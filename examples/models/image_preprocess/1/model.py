"""JPEG or PNG bytes -> one ImageNet-normalised image, FP32 [3, 224, 224] (Triton Python backend).

`image` BYTES [1] in: the file's bytes, as `endpoint_client invoke --raw image=cat.jpg` sends them.
`pixels` FP32 [3, 224, 224] out: RGB, shorter side resized to 256 (bilinear), centre crop 224x224,
scaled to 0..1, minus ImageNet's mean, divided by its standard deviation (torchvision's
ImageClassification preset, which the client's `--preset resnet50` follows too).

Pillow comes from this model's packed environment (requirements.txt -> python_env.tar.gz), not from
the server's. The request is hostile until decoded: only JPEG and PNG parsers are tried, the size is
read from the header and refused before any pixel is decoded (decompression bombs), and every refusal
is an INVALID_ARG error naming the problem (HTTP 400), never a crashed model.
"""

import io

import numpy as np
import triton_python_backend_utils as pb_utils

try:
    from PIL import Image, UnidentifiedImageError
except ImportError as error:  # the environment was not packed: say how to pack it
    raise ImportError(
        "image_preprocess needs Pillow from its packed environment python_env.tar.gz (EXECUTION_ENV_PATH); "
        "package the model with `python -m model_build package --environment-python PY`"
    ) from error

FORMATS = ("JPEG", "PNG")
MAX_BYTES = 6_291_456  # SageMaker's InvokeEndpoint payload limit: no real request carries more
MAX_PIXELS = 25_000_000  # as endpoint_client's presets: a 5000x5000 photo decodes to 75 MB of RGB
MAX_ASPECT = 20  # a 25,000,000x1 image would be resized to 6.4e9x256 pixels
RESIZE = 256
CROP = 224
MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)

# Pillow's own bomb guard (a warning over the limit, an error over twice it) backs up the check below.
Image.MAX_IMAGE_PIXELS = MAX_PIXELS


class Refused(Exception):
    """The request's image is refused; the message says why."""


def _image_bytes(request) -> bytes:
    tensor = pb_utils.get_input_tensor_by_name(request, "image")
    values = tensor.as_numpy().reshape(-1) if tensor is not None else ()
    if len(values) != 1:
        raise Refused(f"image: expected one element (the file's bytes), got {len(values)}")
    data = values[0]
    if not isinstance(data, bytes):
        raise Refused("image: expected the file's bytes as a BYTES element")
    if not data:
        raise Refused("image: the element is empty (0 bytes); send a JPEG or PNG file")
    if len(data) > MAX_BYTES:
        raise Refused(f"image: {len(data)} bytes, more than {MAX_BYTES}")
    return data


def _decode(data: bytes) -> "Image.Image":
    try:
        image = Image.open(io.BytesIO(data), formats=FORMATS)  # reads the header only
    except Image.DecompressionBombError as error:  # Pillow's guard, on the header's size
        raise Refused(f"image: refused before decoding, a likely decompression bomb ({error})") from None
    except UnidentifiedImageError:
        raise Refused(f"image: not a JPEG or PNG file ({len(data)} bytes starting {data[:8]!r})") from None
    except Exception as error:  # Pillow raises several types for broken headers
        raise Refused(f"image: a broken JPEG or PNG header ({type(error).__name__}: {error})") from None
    width, height = image.size
    if width < 1 or height < 1:
        raise Refused(f"image: {width}x{height} has no pixels")
    if width * height > MAX_PIXELS:
        raise Refused(f"image: {width}x{height} is {width * height} pixels, more than {MAX_PIXELS}; send a smaller one")
    if max(width, height) > MAX_ASPECT * min(width, height):
        raise Refused(f"image: {width}x{height}: one side is over {MAX_ASPECT} times the other; not a photo")
    try:
        return image.convert("RGB")  # decodes; truncated or corrupt data fails here
    except Exception as error:
        raise Refused(f"image: {image.format} data cannot be decoded ({type(error).__name__}: {error})") from None


def preprocess(data: bytes) -> np.ndarray:
    image = _decode(data)
    width, height = image.size
    scale = RESIZE / min(width, height)
    size = (max(CROP, round(width * scale)), max(CROP, round(height * scale)))
    image = image.resize(size, Image.Resampling.BILINEAR)
    left, top = (size[0] - CROP) // 2, (size[1] - CROP) // 2
    image = image.crop((left, top, left + CROP, top + CROP))
    pixels = np.asarray(image, dtype=np.float32) / 255.0  # HWC
    pixels = (pixels - MEAN) / STD
    return np.ascontiguousarray(pixels.transpose(2, 0, 1))  # CHW


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            try:
                pixels = preprocess(_image_bytes(request))
            except Refused as refusal:
                error = pb_utils.TritonError(str(refusal), pb_utils.TritonError.INVALID_ARG)
                responses.append(pb_utils.InferenceResponse(error=error))
                continue
            except Exception as failure:  # a bug or an exhausted machine: this request fails, the model stays
                error = pb_utils.TritonError(f"image_preprocess failed: {type(failure).__name__}: {failure}")
                responses.append(pb_utils.InferenceResponse(error=error))
                continue
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("pixels", pixels)]))
        return responses
