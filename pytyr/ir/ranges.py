"""The ranges of op attributes that their type does not state: Lean's `Float` admits any
value, but a dropout probability of 1.5, a negative norm epsilon or a rotary base of 0 makes
a model that fails (or computes NaN) only once it runs. Checked on every graph a model source
gives (`pytyr.pipeline.LeanModels`, a compiled library's), before any work starts."""
from __future__ import annotations

import dataclasses
import math
from typing import Any

from pytyr.config import flatten
from pytyr.errors import ConfigError
from pytyr.ir.graph import Graph


@dataclasses.dataclass(frozen=True)
class Range:
    what: str  # the attribute's meaning, for the message
    low: float
    low_open: bool  # `low` itself excluded
    high: float = math.inf  # always excluded

    def holds(self, v: float) -> bool:
        return (v > self.low if self.low_open else v >= self.low) and v < self.high

    def __str__(self) -> str:
        if self.high == math.inf:
            return f"{'>' if self.low_open else '≥'} {self.low:g}"
        return f"{'(' if self.low_open else '['}{self.low:g}, {self.high:g})"


# By attribute name: each name means one thing across Tyr/*.lean's prims.
RANGES = {
    "p": Range("dropout probability", 0, False, 1),  # dropout, the attentions
    "eps": Range("epsilon", 0, False),  # the norms
    "base": Range("rotary base", 0, True),  # rotary, rotary_at
    "theta": Range("rotary theta", 0, True),  # Flux's grid rotary, rope, rope_at
    "factor": Range("rotary scaling factor", 0, True),  # rope, rope_at (Llama 3's)
    "low_freq": Range("rotary low-frequency factor", 0, True),
    "high_freq": Range("rotary high-frequency factor", 0, True),
    "cap": Range("softcap", 0, True),  # cap * tanh(x / cap)
}


def check_attributes(graph: Graph, values: dict[str, Any], where: str) -> None:
    """A ConfigError at `where` (the model's place) for the first attribute of `graph` outside
    its range, naming the node's source place and the config values (`values`, the model's)
    that hold the number."""
    for n in graph.nodes:
        for name, v in n.attrs.items():
            rule = RANGES.get(name)
            if (rule is None or isinstance(v, bool) or not isinstance(v, (int, float))
                    or rule.holds(v)):
                continue
            keys = [k for k, x in flatten(values, "model").items() if isinstance(x, (int, float))
                    and not isinstance(x, bool) and x == v]
            hint = f" ({', '.join(f'{k} is {v}' for k in keys)})" if keys else ""
            outside = "outside" if rule.high != math.inf else "it must be"
            raise ConfigError(f"{where}: model '{graph.model}': the {n.op} at {n.loc or n.name} "
                              f"has {rule.what} {v}, {outside} {rule}{hint}")
