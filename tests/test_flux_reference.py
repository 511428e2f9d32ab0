"""Flux.lean against Black Forest Labs' Flux, in both of its checkpoint layouts.

`BFLFlux` below is an independent PyTorch rendering of the reference (black-forest-labs/flux,
`src/flux/model.py` and `modules/layers.py`, `math.py`): its modules carry the reference's
names and structure (LayerNorms and activations as modules, `nn.Identity` for `guidance_in`
when `guidance_embed` is off), so its `state_dict()` has the keys of FLUX.1-schnell's and
FLUX.1-dev's checkpoints, and its forward takes what the reference's does: packed latent
tokens with their position ids, text tokens with theirs, times, the pooled vector and, for
dev, the guidance scale. At a small size (timestep features `2 * time_freqs` instead of 256)
each layout's random state dict is written with `safetensors`, typed by
`safetensors_type_provider` against the Lean model's parameters, loaded by name, and the
Lean model's velocity is compared with the reference's output (≤ 1e-4)."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file
from torch import Tensor, nn

from pytyr.cli import main
from pytyr.errors import ConfigError, SafeTensorsError
from pytyr.lean import check_files
from pytyr.pipeline import graph_from_lean, module_from_graph
from pytyr.safetensors import check_fit, load_file, load_model, write_file

ROOT = Path(__file__).resolve().parents[1]
FLUX = ROOT / "examples" / "flux" / "Flux.lean"
SMALL = {"in_channels": 3, "patch": 2, "grid_h": 3, "grid_w": 2, "txt_len": 4,
         "context_in_dim": 7, "vec_in_dim": 5, "time_freqs": 8, "num_heads": 3,
         "rope_idx": 1, "rope_row": 2, "rope_col": 2, "mlp_ratio": 3, "depth": 2,
         "depth_single_blocks": 3, "theta": 10000.0}
LAYOUTS = {"schnell": (0, "fluxVelocity"), "dev": (1, "fluxDevVelocity")}


# -- the reference, in its own structure -----------------------------------------------------
def timestep_embedding(t: Tensor, dim: int, max_period: float = 10000.0,
                       time_factor: float = 1000.0) -> Tensor:
    t = time_factor * t
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(0, half, dtype=torch.float32) / half)
    args = t[:, None].float() * freqs[None]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)


def rope(pos: Tensor, dim: int, theta: float) -> Tensor:
    """Rotation matrices [b, n, dim/2, 2, 2] of one position axis."""
    omega = 1.0 / theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    out = pos.double()[..., None] * omega
    rot = torch.stack([torch.cos(out), -torch.sin(out), torch.sin(out), torch.cos(out)], -1)
    return rot.reshape(*out.shape, 2, 2).float()


def apply_rope(x: Tensor, pe: Tensor) -> Tensor:
    pairs = x.float().reshape(*x.shape[:-1], -1, 1, 2)
    out = pe[..., 0] * pairs[..., 0] + pe[..., 1] * pairs[..., 1]
    return out.reshape(*x.shape).type_as(x)


def attention(q: Tensor, k: Tensor, v: Tensor, pe: Tensor) -> Tensor:
    x = nn.functional.scaled_dot_product_attention(apply_rope(q, pe), apply_rope(k, pe), v)
    b, h, n, d = x.shape
    return x.transpose(1, 2).reshape(b, n, h * d)


def heads(qkv: Tensor, num_heads: int) -> tuple[Tensor, Tensor, Tensor]:
    b, n, _ = qkv.shape
    q, k, v = qkv.reshape(b, n, 3, num_heads, -1).permute(2, 0, 3, 1, 4)
    return q, k, v


class EmbedND(nn.Module):
    def __init__(self, theta: float, axes_dim: list[int]):
        super().__init__()
        self.theta, self.axes_dim = theta, axes_dim

    def forward(self, ids: Tensor) -> Tensor:
        return torch.cat([rope(ids[..., i], d, self.theta) for i, d in enumerate(self.axes_dim)],
                         dim=-3).unsqueeze(1)


class MLPEmbedder(nn.Module):
    def __init__(self, in_dim: int, hidden_dim: int):
        super().__init__()
        self.in_layer = nn.Linear(in_dim, hidden_dim)
        self.silu = nn.SiLU()
        self.out_layer = nn.Linear(hidden_dim, hidden_dim)

    def forward(self, x: Tensor) -> Tensor:
        return self.out_layer(self.silu(self.in_layer(x)))


class RMSNorm(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(dim))

    def forward(self, x: Tensor) -> Tensor:
        rrms = torch.rsqrt(torch.mean(x.float() ** 2, dim=-1, keepdim=True) + 1e-6)
        return (x.float() * rrms).to(x.dtype) * self.scale


class QKNorm(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.query_norm, self.key_norm = RMSNorm(dim), RMSNorm(dim)


class SelfAttention(nn.Module):
    def __init__(self, dim: int, num_heads: int):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim, bias=True)  # qkv_bias: True in both releases
        self.norm = QKNorm(dim // num_heads)
        self.proj = nn.Linear(dim, dim)


class Modulation(nn.Module):
    def __init__(self, dim: int, double: bool):
        super().__init__()
        self.multiplier = 6 if double else 3
        self.lin = nn.Linear(dim, self.multiplier * dim)

    def forward(self, vec: Tensor) -> tuple[Tensor, ...]:
        return self.lin(nn.functional.silu(vec))[:, None, :].chunk(self.multiplier, dim=-1)


def mlp(hidden: int, mlp_hidden: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(hidden, mlp_hidden), nn.GELU(approximate="tanh"),
                         nn.Linear(mlp_hidden, hidden))


class DoubleStreamBlock(nn.Module):
    def __init__(self, hidden: int, num_heads: int, mlp_ratio: float):
        super().__init__()
        self.num_heads = num_heads
        for s in ("img", "txt"):
            setattr(self, f"{s}_mod", Modulation(hidden, double=True))
            setattr(self, f"{s}_norm1", nn.LayerNorm(hidden, elementwise_affine=False, eps=1e-6))
            setattr(self, f"{s}_attn", SelfAttention(hidden, num_heads))
            setattr(self, f"{s}_norm2", nn.LayerNorm(hidden, elementwise_affine=False, eps=1e-6))
            setattr(self, f"{s}_mlp", mlp(hidden, int(hidden * mlp_ratio)))

    def _qkv(self, s: str, x: Tensor, shift: Tensor, scale: Tensor) -> tuple[Tensor, ...]:
        attn = getattr(self, f"{s}_attn")
        x = (1 + scale) * getattr(self, f"{s}_norm1")(x) + shift
        q, k, v = heads(attn.qkv(x), self.num_heads)
        return attn.norm.query_norm(q).to(v), attn.norm.key_norm(k).to(v), v

    def _update(self, s: str, x: Tensor, a: Tensor, mod: tuple[Tensor, ...]) -> Tensor:
        x = x + mod[2] * getattr(self, f"{s}_attn").proj(a)
        m = (1 + mod[4]) * getattr(self, f"{s}_norm2")(x) + mod[3]
        return x + mod[5] * getattr(self, f"{s}_mlp")(m)

    def forward(self, img: Tensor, txt: Tensor, vec: Tensor, pe: Tensor) -> tuple[Tensor, Tensor]:
        im, tm = self.img_mod(vec), self.txt_mod(vec)
        iq, ik, iv = self._qkv("img", img, im[0], im[1])
        tq, tk, tv = self._qkv("txt", txt, tm[0], tm[1])
        a = attention(torch.cat((tq, iq), 2), torch.cat((tk, ik), 2), torch.cat((tv, iv), 2), pe)
        ta, ia = a[:, :txt.shape[1]], a[:, txt.shape[1]:]
        return self._update("img", img, ia, im), self._update("txt", txt, ta, tm)


class SingleStreamBlock(nn.Module):
    def __init__(self, hidden: int, num_heads: int, mlp_ratio: float):
        super().__init__()
        self.hidden, self.num_heads = hidden, num_heads
        self.mlp_hidden = int(hidden * mlp_ratio)
        self.linear1 = nn.Linear(hidden, 3 * hidden + self.mlp_hidden)
        self.linear2 = nn.Linear(hidden + self.mlp_hidden, hidden)
        self.norm = QKNorm(hidden // num_heads)
        self.pre_norm = nn.LayerNorm(hidden, elementwise_affine=False, eps=1e-6)
        self.mlp_act = nn.GELU(approximate="tanh")
        self.modulation = Modulation(hidden, double=False)

    def forward(self, x: Tensor, vec: Tensor, pe: Tensor) -> Tensor:
        shift, scale, gate = self.modulation(vec)
        h = self.linear1((1 + scale) * self.pre_norm(x) + shift)
        qkv, m = torch.split(h, [3 * self.hidden, self.mlp_hidden], dim=-1)
        q, k, v = heads(qkv, self.num_heads)
        q, k = self.norm.query_norm(q).to(v), self.norm.key_norm(k).to(v)
        return x + gate * self.linear2(torch.cat((attention(q, k, v, pe), self.mlp_act(m)), 2))


class LastLayer(nn.Module):
    def __init__(self, hidden: int, out: int):
        super().__init__()
        self.norm_final = nn.LayerNorm(hidden, elementwise_affine=False, eps=1e-6)
        self.linear = nn.Linear(hidden, out)
        self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(hidden, 2 * hidden))

    def forward(self, x: Tensor, vec: Tensor) -> Tensor:
        shift, scale = self.adaLN_modulation(vec).chunk(2, dim=1)
        return self.linear((1 + scale[:, None, :]) * self.norm_final(x) + shift[:, None, :])


class BFLFlux(nn.Module):
    """The reference's `Flux(FluxParams)`: `in_channels` is the packed token width."""

    def __init__(self, *, in_channels: int, vec_in_dim: int, context_in_dim: int,
                 hidden_size: int, mlp_ratio: float, num_heads: int, depth: int,
                 depth_single_blocks: int, axes_dim: list[int], theta: float,
                 guidance_embed: bool, time_dim: int):
        super().__init__()
        self.guidance_embed, self.time_dim = guidance_embed, time_dim
        self.pe_embedder = EmbedND(theta, axes_dim)
        self.img_in = nn.Linear(in_channels, hidden_size)
        self.time_in = MLPEmbedder(time_dim, hidden_size)
        self.vector_in = MLPEmbedder(vec_in_dim, hidden_size)
        self.guidance_in = MLPEmbedder(time_dim, hidden_size) if guidance_embed else nn.Identity()
        self.txt_in = nn.Linear(context_in_dim, hidden_size)
        self.double_blocks = nn.ModuleList(DoubleStreamBlock(hidden_size, num_heads, mlp_ratio)
                                           for _ in range(depth))
        self.single_blocks = nn.ModuleList(SingleStreamBlock(hidden_size, num_heads, mlp_ratio)
                                           for _ in range(depth_single_blocks))
        self.final_layer = LastLayer(hidden_size, in_channels)

    def forward(self, img: Tensor, img_ids: Tensor, txt: Tensor, txt_ids: Tensor,
                timesteps: Tensor, y: Tensor, guidance: Tensor | None = None) -> Tensor:
        img = self.img_in(img)
        vec = self.time_in(timestep_embedding(timesteps, self.time_dim))
        if self.guidance_embed:
            vec = vec + self.guidance_in(timestep_embedding(guidance, self.time_dim))
        vec = vec + self.vector_in(y)
        txt = self.txt_in(txt)
        pe = self.pe_embedder(torch.cat((txt_ids, img_ids), dim=1))
        for block in self.double_blocks:
            img, txt = block(img, txt, vec, pe)
        x = torch.cat((txt, img), 1)
        for block in self.single_blocks:
            x = block(x, vec, pe)
        return self.final_layer(x[:, txt.shape[1]:], vec)


