"""Autoregressive sampling from a language model given as a logits function.

The caller supplies `logits_fn(idx_cond: i64[1, t]) -> f32[1, t, vocab]` (a tuple or list
whose first element is the logits is accepted too, as a TyrModule returns). For a Lean model,
whose graph has a fixed length, the caller instantiates one graph per length t <= block and
dispatches on `idx_cond.shape[1]`; `block_size` crops the context to the last `block_size`
tokens so that t never exceeds it.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from pytyr.errors import ConfigError

LogitsFn = Callable[[torch.Tensor], Any]


def _as_prompt(idx: torch.Tensor | Sequence[int]) -> torch.Tensor:
    t = torch.as_tensor(idx, dtype=torch.int64)
    if t.ndim == 1:
        t = t.unsqueeze(0)
    if t.ndim != 2 or t.shape[0] != 1 or t.shape[1] == 0:
        raise ConfigError(f"generate: idx must be a non-empty prompt of shape [t] or [1, t], "
                          f"got {list(t.shape)}")
    return t


def check_sampling_args(max_new_tokens: int, temperature: float, top_k: int | None) -> None:
    if not (isinstance(max_new_tokens, int) and max_new_tokens >= 0):
        raise ConfigError(f"generate: max_new_tokens must be an integer >= 0, "
                          f"got {max_new_tokens!r}")
    if not temperature >= 0:
        raise ConfigError(f"generate: temperature must be >= 0, got {temperature!r}")
    if top_k is not None and not (isinstance(top_k, int) and top_k >= 1):
        raise ConfigError(f"generate: top_k must be a positive integer or None, got {top_k!r}")


def pick_token(logits: torch.Tensor, temperature: float, top_k: int | None,
               gen: torch.Generator) -> int:
    """The next token from the last position's `logits` [vocab]: argmax at temperature 0,
    else a draw from the softmax of `logits / temperature` restricted to the `top_k` largest."""
    last = logits.float().cpu()
    if temperature == 0:
        return int(torch.argmax(last))
    last = last / temperature
    if top_k is not None and top_k < last.numel():
        kth = torch.topk(last, top_k).values[-1]
        last = last.masked_fill(last < kth, float("-inf"))
    return int(torch.multinomial(torch.softmax(last, dim=-1), 1, generator=gen))


@torch.no_grad()
def generate(logits_fn: LogitsFn, idx: torch.Tensor | Sequence[int], max_new_tokens: int,
             temperature: float = 1.0, top_k: int | None = None, seed: int = 0, *,
             block_size: int | None = None) -> torch.Tensor:
    """Extend the prompt `idx` ([t] or [1, t] token ids) by `max_new_tokens` sampled tokens;
    return i64 [1, t + max_new_tokens] (prompt included).

    Each step feeds the last `block_size` tokens (all, if None) to `logits_fn`, takes the
    logits of the last position, divides by `temperature` (0 means greedy: argmax), keeps the
    `top_k` largest (all, if None) and samples. The same `seed` gives the same tokens; the
    global RNG is not touched.
    """
    check_sampling_args(max_new_tokens, temperature, top_k)
    if block_size is not None and not (isinstance(block_size, int) and block_size >= 1):
        raise ConfigError(f"generate: block_size must be a positive integer, got {block_size!r}")
    idx = _as_prompt(idx)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(max_new_tokens):
        cond = idx if block_size is None else idx[:, -block_size:]
        out = logits_fn(cond)
        logits = out[0] if isinstance(out, (tuple, list)) else out
        if logits.ndim != 3 or logits.shape[:2] != cond.shape:
            raise ConfigError(f"generate: logits_fn returned shape {list(logits.shape)} for an "
                              f"input of {list(cond.shape)}; expected [1, {cond.shape[1]}, vocab]")
        nxt = pick_token(logits[0, -1], temperature, top_k, gen)
        idx = torch.cat([idx, torch.tensor([[nxt]], dtype=torch.int64)], dim=1)
    return idx
