"""One side of an example's training step in a process of its own, as a user runs it:
`python -m bench.side EXAMPLE SIDE [--steps N | --serve]` (EXAMPLE `gpt_large`: a GPT whose
activations outweigh its weights, for `bench/memory.py`).

`bench/defaults.py` starts one such process per side and setting and alternates them step by
step (`--serve`: a `step` line on stdin runs one step, `end` reports): torch's thread count
and OpenMP's wait policy are fixed when torch loads, and a process's peak RSS (`VmHWM`)
cannot be reset, so two sides in one process would share all three. SIDE is `tyr` (what
`tyr train` runs: the module lowered from the Lean model, the
optimizers built from the example's config, the engine's thread policy
`pytyr.train.threads`; `tyr_checkpoint` with `train.checkpoint_blocks` too), `plain` (the hand-written PyTorch model as a plain script runs it:
torch's threads and torch's default AdamW) or `plain_fused` (with `AdamW(fused=True)`). The
setting is the environment the parent gives (`child_env`).

A process reports the wall and process CPU time of each step, the threads used and why, its
peak RSS, its RSS before the model was built, and the activation memory of one step: the
bytes of the distinct storages autograd saved for the backward
(`torch.autograd.graph.saved_tensors_hooks`), parameters excluded.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

EXAMPLES = ("gpt", "gpt_large", "diffusion", "flux", "nanochat")
SIDES = ("tyr", "tyr_checkpoint", "plain", "plain_fused")
# a GPT whose activations outweigh its weights: where checkpointing blocks pays (bench/memory)
GPT_LARGE = {"n_layer": 8, "n_head": 8, "head_dim": 32, "block": 256, "b": 8, "t": 256}
SETTINGS = ("defaults", "one")
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


def status_kb(field: str) -> int | None:
    """A `VmHWM`/`VmRSS` line of /proc/self/status in kB (None where there is no /proc)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _config(example: str) -> dict[str, Any]:
    from bench import ROOT

    if example == "nanochat":  # the layout the plain model writes (bench/nanochat.py)
        from bench.nanochat import CONFIG
        return json.loads(CONFIG.read_text(encoding="utf-8"))
    folder = "gpt" if example == "gpt_large" else example
    return json.loads((ROOT / "examples" / folder / "config.json").read_text(encoding="utf-8"))


def build(example: str, side: str, n_batches: int = 8) -> tuple[Any, list[Any], list[tuple]]:
    """(module, optimizers, batches) of one side of `example` at its recipe's sizes."""
    import torch

    cfg = _config(example)
    tyr = side.startswith("tyr")
    checkpoint = side == "tyr_checkpoint"
    if example in ("gpt", "gpt_large"):
        from bench import gpt
        values = {"c": dict(cfg["model"]["c"]), "b": cfg["train"]["batch"],
                  "t": cfg["task"]["seq"]}
        if example == "gpt_large":
            for k, x in GPT_LARGE.items():
                (values if k in ("b", "t") else values["c"])[k] = x
        data = gpt.batches(values, n_batches, 1)
        if tyr:
            module = _tyr_module(gpt.GPT_FILE, "gpt", values, checkpoint)
        else:
            from bench.nanogpt import GPT, GPTConfig
            module = GPT(GPTConfig.from_tyr(values["c"]))
        opts = [gpt._optimizer(module, side)] if not tyr else _tyr_optimizers(module, cfg)
        return module, opts, data
    if example == "diffusion":
        from bench import diffusion
        values = diffusion.recipe_values()
        data = diffusion.batches(values, n_batches, 1)
        if tyr:
            module = _tyr_module(diffusion.LEAN_FILE, "diffusion", values, checkpoint)
        else:
            from bench.diffusion_plain import Diffusion, DiffusionConfig
            module = Diffusion(DiffusionConfig.from_tyr(values["c"]))
        return module, _tyr_optimizers(module, cfg) if tyr else [_plain_adamw(
            module, side, cfg)], data
    if example == "flux":
        from bench import flux
        values = flux.flux_values()
        data = flux.batches(values, n_batches, 1)
        if tyr:
            module = _tyr_module(flux.FLUX_FILE, "flux", values, checkpoint)
        else:
            from bench.flux_plain import Flux, FluxConfig
            module = Flux(FluxConfig.from_tyr(values["c"]))
        return module, _tyr_optimizers(module, cfg) if tyr else [_plain_adamw(
            module, side, cfg)], data
    if example == "nanochat":
        from bench import nanochat
        c, t, b = cfg["model"]["c"], cfg["task"]["seq"], cfg["train"]["micro_batch"]
        gen = torch.Generator().manual_seed(1)
        data = [tuple(torch.randint(0, c["vocab"], (2, b, t), generator=gen))
                for _ in range(n_batches)]
        if tyr:
            module = _tyr_module(nanochat.LEAN, "nanochatJan", {"c": c, "b": b, "t": t},
                                 checkpoint)
        else:
            from bench.plain_nanochat import Config, NanoChat
            module = NanoChat(Config.from_lean(c))
        # nanochat's own code steps with Muon and AdamW: the same optimizers on both sides
        return module, nanochat._optimizers(module, cfg["train"]), data
    raise ValueError(f"unknown example {example!r}; one of {', '.join(EXAMPLES)}")


def _tyr_module(path: Any, model: str, values: dict[str, Any], checkpoint: bool) -> Any:
    from pytyr.pipeline import graph_from_lean, module_from_graph

    return module_from_graph(graph_from_lean(path, model, values), checkpoint_blocks=checkpoint)