def reference(c: dict, guidance_embed: bool) -> BFLFlux:
    hidden = c["num_heads"] * 2 * (c["rope_idx"] + c["rope_row"] + c["rope_col"])
    return BFLFlux(in_channels=c["in_channels"] * c["patch"] ** 2, vec_in_dim=c["vec_in_dim"],
                   context_in_dim=c["context_in_dim"], hidden_size=hidden,
                   mlp_ratio=float(c["mlp_ratio"]), num_heads=c["num_heads"], depth=c["depth"],
                   depth_single_blocks=c["depth_single_blocks"],
                   axes_dim=[2 * c["rope_idx"], 2 * c["rope_row"], 2 * c["rope_col"]],
                   theta=c["theta"], guidance_embed=guidance_embed, time_dim=2 * c["time_freqs"])


def pack(img: Tensor, p: int) -> tuple[Tensor, Tensor]:
    """The reference's `prepare`: latents to patch tokens `b (h w) (c ph pw)` and their ids
    `(0, row, col)`."""
    b, ch, hh, ww = img.shape
    h, w = hh // p, ww // p
    tokens = img.reshape(b, ch, h, p, w, p).permute(0, 2, 4, 1, 3, 5).reshape(b, h * w, -1)
    ids = torch.zeros(h, w, 3)
    ids[..., 1] += torch.arange(h)[:, None]
    ids[..., 2] += torch.arange(w)[None, :]
    return tokens, ids.reshape(1, h * w, 3).expand(b, -1, -1)


