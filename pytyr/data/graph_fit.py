"""Does a batch iterator fit a model? `check_against_graph` compares an iterator's batch
shapes with the model's token input, and its vocabulary with the bound of that input's type
(`IT #[b, t] n` takes ids below `n`), before any training."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pytyr.errors import ConfigError


def _token_input(graph: Any, input_name: str | None) -> Any:
    inputs = list(getattr(graph, "inputs", []))
    model = getattr(graph, "model", "<graph>")
    if input_name is not None:
        for inp in inputs:
            if inp.name == input_name:
                return inp
        raise ConfigError(f"model '{model}' has no input '{input_name}' (inputs: "
                          f"{', '.join(i.name for i in inputs) or 'none'})")
    for inp in inputs:
        if inp.dtype == "i64" and len(inp.shape) == 2:
            return inp
    raise ConfigError(f"model '{model}' has no token input (an IT #[b, t] input); its inputs "
                      f"are {', '.join(f'{i.name} : {_type(i)}' for i in inputs) or 'none'}")


def _type(inp: Any) -> str:
    return str(inp.type)


def check_against_graph(iterator: Any, graph: Any | Sequence[Any],
                        input_name: str | None = None) -> None:
    """Check, before training, that every batch shape the iterator yields is the token input
    of an instantiated graph (`graph`, or one of several: a model instantiated for the full
    and for the short last batch). The token input is `input_name`, else the graph's first
    i64 rank-2 input. A disagreement is a ConfigError naming both shapes; so is a vocabulary
    (`vocab_size`, when the iterator was given one) larger than the input's bound."""
    graphs = list(graph) if isinstance(graph, (list, tuple)) else [graph]
    found = [(g, _token_input(g, input_name)) for g in graphs]
    for inp in (i for _, i in found):
        if inp.dtype != "i64" or len(inp.shape) != 2:
            raise ConfigError(f"input '{inp.name}' : {_type(inp)} is not a token input "
                              f"(expected IT #[b, t])")
    have = {tuple(i.shape) for _, i in found}
    for b, t in iterator.shapes:
        if (b, t) not in have:
            models = "; ".join(f"model '{getattr(g, 'model', '<graph>')}' input '{i.name}' : "
                               f"{_type(i)}" for g, i in found)
            raise ConfigError(f"{type(iterator).__name__} yields batches of [{b}, {t}] "
                              f"(batch {b}, seq {t}) but {models} (b = "
                              f"{', '.join(str(i.shape[0]) for _, i in found)}, t = "
                              f"{', '.join(str(i.shape[1]) for _, i in found)})")
    vocab = getattr(iterator, "vocab_size", None)
    for g, i in found:
        if vocab is not None and i.bound is not None and vocab > i.bound:
            raise ConfigError(f"{type(iterator).__name__} yields ids below {vocab} (its "
                              f"vocab_size) but model '{getattr(g, 'model', '<graph>')}' input "
                              f"'{i.name}' : {_type(i)} takes ids below {i.bound}")
