"""Flux-format checkpoints and Flux.lean: a tiny random checkpoint with Flux's key names,
written by the `safetensors` library, types the model's parameters through
`safetensors_type_provider` (header only), loads into the Lean model by name and computes
what the plain PyTorch Flux computes from it; a checkpoint that disagrees is rejected with
every disagreement listed, by the checker (each at its place) and at load time (one report,
before any tensor is read)."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.flux_plain import Flux, FluxConfig  # noqa: E402
from pytyr.errors import SafeTensorsError  # noqa: E402
from pytyr.lean import check_files  # noqa: E402
from pytyr.pipeline import graph_from_lean, module_from_graph  # noqa: E402
from pytyr.safetensors import check_fit, load_model  # noqa: E402
from pytyr.safetensors.sharded import Checkpoint  # noqa: E402
from test_flux_model import FLUX, TINY, inputs, values  # noqa: E402

LISTS = ("double_blocks", "single_blocks")


def flux_checkpoint(path: Path, seed: int = 0, **over) -> dict[str, torch.Tensor]:
    """A random state dict of the plain Flux (Flux's key names), saved by `safetensors`."""
    torch.manual_seed(seed)
    state = {k: torch.randn(v.shape) * 0.3
             for k, v in Flux(FluxConfig.from_tyr({**TINY, **over})).state_dict().items()}
    save_file(state, str(path))
    return state


def lean_access(name: str, key: str) -> str:
    """`double_blocks.0.img_mlp.2.weight` → `Name.double_blocks[0].img_mlp.«2».weight`: the
    blocks are lists, other numbered segments are fields (an nn.Sequential's layers)."""
    out, parts = name, key.split(".")
    for i, seg in enumerate(parts):
        if seg.isdigit():
            out += f"[{seg}]" if parts[i - 1] in LISTS else f".«{seg}»"
        else:
            out += f".{seg}"
    return out


def typing_file(tmp_path: Path, ckpt: str) -> tuple[Path, list[str]]:
    """A Lean file that types every parameter of Flux.lean's model (for TINY) by the
    checkpoint's header: one `def` per parameter, at the shape the model gives it."""
    graph = graph_from_lean(FLUX, "flux", values())
    lines = ["import Tyr", "open torch", f'safetensors_type_provider "{ckpt}" as Ckpt']
    keys = []
    for k, p in enumerate(graph.params):
        shape = ", ".join(map(str, p.shape))
        lines.append(f"def p{k} : T #[{shape}] := {lean_access('Ckpt', p.path)}")
        keys.append(p.path)
    f = tmp_path / "Typed.lean"
    f.write_text("\n".join(lines) + "\n")
    return f, keys


def test_the_header_types_every_parameter_of_the_model(tmp_path):
    flux_checkpoint(tmp_path / "flux.safetensors")
    f, keys = typing_file(tmp_path, "flux.safetensors")
    assert len(keys) == 12 + 2 * 24 + 2 * 8 + 4  # embedders, double, single, final layer
    assert check_files(f) == []


def test_each_disagreement_with_the_header_is_located(tmp_path):
    # a checkpoint of a wider MLP: every MLP weight and bias and every linear1/linear2 differ
    flux_checkpoint(tmp_path / "wide.safetensors", mlp_ratio=3)
    f, keys = typing_file(tmp_path, "wide.safetensors")
    diags = check_files(f)
    wrong = {k for k in keys if re.search(r"_mlp\.(0\.|2\.weight)|linear1|linear2\.weight", k)}
    assert len(diags) == len(wrong) == 2 * 2 * 3 + 2 * 3
    lines = f.read_text().splitlines()
    for d in diags:
        key = keys[int(re.match(r"def p(\d+)", lines[d.pos.line - 1]).group(1))]
        assert key in wrong, (key, d.message)
        assert "type mismatch" in d.message or "has type" in d.message, d.message


def test_a_flux_checkpoint_loads_by_name_and_runs_as_the_plain_flux(tmp_path):
    path = tmp_path / "flux.safetensors"
    state = flux_checkpoint(path, seed=4)
    tyr = module_from_graph(graph_from_lean(FLUX, "flux", values()))
    assert sorted(load_model(tyr, path)) == sorted(state)
    plain = Flux(FluxConfig.from_tyr(TINY))
    plain.load_state_dict(state)
    args = inputs(values())
    vt, lt = tyr(*args)
    vp, lp = plain(*args)
    assert torch.equal(vt, vp) and torch.equal(lt, lp) and vt.abs().max() > 0


def test_every_disagreement_is_listed_before_any_tensor_is_read(tmp_path, monkeypatch):
    state = flux_checkpoint(tmp_path / "ok.safetensors")
    del state["final_layer.linear.bias"]                        # missing
    state["guidance_in.in_layer.weight"] = torch.zeros(16, 8)   # extra (FLUX.1-dev has it)
    state["img_in.weight"] = torch.zeros(16, 9)                 # mis-shaped
    state["double_blocks.1.txt_attn.norm.key_norm.scale"] = torch.zeros(5)
    save_file(state, str(tmp_path / "bad.safetensors"))
    graph = graph_from_lean(FLUX, "flux", values())
    tyr = module_from_graph(graph, seed=1)
    before = {k: v.clone() for k, v in tyr.state_dict().items()}

    def no_reading(*args, **kwargs):
        raise AssertionError("a tensor was read before the fit was checked")

    monkeypatch.setattr(Checkpoint, "tensor", no_reading)
    for target in (graph, tyr):
        with pytest.raises(SafeTensorsError) as info:
            (check_fit if target is graph else load_model)(target, tmp_path / "bad.safetensors")
        err = info.value
        assert err.rule == "model-mismatch" and len(err.problems) == 4, err.problems
        assert err.problems[0].startswith("missing: 'final_layer.linear.bias'")
        assert err.problems[1].startswith("unexpected: 'guidance_in.in_layer.weight'")
        assert "shape: 'img_in.weight' is [16, 9] in the file, [16, 8] in the model" \
            in err.problems
        assert "shape: 'double_blocks.1.txt_attn.norm.key_norm.scale' is [5] in the file, " \
            "[8] in the model" in err.problems
        assert "nothing was loaded" in str(err)
    assert all(torch.equal(v, before[k]) for k, v in tyr.state_dict().items())


def test_extra_flux_dev_tensors_may_be_ignored(tmp_path):
    state = flux_checkpoint(tmp_path / "a.safetensors")
    state["guidance_in.in_layer.weight"] = torch.zeros(16, 8)
    save_file(state, str(tmp_path / "dev.safetensors"))
    graph = graph_from_lean(FLUX, "flux", values())
    with pytest.raises(SafeTensorsError, match="unexpected: 'guidance_in"):
        check_fit(graph, tmp_path / "dev.safetensors")
    check_fit(graph, tmp_path / "dev.safetensors", strict=False)
