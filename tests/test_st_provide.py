"""The type provider and the `tyr safetensors` commands: a generated module that imports and
works (typed classes, loaders, drift detection), hostile names that cannot break it, and
`inspect` / `provide` / `schema` through an argparse parser built with `register`."""
from __future__ import annotations

import argparse
import ast
import importlib.util
import sys
import typing
from pathlib import Path

import pytest
import torch

from pytyr.safetensors import SafeTensorsError, open_weights, save_sharded, write_file
from pytyr.safetensors.commands import register
from pytyr.safetensors.provide import provide


def _llama(layers: int = 2, dim: int = 4) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    out = {"model.embed_tokens.weight": torch.randn(10, dim, generator=g),
           "lm_head.weight": torch.randn(10, dim, generator=g)}
    for i in range(layers):
        out[f"model.layers.{i}.self_attn.q_proj.weight"] = torch.randn(dim, dim, generator=g)
        out[f"model.layers.{i}.mlp.up.weight"] = torch.randn(2 * dim, dim, generator=g)
    return out


def _import(path: Path, name: str, monkeypatch) -> typing.Any:
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, mod)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def ckpt(tmp_path) -> Path:
    d = tmp_path / "ckpt"
    save_sharded(_llama(), d, max_shard_size=200)
    return d


def test_generated_module_imports_and_works(ckpt, tmp_path, monkeypatch):
    py, pyi = provide(ckpt, "llama_weights", tmp_path / "gen")
    mod = _import(py, "llama_weights", monkeypatch)
    assert mod.SPECS == open_weights(ckpt).specs
    root = mod.open_weights()
    assert isinstance(root, mod.Root) and isinstance(root.model, mod.Model)
    layer = root.model.layers[1]
    assert isinstance(layer, mod.ModelLayersItem)
    assert isinstance(layer.self_attn, mod.ModelLayersItemSelfAttn)
    want = _llama()
    assert torch.equal(layer.mlp.up.weight.load(), want["model.layers.1.mlp.up.weight"])
    assert layer.load(dtype=torch.float64)["self_attn.q_proj.weight"].dtype == torch.float64
    every = mod.load_all()
    assert every.keys() == want.keys() and all(torch.equal(every[k], want[k]) for k in want)
    assert mod.weights(ckpt).model.embed_tokens.weight.shape == (10, 4)
    # the annotations name real classes: a type checker (and get_type_hints) resolves them
    hints = typing.get_type_hints(mod.Model)
    assert hints["layers"] == mod.NodeList[mod.ModelLayersItem]
    assert typing.get_type_hints(mod.ModelLayersItemSelfAttnQProj)["weight"] is mod.TensorRef
    assert "# F32 [8, 4]" in py.read_text()


def test_stub_mirrors_the_module(ckpt, tmp_path):
    py, pyi = provide(ckpt, "w", tmp_path)
    stub, real = ast.parse(pyi.read_text()), ast.parse(py.read_text())
    classes = lambda tree: [n.name for n in tree.body if isinstance(n, ast.ClassDef)]  # noqa: E731
    funcs = lambda tree: {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}  # noqa: E731
    assert classes(stub) == classes(real) and "Root" in classes(stub)
    assert funcs(stub) == funcs(real) == {"weights", "open_weights", "load_all"}
    compile(pyi.read_text(), str(pyi), "exec")


def test_drift_is_detected(ckpt, tmp_path, monkeypatch):
    py, _ = provide(ckpt, "drift_weights", tmp_path)
    mod = _import(py, "drift_weights", monkeypatch)
    other = tmp_path / "other"
    save_sharded(_llama(dim=8), other)
    with pytest.raises(SafeTensorsError) as info:
        mod.weights(other)
    assert info.value.rule == "schema-drift"
    assert any("model.embed_tokens.weight" in p and "[10, 8]" in p for p in info.value.problems)


