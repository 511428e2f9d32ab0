"""The one training loop: any graph, any task, resumable bit for bit, torchrun-aware.

`Engine(module, task, cfg, input_names, out_dir).run(resume=...)` trains `module` (a lowered
graph whose last output is the scalar loss) on `task`'s batches:

- each optimizer step takes `accum` micro-batches per process (`TrainConfig.accumulation`);
  micro-batch `k` is `task.training_batch(k)`: `task.batch(k)` passed through the task's
  `step_inputs` hook with the `StepRNG` of (seed, k) of its rank (the task's `TaskContext`:
  seed, rank, world, accum), so the whole data stream is a pure function of the step, and
  step s is the same global batch for every world size and micro-batch split
  (`TaskContext.first_row`): 1 and N processes agree at every step, epochs wrapped or not;
- the rate follows `settings.lr_multiplier` for every optimizer group; gradients are clipped
  to `grad_clip` (the norm is always measured); AdamW is fused where torch has it, Muon is
  the alternative (`optim.py`); the forward runs under autocast when `precision` says so;
- every `eval_interval` steps (and at step 0 and the end) the task's fixed evaluation batches
  are run (this rank's micro-batches of the same global batches for every world size) and
  their metrics averaged over micro-batches and ranks (equal sizes: the global mean);
- every `checkpoint_interval` steps (and at the end) rank 0 writes a checkpoint holding
  every rank's RNG states (torch's, numpy's, Python's: a fresh run seeds all three from
  `seed`), so `run(resume=True)` continues exactly where the run was; an
  evaluation with the lowest `val` loss so far also writes the weights to `best/`;
- SIGINT or SIGTERM (Ctrl-C) stops the run at the end of the step: the checkpoint, the plot
  and the metrics are written, then `Interrupted` is raised (`--resume` continues exactly);
  so in a tyr command run as a program (`process.own_signals`); called from another program
  (pytest), its Ctrl-C interrupts the run as anything else;
- on a CPU the thread count is measured once and kept for the run (`threads.py`).

Under torchrun (`distributed.py`) the module is wrapped in DDP (gradient sync only on a
step's last micro-batch), or sharded by FSDP2 with `data_parallel="fsdp"` (checkpoints
still hold whole tensors, so a run resumes under either), logged values are means over the
ranks, and only rank 0 writes.
"""
from __future__ import annotations

import contextlib
import dataclasses
import math
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn

from pytyr.errors import ConfigError, Interrupted, TyrError
from pytyr.process import StopRequest
from pytyr.train import distributed
from pytyr.train.checkpoint import (
    capture_rng,
    load_checkpoint,
    read_state,
    resolve,
    restore_rng,
    rngs_kept,
    save_checkpoint,
    seed_rngs,
)
from pytyr.train.heap import keep_freed_heap
from pytyr.train.optim import make_optimizers, schedule_muon, set_rate
from pytyr.train.progress import Progress
from pytyr.train.report import write_outputs
from pytyr.train.settings import TrainConfig, lr_multiplier
from pytyr.train.task import Batch, Task
from pytyr.train.threads import ThreadChoice, choose_threads

History = dict[str, list[dict[str, float]]]
_AUTOCAST = {"bfloat16": torch.bfloat16, "float16": torch.float16}


def resolve_device(name: str) -> torch.device:
    """`cpu`, `cuda` or `auto` (cuda where available) as a device; under NCCL, this rank's."""
    if distributed.is_initialized():
        return distributed.device()
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("train.device is 'cuda' but torch sees no CUDA device here; use "
                          "'cpu' or 'auto'")
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def trajectory(cfg: TrainConfig) -> dict[str, Any]:
    """The config values that decide the run's path (a resume must keep them)."""
    full = {**dataclasses.asdict(cfg), "lr_decay_iters": cfg.decay_iters}  # the effective end
    return {k: full[k] for k in TrainConfig.TRAJECTORY}


