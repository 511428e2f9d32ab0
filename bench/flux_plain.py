"""A plain PyTorch Flux-style DiT: the hand-written baseline for `examples/flux/Flux.lean`.

Written for Tyr's benchmark and parity test in the structure of Black Forest Labs' Flux
(`Flux`, `DoubleStreamBlock`, `SingleStreamBlock`, `LastLayer`, `Modulation`, `QKNorm`,
`EmbedND`-style rotary tables), so its `state_dict()` keys are Flux's checkpoint keys and the
same as the Lean model's parameter paths: a state dict moves between the two unchanged. The
two streams are carried as a pair between double blocks, as Flux does (the Lean model carries
them as one joint sequence). The arithmetic is the Lean model's, operation for operation, so
the forward passes agree bit for bit: patchify inside the model, adaLN
`(1 + scale) · x + shift`, tanh-GELU MLPs, QK-norm by `F.rms_norm` with a gain, Flux's
interleaved three-axis rotary embedding, `F.scaled_dot_product_attention`.

Init: PyTorch's default for `nn.Linear`, zeros for the modulations and the final projection
(adaLN-Zero), ones for the QK-norm gains; the Lean model's initial values differ (another
generator), so parity tests copy one state dict into the other.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn


@dataclass
class FluxConfig:
    in_channels: int = 1
    patch: int = 2
    grid_h: int = 4
    grid_w: int = 4
    txt_len: int = 1
    context_in_dim: int = 10
    vec_in_dim: int = 10
    time_freqs: int = 32
    num_heads: int = 4
    axes_pairs: tuple[int, int, int] = (2, 3, 3)
    mlp_ratio: int = 4
    depth: int = 2
    depth_single_blocks: int = 2
    theta: float = 10000.0

    @classmethod
    def from_tyr(cls, c: dict) -> "FluxConfig":
        """From the `c` value of Flux.lean's models."""
        return cls(in_channels=c["in_channels"], patch=c["patch"], grid_h=c["grid_h"],
                   grid_w=c["grid_w"], txt_len=c["txt_len"], context_in_dim=c["context_in_dim"],
                   vec_in_dim=c["vec_in_dim"], time_freqs=c["time_freqs"],
                   num_heads=c["num_heads"],
                   axes_pairs=(c["rope_idx"], c["rope_row"], c["rope_col"]),
                   mlp_ratio=c["mlp_ratio"], depth=c["depth"],
                   depth_single_blocks=c["depth_single_blocks"], theta=float(c["theta"]))

    @property
    def head_dim(self) -> int:
        return 2 * sum(self.axes_pairs)

    @property
    def hidden(self) -> int:
        return self.num_heads * self.head_dim


def timestep_embedding(t: Tensor, half: int, max_period: float = 10000.0,
                       time_factor: float = 1000.0) -> Tensor:
    freqs = torch.exp(-math.log(max_period) * torch.arange(0, half, dtype=torch.float32) / half)
    args = (time_factor * t)[:, None] * freqs.to(t)[None]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)


