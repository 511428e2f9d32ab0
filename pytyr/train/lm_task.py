"""`tyr train` and `tyr sample` for language models written in Lean (the GPT example).

The run directory holds `run.json` (which Lean file, model and argument values made it), the
checkpoint (`ckpt/`), `loss.png`, `metrics.json` and `sample.txt`, so `tyr sample --run DIR`
needs nothing else.

Under torchrun (`WORLD_SIZE` > 1, e.g. `scripts/torchrun-gpt.sh`), `tyr train` trains data
parallel (`distributed.py`): `model.b` (and `train.batch`) stay the *global* batch, so a config
means the same run on any number of processes; each rank instantiates the model with its share
b / W, and only rank 0 prints, writes the run directory and samples.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from ..atomic import atomic_write_text
from ..errors import ConfigError
from ..pipeline import LeanModels, module_from_graph

SAMPLE_KEYS = {"model": str, "prompt": str, "max_new_tokens": int, "temperature": (int, float),
               "top_k": (int, type(None)), "seed": int}
SAMPLE_DEFAULTS = {"model": "gptLogits", "prompt": "\n", "max_new_tokens": 500,
                   "temperature": 0.8, "top_k": 200, "seed": 1337}


def _sample_cfg(raw: dict[str, Any], source: str) -> dict[str, Any]:
    for k, v in raw.items():
        if k not in SAMPLE_KEYS:
            raise ConfigError(f"{source}: unknown key 'sample.{k}' (known: {', '.join(SAMPLE_KEYS)})")
        if isinstance(v, bool) or not isinstance(v, SAMPLE_KEYS[k]):
            raise ConfigError(f"{source}: 'sample.{k}' has the wrong type: {v!r}")
    return {**SAMPLE_DEFAULTS, **raw}


def _corpus(task: dict[str, Any], source: str) -> Any:
    from ..data import shakespeare

    unknown = sorted(set(task) - {"name", "cache_dir"})
    if unknown:
        raise ConfigError(f"{source}: unknown key 'task.{unknown[0]}' (known: name, cache_dir)")
    return shakespeare.prepare(task.get("cache_dir"))


def train_language_model(file: Path, model: str, cfg: dict[str, Any], *, source: str,
                         progress: bool = True, resume: bool = False) -> int:
    from . import distributed

    with distributed.session() as env:
        return _train(file, model, cfg, source=source, progress=progress, resume=resume,
                      world=env.world)


def _train(file: Path, model: str, cfg: dict[str, Any], *, source: str, progress: bool,
           resume: bool, world: int) -> int:
    from . import distributed
    from .lm import LMConfig, train_lm

    main = distributed.is_main()
    sample = _sample_cfg(cfg.get("sample", {}), source)
    with distributed.main_first():  # rank 0 builds the corpus cache; the others read it
        data = _corpus(cfg["task"], source)
    values = cfg["model"]
    vocab = values.get("c", {}).get("vocab") if isinstance(values.get("c"), dict) else None
    if vocab is not None and vocab != data.vocab_size:
        raise ConfigError(f"{source}: model.c.vocab is {vocab} but the corpus has "
                          f"{data.vocab_size} distinct characters")
    models = LeanModels(file)
    rank_values = values  # each rank's batch is its share of the global model.b
    if world > 1:
        rank_values = {**values, "b": distributed.per_rank_batch(values.get("b"), world, source)}
    graph = models.graph(model, rank_values)
    b, t = graph.inputs[0].shape
    train = dict(cfg["train"])
    for key, dim in (("batch", b * world), ("block", t)):
        if train.get(key, dim) != dim:
            raise ConfigError(f"{source}: train.{key} is {train[key]} but the model is "
                              f"instantiated with {dim} (model.{'b' if key == 'batch' else 't'})")
        train[key] = dim
    train["batch"] = b  # train_lm's batch is per rank
    lm = LMConfig.from_dict(train, source)
    out = Path(cfg.get("out", f"runs/{graph.model}"))
    module = module_from_graph(graph, seed=lm.seed)
    if world > 1:
        module = module.to(distributed.device())
    if main:
        print(f"model {graph.model} from {file}: {len(graph.nodes)} nodes, "
              f"{sum(p.numel() for p in module.parameters()):,} parameters; corpus "
              f"{data.n_chars:,} characters, vocab {data.vocab_size}"
              + (f"; {world} processes, batch {b} each" if world > 1 else ""))
        atomic_write_text(out / "run.json", json.dumps(
            {"file": str(file), "model": model, "values": values, "task": cfg["task"],
             "sample": sample}, indent=1))
    history = train_lm(module, data, lm, out, resume=resume, progress=progress)
    if not main:
        return 0
    last = history["evals"][-1]
    print(f"step {last['step']}: train loss {last['train']:.4f}, val loss {last['val']:.4f}")
    text = sample_text(models, sample, values, module.state_dict(), data)
    atomic_write_text(out / "sample.txt", text)
    print(f"wrote {out / 'ckpt'}, {out / 'loss.png'}, {out / 'metrics.json'}, {out / 'sample.txt'}")
    print("--- sample ---\n" + text)
    return 0


def sample_text(models: LeanModels, sample: dict[str, Any], values: dict[str, Any],
                weights: dict[str, torch.Tensor], data: Any) -> str:
    """Generate with the sampling model instantiated once per context length t ≤ block."""
    from .sample import generate

    block = int(values["c"]["block"])
    bad = sorted({ch for ch in sample["prompt"] if ch not in data.stoi})
    if bad:
        raise ConfigError(f"the prompt has characters outside the vocabulary: {bad}")
    cache: dict[int, Any] = {}

    def logits_fn(idx: torch.Tensor) -> torch.Tensor:
        t = idx.shape[1]
        if t not in cache:
            g = models.graph(sample["model"], {**values, "b": 1, "t": t})
            m = module_from_graph(g)
            m.load_state_dict(weights)
            cache[t] = m.eval()
        (out,) = cache[t](idx)[:1]
        return out

    ids = generate(logits_fn, data.encode(sample["prompt"]), sample["max_new_tokens"],
                   sample["temperature"], sample["top_k"], sample["seed"], block_size=block)
    return data.decode(ids[0].tolist())


def sample_from_run(run_dir: Path, overrides: dict[str, Any]) -> str:
    """`tyr sample --run DIR`: the trained weights of DIR/ckpt, the run's model and corpus."""
    from safetensors.torch import load_file

    from .checkpoint import resolve

    try:
        run = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{run_dir}: no run.json; is this the output directory of `tyr train`?") from None
    sample = _sample_cfg({**run.get("sample", {}), **overrides}, f"{run_dir}/run.json")
    data = _corpus(run["task"], f"{run_dir}/run.json")
    weights = load_file(str(resolve(run_dir / "ckpt") / "model.safetensors"))
    return sample_text(LeanModels(run["file"]), sample, run["values"], weights, data)
