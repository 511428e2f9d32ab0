"""examples/nanochat/NanoChat.lean: nanochat's math (against the plain PyTorch model of
`bench/plain_nanochat.py` holding the same weights, forward and backward), the hypotheses that
reject bad configs by name and value, and the typed KV-cache step (cached logits equal the
uncached ones)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from pytyr.errors import ConfigError
from pytyr.lean import check_files
from pytyr.pipeline import LeanModels, module_from_graph

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `bench` is a top-level package of the repository
    sys.path.insert(0, str(ROOT))

from bench.plain_nanochat import Config, NanoChat  # noqa: E402

LEAN = ROOT / "examples" / "nanochat" / "NanoChat.lean"
TINY = {"vocab": 37, "block": 12, "depth": 2, "aspect_ratio": 16, "head_dim": 16,
        "n_kv_head": 1, "rope_base": 10000.0, "softcap": 15.0}


@pytest.fixture(scope="module")
def models() -> LeanModels:
    return LeanModels(LEAN)


def _module(models, name, b, t, c=TINY, seed=0):
    return module_from_graph(models.graph(name, {"c": c, "b": b, "t": t}), seed=seed)


def test_the_example_checks():
    assert check_files(LEAN) == []


def test_sizes_follow_the_depth_dial(models):
    # depth 4 × aspect 64 = 256 wide; ⌈256 / 64⌉ = 4 heads of 64; 2 key/value heads
    c = {**TINY, "depth": 4, "aspect_ratio": 64, "head_dim": 64, "n_kv_head": 2}
    g = models.graph("nanochat", {"c": c, "b": 1, "t": 4})
    shapes = {p.path: p.shape for p in g.params}
    assert shapes["blocks.3.attn.c_q"] == (256, 256)
    assert shapes["blocks.3.attn.c_k"] == (128, 256)
    assert shapes["blocks.0.mlp.c_fc"] == (1024, 256)
    assert shapes["wte"] == shapes["lm_head"] == (37, 256)
    assert len([p for p in shapes if p.startswith("blocks.")]) == 4 * 6
    assert Config.from_lean(c) == Config(37, 12, 4, 4, 2, 64)


@pytest.mark.parametrize("over,name,frags", [
    # 5 × 64 = 320 over ⌈320 / 128⌉ = 3 heads does not divide
    ({"depth": 5, "aspect_ratio": 64, "head_dim": 128}, "hdiv",
     ["320 % 3 = 0 is false", "NanoChatConfig.n_embd c = 320", "NanoChatConfig.n_head c = 3"]),
    # 3 × 11 = 33 wide in one head of 33: rotary needs an even head
    ({"depth": 3, "aspect_ratio": 11, "head_dim": 64}, "hrot", ["33 / 1 % 2 = 0 is false"]),
    # 2 query heads cannot share 3 key/value heads
    ({"n_kv_head": 3}, "hkv", ["2 % 3 = 0 is false", "c.n_kv_head = 3"]),
])
def test_bad_configs_cannot_be_instantiated(models, over, name, frags):
    for model in ("nanochat", "nanochatLogits", "nanochatStep"):
        with pytest.raises(ConfigError) as e:
            models.graph(model, {"c": {**TINY, **over}, "b": 1, "t": 4})
        msg = str(e.value)
        assert f"violate the hypothesis '{name} :" in msg and f"model '{model}'" in msg
        for frag in frags:
            assert frag in msg, (frag, msg)


def test_a_context_longer_than_the_block_is_rejected(models):
    with pytest.raises(ConfigError, match=r"'hT : t ≤ c.block'.*13 ≤ 12 is false"):
        models.graph("nanochat", {"c": TINY, "b": 1, "t": 13})


@pytest.mark.parametrize("kv", [1, 2], ids=["gqa", "mha"])
def test_forward_and_backward_match_plain_pytorch(models, kv):
    c = {**TINY, "n_kv_head": kv}
    tyr = _module(models, "nanochat", 3, 12, c, seed=1)
    plain = NanoChat(Config.from_lean(c))
    plain.load_state_dict(tyr.state_dict())
    with torch.no_grad():  # nonzero output projections, so every path carries gradient
        for m in (tyr, plain):
            for name, p in m.named_parameters():
                if name.endswith("c_proj"):
                    p.copy_(torch.randn(p.shape, generator=torch.Generator().manual_seed(7)) * 0.1)
    gen = torch.Generator().manual_seed(2)
    x, y = torch.randint(0, 37, (2, 3, 12), generator=gen)
    zt, lt = tyr(x, y)
    zp, lp = plain(x, y)
    torch.testing.assert_close(zt, zp, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(lt, lp, rtol=1e-6, atol=1e-6)
    lt.backward()
    lp.backward()
    grads = dict(plain.named_parameters())
    for name, p in tyr.named_parameters():
        torch.testing.assert_close(p.grad, grads[name].grad, rtol=1e-4, atol=1e-6)
    assert all(float(p.grad.abs().max()) > 0 for p in tyr.parameters())


def test_initialisation_follows_nanochat(models):
    m = _module(models, "nanochat", 1, 4, {**TINY, "aspect_ratio": 64, "head_dim": 64})
    sd = m.state_dict()
    bound = 3 ** 0.5 / 128 ** 0.5
    assert float(sd["blocks.0.attn.c_q"].abs().max()) <= bound
    assert float(sd["blocks.0.attn.c_q"].std()) == pytest.approx(bound / 3 ** 0.5, rel=0.05)
    assert float(sd["blocks.1.attn.c_proj"].abs().max()) == 0.0
    assert float(sd["blocks.1.mlp.c_proj"].abs().max()) == 0.0
    assert float(sd["wte"].std()) == pytest.approx(1.0, rel=0.1)
    assert float(sd["lm_head"].std()) == pytest.approx(0.001, rel=0.1)


def test_cached_steps_give_the_uncached_logits(models):
    b, n, prompt = 2, TINY["block"], 5
    full = _module(models, "nanochatLogits", b, n, seed=3)
    with torch.no_grad():
        for name, p in full.named_parameters():
            if name.endswith("c_proj"):
                p.normal_(0, 0.1, generator=torch.Generator().manual_seed(5))
    weights = full.state_dict()
    prefill = _module(models, "nanochatStep", b, prompt)
    step = _module(models, "nanochatStep", b, 1)
    prefill.load_state_dict(weights)
    step.load_state_dict(weights)
    idx = torch.randint(0, 37, (b, n), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        (want,) = full(idx)
        cache = torch.zeros(TINY["depth"], b, 1, n, 16)
        got, kc, vc = prefill(idx[:, :prompt], torch.arange(prompt), cache, cache.clone())
        rows = [got]
        for p in range(prompt, n):
            z, kc, vc = step(idx[:, p:p + 1], torch.tensor([p]), kc, vc)
            rows.append(z)
    torch.testing.assert_close(torch.cat(rows, dim=1), want, rtol=1e-5, atol=1e-5)
    assert float(kc.abs().sum(-1).min()) > 0  # every position of every layer was written


def test_the_validator_rejects_heads_that_do_not_divide(signatures):
    from graphs import GraphBuilder
    from pytyr.errors import IRError
    from pytyr.ir.validate import load_graph

    g = GraphBuilder("bad")
    q, k, v = g.input("q", [1, 4, 3, 2]), g.input("k", [1, 3, 3, 2]), g.input("v", [1, 3, 3, 2])
    g.output("y", g.node("gqa_attention", [q, k, v], [1, 4, 3, 2]))
    with pytest.raises(IRError, match=r"4 % 3 = 0 is false"):
        load_graph(g.build(), signatures)