def unpack(tokens: Tensor, ch: int, h: int, w: int, p: int) -> Tensor:
    b = tokens.shape[0]
    return tokens.reshape(b, h, w, ch, p, p).permute(0, 3, 1, 4, 2, 5).reshape(b, ch, h * p, w * p)


# -- the tests -------------------------------------------------------------------------------
def checkpoint(path: Path, layout: str, seed: int) -> dict[str, Tensor]:
    """A random state dict of the reference in `layout`, saved by `safetensors`."""
    torch.manual_seed(seed)
    state = {k: torch.randn(v.shape) * 0.3
             for k, v in reference(SMALL, layout == "dev").state_dict().items()}
    save_file(state, str(path))
    return state


def values(layout: str, b: int = 2) -> dict:
    return {"c": {**SMALL, "guidance_embed": LAYOUTS[layout][0]}, "b": b}


def inputs(b: int, seed: int) -> dict[str, Tensor]:
    g = torch.Generator().manual_seed(seed)
    c = SMALL
    side = (c["grid_h"] * c["patch"], c["grid_w"] * c["patch"])
    return {"img": torch.randn(b, c["in_channels"], *side, generator=g),
            "timesteps": torch.rand(b, generator=g),
            "txt": torch.randn(b, c["txt_len"], c["context_in_dim"], generator=g),
            "y": torch.randn(b, c["vec_in_dim"], generator=g),
            "guidance": 1 + 4 * torch.rand(b, generator=g)}  # FLUX.1-dev samples at ~3.5


