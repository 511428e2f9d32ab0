"""A tiny NanoChat.lean model behind the factory `tyr sample` and `tyr chat` use.

`TODAY` and `JANUARY` are tiny configs of the two layouts; today's has a window shorter than
its context (its first layer sees 3 positions back, its second the whole context), a value
embedding and tables padded to 64 rows, so cached decoding must get every feature right."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from pytyr.pipeline import LeanModels, module_from_graph
from pytyr.train.model import RunModel

ROOT = Path(__file__).resolve().parents[1]
BASE = {"vocab": 37, "pad_vocab_to": 64, "block": 12, "depth": 2, "aspect_ratio": 16,
        "head_dim": 16, "n_kv_head": 1, "softcap": 1.5}
TODAY = {**BASE, "window": 3, "rope_base": 100000.0, "qk_scale": 1.2, "extras": 1}
JANUARY = {**BASE, "window": 12, "rope_base": 10000.0, "qk_scale": 1.0, "extras": 0}
MODELS = {"nanochat": TODAY, "nanochatJan": JANUARY}


def tiny_factory(c: dict[str, Any], seed: int, proj_seed: int, model: str = "nanochat") -> Any:
    """The factory over `model` (`nanochat` or `nanochatJan`) of NanoChat.lean with the config
    `c`, seeded weights; what starts at zero or neutral (the output projections, the smear)
    drawn with `proj_seed` so every part does something."""
    source = LeanModels(ROOT / "examples" / "nanochat" / "NanoChat.lean")
    m = module_from_graph(source.graph(model, {"c": c, "b": 1, "t": 4}), seed=seed)
    gen = torch.Generator().manual_seed(proj_seed)
    with torch.no_grad():
        for name, p in m.named_parameters():
            if "c_proj" in name or name == "smear_lambda":
                p.normal_(0, 0.3, generator=gen)
    return RunModel(source, model, {"c": c}, m.state_dict())
