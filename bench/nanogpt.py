"""A plain PyTorch GPT in nanoGPT's structure: the hand-written baseline for `examples/gpt/GPT.lean`.

Written for Tyr's benchmark and parity test, following nanoGPT's layout and naming so its
state-dict keys are the familiar ones (`transformer.h.0.attn.c_attn.weight`, ...):
`CausalSelfAttention` with one fused q/k/v `Linear` and `F.scaled_dot_product_attention
(is_causal=True)`, a 4x GELU `MLP`, pre-LayerNorm `Block`s, and `GPT` with token and position
embeddings, embedding dropout, a final LayerNorm and an `lm_head` whose weight IS `wte`'s.

Init is nanoGPT's: every Linear/Embedding weight ~ N(0, 0.02), the two residual projections
(`c_proj`) ~ N(0, 0.02/sqrt(2 n_layer)), biases 0, LayerNorm weights 1.

`load_from_tyr(plain, tyr)` copies the parameters of the Tyr module of `gpt` into a `GPT`,
key by key (see `tyr_to_plain_key`), after which both compute the same arithmetic.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class GPTConfig:
    vocab_size: int = 65
    block_size: int = 64
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    dropout: float = 0.0

    @classmethod
    def from_tyr(cls, c: dict) -> "GPTConfig":
        """From the `c` value of GPT.lean's `gpt` (width given as n_head * head_dim)."""
        return cls(vocab_size=c["vocab"], block_size=c["block"], n_layer=c["n_layer"],
                   n_head=c["n_head"], n_embd=c["n_head"] * c["head_dim"], dropout=c["dropout"])


class LayerNorm(nn.Module):
    """LayerNorm with weight and bias, eps 1e-5 (GPT.lean's `layerNorm3` default)."""

    def __init__(self, ndim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        assert cfg.n_embd % cfg.n_head == 0
        self.c_attn = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)  # q, k, v in one matmul
        self.c_proj = nn.Linear(cfg.n_embd, cfg.n_embd)
        self.resid_dropout = nn.Dropout(cfg.dropout)
        self.n_head, self.n_embd, self.dropout = cfg.n_head, cfg.n_embd, cfg.dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        hs = C // self.n_head
        # (B, T, C) -> (B, nh, T, hs): heads become a batch dimension
        q = q.view(B, T, self.n_head, hs).transpose(1, 2)
        k = k.view(B, T, self.n_head, hs).transpose(1, 2)
        v = v.view(B, T, self.n_head, hs).transpose(1, 2)
        y = F.scaled_dot_product_attention(
            q, k, v, attn_mask=None, dropout_p=self.dropout if self.training else 0.0, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # heads side by side again
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.c_fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd)
        self.gelu = nn.GELU()  # exact (erf) form, as Tyr's `gelu`
        self.c_proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.ln_1 = LayerNorm(cfg.n_embd)
        self.attn = CausalSelfAttention(cfg)
        self.ln_2 = LayerNorm(cfg.n_embd)
        self.mlp = MLP(cfg)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.config = cfg
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(cfg.vocab_size, cfg.n_embd),
            wpe=nn.Embedding(cfg.block_size, cfg.n_embd),
            drop=nn.Dropout(cfg.dropout),
            h=nn.ModuleList([Block(cfg) for _ in range(cfg.n_layer)]),
            ln_f=LayerNorm(cfg.n_embd),
        ))
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        # weight tying: one Parameter, two uses (its grad sums the lookup and the head)
        self.transformer.wte.weight = self.lm_head.weight
        self.apply(self._init_weights)
        resid_std = 0.02 / math.sqrt(2 * cfg.n_layer)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=resid_std)

    @staticmethod
    def _init_weights(m: nn.Module) -> None:
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, torch.Tensor | None]:
        _, t = idx.shape
        assert t <= self.config.block_size, f"sequence of {t} > block size {self.config.block_size}"
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss


# Tyr path (GPT.lean's field names) -> nanoGPT state-dict key. The Lean structures name a
# bias `<weight>_bias` next to its weight; nanoGPT keeps `.weight`/`.bias` in a submodule.
# `wte` also stands for `lm_head.weight` (the same Parameter in both models).
_BLOCK_KEY = re.compile(r"blocks\.(\d+)\.(.+)")
_IN_BLOCK = {
    "ln_1": "ln_1.weight", "ln_1_bias": "ln_1.bias",
    "ln_2": "ln_2.weight", "ln_2_bias": "ln_2.bias",
    "attn.c_attn": "attn.c_attn.weight", "attn.c_attn_bias": "attn.c_attn.bias",
    "attn.c_proj": "attn.c_proj.weight", "attn.c_proj_bias": "attn.c_proj.bias",
    "mlp.c_fc": "mlp.c_fc.weight", "mlp.c_fc_bias": "mlp.c_fc.bias",
    "mlp.c_proj": "mlp.c_proj.weight", "mlp.c_proj_bias": "mlp.c_proj.bias",
}
_TOP = {"wte": "transformer.wte.weight", "wpe": "transformer.wpe.weight",
        "ln_f": "transformer.ln_f.weight", "ln_f_bias": "transformer.ln_f.bias"}


def tyr_to_plain_key(path: str) -> str:
    """`blocks.3.attn.c_attn_bias` -> `transformer.h.3.attn.c_attn.bias`; KeyError if unknown."""
    if path in _TOP:
        return _TOP[path]
    m = _BLOCK_KEY.fullmatch(path)
    if m is None:
        raise KeyError(path)
    return f"transformer.h.{m.group(1)}.{_IN_BLOCK[m.group(2)]}"


def load_from_tyr(plain: GPT, tyr: nn.Module) -> None:
    """Copy every parameter of the Tyr `gpt` module into `plain` (shapes are equal, no
    transposes: both store Linear weights as [out, in]). Every plain parameter is written."""
    targets = dict(plain.named_parameters())  # tied lm_head.weight is listed once, as wte
    written = set()
    with torch.no_grad():
        for path, value in tyr.state_dict().items():
            key = tyr_to_plain_key(path)
            targets[key].copy_(value)
            written.add(key)
    missing = set(targets) - written
    if missing:
        raise KeyError(f"plain parameters not written by load_from_tyr: {sorted(missing)}")