def reference_velocity(state: dict, layout: str, x: dict[str, Tensor]) -> Tensor:
    ref = reference(SMALL, layout == "dev")
    ref.load_state_dict(state)
    c = SMALL
    tokens, img_ids = pack(x["img"], c["patch"])
    txt_ids = torch.zeros(x["txt"].shape[0], c["txt_len"], 3)
    with torch.no_grad():
        out = ref(tokens, img_ids, x["txt"], txt_ids, x["timesteps"], x["y"],
                  x["guidance"] if layout == "dev" else None)
    return unpack(out, c["in_channels"], c["grid_h"], c["grid_w"], c["patch"])


def lean_access(key: str) -> str:
    """`double_blocks.0.img_mlp.2.weight` → `Ckpt.double_blocks[0].img_mlp.«2».weight`."""
    out, parts = "Ckpt", key.split(".")
    for i, seg in enumerate(parts):
        lists = ("double_blocks", "single_blocks")
        out += (f"[{seg}]" if parts[i - 1] in lists else f".«{seg}»") if seg.isdigit() else f".{seg}"
    return out


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_the_header_types_every_parameter_of_the_layout_s_model(tmp_path, layout):
    checkpoint(tmp_path / "flux.safetensors", layout, seed=0)
    graph = graph_from_lean(FLUX, LAYOUTS[layout][1], values(layout))
    lines = ["import Tyr", "open torch", 'safetensors_type_provider "flux.safetensors" as Ckpt']
    for k, p in enumerate(graph.params):
        lines.append(f"def p{k} : T #[{', '.join(map(str, p.shape))}] := {lean_access(p.path)}")
    (tmp_path / "Typed.lean").write_text("\n".join(lines) + "\n")
    assert check_files(tmp_path / "Typed.lean") == []
    assert any(p.path.startswith("guidance_in.") for p in graph.params) == (layout == "dev")


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("b", [1, 3])
def test_a_reference_checkpoint_loads_and_computes_the_reference_s_velocity(tmp_path, layout, b):
    path = tmp_path / "flux.safetensors"
    state = checkpoint(path, layout, seed=b)
    graph = graph_from_lean(FLUX, LAYOUTS[layout][1], values(layout, b))
    tyr = module_from_graph(graph)
    assert sorted(load_model(tyr, path)) == sorted(state)
    x = inputs(b, seed=7 + b)
    with torch.no_grad():
        (ours,) = tyr(*[x[i.name] for i in graph.inputs])
    theirs = reference_velocity(state, layout, x)
    assert ours.shape == theirs.shape == x["img"].shape and theirs.abs().max() > 0.1
    assert (ours - theirs).abs().max() <= 1e-4


