"""The types a hover shows, through a real client (pytest-lsp). The numbers are the run's: a
helper whose binder shares a model argument's name but is called with another value (a ViT
layer applied to the class token plus `t` patches) shows its call's sizes, the graph's; a
helper's dims fixed by its one call show their numbers; a model whose `c.vocab` comes from the
data (the README's own-data config) shows the data's vocabulary, read from the shards'
meta.json alone. The names are the author's, in hovers and error messages alike, and the
bindings before and after an error have hovers."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import pytest_lsp
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient

from lsp_session import (
    GPT,
    SERVER,
    at,
    diagnostics,
    hover_text,
    init_params,
    open_doc,
    replace_all,
)
from pytyr.cli import main

pytestmark = pytest.mark.asyncio(loop_scope="module")

VIT = """import Tyr

open torch

structure ViTConfig where
  d : Nat
  gh : Nat
  gw : Nat

structure ViTParams (c : ViTConfig) where
  w : T #[c.d, c.d] := normal 0.1
  deriving TensorStruct

/-- A layer over any number of tokens `t`: the model calls it with `1 + t`. -/
def layer {b t d : Nat} (w : T #[d, d]) (x : T #[b, t, d]) : T #[b, t, d] :=
  let h := gelu (linear3 x w)
  add h x

@[model]
def vit (c : ViTConfig) {b t : Nat} (p : ViTParams c) (x : T #[b, t, c.d])
    (cls : T #[b, 1, c.d]) : T #[b, 1 + t, c.d] :=
  let z := catSeq3 cls x
  layer p.w z
"""
VIT_CONFIG = {"model": {"b": 2, "t": 6, "c": {"d": 24, "gh": 2, "gw": 3}}}


@pytest_lsp.fixture(scope="module", config=ClientServerConfig(server_command=SERVER))
async def client(lsp_client: LanguageClient):
    await lsp_client.initialize_session(init_params())
    yield
    await lsp_client.shutdown_session()


def _vit(tmp: Path) -> Path:
    (tmp / "config.json").write_text(json.dumps(VIT_CONFIG))
    (tmp / "ViT.lean").write_text(VIT)
    return tmp / "ViT.lean"


def _graph_shapes(path: Path, config: Path, tmp: Path, model: str) -> list[list[int]]:
    out = tmp / "graph.json"
    assert main(["graph", str(path), "--model", model, "--config", str(config),
                 "-o", str(out)]) == 0
    return [n["shape"] for n in json.loads(out.read_text())["nodes"]]


async def test_a_helper_called_with_another_value_shows_the_graphs_sizes(
        client: LanguageClient, tmp_path):
    path = _vit(tmp_path)
    uri = open_doc(client, path)
    await diagnostics(client, uri, lambda ds: ds == [])
    h = await hover_text(client, uri, at(VIT, "let h", 4))
    assert "h : T #[b, t, d]" in h
    # the layer runs on the class token and the 6 patches: 7 tokens, as the graph says
    assert "`T #[2, 7, 24]`" in h and "T #[2, 6" not in h
    assert [2, 7, 24] in _graph_shapes(path, tmp_path / "config.json", tmp_path, "vit")
    # its binder `t` is 7 there, the model's own `t` is 6 (the same name, another value)
    t_layer = await hover_text(client, uri, at(VIT, "{b t d : Nat}", 3))
    assert "= `7`" in t_layer
    t_model = await hover_text(client, uri, at(VIT, "{b t : Nat} (p", 3))
    assert "= `6`" in t_model
    x_model = await hover_text(client, uri, at(VIT, "(x : T #[b, t, c.d])", 1))
    assert "`T #[2, 6, 24]`" in x_model
    # `d` is no model argument at all: its one call fixes it
    d = await hover_text(client, uri, at(VIT, "{b t d : Nat}", 5))
    assert "= `24`" in d
    w = await hover_text(client, uri, at(VIT, "(w : T #[d, d])", 1))
    assert "`T #[24, 24]`" in w
    client.text_document_did_close(lsp.DidCloseTextDocumentParams(
        lsp.TextDocumentIdentifier(uri)))


async def test_a_helper_called_with_two_sizes_shows_both(client: LanguageClient, tmp_path):
    text = VIT.replace("  let z := catSeq3 cls x\n  layer p.w z",
                       "  let y := layer p.w x\n  layer p.w (catSeq3 cls y)")
    (tmp_path / "config.json").write_text(json.dumps(VIT_CONFIG))
    uri = open_doc(client, tmp_path / "ViT.lean", text)
    await diagnostics(client, uri, lambda ds: ds == [])
    h = await hover_text(client, uri, at(text, "let h", 4))
    assert "`T #[2, 6, 24] | T #[2, 7, 24]`" in h


async def test_tyr_shapes_shows_the_same_numbers(tmp_path, capsys):
    path = _vit(tmp_path)
    assert main(["shapes", str(path)]) == 0
    out = capsys.readouterr().out
    rows = [line.split(None, 1)[1] for line in out.splitlines() if line.startswith("  ")]
    assert "h : T #[b, t, d]   [config: T #[2, 7, 24]]" in rows
    assert "d : Nat   [config: 24]" in rows and "t : Nat   [config: 7]" in rows


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """Shards of a tiny corpus, by `tyr tokenizer train` and `tyr data prepare`."""
    d = tmp_path_factory.mktemp("own")
    docs = [f"the cat {i} sat on a mat and the dog ran home." for i in range(200)]
    pq.write_table(pa.table({"text": docs}), d / "mine.parquet")
    assert main(["tokenizer", "train", str(d / "mine.parquet"), "--vocab-size", "300",
                 "--out", str(d / "tok.json")]) == 0
    assert main(["data", "prepare", str(d / "mine.parquet"), "--tokenizer", str(d / "tok.json"),
                 "--out", str(d / "shards"), "--val-tokens", "600", "--no-progress"]) == 0
    return d / "shards"


async def test_a_vocabulary_from_the_data_has_numbers(client: LanguageClient, shards, tmp_path):
    vocab = json.loads((shards / "meta.json").read_text())["vocab_size"]
    cfg = json.loads((GPT / "shards.json").read_text())  # the README's own-data config
    assert "vocab" not in cfg["model"]["c"]
    cfg["task"]["data"] = str(shards)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    shutil.copy(GPT / "GPT.lean", tmp_path / "GPT.lean")
    text = (tmp_path / "GPT.lean").read_text()
    uri = open_doc(client, tmp_path / "GPT.lean")
    await diagnostics(client, uri, lambda ds: ds == [])
    z = await hover_text(client, uri, at(text, "let z := logits", 4))
    assert "z : T #[b, t, c.vocab]" in z and f"`T #[8, 256, {vocab}]`" in z
    # the editor reads meta.json only: the shards themselves may be anywhere
    moved = [s.rename(s.with_name(s.name + ".gone")) for s in shards.iterdir()
             if s.name.endswith(".bin")]
    assert moved
    qkv = await hover_text(client, uri, at(text, "let qkv", 4))
    assert "`T #[8, 256, 384]`" in qkv
    client.text_document_did_close(lsp.DidCloseTextDocumentParams(
        lsp.TextDocumentIdentifier(uri)))


async def test_damaged_metadata_is_named_in_the_hover(client: LanguageClient, shards, tmp_path):
    bad = tmp_path / "shards"
    shutil.copytree(shards, bad)
    meta = json.loads((bad / "meta.json").read_text())
    meta["vocab_size"] += 1  # its checksum no longer matches
    (bad / "meta.json").write_text(json.dumps(meta))
    cfg = json.loads((GPT / "shards.json").read_text())
    cfg["task"]["data"] = str(bad)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    shutil.copy(GPT / "GPT.lean", tmp_path / "GPT.lean")
    text = (tmp_path / "GPT.lean").read_text()
    uri = open_doc(client, tmp_path / "GPT.lean")
    z = await hover_text(client, uri, at(text, "let z := logits", 4))
    assert "z : T #[b, t, c.vocab]" in z
    assert "config not applied" in z and "meta.json: its contents do not match" in z


TOKENS = VIT.replace("""  gw : Nat
""", """  gw : Nat

def ViTConfig.tokens (c : ViTConfig) : Nat := 1 + c.gh * c.gw
""").replace("""(x : T #[b, t, c.d])
    (cls : T #[b, 1, c.d]) : T #[b, 1 + t, c.d] :=
  let z := catSeq3 cls x
  layer p.w z""", """(x : T #[b, c.gh * c.gw, c.d])
    (cls : T #[b, 1, c.d]) : T #[b, c.tokens, c.d] :=
  let z := catSeq3 cls x
  let w := add z x
  let y := layer p.w z
  let u := gelu y
  add u w""")


async def test_error_and_hover_name_a_size_alike_and_hover_past_the_error(
        client: LanguageClient, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(VIT_CONFIG))
    uri = open_doc(client, tmp_path / "ViT.lean", TOKENS)
    (d,) = await diagnostics(client, uri, lambda ds: len(ds) > 0)
    # `1 + c.gh * c.gw` is `c.tokens`, in the message as in the hover (the author's name)
    assert d.range.start.line == at(TOKENS, "let w := add z x").line
    assert d.message.startswith("argument 'y' of 'add' has type T #[b, c.gh * c.gw, c.d] but "
                                "is expected to have type T #[b, c.tokens, c.d];")
    z = await hover_text(client, uri, at(TOKENS, "let z", 4))
    assert "z : T #[b, c.tokens, c.d]" in z  # before the error
    # after it: the bindings that follow still have their types
    y = await hover_text(client, uri, at(TOKENS, "let y", 4))
    assert y is not None and "y : T #[b, c.tokens, c.d]" in y
    u = await hover_text(client, uri, at(TOKENS, "let u", 4))
    assert u is not None and "u : T #[b, c.tokens, c.d]" in u
    # the erroneous `w` itself: the `add`'s result, typed by its first argument
    w = await hover_text(client, uri, at(TOKENS, "let w", 4))
    assert w is not None and "w : T #[b, c.tokens, c.d]" in w
    # the fix leaves one convention: no error, the same hover
    fixed = TOKENS.replace("let w := add z x", "let w := add z z")
    replace_all(client, uri, fixed, 2)
    await diagnostics(client, uri, lambda ds: ds == [])
    y = await hover_text(client, uri, at(fixed, "let y", 4))
    assert "y : T #[b, c.tokens, c.d]" in y and "`T #[2, 7, 24]`" in y
