"""Stacks of tensors through a fold (a step model's per-layer caches, `Tyr.Decode`'s
`stackHead`/`stackPush`): lowered as lists of their elements, so that a fold over `l` layers
moves no tensor where `torch.cat` per push copied the whole stack at every layer; a stack is
one tensor again (`as_stack`) where anything else reads it (an output, another op).
"""
from __future__ import annotations

import torch
from torch import fx


def stack_first(s: torch.Tensor | list[torch.Tensor]) -> torch.Tensor:
    """The first element of a stack: a tensor's `s[0]` (a view), or a pushed list's."""
    return s[0]


def stack_pushed(s: torch.Tensor | list[torch.Tensor], x: torch.Tensor) -> list[torch.Tensor]:
    """The stack `s` without its first element and with `x` at the end, as a list of its
    elements: a fold's pushes move no tensor (a `cat` per push copied the whole stack, every
    layer's caches at every layer); `as_stack` makes the tensor where another op reads it."""
    items = list(s.unbind(0)) if isinstance(s, torch.Tensor) else s
    return [*items[1:], x]


def as_stack(s: torch.Tensor | list[torch.Tensor]) -> torch.Tensor:
    return torch.stack(s) if isinstance(s, list) else s


def stacks_as_tensors(g: fx.Graph) -> None:
    """Give every reader of a pushed stack but `stack_first` and `stack_pushed` (an output,
    any other op) the stack as one tensor."""
    for node in list(g.nodes):
        if node.target is not stack_pushed:
            continue
        others = [u for u in node.users if u.target not in (stack_first, stack_pushed)]
        if others:
            with g.inserting_after(node):
                whole = g.call_function(as_stack, (node,))
            for u in others:
                u.replace_input_with(node, whole)
