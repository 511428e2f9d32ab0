"""examples/nanochat/NanoChat.lean: January's layout against the plain PyTorch model of
`bench/plain_nanochat.py` holding the same weights (forward and backward), today's backward
through every feature, the hypotheses that reject bad configs by name and value, nanochat's
initialisation, and the typed KV-cache steps of both layouts (cached logits equal the uncached
ones). Today's forward against nanochat itself: `test_nanochat_reference.py`."""
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
TINY = {"vocab": 37, "pad_vocab_to": 1, "block": 12, "depth": 2, "aspect_ratio": 16,
        "head_dim": 16, "n_kv_head": 1, "window": 12, "rope_base": 10000.0, "qk_scale": 1.0,
        "softcap": 15.0, "extras": 0}
TODAY = {**TINY, "pad_vocab_to": 64, "depth": 6, "window": 5, "rope_base": 100000.0,
         "qk_scale": 1.2, "extras": 1}


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
    g = models.graph("nanochatJan", {"c": c, "b": 1, "t": 4})
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
    for model in ("nanochatJan", "nanochatJanLogits", "nanochatJanStep"):
        with pytest.raises(ConfigError) as e:
            models.graph(model, {"c": {**TINY, **over}, "b": 1, "t": 4})
        msg = str(e.value)
        assert f"violate the hypothesis '{name} :" in msg and f"model '{model}'" in msg
        for frag in frags:
            assert frag in msg, (frag, msg)


def test_a_context_longer_than_the_block_is_rejected(models):
    with pytest.raises(ConfigError, match=r"'hT : t ≤ c.block'.*13 ≤ 12 is false"):
        models.graph("nanochatJan", {"c": TINY, "b": 1, "t": 13})


@pytest.mark.parametrize("kv", [1, 2], ids=["gqa", "mha"])
def test_forward_and_backward_match_plain_pytorch(models, kv):
    c = {**TINY, "n_kv_head": kv}
    tyr = _module(models, "nanochatJan", 3, 12, c, seed=1)
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
    m = _module(models, "nanochatJan", 1, 4, {**TINY, "aspect_ratio": 64, "head_dim": 64})
    sd = m.state_dict()
    bound = 3 ** 0.5 / 128 ** 0.5
    assert float(sd["blocks.0.attn.c_q"].abs().max()) <= bound
    assert float(sd["blocks.0.attn.c_q"].std()) == pytest.approx(bound / 3 ** 0.5, rel=0.05)
    assert float(sd["blocks.1.attn.c_proj"].abs().max()) == 0.0
    assert float(sd["blocks.1.mlp.c_proj"].abs().max()) == 0.0
    assert float(sd["wte"].std()) == pytest.approx(1.0, rel=0.1)
    assert float(sd["lm_head"].std()) == pytest.approx(0.001, rel=0.1)


