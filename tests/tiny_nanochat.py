"""A tiny NanoChat.lean model behind the factory `tyr sample` and `tyr chat` use."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from pytyr.pipeline import LeanModels, module_from_graph
from pytyr.train.run import make_factory

ROOT = Path(__file__).resolve().parents[1]


def tiny_factory(c: dict[str, Any], seed: int, proj_seed: int) -> Any:
    """The factory over `nanochat` of NanoChat.lean with the config `c`, seeded weights; the
    output projections (zero at init) drawn with `proj_seed` so the blocks do something."""
    source = LeanModels(ROOT / "examples" / "nanochat" / "NanoChat.lean")
    m = module_from_graph(source.graph("nanochat", {"c": c, "b": 1, "t": 4}), seed=seed)
    with torch.no_grad():
        for name, p in m.named_parameters():
            if name.endswith("c_proj"):
                p.normal_(0, 0.3, generator=torch.Generator().manual_seed(proj_seed))
    return make_factory(source, "nanochat", {"c": c}, m.state_dict())
