"""An independent PyTorch reimplementation of nanochat's GPT as it is today (karpathy/nanochat,
`nanochat/gpt.py` of July 2026), written for the tests from a reading of the reference: the
same module tree, so its `state_dict()` has nanochat's own key names and shapes, and the same
forward pass in float32 (SDPA with explicit window masks instead of FlashAttention 3).

Its pieces, as the reference has them: a padded token table (rows rounded up to a multiple of
64); the embedding RMS-normalised, then smeared (each position but the first gets its
predecessor times `smear_lambda · σ(smear_gate(x[..., :24]))`); every layer reads
`resid_lambdas[i] · x + x0_lambdas[i] · x0`; attention with rotary (base 100000, turned by
-θ), QK-norm, queries and keys times 1.2, a value embedding on every other layer counted from
the last, gated by `3 σ(ve_gate(x[..., :12]))` per key/value head, windows after the pattern
`window_pattern` tiled over the layers (the last always whole, `S` a quarter of the context
rounded up to 128); the stream after layer `n_layer // 2` subtracted times `backout_lambda`;
the final norm, the head, the padding cut, the logits soft-capped at 15.

`today=False` is the reference of January 2026 instead (before its commit "add alternating
window size patterns" of January 11): none of those features, rotary base 10000, no 1.2, every
layer over the whole context.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class RefConfig:
    sequence_len: int
    vocab_size: int
    n_layer: int
    n_head: int
    n_kv_head: int
    n_embd: int
    window_pattern: str = "SSSL"


def rms(x: torch.Tensor) -> torch.Tensor:
    return F.rms_norm(x, (x.shape[-1],))


def with_value_embedding(i: int, n_layer: int) -> bool:
    """Every other layer, the last one included."""
    return (n_layer - 1 - i) % 2 == 0


def windows(cfg: RefConfig) -> list[int]:
    """Each layer's left window (how many earlier positions a query sees)."""
    long = cfg.sequence_len
    short = math.ceil(long / 4 / 128) * 128
    sizes = [long if cfg.window_pattern[i % len(cfg.window_pattern)] == "L" else short
             for i in range(cfg.n_layer)]
    sizes[-1] = long
    return sizes