@pytest.mark.parametrize("name,c,extra", [
    ("nanochatJan", TINY, 0),
    # today's: windows of 5 in a context of 12, value embeddings, the smear's previous token
    ("nanochat", TODAY, 1),
], ids=["january", "today"])
def test_cached_steps_give_the_uncached_logits(models, name, c, extra):
    b, n, prompt = 2, c["block"], 5
    full = _module(models, f"{name}Logits", b, n, c, seed=3)
    with torch.no_grad():
        for pname, p in full.named_parameters():
            if "c_proj" in pname or pname == "smear_lambda":
                p.normal_(0, 0.1, generator=torch.Generator().manual_seed(5))
    weights = full.state_dict()
    prefill = _module(models, f"{name}Step", b, prompt, c)
    step = _module(models, f"{name}Step", b, 1, c)
    prefill.load_state_dict(weights)
    step.load_state_dict(weights)
    idx = torch.randint(0, 37, (b, n), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        (want,) = full(idx)
        cache = torch.zeros(c["depth"], b, 1, n, 16)
        width = c["depth"] * c["aspect_ratio"]
        prev = [torch.zeros(b, 1, width)] * extra  # the last token's embedding: the smear's
        got, kc, vc, *prev = prefill(idx[:, :prompt], torch.arange(prompt), cache,
                                     cache.clone(), *prev)
        rows = [got]
        for p in range(prompt, n):
            z, kc, vc, *prev = step(idx[:, p:p + 1], torch.tensor([p]), kc, vc, *prev)
            rows.append(z)
    torch.testing.assert_close(torch.cat(rows, dim=1), want, rtol=1e-5, atol=1e-5)
    assert float(kc.abs().sum(-1).min()) > 0  # every position of every layer was written


def test_today_s_gradients_reach_every_parameter(models):
    m = _module(models, "nanochat", 2, 12, TODAY, seed=6)
    with torch.no_grad():
        for pname, p in m.named_parameters():
            if "c_proj" in pname or pname == "smear_lambda":
                p.normal_(0, 0.1, generator=torch.Generator().manual_seed(7))
    x, y = torch.randint(0, 37, (2, 2, 12), generator=torch.Generator().manual_seed(8))
    m(x, y)[1].backward()
    silent = [n for n, p in m.named_parameters() if float(p.grad.abs().max()) == 0]
    assert silent == [], silent
    # the padding rows of the tables are never read
    wte = dict(m.named_parameters())["transformer.wte.weight"]
    assert wte.shape[0] == 64 and float(wte.grad[37:].abs().max()) == 0


def test_today_s_initialisation_is_nanochat_s(models):
    sd = _module(models, "nanochat", 1, 4, TODAY).state_dict()
    torch.testing.assert_close(sd["resid_lambdas"],
                               torch.tensor([1.15 - 0.10 * i / 5 for i in range(6)]))
    torch.testing.assert_close(sd["x0_lambdas"],
                               torch.tensor([0.20 - 0.15 * i / 5 for i in range(6)]))
    assert float(sd["backout_lambda"]) == pytest.approx(0.2) and float(sd["smear_lambda"]) == 0
    gate = sd["transformer.h.0.1.attn.ve_gate.weight"]
    assert gate.shape == (1, 12) and 0 <= float(gate.min()) and float(gate.max()) <= 0.02
    bound = 3 ** 0.5 / 96 ** 0.5  # the width is 6 heads of 16
    assert float(sd["transformer.tail.0.1.mlp.c_fc.weight"].abs().max()) <= 0.4 * bound
    assert float(sd["transformer.h.0.3.value_embed.weight"].abs().max()) <= bound
    assert float(sd["transformer.wte.weight"].std()) == pytest.approx(0.8, rel=0.1)
    # layers 1, 3 and 5 of 6 have a value embedding, as nanochat's `has_ve`
    assert sorted(k for k in sd if k.endswith("value_embed.weight")) == [
        "transformer.h.0.1.value_embed.weight", "transformer.h.0.3.value_embed.weight",
        "transformer.tail.0.1.value_embed.weight"]


@pytest.mark.parametrize("over,name,frags", [
    ({"depth": 5}, "hev", ["5 % 2 = 0 is false"]),
    ({"window": 13}, "hw", ["13 ≤ 12 is false"]),
    ({"extras": 0}, "hx", ["0 = 1 is false"]),
    ({"head_dim": 15, "aspect_ratio": 15}, "hrot", ["15 % 2 = 0 is false"]),
])
def test_today_s_hypotheses_name_a_bad_config(models, over, name, frags):
    for model in ("nanochat", "nanochatLogits", "nanochatStep"):
        with pytest.raises(ConfigError) as e:
            models.graph(model, {"c": {**TODAY, **over}, "b": 1, "t": 4})
        msg = str(e.value)
        assert f"violate the hypothesis '{name} :" in msg and f"model '{model}'" in msg, msg
        assert all(f in msg for f in frags), msg


def test_the_validator_rejects_heads_that_do_not_divide(signatures):
    from graphs import GraphBuilder
    from pytyr.errors import IRError
    from pytyr.ir.validate import load_graph

    g = GraphBuilder("bad")
    q, k, v = g.input("q", [1, 4, 3, 2]), g.input("k", [1, 3, 3, 2]), g.input("v", [1, 3, 3, 2])
    g.output("y", g.node("gqa_attention", [q, k, v], [1, 4, 3, 2]))
    with pytest.raises(IRError, match=r"4 % 3 = 0 is false"):
        load_graph(g.build(), signatures)
