"""Text from a masked diffusion model (`pytyr.train.diffusion_sample`): the `sample` table is
checked before any work, and a Lean model with given weights samples through `unmask`."""
from __future__ import annotations

from pathlib import Path

import pytest

from pytyr.errors import ConfigError
from pytyr.pipeline import LeanModels, module_from_graph
from pytyr.train.diffusion_sample import SAMPLE_DEFAULTS, mask_id, sample_config, sample_text

LEAN = Path(__file__).resolve().parents[1] / "examples" / "diffusion" / "Diffusion.lean"
ITOS = list("\n :ABCabcde")  # 11 characters; [MASK] is 11
VALUES = {"c": {"vocab": 11, "block": 16, "n_layer": 1, "n_head": 2, "head_dim": 4,
                "dropout": 0.0}, "b": 4, "t": 12}


@pytest.fixture(scope="module")
def trained():
    models = LeanModels(LEAN)
    weights = module_from_graph(models.graph("diffusion", VALUES), seed=7).state_dict()
    return models, weights


def test_defaults_and_length_from_the_model():
    cfg = sample_config({}, VALUES, ITOS)
    assert cfg == {**SAMPLE_DEFAULTS, "length": 12}
    assert sample_config({"length": 16, "prompt": "Ab"}, VALUES, ITOS)["length"] == 16


@pytest.mark.parametrize("raw,frag", [
    ({"top_k": 5}, "unknown key 'sample.top_k'"),
    ({"steps": "8"}, "'sample.steps' has the wrong type"),
    ({"temperature": True}, "'sample.temperature' has the wrong type"),
    ({"length": 17}, "'sample.length' is 17 but the model's block is 16"),
    ({"length": 0}, "'sample.length' must be a positive integer"),
    ({"length": 4, "prompt": "abc", "suffix": "de"}, "(3 + 2 characters) do not fit"),
    ({"steps": 0}, "'sample.steps' must be >= 1"),
    ({"schedule": "square"}, "'sample.schedule' must be one of linear, cosine"),
    ({"temperature": -0.5}, "'sample.temperature' must be >= 0"),
    ({"prompt": "ROMEO:"}, "outside the vocabulary: ['E', 'M', 'O', 'R']"),
    ({"suffix": "z"}, "outside the vocabulary: ['z']"),
])
def test_bad_sample_tables_are_rejected_with_the_key_named(raw, frag):
    with pytest.raises(ConfigError) as info:
        sample_config(raw, VALUES, ITOS, "cfg.json")
    assert str(info.value).startswith("cfg.json: ") and frag in str(info.value)


@pytest.mark.parametrize("values", [{}, {"c": {}}, {"c": {"vocab": 0}}, {"c": {"vocab": True}}])
def test_mask_id_needs_the_vocabulary(values):
    with pytest.raises(ConfigError, match="model.c.vocab must be a positive integer"):
        mask_id(values)
    assert mask_id(VALUES) == 11


def test_sample_text_keeps_prompt_and_suffix_and_is_seeded(trained):
    models, weights = trained
    cfg = sample_config({"prompt": "Ab", "suffix": "\n", "steps": 5, "length": 14}, VALUES, ITOS)
    seen = []
    text = sample_text(models, cfg, VALUES, weights, ITOS, on_step=seen.append)
    assert len(text) == 14 and text.startswith("Ab") and text.endswith("\n")
    assert set(text) <= set(ITOS)
    assert [s.step for s in seen] == [1, 2, 3, 4, 5] and seen[-1].ids.shape == (14,)
    assert sample_text(models, cfg, VALUES, weights, ITOS) == text
    other = sample_text(models, {**cfg, "seed": 2}, VALUES, weights, ITOS)
    assert other != text and other.startswith("Ab")


def test_sample_text_uses_the_weights(trained):
    models, weights = trained
    cfg = sample_config({"temperature": 0, "steps": 3}, VALUES, ITOS)
    a = sample_text(models, cfg, VALUES, weights, ITOS)
    other = module_from_graph(models.graph("diffusion", VALUES), seed=8).state_dict()
    assert sample_text(models, cfg, VALUES, other, ITOS) != a