class RefAttention(nn.Module):
    def __init__(self, cfg: RefConfig, i: int, today: bool):
        super().__init__()
        self.sharpen = 1.2 if today else 1.0
        d, hd = cfg.n_embd, cfg.n_embd // cfg.n_head
        self.n_head, self.n_kv, self.hd = cfg.n_head, cfg.n_kv_head, hd
        self.c_q = nn.Linear(d, cfg.n_head * hd, bias=False)
        self.c_k = nn.Linear(d, cfg.n_kv_head * hd, bias=False)
        self.c_v = nn.Linear(d, cfg.n_kv_head * hd, bias=False)
        self.c_proj = nn.Linear(d, d, bias=False)
        self.ve_gate = (nn.Linear(12, cfg.n_kv_head, bias=False)
                        if today and with_value_embedding(i, cfg.n_layer) else None)

    def forward(self, x, ve, cos, sin, window):
        b, t, _ = x.shape
        q = self.c_q(x).view(b, t, self.n_head, self.hd)
        k = self.c_k(x).view(b, t, self.n_kv, self.hd)
        v = self.c_v(x).view(b, t, self.n_kv, self.hd)
        if ve is not None:
            gate = 3 * torch.sigmoid(self.ve_gate(x[..., :12]))  # [b, t, n_kv]
            v = v + gate[..., None] * ve.view(b, t, self.n_kv, self.hd)
        q, k = turn(q, cos, sin), turn(k, cos, sin)
        q, k = rms(q) * self.sharpen, rms(k) * self.sharpen
        q, k, v = (z.transpose(1, 2) for z in (q, k, v))
        pos = torch.arange(t)
        mask = (pos[None, :] <= pos[:, None]) & (pos[:, None] - pos[None, :] <= window)
        k = k.repeat_interleave(self.n_head // self.n_kv, dim=1)
        v = v.repeat_interleave(self.n_head // self.n_kv, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.c_proj(y.transpose(1, 2).reshape(b, t, -1))


def turn(x, cos, sin):
    """Rotary as the reference applies it: halves (x1, x2) to (x1 cos + x2 sin,
    x2 cos - x1 sin)."""
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h], x[..., h:]
    return torch.cat([x1 * cos + x2 * sin, x2 * cos - x1 * sin], dim=-1)


class RefMLP(nn.Module):
    def __init__(self, d: int):
        super().__init__()
        self.c_fc = nn.Linear(d, 4 * d, bias=False)
        self.c_proj = nn.Linear(4 * d, d, bias=False)

    def forward(self, x):
        return self.c_proj(F.relu(self.c_fc(x)) ** 2)


class RefBlock(nn.Module):
    def __init__(self, cfg: RefConfig, i: int, today: bool):
        super().__init__()
        self.attn = RefAttention(cfg, i, today)
        self.mlp = RefMLP(cfg.n_embd)

    def forward(self, x, ve, cos, sin, window):
        x = x + self.attn(rms(x), ve, cos, sin, window)
        return x + self.mlp(rms(x))


class RefGPT(nn.Module):
    def __init__(self, cfg: RefConfig, pad_to: int = 64, today: bool = True):
        super().__init__()
        self.cfg, self.today = cfg, today
        rows = -(-cfg.vocab_size // pad_to) * pad_to
        d, n = cfg.n_embd, cfg.n_layer
        self.transformer = nn.ModuleDict({
            "wte": nn.Embedding(rows, d),
            "h": nn.ModuleList([RefBlock(cfg, i, today) for i in range(n)])})
        self.lm_head = nn.Linear(d, rows, bias=False)
        if today:
            self.resid_lambdas = nn.Parameter(torch.ones(n))
            self.x0_lambdas = nn.Parameter(torch.zeros(n))
            self.smear_gate = nn.Linear(24, 1, bias=False)
            self.smear_lambda = nn.Parameter(torch.zeros(1))
            self.backout_lambda = nn.Parameter(torch.zeros(1))
            kv = cfg.n_kv_head * (d // cfg.n_head)
            self.value_embeds = nn.ModuleDict({str(i): nn.Embedding(rows, kv) for i in range(n)
                                               if with_value_embedding(i, n)})

    def randomize(self, seed: int) -> RefGPT:
        """Every parameter drawn at random (no zero projection, no neutral scalar), so each
        feature changes the logits."""
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for name, p in self.named_parameters():
                scale = 1.0 if p.ndim == 1 or "wte" in name or "value_embeds" in name \
                    else p.shape[-1] ** -0.5
                p.copy_(torch.randn(p.shape, generator=g) * scale)
            if self.today:
                self.smear_lambda.fill_(0.7)
                self.backout_lambda.fill_(0.3)
        return self

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        cfg = self.cfg
        t = idx.shape[1]
        hd = cfg.n_embd // cfg.n_head
        base = 100000 if self.today else 10000
        inv = 1.0 / (base ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))
        angles = torch.outer(torch.arange(t, dtype=torch.float32), inv)
        cos, sin = angles.cos()[None, :, None, :], angles.sin()[None, :, None, :]
        x = rms(self.transformer.wte(idx))
        if not self.today:
            for block in self.transformer.h:
                x = block(x, None, cos, sin, cfg.sequence_len)
            return 15 * torch.tanh(self.lm_head(rms(x))[..., :cfg.vocab_size] / 15)
        gate = self.smear_lambda * torch.sigmoid(self.smear_gate(x[:, 1:, :24]))
        x = torch.cat([x[:, :1], x[:, 1:] + gate * x[:, :-1]], dim=1)
        x0, backout = x, None
        for i, (block, window) in enumerate(zip(self.transformer.h, windows(cfg))):
            x = self.resid_lambdas[i] * x + self.x0_lambdas[i] * x0
            ve = self.value_embeds[str(i)](idx) if str(i) in self.value_embeds else None
            x = block(x, ve, cos, sin, window)
            if i == cfg.n_layer // 2:
                backout = x
        x = rms(x - self.backout_lambda * backout)
        logits = self.lm_head(x)[..., :cfg.vocab_size]
        return 15 * torch.tanh(logits / 15)