def test_the_guidance_changes_dev_s_velocity_as_the_reference_s(tmp_path):
    state = checkpoint(tmp_path / "dev.safetensors", "dev", seed=3)
    graph = graph_from_lean(FLUX, "fluxDevVelocity", values("dev"))
    tyr = module_from_graph(graph)
    load_model(tyr, tmp_path / "dev.safetensors")
    x = inputs(2, seed=1)
    outs = []
    for g in (1.0, 4.5):
        x["guidance"] = torch.full((2,), g)
        with torch.no_grad():
            outs.append(tyr(*[x[i.name] for i in graph.inputs])[0])
        assert (outs[-1] - reference_velocity(state, "dev", x)).abs().max() <= 1e-4
    assert (outs[0] - outs[1]).abs().max() > 1e-2


def test_each_layout_s_checkpoint_is_refused_by_the_other_s_model(tmp_path):
    checkpoint(tmp_path / "schnell.safetensors", "schnell", seed=0)
    checkpoint(tmp_path / "dev.safetensors", "dev", seed=0)
    dev = graph_from_lean(FLUX, "fluxDev", values("dev"))
    with pytest.raises(SafeTensorsError) as info:
        check_fit(dev, tmp_path / "schnell.safetensors")
    assert [p.split(" ")[0:2] for p in info.value.problems] == [
        ["missing:", f"'guidance_in.{k}'"] for k in ("in_layer.weight", "in_layer.bias",
                                                     "out_layer.weight", "out_layer.bias")]
    schnell = graph_from_lean(FLUX, "flux", values("schnell"))
    with pytest.raises(SafeTensorsError, match=r"\(4 problems\)") as info:
        check_fit(schnell, tmp_path / "dev.safetensors")
    assert all(p.startswith("unexpected: 'guidance_in.") for p in info.value.problems)


@pytest.mark.parametrize("model,embed,hyp", [("fluxDev", 0, "hd"), ("fluxDevVelocity", 0, "hd"),
                                             ("flux", 1, "hs"), ("fluxVelocity", 1, "hs")])
def test_a_config_of_the_other_layout_is_refused_naming_the_hypothesis(model, embed, hyp):
    with pytest.raises(ConfigError) as info:
        graph_from_lean(FLUX, model, {"c": {**SMALL, "guidance_embed": embed}, "b": 2})
    msg = str(info.value)
    assert f"'{hyp}" in msg and f"{embed} = {1 - embed} is false" in msg and "\n" not in msg


def test_tyr_run_takes_a_dev_checkpoint_and_the_guidance(tmp_path, capsys):
    state = checkpoint(tmp_path / "dev.safetensors", "dev", seed=5)
    x = inputs(2, seed=2)
    write_file(x, tmp_path / "x.safetensors")
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"model": {"c": values("dev")["c"]}}))
    assert main(["run", str(FLUX), "--model", "fluxDevVelocity", "--config", str(cfg),
                 "--inputs", str(tmp_path / "x.safetensors"), "--weights",
                 str(tmp_path / "dev.safetensors"), "-o", str(tmp_path / "v.safetensors")]) == 0
    out = load_file(tmp_path / "v.safetensors")["out"]
    assert (out - reference_velocity(state, "dev", x)).abs().max() <= 1e-4
