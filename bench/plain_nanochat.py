"""A nanochat-style transformer written directly in PyTorch: the comparison side of
`bench/nanochat.py` and the reference of `tests/test_nanochat_model.py`.

The same architecture as `examples/nanochat/NanoChat.lean` (nanochat's): token embedding
RMS-normalised after the lookup, pre-norm blocks of causal self-attention (rotary, then
QK-norm, grouped-query heads through `scaled_dot_product_attention(enable_gqa=True)`) and a
ReLU² MLP, a final RMS norm, an untied head and logit soft-capping; no gains, no biases. It is
written the way a plain PyTorch user writes it (nanochat's own style): `F.linear` on
parameters, the rotary tables precomputed once as buffers. Parameter names equal the Lean
model's paths (`blocks.0.attn.c_q`), so a state dict moves between the two unchanged.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn


@dataclasses.dataclass(frozen=True)
class Config:
    vocab: int
    block: int
    depth: int
    n_head: int
    n_kv_head: int
    head_dim: int
    rope_base: float = 10000.0
    softcap: float = 15.0

    @property
    def width(self) -> int:
        return self.n_head * self.head_dim

    @classmethod
    def from_lean(cls, c: dict[str, Any]) -> Config:
        """The sizes NanoChat.lean derives from its config table (`depth` is the dial)."""
        width = c["depth"] * c["aspect_ratio"]
        heads = (width + c["head_dim"] - 1) // c["head_dim"]
        return cls(c["vocab"], c["block"], c["depth"], heads, c["n_kv_head"], width // heads,
                   c["rope_base"], c["softcap"])


def _norm(x: torch.Tensor) -> torch.Tensor:
    return F.rms_norm(x, (x.size(-1),), eps=1e-6)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    k = x.size(-1) // 2
    x1, x2 = x[..., :k], x[..., k:]
    return torch.cat([x1 * cos + x2 * sin, x2 * cos - x1 * sin], dim=-1)


class Attention(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.cfg = cfg
        kv = cfg.n_kv_head * cfg.head_dim
        self.c_q = nn.Parameter(torch.empty(cfg.width, cfg.width))
        self.c_k = nn.Parameter(torch.empty(kv, cfg.width))
        self.c_v = nn.Parameter(torch.empty(kv, cfg.width))
        self.c_proj = nn.Parameter(torch.zeros(cfg.width, cfg.width))

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        c = self.cfg
        q = F.linear(x, self.c_q).view(b, t, c.n_head, c.head_dim).transpose(1, 2)
        k = F.linear(x, self.c_k).view(b, t, c.n_kv_head, c.head_dim).transpose(1, 2)
        v = F.linear(x, self.c_v).view(b, t, c.n_kv_head, c.head_dim).transpose(1, 2)
        q, k = _norm(_rotate(q, cos, sin)), _norm(_rotate(k, cos, sin))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        return F.linear(y.transpose(1, 2).reshape(b, t, c.width), self.c_proj)


class MLP(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.c_fc = nn.Parameter(torch.empty(4 * cfg.width, cfg.width))
        self.c_proj = nn.Parameter(torch.zeros(cfg.width, 4 * cfg.width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(F.relu(F.linear(x, self.c_fc)).square(), self.c_proj)


class Block(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.attn = Attention(cfg)
        self.mlp = MLP(cfg)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(_norm(x), cos, sin)
        return x + self.mlp(_norm(x))


class NanoChat(nn.Module):
    """`forward(idx, targets) -> (logits, loss)`, as the Lean model's `nanochat`."""

    def __init__(self, cfg: Config):
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Parameter(torch.empty(cfg.vocab, cfg.width))
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.depth))
        self.lm_head = nn.Parameter(torch.empty(cfg.vocab, cfg.width))
        k = cfg.head_dim // 2
        freq = cfg.rope_base ** (-torch.arange(k, dtype=torch.float64) / k)
        theta = torch.outer(torch.arange(cfg.block, dtype=torch.float64), freq)
        self.register_buffer("cos", theta.cos().float(), persistent=False)
        self.register_buffer("sin", theta.sin().float(), persistent=False)

    def init_weights(self, seed: int = 0) -> NanoChat:
        """Seeded weights, as a plain script draws them: normal, 1/sqrt(fan-in) (the module's
        tensors are made empty; `bench.nanochat.build_pair` copies the Tyr side's instead)."""
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for p in self.parameters():
                p.normal_(0.0, p.shape[-1] ** -0.5, generator=g)
        return self

    def forward(self, idx: torch.Tensor, targets: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
        t = idx.size(1)
        cos, sin = self.cos[:t], self.sin[:t]
        x = _norm(F.embedding(idx, self.wte))
        for block in self.blocks:
            x = block(x, cos, sin)
        logits = F.linear(_norm(x), self.lm_head)
        cap = self.cfg.softcap
        logits = cap * torch.tanh(logits / cap)
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))
        return logits, loss