def test_hostile_names_cannot_break_the_module(tmp_path, monkeypatch):
    names = ['a"""b.w', "c\\d.w", "e\nf.w", "class.w", "g\x00h.w", "lm-head.w", "lm_head.w",
             "Root.w", "load.w", "0x.w", "__init__.w", "'.w"]
    write_file({n: torch.full((2,), float(i)) for i, n in enumerate(names)},
               tmp_path / "weird.safetensors")
    py, pyi = provide(tmp_path / "weird.safetensors", "weird", tmp_path / "gen")
    mod = _import(py, "weird", monkeypatch)
    root = mod.open_weights()
    assert root.class_.w.load()[0].item() == 3.0 and root["lm-head"].w.load()[0].item() == 5.0
    assert root["g\x00h"].w.name == "g\x00h.w" and root.Root.w.name == "Root.w"
    assert isinstance(root, mod.Root) and mod.Root is not type(root.Root)
    compile(pyi.read_text(), str(pyi), "exec")


def test_root_list_and_snapshot_sources(tmp_path, monkeypatch):
    write_file({"0.w": torch.ones(2), "1.w": torch.zeros(2)}, tmp_path / "seq.safetensors")
    w = open_weights(tmp_path / "seq.safetensors")
    snap = w.write_schema(tmp_path / "seq.schema.json")
    py, _ = provide(snap, "seq_weights", tmp_path / "gen")  # typed from the snapshot alone
    mod = _import(py, "seq_weights", monkeypatch)
    root = mod.open_weights(tmp_path / "seq.safetensors")
    assert len(root) == 2 and isinstance(root[0], mod.Item)
    assert torch.equal(root[0].w.load(), torch.ones(2))


def _cli(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="tyr")
    register(p.add_subparsers(dest="command", required=True))
    args = p.parse_args(argv)
    return args.fn(args)


def test_inspect_prints_the_tree(ckpt, capsys):
    assert _cli(["safetensors", "inspect", str(ckpt)]) == 0
    out = capsys.readouterr().out
    assert "6 tensors in 4 files" in out and "F32 x 6" in out and "format=pt" in out
    assert "  layers[0..1]\n" in out and "        weight  F32 [4, 4]" in out


def test_inspect_lists_unlike_items_and_untreeable_names(tmp_path, capsys):
    write_file({"l.0.w": torch.ones(2), "l.1.w": torch.ones(3)}, tmp_path / "a.safetensors")
    assert _cli(["safetensors", "inspect", str(tmp_path / "a.safetensors")]) == 0
    out = capsys.readouterr().out
    assert "l[0]\n" in out and "l[1]\n" in out and "F32 [3]" in out
    write_file({"a": torch.ones(2), "a.b": torch.ones(2)}, tmp_path / "b.safetensors")
    assert _cli(["safetensors", "inspect", str(tmp_path / "b.safetensors")]) == 0
    out = capsys.readouterr().out
    assert "tree-leaf-and-node" in out and "a.b  F32 [2]" in out


def test_inspect_rejects_a_hostile_file(tmp_path, capsys):
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes((2**40).to_bytes(8, "little") + b"{}")
    assert _cli(["safetensors", "inspect", str(bad)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("tyr safetensors inspect: ") and "header-too-large" in err
    assert str(bad) in err


def test_provide_and_schema_commands(ckpt, tmp_path, capsys, monkeypatch):
    assert _cli(["safetensors", "provide", str(ckpt), "--module", "cli_w",
                 "--out", str(tmp_path / "o")]) == 0
    assert (tmp_path / "o" / "cli_w.py").is_file() and (tmp_path / "o" / "cli_w.pyi").is_file()
    assert _cli(["safetensors", "provide", str(ckpt), "--module", "not-a-name"]) == 2
    out = tmp_path / "c.schema.json"
    assert _cli(["safetensors", "schema", str(ckpt), "-o", str(out)]) == 0
    assert _cli(["safetensors", "inspect", str(out)]) == 0
    assert "snapshot of 6 tensors" in capsys.readouterr().out
    assert _cli(["safetensors", "schema", str(tmp_path / "missing")]) == 1
