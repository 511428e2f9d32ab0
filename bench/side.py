"""One side of an example's training step in a process of its own, as a user runs it:
`python -m bench.side EXAMPLE SIDE [--steps N | --serve]` (EXAMPLE `gpt_large`: a GPT whose
activations outweigh its weights, for `bench/memory.py`; `gpt_tiny`: a GPT of one narrow
layer, for the smoke tests).

`take_turns` (the parent's side, for `bench/defaults.py`, `memory.py` and `threads.py`) starts
one such process per job and alternates them step by step (`--serve`, through `Child`: a `step`
line on stdin runs one step, `end` reports): torch's thread count and OpenMP's wait policy are
fixed when torch loads, and a process's peak RSS (`VmHWM`) cannot be reset, so two sides in one
process would share all three. SIDE is `tyr` (what `tyr train` runs: the module lowered from the
Lean model, the optimizers built from the example's config, the engine's heap thresholds
`pytyr.train.heap` and thread policy `pytyr.train.threads`; `tyr_checkpoint` with
`train.checkpoint_blocks` too), `plain` (the hand-written PyTorch model as a plain script runs
it: torch's threads and torch's default AdamW) or `plain_fused` (with `AdamW(fused=True)`). The
setting is the environment the parent gives (`child_env`).

Batches: the example's bench module's `batches` (the task's `training_batch`, as `tyr train`
makes them; nanochat's over a data set written at the start, see `bench.nanochat.batches`),
the same on every side.

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

EXAMPLES = ("gpt", "gpt_large", "gpt_tiny", "diffusion", "flux", "nanochat")
SIDES = ("tyr", "tyr_checkpoint", "plain", "plain_fused")
# a GPT whose activations outweigh its weights: where checkpointing blocks pays (bench/memory)
GPT_LARGE = {"n_layer": 8, "n_head": 8, "head_dim": 32, "block": 256, "b": 8, "t": 256}
# the recipe's GPT at smoke-test size: the processes' start-up is most of their time
GPT_TINY = {"n_layer": 1, "n_head": 2, "head_dim": 8, "block": 16, "b": 2, "t": 16}
GPT_SIZES = {"gpt": {}, "gpt_large": GPT_LARGE, "gpt_tiny": GPT_TINY}
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

    if example == "nanochat":  # January's layout, as bench/plain_nanochat.py writes it
        from bench.nanochat import recipe
        return recipe()
    folder = "gpt" if example in GPT_SIZES else example
    return json.loads((ROOT / "examples" / folder / "config.json").read_text(encoding="utf-8"))


def build(example: str, side: str, n_batches: int = 8) -> tuple[Any, list[Any], list[tuple]]:
    """(module, optimizers, batches) of one side of `example` at its recipe's sizes."""
    cfg = _config(example)
    tyr = side.startswith("tyr")
    checkpoint = side == "tyr_checkpoint"
    if example in GPT_SIZES:
        from bench import gpt
        values = gpt.gpt_values(**GPT_SIZES[example])
        data = gpt.batches(values, n_batches, 1)
        if tyr:
            module = _tyr_module(gpt.GPT_FILE, "gpt", values, checkpoint)
        else:
            from bench.nanogpt import GPT, GPTConfig
            module = GPT(GPTConfig.from_tyr(values["c"]))
        opts = [gpt._optimizer(module, side)] if not tyr else _tyr_optimizers(module, cfg)
        return module, opts, data
    if example in ("diffusion", "flux"):
        from bench import diffusion, flux
        from bench.diffusion_plain import Diffusion, DiffusionConfig
        from bench.flux_plain import Flux, FluxConfig
        # the bench module (its batches), the Lean file, the recipe's values, the plain model
        bench, lean, values, plain = {
            "diffusion": (diffusion, diffusion.LEAN_FILE, diffusion.recipe_values,
                          lambda c: Diffusion(DiffusionConfig.from_tyr(c))),
            "flux": (flux, flux.FLUX_FILE, flux.flux_values,
                     lambda c: Flux(FluxConfig.from_tyr(c)))}[example]
        v = values()
        data = bench.batches(v, n_batches, 1)
        module = _tyr_module(lean, example, v, checkpoint) if tyr else plain(v["c"])
        return module, _tyr_optimizers(module, cfg) if tyr else [_plain_adamw(
            module, side, cfg)], data
    if example == "nanochat":
        from bench import nanochat
        c, t, b = cfg["model"]["c"], cfg["task"]["seq"], cfg["train"]["micro_batch"]
        data = nanochat.batches(c, b, t, n_batches, 1)
        if tyr:
            module = _tyr_module(nanochat.LEAN, "nanochatJan", {"c": c, "b": b, "t": t},
                                 checkpoint)
        else:
            from bench.plain_nanochat import Config, NanoChat
            module = NanoChat(Config.from_lean(c)).init_weights()
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
    from bench import train_step

    return float(train_step(module, opts, batch).detach())


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
            from pytyr.train.heap import keep_freed_heap

            keep_freed_heap()  # as the engine does on a CPU
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


class Child:
    """A `bench.side EXAMPLE SIDE --serve` process in environment `env`, seen from its parent
    (stderr to a file, so that a chatty child never blocks on a full pipe); `what` names it
    in an error."""

    def __init__(self, example: str, side: str, env: dict[str, str], what: str):
        import subprocess
        import tempfile

        from bench import ROOT

        self.what = f"bench.side {example} {side} ({what})"
        self.err = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench.side", example, side, "--serve"], cwd=ROOT, env=env,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err, text=True, bufsize=1)
        self.ready = self.ask(None)

    def ask(self, command: str | None) -> dict[str, Any]:
        """Send `command` (None: nothing) and read the child's one-line JSON answer."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        if command is not None:
            self.proc.stdin.write(command + "\n")
            self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            self.err.seek(0)
            tail = (self.err.read().strip().splitlines() or ["no message"])[-1]
            raise RuntimeError(f"{self.what} ended: {tail}")
        return json.loads(line)

    def close(self) -> None:
        """End the process (closing its stdin ends a serving child) and every pipe."""
        import subprocess

        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                try:
                    pipe.close()
                except OSError:  # a child that died before reading its last line
                    pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.err.close()


# a pause before each step: OpenMP's threads of the previous process spin for a few ms after
# its step (the default wait policy), which would slow the next process's step
SETTLE_S = 0.02


def take_turns(jobs: dict[str, tuple[str, str, dict[str, str]]], *, steps: int, warmup: int
               ) -> dict[str, Any]:
    """One `--serve` process per job (name -> example, side, environment), started one after
    the other (a starting process does not disturb another's thread choice), then stepped in
    turn, in a new random order every round (no job always follows the same one), the load
    read every round. Returns each job's timed steps (`times`, after `warmup` rounds), its
    closing record with its `ready` line (`records`), and the loads."""
    import random

    from bench import load_average

    children: dict[str, Child] = {}
    times: dict[str, list[dict[str, float]]] = {job: [] for job in jobs}
    loads = []
    try:
        for job, (example, side, env) in jobs.items():
            children[job] = Child(example, side, env, job)
        order, names = random.Random(0), list(jobs)
        for i in range(warmup + steps):
            for job in order.sample(names, len(names)):
                time.sleep(SETTLE_S)
                got = children[job].ask("step")
                if i >= warmup:
                    times[job].append(got)
            loads.append(load_average())
        records = {job: {**c.ask("end"), "ready": c.ready} for job, c in children.items()}
    finally:
        for c in children.values():
            c.close()
    return {"times": times, "records": records, "load": [x for x in loads if x is not None]}


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
