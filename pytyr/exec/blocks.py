"""Activation checkpointing per block: each element of a model's block stack lowered into a
sub-graph that `torch.utils.checkpoint` runs, so that its activations are not kept for the
backward but recomputed there, one block at a time.

The stacks are the front end's (`Graph.stacks`: a `foldl` over `Vector (Block c) n`, each
element's step a contiguous run of nodes). A block's sub-graph takes every value it reads
from outside (the residual stream, the block's parameters, tables computed before the stack,
the training flag) and returns the values read after it (the new stream). The recomputation
runs the same ops on the same values, with the RNG state of the first run (dropout draws the
same mask), so losses and gradients are those of the model without checkpointing; only the
activations inside a block are dropped: memory falls from ~all blocks' activations to the
stream at each block boundary plus one block's, for about one more forward of compute.
"""
from __future__ import annotations

import operator
from collections.abc import Callable

import torch
from torch import fx, nn
from torch.utils.checkpoint import checkpoint

from pytyr.errors import ConfigError
from pytyr.exec.ops import Lower
from pytyr.exec.stacks import stacks_as_tensors
from pytyr.ir.graph import Graph, Node

LowerNode = Callable[[Lower, Node, dict[str, fx.Node]], None]


def run_checkpointed(block: fx.GraphModule, *args: object) -> tuple[torch.Tensor, ...]:
    """The block's outputs, its activations recomputed in the backward."""
    return checkpoint(block, *args, use_reentrant=False)


def spans(graph: Graph) -> dict[int, int]:
    """First node index → last node index of every block of every stack; a ConfigError
    naming the model when it has no stack."""
    if not graph.stacks:
        raise ConfigError(f"train.checkpoint_blocks: model {graph.model!r} has no stack of "
                          "blocks to checkpoint (a `foldl` over a `Vector` of parameter "
                          "structures, as `p.blocks.foldl (fun x blk => block c blk x) x`); "
                          "a graph read from JSON carries none")
    index = {n.name: i for i, n in enumerate(graph.nodes)}
    out = {}
    for stack in graph.stacks:
        for first, last in stack.spans:
            if first in index and last in index and index[first] <= index[last]:
                out[index[first]] = index[last]
    return out


def lower_block(graph: Graph, first: int, last: int, env: dict[str, fx.Node], cx: Lower,
                root: nn.Module, lower_node: LowerNode) -> None:
    """Lower nodes `first..last` into a sub-graph kept on `root` and a checkpointed call of it
    in `cx`'s graph; the values read after the block are set in `env`."""
    nodes = graph.nodes[first:last + 1]
    inside = {n.name for n in nodes}
    outside: list[str] = []
    for n in nodes:
        outside += [r for r in n.inputs if r not in inside and r not in outside]
    later = {r for n in graph.nodes[last + 1:] for r in n.inputs} | \
        {o.ref for o in graph.outputs}
    results = [n.name for n in nodes if n.name in later]
    sub = fx.Graph()
    sub_env = {ref: sub.placeholder(f"x{k}") for k, ref in enumerate(outside)}
    sub_cx = Lower(sub, sub.placeholder("training"))
    for n in nodes:
        lower_node(sub_cx, n, sub_env)
    sub.output(tuple(sub_env[r] for r in results))
    stacks_as_tensors(sub)  # what leaves the block is a tensor
    sub.lint()
    name = f"block{len(root._modules)}"
    root.add_module(name, fx.GraphModule(nn.Module(), sub))
    call = cx.g.call_function(run_checkpointed, (cx.g.get_attr(name),
                                                 *[env[r] for r in outside], cx.training))
    for k, ref in enumerate(results):
        env[ref] = cx.g.call_function(operator.getitem, (call, k))
        env[ref].meta["tyr_node"] = nodes[[n.name for n in nodes].index(ref)]
