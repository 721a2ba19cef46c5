"""The client's input presets name the tensors the export recipes give the default models."""

from __future__ import annotations

import numpy as np

from endpoint_client import presets
from model_build.export import RECIPES


def test_presets_cover_every_export_recipe() -> None:
    assert set(presets.PRESETS) == set(RECIPES)


def test_image_presets_use_the_exported_input_names() -> None:
    image = np.zeros((32, 48, 3), dtype=np.uint8)
    for name, build_inputs in presets.IMAGE_PRESETS.items():
        assert tuple(build_inputs(image)) == RECIPES[name].inputs, name


def test_text_preset_uses_the_exported_input_names() -> None:
    inputs, _tokenizer = presets.bert_base_inputs("a short sentence")
    assert tuple(inputs) == RECIPES["bert_base"].inputs
    assert all(array.dtype == np.int32 and array.shape == (1, 128) for array in inputs.values())
