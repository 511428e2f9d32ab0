"""The rotary settings of a decoder's config.json in one layout, whichever version wrote it.

transformers 5 writes one table, `rope_parameters` (`rope_theta`, `rope_type` and the scaling's
keys); the checkpoints on the Hub carry `rope_theta` at the top and a `rope_scaling` table
(`rope_type`, or its old name `type`), or `null` for none. `rope_parameters` turns either into
the first, so one set of `rope_parameters.*` fields reads both. A default rotary ignores the
scaling's keys, as transformers does; a Llama 3 scaling without one of its four keys is
refused (transformers would refuse it too), never filled with a guess.
"""
from __future__ import annotations

from typing import Any

LLAMA3_KEYS = ("factor", "low_freq_factor", "high_freq_factor",
               "original_max_position_embeddings")


def rope_parameters(raw: dict[str, Any]) -> dict[str, Any]:
    """`raw` with `rope_theta` and `rope_scaling` folded into `rope_parameters`; a ValueError
    naming the key for a layout that is neither."""
    out = dict(raw)
    table = out.get("rope_parameters")
    if table is not None and not isinstance(table, dict):
        raise ValueError(f"'rope_parameters' must be a table, got {table!r}")
    table = dict(table or {})
    theta = out.pop("rope_theta", None)
    if theta is not None:
        table.setdefault("rope_theta", theta)
    scaling = out.pop("rope_scaling", None)
    if scaling is not None and not isinstance(scaling, dict):
        raise ValueError(f"'rope_scaling' must be a table or null, got {scaling!r}")
    for k, v in (scaling or {}).items():
        table.setdefault("rope_type" if k == "type" else k, v)
    kind = table.get("rope_type", "default")
    if kind == "default":
        for k in LLAMA3_KEYS:
            table.pop(k, None)
    elif kind == "llama3":
        missing = [k for k in LLAMA3_KEYS if table.get(k) is None]
        if missing:
            raise ValueError(f"a 'llama3' rotary scaling needs {', '.join(missing)} in "
                             f"'rope_parameters' (or 'rope_scaling')")
        if not table["high_freq_factor"] > table["low_freq_factor"]:
            raise ValueError("a 'llama3' rotary scaling needs high_freq_factor > "
                             "low_freq_factor")
    out["rope_parameters"] = table
    return out
