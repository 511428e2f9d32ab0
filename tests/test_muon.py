"""Muon: the Newton-Schulz orthogonalisation, the optimizer step, its state, and the routing
of parameters between Muon and AdamW by path."""
from __future__ import annotations

import io
import math

import pytest
import torch
from torch import nn

from pytyr.train.muon import Muon, hybrid_param_groups, make_optimizers, newton_schulz

# The quintic's attracting band after 5 steps: every singular value not tiny lands here.
BAND = (0.68, 1.21)


def _with_spectrum(rows: int, cols: int, sv: torch.Tensor, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    u, _ = torch.linalg.qr(torch.randn(rows, len(sv), generator=gen, dtype=torch.float64))
    v, _ = torch.linalg.qr(torch.randn(cols, len(sv), generator=gen, dtype=torch.float64))
    return u, v, (u * sv) @ v.T


@pytest.mark.parametrize("rows,cols", [(16, 48), (48, 16), (32, 32)])
def test_newton_schulz_is_close_to_orthogonal(rows, cols):
    # singular values spread over two decades: the output's all land in the band, and the
    # singular vectors are kept (uᵀ o v is diagonal)
    r = min(rows, cols)
    sv = torch.logspace(-2, 0, r, dtype=torch.float64) * 7.0
    u, v, g = _with_spectrum(rows, cols, sv)
    o = newton_schulz(g.float()).double()
    assert o.dtype == torch.float64 and o.shape == (rows, cols)
    s = torch.linalg.svdvals(o)
    assert s.min() > BAND[0] - 0.01 and s.max() < BAND[1] + 0.01, s
    core = u.T @ o @ v
    off = core - torch.diag(torch.diagonal(core))
    assert off.abs().max() < 1e-4
    # orthogonal up to the band: o oᵀ (wide side) is near the identity
    small = o @ o.T if rows <= cols else o.T @ o
    assert (small - torch.eye(r, dtype=torch.float64)).abs().max() < 0.5


def test_newton_schulz_of_a_random_matrix_and_more_steps():
    g = torch.randn(64, 32, generator=torch.Generator().manual_seed(3))
    s = torch.linalg.svdvals(newton_schulz(g))
    assert BAND[0] - 0.01 < s.min() and s.max() < BAND[1] + 0.01
    # it is scale-free: the Frobenius normalisation makes 1000 g the same input
    torch.testing.assert_close(newton_schulz(1000 * g), newton_schulz(g), rtol=1e-5, atol=1e-5)
    # batches of matrices are orthogonalised one by one
    batch = torch.stack([g, 2 * g.flip(0)])
    torch.testing.assert_close(newton_schulz(batch)[1], newton_schulz(2 * g.flip(0)),
                               rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="expected a matrix"):
        newton_schulz(torch.ones(3))


def _quadratic(seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    target = torch.randn(12, 6, generator=gen)
    w = nn.Parameter(torch.zeros(12, 6))
    return w, target, lambda: ((w - target) ** 2).sum()


def test_steps_reduce_a_quadratic_loss():
    w, target, loss_fn = _quadratic()
    opt = Muon([w], lr=0.05, momentum=0.9)
    losses = []
    for _ in range(60):
        opt.zero_grad()
        loss = loss_fn()
        loss.backward()
        losses.append(loss.item())
        opt.step()
    assert losses[1] < losses[0]
    assert losses[-1] < 0.05 * losses[0]


def test_first_step_is_the_scaled_orthogonalised_gradient():
    # from zero momentum: buf = g, nesterov update g + μg; step -lr·√(rows/cols)·NS(update)
    gen = torch.Generator().manual_seed(5)
    w = nn.Parameter(torch.randn(8, 2, generator=gen))
    g = torch.randn(8, 2, generator=gen)
    w.grad = g.clone()
    before = w.detach().clone()
    Muon([w], lr=0.1, momentum=0.5, weight_decay=0.25).step()
    want = before * (1 - 0.1 * 0.25) - 0.1 * math.sqrt(8 / 2) * newton_schulz(1.5 * g)
    torch.testing.assert_close(w.detach(), want, rtol=1e-6, atol=1e-6)
    # without nesterov the update is the buffer itself (same direction at step 1)
    w2 = nn.Parameter(before.clone())
    w2.grad = g.clone()
    Muon([w2], lr=0.1, momentum=0.5, nesterov=False).step()
    torch.testing.assert_close(w2.detach(), before - 0.1 * 2.0 * newton_schulz(g),
                               rtol=1e-6, atol=1e-6)


def _run(steps: int, opt_state=None, w0=None):
    w, target, loss_fn = _quadratic(1)
    if w0 is not None:
        with torch.no_grad():
            w.copy_(w0)
    opt = Muon([w], lr=0.03)
    if opt_state is not None:
        opt.load_state_dict(opt_state)
    for _ in range(steps):
        opt.zero_grad()
        loss_fn().backward()
        opt.step()
    return w.detach().clone(), opt


def test_state_dict_round_trip_continues_exactly():
    straight, _ = _run(6)
    w3, opt = _run(3)
    buf = io.BytesIO()
    torch.save(opt.state_dict(), buf)
    buf.seek(0)
    state = torch.load(buf, weights_only=True)  # as pytyr.train.checkpoint loads it
    assert set(state["state"][0]) == {"momentum_buffer"}
    resumed, _ = _run(3, opt_state=state, w0=w3)
    assert torch.equal(resumed, straight)


def test_deterministic():
    a, _ = _run(5)
    b, _ = _run(5)
    assert torch.equal(a, b)


def test_rejects_vectors_and_bad_settings():
    with pytest.raises(ValueError, match="rank >= 2"):
        Muon([nn.Parameter(torch.zeros(4))])
    w = nn.Parameter(torch.zeros(2, 2))
    for kwargs, msg in [({"lr": 0.0}, "lr"), ({"momentum": 1.0}, "momentum"),
                        ({"ns_steps": 0}, "ns_steps"), ({"weight_decay": -1.0}, "weight_decay"),
                        ({"ns_dtype": "float16"}, "ns_dtype")]:
        with pytest.raises(ValueError, match=msg):
            Muon([w], **kwargs)


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Parameter(torch.randn(10, 4))
        self.wpe = nn.Parameter(torch.randn(6, 4))
        self.blocks = nn.ModuleList(nn.ModuleDict({
            "attn": nn.Linear(4, 12, bias=False), "mlp": nn.Linear(4, 16)}) for _ in range(2))
        self.gain = nn.Parameter(torch.ones(4))
        self.scalar = nn.Parameter(torch.tensor(0.5))
        self.wte_mix = nn.Parameter(torch.randn(4, 4))  # not an embedding: segment match only
        self.lm_head = nn.Linear(4, 10, bias=False)
        self.frozen = nn.Parameter(torch.randn(3, 3), requires_grad=False)

    def forward(self, idx):
        x = self.wte[idx] + self.wpe[: idx.shape[-1]]
        for blk in self.blocks:
            x = x + blk["attn"](x)[..., :4] + blk["mlp"](x)[..., :4]
        return self.lm_head((x @ self.wte_mix) * self.gain * self.scalar)


def test_param_group_routing_by_path():
    groups = hybrid_param_groups(_Net())
    routed = {g["name"]: g["paths"] for kind in ("muon", "adamw") for g in groups[kind]}
    assert [g["name"] for g in groups["muon"]] == ["matrices"]
    assert [g["name"] for g in groups["adamw"]] == ["embeddings", "head", "scalars"]
    # in named_parameters order (a module's own parameters before its children's)
    assert routed["matrices"] == ["wte_mix", "blocks.0.attn.weight", "blocks.0.mlp.weight",
                                  "blocks.1.attn.weight", "blocks.1.mlp.weight"]
    assert routed["embeddings"] == ["wte", "wpe"]
    assert routed["head"] == ["lm_head.weight"]
    assert routed["scalars"] == ["gain", "scalar", "blocks.0.mlp.bias", "blocks.1.mlp.bias"]
    assert all("frozen" not in p for paths in routed.values() for p in paths)
    # configurable names: the head treated as one more matrix, wpe renamed
    g2 = hybrid_param_groups(_Net(), embedding_names=("wte", "wpe"), head_names=())
    assert "lm_head.weight" in g2["muon"][0]["paths"]
    assert [g["name"] for g in g2["adamw"]] == ["embeddings", "scalars"]


def test_make_optimizers_trains_every_parameter_once():
    torch.manual_seed(0)
    net = _Net()
    muon, adamw = make_optimizers(net, muon_lr=0.02, embedding_lr=0.05, head_lr=0.01)
    assert isinstance(muon, Muon) and isinstance(adamw, torch.optim.AdamW)
    seen = [id(p) for opt in (muon, adamw) for g in opt.param_groups for p in g["params"]]
    trainable = [id(p) for p in net.parameters() if p.requires_grad]
    assert sorted(seen) == sorted(trainable)
    assert {g["name"]: g["lr"] for g in adamw.param_groups} == {
        "embeddings": 0.05, "head": 0.01, "scalars": 0.02}
    before = {n: p.detach().clone() for n, p in net.named_parameters()}
    idx = torch.tensor([[1, 2, 3, 4], [5, 6, 7, 8]])
    for _ in range(2):
        for opt in (muon, adamw):
            opt.zero_grad()
        net(idx).logsumexp(-1).mean().backward()
        for opt in (muon, adamw):
            opt.step()
    for n, p in net.named_parameters():
        assert torch.equal(p, before[n]) == (n == "frozen"), n
    # the optimizers' states round-trip through torch.save / weights_only load
    for opt in (muon, adamw):
        buf = io.BytesIO()
        torch.save(opt.state_dict(), buf)
        buf.seek(0)
        opt.load_state_dict(torch.load(buf, weights_only=True))