class Engine:
    def __init__(self, module: nn.Module, task: Task, cfg: TrainConfig, input_names: list[str],
                 out_dir: str | Path, *, accum: int = 1, row_tokens: int = 1,
                 title: str = "training"):
        self.module, self.task, self.cfg = module, task, cfg
        self.names = list(input_names)
        self.out_dir = Path(out_dir)
        self.ckpt = self.out_dir / "ckpt"
        self.best = self.out_dir / "best"
        self.accum = accum
        self.row_tokens = row_tokens  # tokens per row, for the speed in tokens/s
        self.title = title
        self.rank, self.world = distributed.rank(), distributed.world()
        if cfg.data_parallel == "fsdp":
            distributed.shard(module)  # before the optimizers: they hold the shards
        self.sharded = distributed.is_sharded(module)
        params = [p for p in module.parameters() if p.requires_grad]
        if not params:
            raise ConfigError("the model has no trainable parameters")
        self.params = params
        self.device = params[0].device
        self.optimizers = make_optimizers(module, cfg, self.device)
        self.scaler = torch.amp.GradScaler(self.device.type,
                                           enabled=cfg.precision == "float16")
        self.history: History = {"steps": [], "evals": []}
        # Settings beside `cfg` that decide the trajectory too (`tyr train`: the model's
        # values and the task's options), kept in the checkpoint and checked on resume.
        self.fixed: dict[str, Any] = {}
        self.threads: ThreadChoice | None = None
        self._recorded_threads: int | None = None

    # -- one batch ----------------------------------------------------------------------------
    def _autocast(self) -> contextlib.AbstractContextManager:
        if self.cfg.precision == "float32":
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=_AUTOCAST[self.cfg.precision])

    def _inputs(self, batch: Batch) -> list[torch.Tensor]:
        return [batch[n].to(self.device, non_blocking=True) for n in self.names]

    def forward(self, model: nn.Module, batch: Batch) -> tuple[torch.Tensor, ...]:
        with self._autocast():
            out = model(*self._inputs(batch))
        return tuple(out) if isinstance(out, (tuple, list)) else (out,)

    def micro_batch(self, k: int) -> Batch:
        return self.task.training_batch(k)

    # -- evaluation ---------------------------------------------------------------------------
    @torch.no_grad()
    def evaluate(self) -> dict[str, float]:
        was = self.module.training
        self.module.eval()
        record: dict[str, float] = {}
        for split in self.task.splits:
            sums: dict[str, float] = {}
            n = 0
            for batch in self.task.eval_batches(split, self.cfg.eval_iters):
                metrics = self.task.eval_metrics(batch, self.forward(self.module, batch))
                for k, v in metrics.items():
                    sums[k] = sums.get(k, 0.0) + float(v)
                n += 1
            for k, v in sums.items():
                record[split if k == "loss" else f"{split}_{k}"] = v / max(n, 1)
        self.module.train(was)
        return self.task.summarize_metrics(distributed.mean_over_ranks(record))

    # -- resume -------------------------------------------------------------------------------
    def _check_resume(self, state: dict[str, Any]) -> None:
        # The process count first: it also changes the per-rank batch, a confusing diff alone.
        saved_world = state.get("extra", {}).get("world", 1)
        if saved_world != self.world:
            raise ConfigError(f"{self.ckpt}: the checkpoint was written by a run of "
                              f"{saved_world} process(es) and this run has {self.world}; "
                              f"resume with {saved_world} (torchrun "
                              f"--nproc_per_node={saved_world})")
        saved, now = state["config"], trajectory(self.cfg)
        was = {**trajectory(TrainConfig()), **saved}  # a key newer than it: its default then
        diff = [f"{k}: checkpoint {was[k]!r}, now {now[k]!r}"
                for k in now if _jsonable(was[k]) != _jsonable(now[k])]
        diff += [f"{k}: checkpoint {a!r}, now {b!r}" for k, a, b in _changes(
            {k: saved[k] for k in self.fixed if k in saved},  # older checkpoints lack them
            {k: v for k, v in _jsonable(self.fixed).items() if k in saved})]
        if diff:
            raise ConfigError(f"{self.ckpt}: cannot resume with a different configuration ("
                              + "; ".join(diff) + "); use a new out directory to start over")

    def _restore(self) -> int:
        if not (resolve(self.ckpt) / "state.json").is_file():
            raise ConfigError(f"{self.ckpt}: no checkpoint to resume from; run without "
                              "--resume to start a new run")
        state = read_state(self.ckpt)  # every file verified once, here
        self._check_resume(state)  # before touching the module
        if not isinstance(state["extra"].get("history"), dict):
            raise ConfigError(f"{state['path']}: no training history in the checkpoint; it was "
                              f"not written by `tyr train`")
        if self.sharded:  # full tensors from the file copied into this rank's shards
            from torch.distributed.tensor.experimental import implicit_replication

            with implicit_replication():
                state = load_checkpoint(self.ckpt, self.module, self.optimizers, state=state)
            for opt in self.optimizers:
                distributed.reshard_optimizer_state(opt)
        else:
            state = load_checkpoint(self.ckpt, self.module, self.optimizers, state=state)
        extra = state["extra"]
        if "rank_rng" in extra:
            restore_rng(extra["rank_rng"][self.rank])
        if "scaler" in extra:
            self.scaler.load_state_dict(extra["scaler"])
        self.history = extra["history"]
        self._recorded_threads = extra.get("threads")
        step = int(state["step"])
        if distributed.is_main():
            print(f"resuming from step {step} of {self.cfg.max_iters} ({state['path']})",
                  flush=True)
        return step

    def _save(self, step: int) -> None:
        rngs = distributed.gather(capture_rng())  # None for a process alone
        module, optimizers = self.module, self.optimizers
        if self.sharded:  # every rank gathers; rank 0 writes the whole tensors
            module = distributed.StateView(distributed.full_state_dict(module))
            optimizers = [distributed.StateView(distributed.full_state_dict(o))
                          for o in optimizers]
        if not distributed.is_main():
            return
        extra: dict[str, Any] = {"history": self.history, "world": self.world}
        if self.threads is not None:
            extra["threads"] = self.threads.threads
        if rngs is not None:
            extra["rank_rng"] = rngs
        if self.scaler.is_enabled():
            extra["scaler"] = self.scaler.state_dict()
        save_checkpoint(self.ckpt, module=module, optimizers=optimizers, step=step,
                        config=_jsonable({**trajectory(self.cfg), **self.fixed}), extra=extra)

    def _save_best(self, step: int, val: float) -> None:
        """The weights of the evaluation with the lowest validation loss so far, to `best/`
        (on every rank: a sharded model gathers its tensors)."""
        module = self.module
        if self.sharded:
            module = distributed.StateView(distributed.full_state_dict(module))
        if distributed.is_main():
            save_checkpoint(self.best, module=module, optimizers=None, step=step,
                            config=_jsonable(trajectory(self.cfg)),
                            extra={"val": val, **({"threads": self.threads.threads}
                                                  if self.threads is not None else {})})

    def _best_val(self) -> float:
        return min((e["val"] for e in self.history["evals"] if e["step"] > 0 and "val" in e),
                   default=math.inf)

    def _choose_threads(self, start: int) -> ThreadChoice:
        """The run's thread count (`threads.py`), timed on the next micro-batch's forward and
        backward; the gradients and every RNG are left as they were."""
        def probe() -> None:
            with rngs_kept():
                loss = self.forward(self.module, self.micro_batch(start * self.accum))[-1]
                loss.backward()
            for p in self.params:
                p.grad = None

        return choose_threads(self.cfg.threads, probe, device=self.device,
                              recorded=self._recorded_threads)

    def weights(self) -> dict[str, torch.Tensor]:
        """The trained weights on the CPU, whole (under FSDP a collective: call on every
        rank)."""
        sd = (distributed.full_state_dict(self.module) if self.sharded
              else self.module.state_dict())
        return {k: v.detach().cpu() for k, v in sd.items()}

    # -- the loop -----------------------------------------------------------------------------
    def run(self, *, resume: bool = False, progress: bool = True) -> History:
        """Train to `max_iters`; return the history `{"steps": [{"step", "loss", "lr",
        "grad_norm"}], "evals": [{"step", "<split>", "<split>_<metric>"}]}`."""
        threads_before = torch.get_num_threads()
        try:
            return self._run(resume, progress)
        finally:
            torch.set_num_threads(threads_before)  # the run's count was the run's

    def _run(self, resume: bool, progress: bool) -> History:
        # The run's randomness (dropout, a task's draws) comes from the global generators:
        # seeded by the run (restored on resume), the caller's states kept around it.
        with rngs_kept():
            if resume:
                start = self._restore()
            else:
                seed_rngs(self.cfg.seed + self.rank)
                start = 0
            self.module.train()
            if self.device.type == "cpu":
                keep_freed_heap()  # before the probe: it times steps as the run takes them
            self.threads = self._choose_threads(start)
            if progress and distributed.is_main() and self.device.type == "cpu":
                print(self.threads.line(), flush=True)
            if start == 0:
                self.history["evals"].append({"step": 0, **self.evaluate()})
            with StopRequest() as stop:
                speed, stopped = self._loop(start, progress and distributed.is_main(), stop)
        if distributed.is_main():
            write_outputs(self.out_dir, trajectory(self.cfg), self.history, speed, self.title)
        distributed.barrier()  # the outputs exist when any rank returns
        if stopped is not None:
            raise Interrupted(f"stopped by {stop.signal} at step {stopped} of "
                              f"{self.cfg.max_iters}; wrote {self.ckpt}, loss.png and "
                              "metrics.json: run the same command with --resume to continue",
                              stop.exit_code)
        return self.history

    def _step(self, model: nn.Module, it: int) -> float:
        total = 0.0
        for micro in range(self.accum):
            batch = self.micro_batch(it * self.accum + micro)
            last = micro == self.accum - 1
            sync = contextlib.nullcontext() if last or not hasattr(model, "no_sync") \
                else model.no_sync()
            with sync:
                loss = self.forward(model, batch)[-1]
                if loss.ndim != 0:
                    raise ConfigError(f"the model's last output has shape {list(loss.shape)}; "
                                      "the loss must be a scalar")
                self.scaler.scale(loss / self.accum).backward()
            total += float(loss.detach())
        return total / self.accum

    def _loop(self, start: int, progress: bool, stop: StopRequest
              ) -> tuple[float | None, int | None]:
        """Steps `start`..`max_iters`; returns the speed in tokens/s and, when a signal
        stopped the run, the step it stopped after."""
        cfg = self.cfg
        model = self.module if self.sharded else distributed.wrap(self.module)
        bar = Progress(cfg.max_iters, start, enabled=progress)
        tokens = cfg.batch * self.row_tokens
        t0, done = time.perf_counter(), 0
        best = self._best_val()
        stopped = None
        for it in range(start, cfg.max_iters):
            mult = lr_multiplier(it, cfg)
            set_rate(self.optimizers, mult)
            schedule_muon(self.optimizers, it, cfg)
            for opt in self.optimizers:
                opt.zero_grad(set_to_none=True)
            # The stop request rides on the loss's mean: every rank stops after the same step.
            means = distributed.mean_over_ranks({"loss": self._step(model, it),
                                                 "stop": float(stop.signal is not None)})
            value = means["loss"]
            if not math.isfinite(value):
                raise TyrError(f"train: the loss is {value} at step {it + 1}; try a lower "
                               "train.lr or train.grad_clip")
            for opt in self.optimizers:
                self.scaler.unscale_(opt)
            # An infinite bound makes clip_grad_norm_ only measure the global norm.
            norm = distributed.full(torch.nn.utils.clip_grad_norm_(
                self.params, cfg.grad_clip or math.inf))
            for opt in self.optimizers:
                self.scaler.step(opt)
            self.scaler.update()
            step = it + 1
            self.history["steps"].append({"step": step, "loss": value,
                                          "lr": cfg.lr * mult, "grad_norm": float(norm)})
            done += 1
            speed = done * tokens / max(time.perf_counter() - t0, 1e-9)
            bar.update(step, loss=value, lr=cfg.lr * mult, tok_s=speed,
                       show=step % cfg.log_interval == 0 or step == cfg.max_iters)
            if step % cfg.eval_interval == 0 or step == cfg.max_iters:
                record = self.evaluate()
                self.history["evals"].append({"step": step, **record})
                bar.write(f"step {step}: " + ", ".join(
                    f"{k} {v:.4f}" for k, v in record.items()))
                if record.get("val", math.inf) < best:
                    best = record["val"]
                    self._save_best(step, best)
            stopping = means["stop"] > 0 or (self.world == 1 and stop.signal is not None)
            if step % cfg.checkpoint_interval == 0 or step == cfg.max_iters or stopping:
                self._save(step)
            if stopping:
                stopped = step
                break
        bar.close()
        elapsed = time.perf_counter() - t0
        return (done * tokens / elapsed if done else None), stopped


def _changes(saved: Any, now: Any, key: str = "") -> list[tuple[str, Any, Any]]:
    """(dotted key, saved, now) of every leaf that differs between two JSON tables."""
    if isinstance(saved, dict) and isinstance(now, dict):
        return [c for k in sorted(set(saved) | set(now), key=str)
                for c in _changes(saved.get(k), now.get(k), f"{key}.{k}" if key else str(k))]
    return [] if saved == now else [(key, saved, now)]


def _jsonable(value: Any) -> Any:
    """Tuples as lists, recursively: how a value reads back from JSON."""
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value
