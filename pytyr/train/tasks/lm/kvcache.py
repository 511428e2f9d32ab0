"""Cached decoding: a prompt's prefill, then one token at a time over key/value caches.

A *step model* (`nanochatStep` of `examples/nanochat/NanoChat.lean`) is an ordinary
`@[model]` whose types say how to drive it:

- `idx : IT #[b, t] vocab`: the `t` new tokens of `b` sequences;
- `pos : IT #[t] n`: their positions (shared by the batch), `p … p+t-1`, below the caches'
  length `n` (`check_positions`: every position of the task's context must fit);
- every other input is a cache, a float tensor of a fixed size (its length, the most
  positions it holds, is part of its type); dims written with `idx`'s binders (`b`) follow
  the batch;
- it returns the logits `T #[b, t, vocab]` and then the updated caches, in the order of the
  cache inputs, with the types of those inputs.

`CachedDecoder` instantiates the model twice (the prompt's length and 1), prefills at
positions `0 … t-1` from zero caches and then feeds each sampled token at the next position.
Its logits are those of the uncached model on the whole sequence (a test checks it) while
the sequence fits the context `block`; at `block` tokens it prefills again with the last
`block // 2` of them (a shorter context than `generate`'s sliding window of `block`).
"""
from __future__ import annotations

from typing import Any

import torch

from pytyr.errors import ConfigError
from pytyr.train.task import Feed, ModelFactory
from pytyr.train.tasks.lm.sample import check_sampling_args, pick_token


def step_feeds(decl: Any, model: str) -> dict[str, Feed]:
    """The feeds of a step model, read from its declaration (`pipeline.ModelDecl`)."""
    if decl is None:
        raise ConfigError(f"step model '{model}': its declaration is needed to feed its caches "
                          f"(a compiled library's model cannot be a step model)")
    inputs = {i.name: i for i in decl.inputs}
    idx, pos = inputs.get("idx"), inputs.get("pos")
    if idx is None or idx.dtype != "i64" or len(idx.dims) != 2 or pos is None \
            or pos.dtype != "i64" or len(pos.dims) != 1:
        shown = ", ".join(f"{i.name} : {i.text}" for i in decl.inputs)
        raise ConfigError(f"{decl.where}: step model '{model}' must take idx : IT #[b, t] v and "
                          f"pos : IT #[t] n besides its caches; it takes {shown}")
    roles = {d: r for d, r in zip(idx.dims, ("batch", "seq")) if isinstance(d, str)}
    feeds = {"idx": Feed("i64", ("batch", "seq"), bound="vocab"), "pos": Feed("i64", ("seq",))}
    for i in decl.inputs:
        if i.name in feeds:
            continue
        if i.dtype != "f32":
            raise ConfigError(f"{decl.where}: step model '{model}': input '{i.name} : {i.text}' "
                              f"is neither idx, pos nor a float cache")
        feeds[i.name] = Feed("f32", tuple(roles.get(d, f"{i.name}[{k}]") if isinstance(d, str)
                                          else f"{i.name}[{k}]" for k, d in enumerate(i.dims)))
    return feeds


def check_positions(inputs: list[Any], block: int, model: str) -> None:
    """The positions `pos : IT #[t] n` of the step model (its graph's `Input`s) reach the last
    one of a context of `block` tokens: `block <= n`, the length of its caches."""
    pos = next(i for i in inputs if i.name == "pos")
    if pos.bound is not None and pos.bound < block:
        raise ConfigError(f"step model '{model}' takes pos : {pos.type}, positions below "
                          f"{pos.bound}, but the context holds {block} tokens (task.seq); "
                          f"give the model caches of at least {block} positions")


