"""Activation checkpointing per block (`train.checkpoint_blocks`, pytyr/exec/blocks.py): the
block stacks the Lean front end records, the same losses and gradients as without, and a
clear refusal where a model has no stack."""
from __future__ import annotations

import json

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pytyr.cli import main
from pytyr.errors import ConfigError
from pytyr.pipeline import graph_from_lean, module_from_graph

GPT = "examples/gpt/GPT.lean"


def _gpt_values(n_layer=2, dropout=0.1, b=2, t=16):
    return {"c": {"vocab": 11, "block": t, "n_layer": n_layer, "n_head": 2, "head_dim": 16,
                  "dropout": dropout}, "b": b, "t": t}


@settings(max_examples=6, deadline=None)
@given(n_layer=st.integers(1, 5))
def test_the_gpt_has_one_stack_of_its_blocks_and_each_span_is_one_block(n_layer):
    graph = graph_from_lean(GPT, "gpt", _gpt_values(n_layer))
    (stack,) = graph.stacks
    assert (stack.type, stack.path, len(stack.spans)) == ("Block", "blocks", n_layer)
    index = {n.name: i for i, n in enumerate(graph.nodes)}
    ranges = [(index[a], index[b]) for a, b in stack.spans]
    assert all(a <= b for a, b in ranges)
    assert all(b1 + 1 == a2 for (_, b1), (a2, _) in zip(ranges, ranges[1:]))  # contiguous
    inside = set()
    for i, (a, b) in enumerate(ranges):
        for node in graph.nodes[a:b + 1]:
            inside.add(node.name)
            params = [r for r in node.inputs if r.startswith("blocks.")]
            assert all(r.startswith(f"blocks.{i}.") for r in params), (i, node)
    for node in graph.nodes:  # no node outside the spans reads a block's parameters
        if node.name not in inside:
            assert not any(r.startswith("blocks.") for r in node.inputs), node


def test_two_stacks_of_different_blocks_are_both_recorded():
    from bench.flux import flux_values

    graph = graph_from_lean("examples/flux/Flux.lean", "flux", flux_values(depth=2))
    assert [(s.type, s.path, len(s.spans)) for s in graph.stacks] == [
        ("DoubleStreamBlock", "double_blocks", 2), ("SingleStreamBlock", "single_blocks", 2)]


def test_a_graph_read_from_json_knows_no_stack_and_says_so(signatures):
    from pytyr.ir.validate import load_graph

    graph = graph_from_lean(GPT, "gpt", _gpt_values())
    again = load_graph(graph.to_json(), signatures, source=graph.source)
    assert again == graph and again.stacks == []  # not part of the IR, not compared
    with pytest.raises(ConfigError, match=r"train.checkpoint_blocks: model 'gpt' has no stack "
                                          r"of blocks to checkpoint .* from JSON"):
        module_from_graph(again, checkpoint_blocks=True)


def _train(module, batches, steps=3):
    opt = torch.optim.AdamW(module.parameters(), lr=1e-2)
    losses = []
    for i in range(steps):
        torch.manual_seed(100 + i)  # dropout's masks: the same draws on both sides
        loss = module(*batches[i % len(batches)])[-1]
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("dropout", [0.0, 0.2])
def test_checkpointed_blocks_train_exactly_as_without(dropout, one_thread):
    graph = graph_from_lean(GPT, "gpt", _gpt_values(3, dropout))
    g = torch.Generator().manual_seed(0)
    batches = [tuple(torch.randint(0, 11, (2, 16), generator=g) for _ in range(2))
               for _ in range(2)]
    plain, ckpt = (module_from_graph(graph, seed=4, checkpoint_blocks=c) for c in (False, True))
    assert "run_checkpointed" in ckpt._fx.code and "run_checkpointed" not in plain._fx.code
    assert _train(plain, batches) == _train(ckpt, batches)
    for (k, a), (_, b) in zip(plain.named_parameters(), ckpt.named_parameters()):
        assert torch.equal(a, b), k


def test_a_stack_whose_step_carries_a_pair_is_checkpointed_too(one_thread):
    from bench.flux import batches as flux_batches
    from bench.flux import flux_values

    values = flux_values(depth=2, b=4)
    graph = graph_from_lean("examples/flux/Flux.lean", "flux", values)
    data = flux_batches(values, 2, 0)
    plain, ckpt = (module_from_graph(graph, seed=1, checkpoint_blocks=c) for c in (False, True))
    assert ckpt._fx.code.count("run_checkpointed(") == 4  # 2 double + 2 single blocks
    assert _train(plain, data, 2) == _train(ckpt, data, 2)


def test_checkpointing_keeps_less_for_the_backward(one_thread):
    from bench.side import activation_bytes

    graph = graph_from_lean(GPT, "gpt", _gpt_values(4, 0.0, b=4, t=32))
    x = torch.randint(0, 11, (4, 32))
    kept = [activation_bytes(module_from_graph(graph, checkpoint_blocks=c), (x, x))
            for c in (False, True)]
    # what stays between forward and backward: a block's input per block, not its insides
    assert kept[1] < kept[0] / 4


def test_the_option_trains_through_tyr_and_refuses_a_model_without_blocks(tmp_path, capsys):
    tiny = ["--set", "model.c.n_layer=2", "--set", "model.c.n_head=2", "--set",
            "model.c.head_dim=8", "--set", "model.c.block=16", "--set", "task.seq=16",
            "--set", "train.batch=4", "--set", "train.max_iters=3", "--set",
            "train.eval_interval=3", "--set", "train.eval_iters=1", "--set",
            "model.c.dropout=0.1", "--set", "train.warmup_iters=0", "--set",
            "sample.max_new_tokens=0", "--set", f"task.cache_dir={tmp_path / 'cache'}", "-q"]
    runs = {}
    for flag in ("false", "true"):
        out = tmp_path / flag
        assert main(["train", GPT, "--model", "gpt", *tiny, "--set", f"out={out}", "--set",
                     f"train.checkpoint_blocks={flag}"]) == 0
        runs[flag] = json.loads((out / "metrics.json").read_text())["history"]["steps"]
    assert [s["loss"] for s in runs["false"]] == [s["loss"] for s in runs["true"]]
    capsys.readouterr()
    rc = main(["train", "examples/mlp/MLP.lean", "--model", "mlp", "--set",
               "train.checkpoint_blocks=true", "--set", "train.warmup_iters=0", "--set",
               f"out={tmp_path / 'mlp'}", "-q"])
    err = capsys.readouterr().err
    assert rc == 1 and err.count("\n") == 1
    assert "train.checkpoint_blocks: model 'mlp' has no stack of blocks" in err
