"""The bidirectional transformer of `examples/diffusion/Diffusion.lean` in plain PyTorch: the
hand-written baseline for its benchmark and parity test.

The same arithmetic as the Lean model, written the usual PyTorch way: one fused q/k/v
projection, `F.scaled_dot_product_attention` without a mask (every position sees every
position), a 4x GELU MLP, pre-LayerNorm blocks, token embedding with a `[MASK]` row (id
`vocab`), learned positions, a final LayerNorm and an untied head over the characters; the
loss is MDLM's weighted cross entropy, `Σ weight · CE / (b · t)`.

Parameters are registered under the Lean model's paths (`wte`, `blocks.0.attn.c_attn`,
`blocks.0.attn.c_attn_bias`, ..., `head`), so `plain.load_state_dict(tyr.state_dict())` copies
a Tyr module's weights as they are, and the two state dicts have the same keys. Init is the
Lean file's: N(0, 0.02) for matrices and embeddings, N(0, 0.02/√(2 n_layer)) for the residual
projections, zero biases, unit LayerNorm gains.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class DiffusionConfig:
    vocab: int = 75  # characters; [MASK] is the id `vocab`
    block: int = 64
    n_layer: int = 4
    n_head: int = 4
    head_dim: int = 32
    dropout: float = 0.0

    @classmethod
    def from_tyr(cls, c: dict[str, Any]) -> DiffusionConfig:
        """From the `c` value of Diffusion.lean's models."""
        return cls(**{k: c[k] for k in ("vocab", "block", "n_layer", "n_head", "head_dim",
                                         "dropout")})

    @property
    def n_embd(self) -> int:
        return self.n_head * self.head_dim


def _normal(shape: tuple[int, ...], std: float) -> nn.Parameter:
    return nn.Parameter(torch.randn(shape) * std)


class Attention(nn.Module):
    def __init__(self, cfg: DiffusionConfig):
        super().__init__()
        n, resid = cfg.n_embd, 0.02 / math.sqrt(2 * cfg.n_layer)
        self.c_attn = _normal((3 * n, n), 0.02)
        self.c_attn_bias = nn.Parameter(torch.zeros(3 * n))
        self.c_proj = _normal((n, n), resid)
        self.c_proj_bias = nn.Parameter(torch.zeros(n))
        self.n_head, self.dropout = cfg.n_head, cfg.dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = F.linear(x, self.c_attn, self.c_attn_bias).split(C, dim=2)
        # (B, T, C) -> (B, nh, T, hs)
        q, k, v = (z.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for z in (q, k, v))
        p = self.dropout if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=p)
        y = y.transpose(1, 2).reshape(B, T, C)
        return F.dropout(F.linear(y, self.c_proj, self.c_proj_bias), self.dropout, self.training)


class MLP(nn.Module):
    def __init__(self, cfg: DiffusionConfig):
        super().__init__()
        n, resid = cfg.n_embd, 0.02 / math.sqrt(2 * cfg.n_layer)
        self.c_fc = _normal((4 * n, n), 0.02)
        self.c_fc_bias = nn.Parameter(torch.zeros(4 * n))
        self.c_proj = _normal((n, 4 * n), resid)
        self.c_proj_bias = nn.Parameter(torch.zeros(n))
        self.dropout = cfg.dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.gelu(F.linear(x, self.c_fc, self.c_fc_bias))
        return F.dropout(F.linear(h, self.c_proj, self.c_proj_bias), self.dropout, self.training)


class Block(nn.Module):
    def __init__(self, cfg: DiffusionConfig):
        super().__init__()
        n = cfg.n_embd
        self.ln_1, self.ln_1_bias = nn.Parameter(torch.ones(n)), nn.Parameter(torch.zeros(n))
        self.attn = Attention(cfg)
        self.ln_2, self.ln_2_bias = nn.Parameter(torch.ones(n)), nn.Parameter(torch.zeros(n))
        self.mlp = MLP(cfg)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[-1:]
        x = x + self.attn(F.layer_norm(x, n, self.ln_1, self.ln_1_bias, 1e-5))
        return x + self.mlp(F.layer_norm(x, n, self.ln_2, self.ln_2_bias, 1e-5))


class Diffusion(nn.Module):
    """`forward(ids, targets=None, weights=None) -> (logits [b, t, vocab], loss [] or None)`."""

    def __init__(self, cfg: DiffusionConfig):
        super().__init__()
        self.cfg = cfg
        n = cfg.n_embd
        self.wte = _normal((cfg.vocab + 1, n), 0.02)
        self.wpe = _normal((cfg.block, n), 0.02)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f, self.ln_f_bias = nn.Parameter(torch.ones(n)), nn.Parameter(torch.zeros(n))
        self.head = _normal((cfg.vocab, n), 0.02)

    def forward(self, ids: torch.Tensor, targets: torch.Tensor | None = None,
                weights: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        t = ids.shape[1]
        x = F.dropout(F.embedding(ids, self.wte) + self.wpe[:t], self.cfg.dropout, self.training)
        for block in self.blocks:
            x = block(x)
        logits = F.linear(F.layer_norm(x, x.shape[-1:], self.ln_f, self.ln_f_bias, 1e-5), self.head)
        if targets is None:
            return logits, None
        ce = F.cross_entropy(logits.reshape(-1, self.cfg.vocab), targets.reshape(-1),
                             reduction="none")
        return logits, (ce * weights.reshape(-1)).mean()