def check_outputs(inputs: list[Any], outs: list[Any], model: str) -> None:
    """The outputs (`TensorType`s) after the logits must be the caches, in the order of the
    cache `inputs` (the graph's `Input`s), with their types."""
    caches = [i for i in inputs if i.name not in ("idx", "pos")]
    want = [(tuple(i.shape), i.dtype) for i in caches]
    have = [(tuple(t.shape), t.dtype) for t in outs[1:]]
    if len(outs) != 1 + len(caches) or have != want:
        shown = " × ".join(str(t) for t in outs)
        raise ConfigError(f"step model '{model}' returns {shown}; it must return the logits and "
                          f"then its {len(caches)} cache(s) "
                          f"({', '.join(f'{i.name} : {i.type}' for i in caches)}), in order")


class CachedDecoder:
    """Prefill and single-token steps of `model` through `factory` (see the module doc)."""

    def __init__(self, factory: ModelFactory, model: str, block: int):
        self.factory, self.model, self.block = factory, model, block
        self.feeds = step_feeds(factory.declaration(model), model)
        self.caches: dict[str, torch.Tensor] = {}
        self.length = 0  # positions filled

    def _forward(self, t: int) -> Any:
        fwd = self.factory(self.model, self.feeds, {"batch": 1, "seq": t})
        check_outputs(fwd.inputs, fwd.outputs, self.model)
        check_positions(fwd.inputs, self.block, self.model)
        return fwd

    def _run(self, ids: list[int], start: int) -> torch.Tensor:
        fwd = self._forward(len(ids))
        batch = {"idx": torch.tensor([ids], dtype=torch.int64),
                 "pos": torch.arange(start, start + len(ids), dtype=torch.int64), **self.caches}
        out = fwd(batch)
        self.caches = dict(zip([n for n in fwd.names if n not in ("idx", "pos")], out[1:]))
        self.length = start + len(ids)
        return out[0][0, -1]

    def prefill(self, ids: list[int]) -> torch.Tensor:
        """Logits [vocab] after the prompt `ids` (at most `block` tokens), from empty caches."""
        if not 0 < len(ids) <= self.block:
            raise ConfigError(f"prefill: the prompt has {len(ids)} tokens; 1 to {self.block} fit")
        fwd = self._forward(len(ids))
        self.caches = {i.name: torch.zeros(i.shape) for i in fwd.inputs
                       if i.name not in ("idx", "pos")}
        return self._run(ids, 0)

    def extend(self, ids: list[int], history: list[int]) -> torch.Tensor:
        """Logits [vocab] after the tokens `ids` at the next positions; `history` (the sequence
        so far, ending with `ids`) is prefilled again when they do not fit the caches: its last
        `block // 2` tokens, or all of `ids` if more (at most `block`)."""
        if self.length and self.length + len(ids) <= self.block:
            return self._run(ids, self.length)
        keep = min(len(ids), self.block)
        if self.length:
            keep = max(self.block // 2, keep)
        return self.prefill(history[-keep:])

    def step(self, token: int, history: list[int]) -> torch.Tensor:
        """Logits [vocab] after `token`, `history`'s last: `extend` by one token."""
        return self.extend([token], history)


@torch.no_grad()
def generate_cached(factory: ModelFactory, model: str, prompt: list[int], max_new_tokens: int,
                    temperature: float = 1.0, top_k: int | None = None, seed: int = 0, *,
                    block: int, vocab: int | None = None) -> list[int]:
    """`prompt` extended by `max_new_tokens` tokens sampled as `sample.generate` samples
    (the same `pick_token`), through the cached step model `model`; with `vocab`, from the
    first `vocab` logits only (a table padded past the tokenizer)."""
    check_sampling_args(max_new_tokens, temperature, top_k)
    ids = list(prompt[-block:])
    decoder = CachedDecoder(factory, model, block)
    gen = torch.Generator().manual_seed(seed)
    logits = decoder.prefill(ids)
    for k in range(max_new_tokens):
        ids.append(pick_token(logits[:vocab], temperature, top_k, gen))
        if k + 1 < max_new_tokens:
            logits = decoder.step(ids[-1], ids)
    return list(prompt[:-block]) + ids if len(prompt) > block else ids
