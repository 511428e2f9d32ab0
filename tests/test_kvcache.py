"""Cached decoding (`pytyr.train.tasks.lm.kvcache`) through the factory `tyr sample` uses: the same
tokens as uncached sampling, a context longer than the cache, and step models whose types
do not say how to drive them, refused by name."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from pytyr.errors import ConfigError
from pytyr.pipeline import LeanModels
from pytyr.train.model import RunModel
from pytyr.train.task import Feed
from pytyr.train.tasks.lm.kvcache import generate_cached
from pytyr.train.tasks.lm.sample import generate
from tiny_nanochat import MODELS, tiny_factory

ROOT = Path(__file__).resolve().parents[1]


def _gpt_factory() -> RunModel:
    """examples/gpt/GPT.lean's model, every parameter drawn (biases and gains too)."""
    from pytyr.pipeline import module_from_graph

    source = LeanModels(ROOT / "examples" / "gpt" / "GPT.lean")
    c = {"vocab": 37, "block": 12, "n_layer": 2, "n_head": 2, "head_dim": 8, "dropout": 0.0}
    m = module_from_graph(source.graph("gptLogits", {"c": c, "b": 1, "t": 4}), seed=2)
    gen = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for p in m.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * 0.3)
    return RunModel(source, "gptLogits", {"c": c}, m.state_dict())


@pytest.fixture(scope="module", params=sorted(MODELS) + ["gpt"])
def model(request):
    """(the model, its factory): nanochat's layout of today (windows, value embeddings,
    smear, backout) and January's; the GPT example's."""
    if request.param == "gpt":
        return "gpt", _gpt_factory()
    return request.param, tiny_factory(MODELS[request.param], seed=2, proj_seed=3,
                                       model=request.param)


def _uncached(model, prompt, n, temperature, block=12):
    name, factory = model
    feeds = {"idx": Feed("i64", ("batch", "seq"), bound="vocab")}

    def logits(idx):
        fwd = factory(f"{name}Logits", feeds, {"batch": 1, "seq": idx.shape[1]})
        return fwd({"idx": idx})[0]

    return generate(logits, prompt, n, temperature, 5, seed=4, block_size=block)[0].tolist()


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_cached_sampling_picks_the_uncached_tokens(model, temperature):
    name, factory = model
    prompt = [3, 1, 4, 1, 5]
    want = _uncached(model, prompt, 7, temperature)
    got = generate_cached(factory, f"{name}Step", prompt, 7, temperature, 5, seed=4, block=12)
    assert got == want and len(got) == 12


def test_a_context_longer_than_the_cache_is_prefilled_again(model):
    name, factory = model
    got = generate_cached(factory, f"{name}Step", [3, 1, 4], 30, 0.0, block=12)
    assert len(got) == 33 and got[:3] == [3, 1, 4] and all(0 <= t < 37 for t in got)
    long = list(range(20))  # a prompt longer than the block keeps its head
    assert generate_cached(factory, f"{name}Step", long, 2, 0.0, block=12)[:20] == long


BAD = """
structure P where
  table : T #[8, 8] := normal 0.1
  deriving TensorStruct

@[model]
def noPos {b t : Nat} (p : P) (idx : IT #[b, t] 8) (cache : T #[b, 4]) :
    T #[b, t, 8] × T #[b, 4] :=
  (embedding2 idx p.table, cache)

@[model]
def noCache {b t : Nat} (p : P) (idx : IT #[b, t] 8) (pos : IT #[t] 4) (cache : T #[b, 4]) :
    T #[b, t, 8] :=
  embedding2 idx p.table

@[model]
def shortPos {b t : Nat} (p : P) (idx : IT #[b, t] 8) (pos : IT #[t] 2) (cache : T #[b, 4]) :
    T #[b, t, 8] × T #[b, 4] :=
  (embedding2 idx p.table, cache)
"""


@pytest.mark.parametrize("model,message", [
    ("noPos", "step model 'noPos' must take idx : IT #[b, t] v and pos : IT #[t] n"),
    # positions typed below 2 cannot reach the last of a context of 4 tokens
    ("shortPos", "step model 'shortPos' takes pos : IT #[1] 2, positions below 2, but the "
                 "context holds 4 tokens"),
    ("noCache", "step model 'noCache' returns T #[1, 1, 8]; it must return the logits and "
                "then its 1 cache(s) (cache : T #[1, 4]), in order"),
])
def test_step_models_are_checked_by_their_types(tmp_path, model, message):
    path = tmp_path / "S.lean"
    path.write_text("import Tyr\nopen torch\n" + BAD, encoding="utf-8")
    source = LeanModels(path)
    factory = RunModel(source, model, {}, {"table": torch.zeros(8, 8)})
    with pytest.raises(ConfigError) as e:
        generate_cached(factory, model, [1], 2, block=4)
    assert message in str(e.value)
