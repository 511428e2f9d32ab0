"""nanochat's optimizer settings for a NanoChat.lean run config, as its `base_train.py` and
`GPT.setup_optimizer` derive them today, written into the config's `train.muon` table (and
`train.warmup_form`).

    .venv/bin/python scripts/nanochat/hparams.py examples/nanochat/config.json [--check]

From nanochat's base rates (embedding 0.3, unembedding 0.008, matrices 0.02, scalars 0.5,
Muon weight decay 0.28) for the config's width `d`, its tokens per step `B`
(`train.batch × task.seq`) and its scaling parameters `N` (the blocks' matrices and the head):

- AdamW rates × `(d / 768)^-½` (head, embedding, value embeddings at half the embedding's);
- every rate but the smear group's × `√(B / 2¹⁹)` (nanochat's batch-size scaling);
- Muon's weight decay `0.28 · √(B / 2¹⁹) · D_ref / D`, `D = 12 N` tokens and `D_ref` the same
  for nanochat's reference depth 12 (width 768, vocabulary 32768);
- the betas and decays of each AdamW group, and Muon's momentum schedule, as nanochat's;
- the lr warmup's form, `train.warmup_form = "nanochat"`: (step + 1) / warmup_iters.

`--check` writes nothing and fails (exit 1) when the file's values differ.
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LEAN = ROOT / "examples" / "nanochat" / "NanoChat.lean"
B_REF, RATIO = 2 ** 19, 12
WARMUP_FORM = "nanochat"  # base_train.py's get_lr_multiplier: (it + 1) / warmup_iters
D12 = {"vocab": 32768, "pad_vocab_to": 64, "block": 2048, "depth": 12, "aspect_ratio": 64,
       "head_dim": 128, "n_kv_head": 6, "window": 768, "rope_base": 100000.0,
       "qk_scale": 1.2, "softcap": 15.0, "extras": 1}


def scaling_params(c: dict) -> int:
    """nanochat's scaling parameters: the transformer's matrices and the head."""
    sys.path.insert(0, str(ROOT))
    from pytyr.pipeline import LeanModels

    graph = LeanModels(LEAN).graph("nanochatLogits", {"c": c, "b": 1, "t": 1})
    return sum(math.prod(p.shape) for p in graph.params
               if p.path.startswith(("transformer.h.", "transformer.tail.", "lm_head.")))


def muon_table(cfg: dict) -> dict:
    c, train = cfg["model"]["c"], cfg["train"]
    heads = -(-c["depth"] * c["aspect_ratio"] // c["head_dim"])
    dim = heads * c["head_dim"]
    tokens = train["batch"] * cfg["task"]["seq"]
    b = math.sqrt(tokens / B_REF)
    s = (dim / 768) ** -0.5
    wd = 0.28 * b * (RATIO * scaling_params(D12)) / (RATIO * scaling_params(c))

    def r(x: float) -> float:
        return float(f"{x:.6g}")

    def group(name, names, lr, beta1, beta2, decay):
        return {"name": name, "names": names, "lr": r(lr), "beta1": beta1, "beta2": beta2,
                "weight_decay": decay}

    return {
        "lr": r(0.02 * b), "momentum": 0.97, "momentum_start": 0.85,
        "momentum_warmup_iters": 400, "momentum_end": 0.9, "orthogonalizer": "polar_express",
        "momentum_form": "ema", "normuon_beta2": 0.9, "equilibrate": True, "renormalize": True,
        "cautious_weight_decay": True, "weight_decay": r(wd), "weight_decay_schedule": "cosine",
        # the groups route these first; the lists still name parameters the model has
        "embedding_names": ["wte"], "head_names": ["lm_head"],
        "groups": [
            group("head", ["lm_head"], 0.008 * s * b, 0.8, 0.96, 0.01),
            group("embedding", ["wte"], 0.3 * s * b, 0.8, 0.995, 0.001),
            group("value_embeds", ["value_embed"], 0.3 * s * b * 0.5, 0.8, 0.995, 0.01),
            group("resid", ["resid_lambdas"], 0.5 * 0.01 * b, 0.8, 0.95, 0.05),
            group("x0", ["x0_lambdas"], 0.5 * b, 0.96, 0.95, 0.0),
            group("smear", ["smear_gate", "smear_lambda", "backout_lambda"], 0.2, 0.8, 0.95,
                  0.0)]}


def with_warmup_form(train: dict) -> dict:
    """`train` with nanochat's warmup form, the key placed after `warmup_iters`."""
    out = {k: v for k, v in train.items() if k != "warmup_form"}
    keys = list(out)
    at = keys.index("warmup_iters") + 1 if "warmup_iters" in keys else len(keys)
    items = list(out.items())
    return dict(items[:at] + [("warmup_form", WARMUP_FORM)] + items[at:])


def dump(v: object, indent: int = 0, key: int = 0) -> str:
    """JSON as the configs are written: a table on one line where it fits in 98 columns,
    else its scalar entries packed on lines and its larger ones below them."""
    flat = json.dumps(v, separators=(", ", ": "))
    if indent + key + len(flat) <= 98 or not isinstance(v, (dict, list)):
        return flat
    pad = " " * (indent + 2)
    if isinstance(v, list):
        return "[\n" + ",\n".join(pad + dump(x, indent + 2) for x in v) + "\n" + " " * indent + "]"
    lines, cur = [], ""
    for k, x in v.items():
        head = json.dumps(k) + ": "
        item = head + dump(x, indent + 2, len(head))
        if "\n" in item or (cur and len(pad) + len(cur) + 2 + len(item) > 98):
            lines += [cur] if cur else []
            cur = ""
            if "\n" in item:
                lines.append(item)
                continue
        cur = item if not cur else f"{cur}, {item}"
    lines += [cur] if cur else []
    return "{\n" + ",\n".join(pad + ln for ln in lines) + "\n" + " " * indent + "}"


def main(argv: list[str]) -> int:
    check = "--check" in argv
    paths = [a for a in argv if a != "--check"]
    if not paths:
        print("usage: hparams.py CONFIG.json... [--check]", file=sys.stderr)
        return 2
    bad = 0
    for p in map(Path, paths):
        cfg = json.loads(p.read_text())
        table = muon_table(cfg)
        if check:
            if cfg["train"].get("muon") != table:
                print(f"{p}: train.muon differs from nanochat's: {json.dumps(table)}")
                bad = 1
            if cfg["train"].get("warmup_form") != WARMUP_FORM:
                print(f"{p}: train.warmup_form is not {WARMUP_FORM!r}, nanochat's warmup")
                bad = 1
            continue
        cfg["train"] = with_warmup_form(cfg["train"])
        cfg["train"]["muon"] = table
        p.write_text(dump(cfg) + "\n")
        print(f"{p}: muon lr {table['lr']}, weight decay {table['weight_decay']}")
    return bad


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