def _tyr_optimizers(module: Any, cfg: dict[str, Any]) -> list[Any]:
    """The optimizers `tyr train` builds from the example's `train` table."""
    import torch

    from pytyr.config import load_dataclass
    from pytyr.train.optim import make_optimizers
    from pytyr.train.settings import TrainConfig

    train = load_dataclass(TrainConfig, cfg["train"], "bench", prefix="train.")
    return make_optimizers(module, train, torch.device("cpu"))


def _plain_adamw(module: Any, side: str, cfg: dict[str, Any]) -> Any:
    """torch's AdamW as a plain script sets it up from the same table (decay on matrices)."""
    import torch

    from pytyr.train.optim import param_groups

    t = cfg["train"]
    return torch.optim.AdamW(param_groups(module, t.get("weight_decay", 0.1)), lr=t["lr"],
                             betas=(t.get("beta1", 0.9), t.get("beta2", 0.99)),
                             fused=side == "plain_fused")


def step(module: Any, opts: list[Any], batch: tuple) -> float:
    """forward, zero_grad, backward, every optimizer's step: the loss."""
    loss = module(*batch)[-1]
    for o in opts:
        o.zero_grad(set_to_none=True)
    loss.backward()
    for o in opts:
        o.step()
    return float(loss.detach())


def activation_bytes(module: Any, batch: tuple) -> int:
    """Bytes of the distinct storages one forward saves for its backward, parameters apart
    (a tensor saved twice, or two views of one buffer, count once)."""
    import torch

    params = {p.untyped_storage().data_ptr() for p in module.parameters()}
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        s = t.untyped_storage()
        if s.data_ptr() not in params and s.device.type == "cpu":
            seen[s.data_ptr()] = s.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = module(*batch)[-1]
    loss.backward()
    module.zero_grad(set_to_none=True)
    return sum(seen.values())


def _choose_threads(module: Any, batch: tuple, cfg: dict[str, Any]) -> tuple[int, str]:
    """The engine's thread policy on this side's own forward and backward."""
    import torch

    from pytyr.train.threads import choose_threads

    def probe() -> None:
        module(*batch)[-1].backward()
        module.zero_grad(set_to_none=True)

    setting = cfg["train"].get("threads", "auto")
    choice = choose_threads(setting, probe, device=torch.device("cpu"))
    return choice.threads, choice.reason


class Side:
    """One side, built and with its thread count chosen; steps on request."""

    def __init__(self, example: str, side: str):
        import torch

        self.example, self.side = example, side
        self.rss_before = status_kb("VmRSS")
        self.module, self.opts, self.data = build(example, side)
        self.module.train()
        self.threads = torch.get_num_threads()
        self.reason = ("the environment" if any(os.environ.get(v) for v in THREAD_VARS)
                       else "torch's default")
        if self.side.startswith("tyr"):
            self.threads, self.reason = _choose_threads(self.module, self.data[0],
                                                        _config(example))
        self.k = 0

    def step(self) -> dict[str, float]:
        """One timed training step: wall and process CPU seconds, the loss."""
        w0, c0 = time.perf_counter(), time.process_time()
        loss = step(self.module, self.opts, self.data[self.k % len(self.data)])
        self.k += 1
        return {"wall_s": time.perf_counter() - w0, "cpu_s": time.process_time() - c0,
                "loss": loss}

    def record(self) -> dict[str, Any]:
        """What the side is and its memory: call after the steps (the peak includes them)."""
        return {"example": self.example, "side": self.side, "threads": self.threads,
                "reason": self.reason, "wait_policy": os.environ.get("OMP_WAIT_POLICY", ""),
                "activation_bytes": activation_bytes(self.module, self.data[0]),
                "rss_before_kb": self.rss_before, "peak_rss_kb": status_kb("VmHWM"),
                "params": sum(p.numel() for p in self.module.parameters())}


def serve(example: str, side: str) -> None:
    """Build, say `ready`, then answer each stdin line `step` with one step's timings and
    `end` with the record (one JSON line each), so that a parent can alternate processes
    step by step."""
    s = Side(example, side)
    _say({"ready": True, "threads": s.threads, "reason": s.reason})
    for line in sys.stdin:
        if line.strip() == "step":
            _say(s.step())
        elif line.strip() == "end":
            _say(s.record())
            return


def _say(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def child_env(side: str, setting: str, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a side runs in: the thread variables cleared at `defaults` (so the
    `python -m bench` parent's one thread does not leak), one thread at `one`. The same for
    both sides: `tyr` sets nothing before torch loads (docs/performance.md, "Threads")."""
    env = dict(os.environ if base is None else base)
    for var in THREAD_VARS:
        env.pop(var, None)
    if setting == "one":
        env.update({var: "1" for var in THREAD_VARS})
    return env


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.side", description=__doc__.splitlines()[0])
    p.add_argument("example", choices=EXAMPLES)
    p.add_argument("side", choices=SIDES)
    p.add_argument("--steps", type=int, default=20, help="without --serve: timed steps")
    p.add_argument("--serve", action="store_true",
                   help="take `step` and `end` lines on stdin (bench/defaults.py)")
    args = p.parse_args(argv)
    if args.side == "plain_fused" and args.example == "nanochat":
        p.error("nanochat has no plain_fused side: both sides step with Muon and AdamW")
    if args.serve:
        serve(args.example, args.side)
        return 0
    s = Side(args.example, args.side)
    s.step()  # warm-up
    steps = [s.step() for _ in range(args.steps)]
    _say({**s.record(), "wall_s": [x["wall_s"] for x in steps],
          "cpu_s": [x["cpu_s"] for x in steps]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
