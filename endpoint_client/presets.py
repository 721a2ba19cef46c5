"""Ready-made inputs for the project's default models (resnet50, yolov5s, bert_base).

Preprocessing follows each model's usual recipe; pure numpy, so it runs anywhere the client does:
- resnet50: shorter side to 256, centre crop 224x224, RGB scaled to 0..1 and normalised with the
  ImageNet mean/std, NCHW FP32 with a batch of 1.
- yolov5s: letterboxed to 640x640 (aspect kept, grey 114 padding, as YOLOv5's own `letterbox`),
  RGB 0..1, NCHW FP32 with a batch of 1.
- bert_base: token ids and attention mask, INT32 [1, 128]. With `transformers` installed and the
  `bert-base-uncased` vocabulary in its local cache, its WordPiece tokenizer is used; otherwise a tiny
  deterministic fallback (words hashed into the vocabulary range) that gives valid-shaped, stable but
  meaningless ids: enough to check an endpoint answers, not to judge its predictions.

Input names are the defaults of the project's exports; rename them with `--rename OLD=NEW` when a
model's config.pbtxt says otherwise.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from endpoint_client.errors import InvalidInputError
from endpoint_client.inputs import read_bounded, regular_file

IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)
BERT_VOCAB_SIZE = 30522
BERT_CLS, BERT_SEP, BERT_PAD = 101, 102, 0
_FIRST_WORD_ID = 1000  # below this, bert-base-uncased keeps special and unused tokens


# Bounds on an --image, checked from its header before any pixel is decoded (review finding 6: a 6 KB
# 2000x1 PPM took 7.7 GB once scaled to 256 px on its short side): a 24-megapixel camera photo passes.
MAX_IMAGE_FILE_BYTES = 64 * 1024 * 1024
MAX_IMAGE_PIXELS = 25_000_000
MAX_ASPECT_RATIO = 20  # resnet50 scales the short side to 256: the long side stays <= 5120 px


def check_image_size(path: Path, height: int, width: int) -> None:
    if height < 1 or width < 1:
        raise InvalidInputError(f"image {path} is {width}x{height}: it has no pixels")
    if height * width > MAX_IMAGE_PIXELS:
        raise InvalidInputError(f"image {path} is {width}x{height}; at most {MAX_IMAGE_PIXELS} pixels are accepted")
    if max(height, width) > MAX_ASPECT_RATIO * min(height, width):
        raise InvalidInputError(
            f"image {path} is {width}x{height}; its long side may be at most {MAX_ASPECT_RATIO} times its short side"
        )


def load_image(path: Path) -> np.ndarray:
    """An image as HxWx3 uint8 RGB: .npy (already HxWx3 uint8), binary PPM (P6), or anything Pillow reads."""
    if not path.exists():
        raise InvalidInputError(f"image {path} does not exist")
    where = f"image {path}"
    if path.suffix == ".npy":
        regular_file(path, where, MAX_IMAGE_FILE_BYTES)
        image = _read_npy(path)
    else:
        data = read_bounded(path, where, MAX_IMAGE_FILE_BYTES)
        image = _read_ppm(path, data) if data[:2] == b"P6" else _read_with_pillow(path)
    if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
        raise InvalidInputError(f"image {path}: expected HxWx3 uint8 RGB, got shape {image.shape} {image.dtype}")
    return image


def _read_npy(path: Path) -> np.ndarray:
    try:
        mapped = np.load(path, allow_pickle=False, mmap_mode="r")  # the header only; pixels stay on disk
    except (OSError, ValueError) as error:
        raise InvalidInputError(f"image {path}: not a readable .npy file ({error})") from error
    if mapped.ndim != 3 or mapped.shape[2] != 3 or mapped.dtype != np.uint8:
        raise InvalidInputError(f"image {path}: expected HxWx3 uint8 RGB, got shape {mapped.shape} {mapped.dtype}")
    check_image_size(path, mapped.shape[0], mapped.shape[1])
    return np.array(mapped)


# pyproject.toml's optional extra `images`; README.md and docs/client-and-local-endpoint.md say the same words
# (tests/client/test_client_cli.py compares them).
PILLOW_INSTALL_HINT = ".venv/bin/pip install -e '.[images]'"


def _read_with_pillow(path: Path) -> np.ndarray:
    try:
        from PIL import Image
    except ImportError:
        raise InvalidInputError(
            f"image {path}: reading {path.suffix or 'this format'} needs Pillow (`{PILLOW_INSTALL_HINT}`); "
            "or pass a binary PPM or an HxWx3 uint8 .npy"
        ) from None
    try:
        with Image.open(path) as opened:
            width, height = opened.size  # from the header: nothing decoded yet
            check_image_size(path, height, width)
            return np.asarray(opened.convert("RGB"))
    except (OSError, ValueError, Image.DecompressionBombError) as error:
        raise InvalidInputError(f"image {path}: cannot be read ({error})") from error


def _read_ppm(path: Path, data: bytes) -> np.ndarray:
    fields = re.match(rb"P6\s+(?:#[^\n]*\s+)*(\d{1,9})\s+(\d{1,9})\s+(\d+)\s", data)
    if not fields or int(fields.group(3)) != 255:
        raise InvalidInputError(f"image {path}: not an 8-bit binary PPM (P6 WIDTH HEIGHT 255)")
    width, height = int(fields.group(1)), int(fields.group(2))
    check_image_size(path, height, width)
    pixels = np.frombuffer(data, dtype=np.uint8, offset=fields.end())
    if pixels.size < width * height * 3:
        raise InvalidInputError(f"image {path}: PPM holds {pixels.size} bytes, {width * height * 3} needed")
    return pixels[: width * height * 3].reshape(height, width, 3)


def resize_bilinear(image: np.ndarray, height: int, width: int) -> np.ndarray:
    """HxWxC -> height x width x C, float32, half-pixel centres (like OpenCV's INTER_LINEAR).

    Only the rows and columns used are turned into floats: never a float copy of a whole large image."""
    in_h, in_w = image.shape[:2]
    ys = np.clip((np.arange(height) + 0.5) * in_h / height - 0.5, 0, in_h - 1)
    xs = np.clip((np.arange(width) + 0.5) * in_w / width - 0.5, 0, in_w - 1)
    y0, x0 = np.floor(ys).astype(int), np.floor(xs).astype(int)
    y1, x1 = np.minimum(y0 + 1, in_h - 1), np.minimum(x0 + 1, in_w - 1)
    wy, wx = (ys - y0)[:, None, None], (xs - x0)[None, :, None]
    rows0, rows1 = image[y0].astype(np.float32), image[y1].astype(np.float32)
    top = rows0[:, x0] * (1 - wx) + rows0[:, x1] * wx
    bottom = rows1[:, x0] * (1 - wx) + rows1[:, x1] * wx
    return top * (1 - wy) + bottom * wy


def resnet50_inputs(image: np.ndarray, *, name: str = "input") -> dict[str, np.ndarray]:
    height, width = image.shape[:2]
    scale = 256 / min(height, width)
    resized = resize_bilinear(image, max(224, round(height * scale)), max(224, round(width * scale)))
    top, left = (resized.shape[0] - 224) // 2, (resized.shape[1] - 224) // 2
    crop = resized[top : top + 224, left : left + 224] / 255.0
    normalised = (crop - IMAGENET_MEAN) / IMAGENET_STD
    return {name: np.ascontiguousarray(normalised.transpose(2, 0, 1)[None], dtype=np.float32)}


def yolov5s_inputs(image: np.ndarray, *, name: str = "images", size: int = 640) -> dict[str, np.ndarray]:
    height, width = image.shape[:2]
    scale = min(size / height, size / width)
    new_h, new_w = round(height * scale), round(width * scale)
    canvas = np.full((size, size, 3), 114.0, dtype=np.float32)
    top, left = (size - new_h) // 2, (size - new_w) // 2
    canvas[top : top + new_h, left : left + new_w] = resize_bilinear(image, new_h, new_w)
    return {name: np.ascontiguousarray((canvas / 255.0).transpose(2, 0, 1)[None], dtype=np.float32)}


@dataclass(frozen=True)
class Tokens:
    ids: np.ndarray  # int32 [1, max_length]
    mask: np.ndarray  # int32 [1, max_length]
    tokenizer: str  # "transformers:bert-base-uncased" or "fallback"


def tokenize(text: str, *, max_length: int = 128) -> Tokens:
    try:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained("bert-base-uncased", local_files_only=True)
    except Exception:  # not installed, or no vocabulary cached: this client never downloads
        return fallback_tokenize(text, max_length=max_length)
    encoded = tokenizer(text, max_length=max_length, padding="max_length", truncation=True, return_tensors="np")
    return Tokens(
        encoded["input_ids"].astype(np.int32),
        encoded["attention_mask"].astype(np.int32),
        "transformers:bert-base-uncased",
    )


def fallback_tokenize(text: str, *, max_length: int = 128) -> Tokens:
    """Deterministic stand-in: lower-cased words and punctuation, each hashed to an id in [1000, 30522)."""
    words = re.findall(r"\w+|[^\w\s]", text.lower())
    ids = [BERT_CLS] + [_FIRST_WORD_ID + zlib.crc32(w.encode()) % (BERT_VOCAB_SIZE - _FIRST_WORD_ID) for w in words]
    ids = [*ids[: max_length - 1], BERT_SEP]
    padded = np.full((1, max_length), BERT_PAD, dtype=np.int32)
    padded[0, : len(ids)] = ids
    mask = np.zeros((1, max_length), dtype=np.int32)
    mask[0, : len(ids)] = 1
    return Tokens(padded, mask, "fallback")


def bert_base_inputs(
    text: str, *, ids_name: str = "input_ids", mask_name: str = "attention_mask"
) -> tuple[dict[str, np.ndarray], str]:
    tokens = tokenize(text)
    return {ids_name: tokens.ids, mask_name: tokens.mask}, tokens.tokenizer


IMAGE_PRESETS = {"resnet50": resnet50_inputs, "yolov5s": yolov5s_inputs}
TEXT_PRESETS = ("bert_base",)
PRESETS = (*IMAGE_PRESETS, *TEXT_PRESETS)
