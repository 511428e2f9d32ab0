"""NanoChat.lean against nanochat itself: state dicts in nanochat's own layout (written here by
an independent reimplementation of the reference, `nanochat_reference.py`, as nanochat's
`base_train` saves them: `model_NNNNNN.pt` and `meta_NNNNNN.json`) load by their key names,
and the Lean model's logits match the reference's to 1e-4 — today's layout (value embeddings,
per-layer scalars, smear, backout, q·k scaling, sliding windows, padded tables) and January's.
Mismatched checkpoints are refused with every problem listed before any tensor is read."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from nanochat_reference import RefConfig, RefGPT, windows
from pytyr.cli import main
from pytyr.errors import ConfigError, SafeTensorsError
from pytyr.export.from_nanochat import read_nanochat
from pytyr.pipeline import LeanModels, module_from_graph
from pytyr.safetensors import write_file

ROOT = Path(__file__).resolve().parents[1]
LEAN = ROOT / "examples" / "nanochat" / "NanoChat.lean"
TOL = dict(rtol=1e-4, atol=1e-4)


@pytest.fixture(scope="module")
def source() -> LeanModels:
    return LeanModels(LEAN)


def _save(root: Path, ref: RefGPT, step: int = 7, state: dict | None = None) -> Path:
    """A nanochat checkpoint directory, as `base_train` writes one."""
    root.mkdir(parents=True, exist_ok=True)
    torch.save(state if state is not None else ref.state_dict(), root / f"model_{step:06d}.pt")
    cfg = ref.cfg
    meta = {"step": step, "model_config": {
        "sequence_len": cfg.sequence_len, "vocab_size": cfg.vocab_size, "n_layer": cfg.n_layer,
        "n_head": cfg.n_head, "n_kv_head": cfg.n_kv_head, "n_embd": cfg.n_embd,
        "window_pattern": cfg.window_pattern}}
    (root / f"meta_{step:06d}.json").write_text(json.dumps(meta))
    return root


def _logits(source, model, values, weights, idx):
    graph = source.graph(f"{model}Logits", {**values, "b": idx.shape[0], "t": idx.shape[1]})
    m = module_from_graph(graph)
    m.load_state_dict(weights)
    with torch.no_grad():
        return m(idx)[0]


@pytest.mark.parametrize("cfg", [
    # depth 6: a group of four layers and a pair; 256 positions, short windows of 128;
    # 100 tokens in tables of 128 rows
    RefConfig(256, 100, 6, 4, 2, 64, "SSSL"),
    # depth 4, one group; nanochat's pattern L; multi-head attention
    RefConfig(64, 64, 4, 2, 2, 48, "L"),
    # depth 8, two groups; the width nanochat rounds up to whole heads (8 × 5 = 40 → 48)
    RefConfig(160, 70, 8, 3, 1, 48, "SSSL"),
], ids=["d6-sssl", "d4-l", "d8-rounded"])
def test_today_s_checkpoints_load_by_name_and_match_the_reference(tmp_path, source, cfg):
    ref = RefGPT(cfg).randomize(1)
    assert min(windows(cfg)) < cfg.sequence_len - 1 or cfg.window_pattern == "L"
    model, values, weights = read_nanochat(source, _save(tmp_path / "ck", ref))
    assert model == "nanochat" and values["c"]["extras"] == 1
    idx = torch.randint(0, cfg.vocab_size, (2, cfg.sequence_len),
                        generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        want = ref(idx)
    got = _logits(source, model, values, weights, idx)
    assert got.shape == want.shape == (2, cfg.sequence_len, cfg.vocab_size)
    torch.testing.assert_close(got, want, **TOL)
    assert float((got - want).abs().max()) < 1e-4
    # each feature matters at these weights: without the value embeddings, the logits move
    off = dict(weights)
    for k in off:
        if k.endswith("value_embed.weight"):
            off[k] = torch.zeros_like(off[k])
    assert float((_logits(source, model, values, off, idx) - want).abs().max()) > 1e-2


def test_january_checkpoints_load_as_the_january_layout(tmp_path, source):
    cfg = RefConfig(32, 128, 4, 2, 1, 32, "L")
    ref = RefGPT(cfg, today=False).randomize(3)
    model, values, weights = read_nanochat(source, _save(tmp_path / "ck", ref))
    assert model == "nanochatJan" and values["c"]["extras"] == 0
    idx = torch.randint(0, 128, (2, 32), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        want = ref(idx)
    torch.testing.assert_close(_logits(source, model, values, weights, idx), want, **TOL)


def test_bfloat16_tables_and_a_compiled_model_s_prefix_load(tmp_path, source):
    cfg = RefConfig(32, 64, 2, 2, 1, 32, "L")
    ref = RefGPT(cfg).randomize(5)
    state = {f"_orig_mod.{k}": (v.to(torch.bfloat16) if "wte" in k or "value_embeds" in k
                                else v) for k, v in ref.state_dict().items()}
    _, values, weights = read_nanochat(source, _save(tmp_path / "ck", ref, state=state))
    assert weights["transformer.wte.weight"].dtype == torch.float32
    with torch.no_grad():
        ref.transformer.wte.weight.copy_(ref.transformer.wte.weight.bfloat16().float())
        for e in ref.value_embeds.values():
            e.weight.copy_(e.weight.bfloat16().float())
    idx = torch.randint(0, 64, (1, 32), generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        want = ref(idx)
    torch.testing.assert_close(_logits(source, "nanochat", values, weights, idx), want, **TOL)


def test_every_mismatch_is_listed_before_any_tensor_is_read(tmp_path, source):
    cfg = RefConfig(32, 64, 4, 2, 1, 32, "SSSL")
    ref = RefGPT(cfg).randomize(7)
    # names and shapes only: a state dict of meta tensors has no data to read at all
    state = {k: torch.empty(v.shape, device="meta") for k, v in ref.state_dict().items()}
    del state["value_embeds.1.weight"]
    state["transformer.h.2.attn.c_q.weight"] = torch.empty(32, 31, device="meta")
    state["transformer.h.2.attn.ve_gate.weight"] = torch.empty(1, 12, device="meta")
    with pytest.raises(SafeTensorsError) as e:
        read_nanochat(source, _save(tmp_path / "ck", ref, state=state))
    err = e.value
    assert err.rule == "model-mismatch" and "nothing was read" in str(err)
    assert err.problems == [
        "missing: 'value_embeds.1.weight' (the model expects F32 [64, 16])",
        "unexpected: 'transformer.h.2.attn.ve_gate.weight' (F32 [1, 12] in the file)",
        "shape: 'transformer.h.2.attn.c_q.weight' is [32, 31] in the file, [32, 32] in the "
        "model"]


@pytest.mark.parametrize("change,frag", [
    ({"window_pattern": "SL"}, "window_pattern 'SL': NanoChat.lean has nanochat's 'SSSL'"),
    ({"n_layer": 3}, "hev : c.depth % 2 = 0"),
    ({"n_embd": 31}, "n_embd 31 is not whole heads of n_head 2"),
    ({"n_embd": 30}, "hrot : c.head_dim % 2 = 0' of model 'nanochatLogits': 15 % 2 = 0"),
])
def test_configs_outside_the_lean_model_are_named(tmp_path, source, change, frag):
    ref = RefGPT(RefConfig(32, 64, 4, 2, 1, 32, "SSSL")).randomize(8)
    root = _save(tmp_path / "ck", ref)
    meta = json.loads((root / "meta_000007.json").read_text())
    meta["model_config"].update(change)
    (root / "meta_000007.json").write_text(json.dumps(meta))
    with pytest.raises(ConfigError, match=frag.replace("(", r"\(").replace(")", r"\)")):
        read_nanochat(source, root)


def test_tyr_import_then_tyr_run_gives_the_reference_logits(tmp_path, capsys):
    cfg = RefConfig(48, 100, 4, 2, 1, 32, "SSSL")
    ref = RefGPT(cfg).randomize(9)
    ck = _save(tmp_path / "ck", ref, step=3)
    _save(tmp_path / "ck", RefGPT(cfg).randomize(10), step=12)  # the last step is taken
    assert main(["import", "nanochat", str(ck), str(tmp_path / "out"), "--step", "3"]) == 0
    assert "nanochatLogits" in capsys.readouterr().out
    idx = torch.randint(0, 100, (1, 48), generator=torch.Generator().manual_seed(11))
    write_file({"idx": idx}, tmp_path / "x.safetensors")
    assert main(["run", str(LEAN), "--model", "nanochatLogits", "--config",
                 str(tmp_path / "out" / "config.json"), "--weights",
                 str(tmp_path / "out" / "model.safetensors"), "--inputs",
                 str(tmp_path / "x.safetensors"), "-o", str(tmp_path / "y.safetensors")]) == 0
    from pytyr.safetensors import load_file

    with torch.no_grad():
        torch.testing.assert_close(load_file(tmp_path / "y.safetensors")["out"], ref(idx),
                                   **TOL)
