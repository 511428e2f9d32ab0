"""FLUX.2 [klein]'s prompt features (`qwen3PromptFeatures` in `examples/llama/Llama.lean`)
against transformers: a tiny random Qwen3 (tied head and not) over right- and left-padded
prompts; the hidden states after `k1`, `k2`, `k3` layers side by side equal
`Flux2KleinPipeline`'s stacking of `output_hidden_states` at every position, padding included
(the transformer reads all of them)."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
import transformers as tf

from pytyr.errors import ConfigError
from pytyr.hf.config import read_hf_config
from pytyr.pipeline import LeanModels, module_from_graph

LLAMA = Path(__file__).resolve().parents[1] / "examples" / "llama" / "Llama.lean"
LAYERS = (1, 2, 4)


def _qwen3(tmp_path: Path, tied: bool) -> tuple[tf.Qwen3ForCausalLM, Path]:
    torch.manual_seed(0)
    model = tf.Qwen3ForCausalLM(tf.Qwen3Config(
        vocab_size=50, hidden_size=16, intermediate_size=24, num_hidden_layers=5,
        num_attention_heads=2, num_key_value_heads=1, head_dim=8, max_position_embeddings=64,
        tie_word_embeddings=tied)).eval()
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():  # every parameter drawn, norm gains around 1
        for name, p in model.named_parameters():
            p.copy_(("norm" in name) + 0.3 * torch.randn(p.shape, generator=gen))
    model.save_pretrained(tmp_path / "enc")
    return model, tmp_path / "enc"


def _features(path: Path, model: str, t: int, layers: tuple[int, int, int]) -> torch.nn.Module:
    values = read_hf_config(path / "config.json").values
    values["c"].update(window=64, cache=64)  # Tyr's own fields, read by no model here
    values.update(b=2, t=t, k1=layers[0], k2=layers[1], k3=layers[2])
    return module_from_graph(LeanModels(LLAMA).graph(model, values), empty=True)


@pytest.mark.parametrize("tied", [True, False])
def test_the_features_are_the_pipelines_stacked_hidden_states(tmp_path, tied):
    hf, path = _qwen3(tmp_path, tied)
    module = _features(path, "qwen3TiedPromptFeatures" if tied else "qwen3PromptFeatures",
                       7, LAYERS)
    state = {k: v for k, v in hf.state_dict().items() if not (tied and k == "lm_head.weight")}
    module.load_state_dict(state, strict=True, assign=True)
    ids = torch.randint(0, 50, (2, 7), generator=torch.Generator().manual_seed(2))
    mask = torch.tensor([[1, 1, 1, 1, 0, 0, 0], [0, 0, 1, 1, 1, 1, 1]])  # right, left padded
    with torch.no_grad():
        (got,) = module(ids, mask)
        states = hf(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states
    want = torch.stack([states[k] for k in LAYERS], dim=1).permute(0, 2, 1, 3).reshape(2, 7, 48)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("layers,hyp", [((2, 1, 3), "h12"), ((1, 2, 5), "h3")])
def test_layers_out_of_order_or_past_the_last_are_refused(tmp_path, layers, hyp):
    # hidden_states[5] of a 5-layer model is the final norm's output, no layer's stream
    _, path = _qwen3(tmp_path, True)
    with pytest.raises(ConfigError, match=hyp):
        _features(path, "qwen3TiedPromptFeatures", 7, layers)