def rope_tables(cfg: FluxConfig, like: Tensor) -> tuple[Tensor, Tensor]:
    """cos, sin [txt_len + grid_h·grid_w, head_dim / 2] of Flux's ids (0, 0, 0) for the
    conditioning tokens, (0, row, col) for the image tokens."""
    rows = torch.arange(cfg.grid_h, dtype=torch.float64).repeat_interleave(cfg.grid_w)
    cols = torch.arange(cfg.grid_w, dtype=torch.float64).repeat(cfg.grid_h)
    ids = torch.cat([torch.zeros(cfg.txt_len, 3, dtype=torch.float64),
                     torch.stack([torch.zeros_like(rows), rows, cols], dim=-1)])
    angles = []
    for axis, k in enumerate(cfg.axes_pairs):
        omega = 1.0 / cfg.theta ** (torch.arange(0, 2 * k, 2, dtype=torch.float64) / (2 * k))
        angles.append(ids[:, axis, None] * omega[None])
    angle = torch.cat(angles, dim=-1)
    return angle.cos().to(like), angle.sin().to(like)


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    b, h, t, d = x.shape
    xp = x.reshape(b, h, t, d // 2, 2)
    x0, x1 = xp[..., 0], xp[..., 1]
    return torch.stack([cos * x0 - sin * x1, sin * x0 + cos * x1], -1).reshape(b, h, t, d)


def modulate(x: Tensor, shift: Tensor, scale: Tensor) -> Tensor:
    return (1 + scale.unsqueeze(1)) * x + shift.unsqueeze(1)


def layer_norm(x: Tensor) -> Tensor:
    return F.layer_norm(x, (x.shape[-1],), None, None, 1e-6)


class MLPEmbedder(nn.Module):
    def __init__(self, in_dim: int, hidden: int):
        super().__init__()
        self.in_layer = nn.Linear(in_dim, hidden)
        self.out_layer = nn.Linear(hidden, hidden)

    def forward(self, x: Tensor) -> Tensor:
        return self.out_layer(F.silu(self.in_layer(x)))


class RMSNorm(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(dim))

    def forward(self, x: Tensor) -> Tensor:
        return F.rms_norm(x, (x.shape[-1],), weight=self.scale, eps=1e-6)


class QKNorm(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.query_norm = RMSNorm(dim)
        self.key_norm = RMSNorm(dim)


class Modulation(nn.Module):
    def __init__(self, dim: int, n: int):
        super().__init__()
        self.n = n
        self.lin = nn.Linear(dim, n * dim)
        nn.init.zeros_(self.lin.weight)
        nn.init.zeros_(self.lin.bias)

    def forward(self, vec: Tensor) -> tuple[Tensor, ...]:
        return self.lin(F.silu(vec)).chunk(self.n, dim=-1)


class SelfAttention(nn.Module):
    def __init__(self, cfg: FluxConfig):
        super().__init__()
        self.heads = cfg.num_heads
        self.qkv = nn.Linear(cfg.hidden, 3 * cfg.hidden)
        self.norm = QKNorm(cfg.head_dim)
        self.proj = nn.Linear(cfg.hidden, cfg.hidden)

    def heads_qkv(self, qkv: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """q, k, v [b, h, t, d] of a fused projection [b, t, 3·h·d], q and k normalised."""
        return split_qkv(qkv, self.heads, self.norm)


def split_qkv(qkv: Tensor, heads: int, norm: QKNorm) -> tuple[Tensor, Tensor, Tensor]:
    b, t, three_hd = qkv.shape
    q, k, v = (x.view(b, t, heads, three_hd // (3 * heads)).transpose(1, 2)
               for x in qkv.chunk(3, dim=-1))
    return norm.query_norm(q), norm.key_norm(k), v


def attention(q: Tensor, k: Tensor, v: Tensor, pe: tuple[Tensor, Tensor]) -> Tensor:
    x = F.scaled_dot_product_attention(apply_rope(q, *pe), apply_rope(k, *pe), v)
    b, h, t, d = x.shape
    return x.transpose(1, 2).reshape(b, t, h * d)


class DoubleStreamBlock(nn.Module):
    def __init__(self, cfg: FluxConfig):
        super().__init__()
        d, m = cfg.hidden, cfg.mlp_ratio * cfg.hidden
        self.img_mod = Modulation(d, 6)
        self.img_attn = SelfAttention(cfg)
        self.img_mlp = nn.Sequential(nn.Linear(d, m), nn.GELU(approximate="tanh"), nn.Linear(m, d))
        self.txt_mod = Modulation(d, 6)
        self.txt_attn = SelfAttention(cfg)
        self.txt_mlp = nn.Sequential(nn.Linear(d, m), nn.GELU(approximate="tanh"), nn.Linear(m, d))

    def forward(self, img: Tensor, txt: Tensor, vec: Tensor,
                pe: tuple[Tensor, Tensor]) -> tuple[Tensor, Tensor]:
        tm, im = self.txt_mod(vec), self.img_mod(vec)
        tq, tk, tv = self.txt_attn.heads_qkv(self.txt_attn.qkv(modulate(layer_norm(txt), *tm[:2])))
        iq, ik, iv = self.img_attn.heads_qkv(self.img_attn.qkv(modulate(layer_norm(img), *im[:2])))
        a = attention(torch.cat((tq, iq), 2), torch.cat((tk, ik), 2), torch.cat((tv, iv), 2), pe)
        n = txt.shape[1]
        txt = txt + tm[2].unsqueeze(1) * self.txt_attn.proj(a[:, :n])
        txt = txt + tm[5].unsqueeze(1) * self.txt_mlp(modulate(layer_norm(txt), *tm[3:5]))
        img = img + im[2].unsqueeze(1) * self.img_attn.proj(a[:, n:])
        img = img + im[5].unsqueeze(1) * self.img_mlp(modulate(layer_norm(img), *im[3:5]))
        return img, txt


class SingleStreamBlock(nn.Module):
    def __init__(self, cfg: FluxConfig):
        super().__init__()
        d, m = cfg.hidden, cfg.mlp_ratio * cfg.hidden
        self.heads, self.hidden = cfg.num_heads, d
        self.linear1 = nn.Linear(d, 3 * d + m)
        self.linear2 = nn.Linear(d + m, d)
        self.norm = QKNorm(cfg.head_dim)
        self.modulation = Modulation(d, 3)

    def forward(self, x: Tensor, vec: Tensor, pe: tuple[Tensor, Tensor]) -> Tensor:
        shift, scale, gate = self.modulation(vec)
        qkv, mlp = self.linear1(modulate(layer_norm(x), shift, scale)).split(
            [3 * self.hidden, self.linear1.out_features - 3 * self.hidden], dim=-1)
        a = attention(*split_qkv(qkv, self.heads, self.norm), pe)
        return x + gate.unsqueeze(1) * self.linear2(
            torch.cat((a, F.gelu(mlp, approximate="tanh")), 2))


class LastLayer(nn.Module):
    def __init__(self, cfg: FluxConfig):
        super().__init__()
        d = cfg.hidden
        self.linear = nn.Linear(d, cfg.in_channels * cfg.patch * cfg.patch)
        self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(d, 2 * d))
        for p in (*self.linear.parameters(), *self.adaLN_modulation.parameters()):
            nn.init.zeros_(p)

    def forward(self, x: Tensor, vec: Tensor) -> Tensor:
        shift, scale = self.adaLN_modulation(vec).chunk(2, dim=-1)
        return self.linear(modulate(layer_norm(x), shift, scale))


class Flux(nn.Module):
    """`forward(img, timesteps, txt, y, target)` → (velocity, MSE loss), as Flux.lean's `flux`."""

    def __init__(self, cfg: FluxConfig):
        super().__init__()
        self.cfg = cfg
        d, pd = cfg.hidden, cfg.in_channels * cfg.patch * cfg.patch
        self.img_in = nn.Linear(pd, d)
        self.time_in = MLPEmbedder(2 * cfg.time_freqs, d)
        self.vector_in = MLPEmbedder(cfg.vec_in_dim, d)
        self.txt_in = nn.Linear(cfg.context_in_dim, d)
        self.double_blocks = nn.ModuleList(DoubleStreamBlock(cfg) for _ in range(cfg.depth))
        self.single_blocks = nn.ModuleList(
            SingleStreamBlock(cfg) for _ in range(cfg.depth_single_blocks))
        self.final_layer = LastLayer(cfg)

    def velocity(self, img: Tensor, timesteps: Tensor, txt: Tensor, y: Tensor) -> Tensor:
        c = self.cfg
        b, p = img.shape[0], c.patch
        patches = img.reshape(b, c.in_channels, c.grid_h, p, c.grid_w, p).permute(
            0, 2, 4, 1, 3, 5).reshape(b, c.grid_h * c.grid_w, c.in_channels * p * p)
        vec = self.time_in(timestep_embedding(timesteps, c.time_freqs)) + self.vector_in(y)
        txt, img_t = self.txt_in(txt), self.img_in(patches)
        pe = rope_tables(c, img_t)
        for block in self.double_blocks:
            img_t, txt = block(img_t, txt, vec, pe)
        x = torch.cat((txt, img_t), 1)
        for block in self.single_blocks:
            x = block(x, vec, pe)
        out = self.final_layer(x[:, txt.shape[1]:], vec)
        return out.reshape(b, c.grid_h, c.grid_w, c.in_channels, p, p).permute(
            0, 3, 1, 4, 2, 5).reshape(img.shape)

    def forward(self, img: Tensor, timesteps: Tensor, txt: Tensor, y: Tensor,
                target: Tensor) -> tuple[Tensor, Tensor]:
        v = self.velocity(img, timesteps, txt, y)
        return v, F.mse_loss(v, target)
