"""`tyr train` and `tyr sample`: a model, a config, a task, the engine.

`train` does, in this order, and stops at the first problem with one message:
config → task and sampler tables → the run directory (`rundir`: its own, not in use, and
free for a fresh run or holding one to resume) → the model's dims filled from the task's
roles → graph → graph against the task's feeds and the optimizer's name lists → data (rank
0 first) → outputs against the data's sizes → the sampler's models → module → the engine's
loop → sample. The run directory then holds `run.json`, `ckpt/`, `best/` (`record.py`),
`metrics.json`, `loss.png` and, for tasks that sample, `sample.txt`; `tyr sample --run DIR`
needs nothing else, and verifies what it reads.
"""
from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytyr.atomic import atomic_write_text
from pytyr.config import merge, show
from pytyr.digest import stamped
from pytyr.errors import ConfigError
from pytyr.ir.graph import Graph
from pytyr.pipeline import module_from_graph
from pytyr.train.match import check_graph, fill_config_fields, fill_dims
from pytyr.train.model import ModelSource, RunModel
from pytyr.train.record import (
    checkpoint_dir,
    describe_checkpoint,
    read_run,
    run_threads,
    run_weights,
    sample_dir,
)
from pytyr.train.settings import RunConfig, load_run_config
from pytyr.train.task import SampleOutput, Task, TaskContext
from pytyr.train.tasks import (
    recorded_task_class,
    sample_options,
    task_class,
    task_options,
    task_record,
)
from pytyr.train.threads import threads_kept


def graph_values(source: ModelSource, model: str, raw: dict[str, Any], where: str, *,
                 data: bool = False, memo: dict[str, Any] | None = None,
                 peek: bool = False) -> dict[str, Any]:
    """The model's values for `tyr graph`: the config's `model` table, plus the dims its
    task's feeds determine and the bounds of its inputs the config alone decides (a prompt
    vocabulary's size; as `tyr train` would instantiate it on one process). With `data`, the
    config fields that only the data decides (`c.vocab` from the corpus) and the config leaves
    out are read from the task's data, as `tyr train` does; the data is prepared only then,
    and once per `memo` over calls for the models of one config. With `peek` instead (the
    editor's values), the data is never prepared: only what its metadata says
    (`Task.peek_sizes`) fills them."""
    cfg = load_run_config(raw, where)
    if not cfg.task:
        return dict(cfg.model)
    cls = task_class(cfg.task, where)
    sample_options(cls, cfg.sample, where)  # checked as `tyr train` would, though unused here
    micro, accum = cfg.train.accumulation(1, where)
    task = cls(task_options(cls, cfg.task, where),
               TaskContext(micro, cfg.train.seed, source=where, accum=accum))
    decl = source.declaration(model)
    values = fill_dims(decl, cfg.model, task.feeds(), task.sizes(), task.name, partial=True)
    values, waiting = fill_config_fields(decl, values, task.feeds(), task.expects(),
                                         task.sizes())
    if not (waiting and (data or peek)):
        return values
    memo = {} if memo is None else memo
    if "sizes" not in memo:
        memo["sizes"] = {**task.sizes(), **_data_sizes(task, peek)}
    return fill_config_fields(decl, values, task.feeds(), task.expects(), memo["sizes"])[0]


def _data_sizes(task: Task, peek: bool) -> dict[str, int]:
    if peek:
        return task.peek_sizes() or {}
    task.prepare()
    return task.data_sizes()


@dataclasses.dataclass
class Checked:
    """What `tyr train` has checked before the first step: the model with every value filled
    in, its graph (fits the task's feeds and outputs and the optimizer's names), the task with
    its data prepared (`about`: a line on it), the run's config and sampling options."""

    model: RunModel
    graph: Graph
    task: Task
    cfg: RunConfig
    sampling: Any
    about: str


def train(source: ModelSource, model: str, raw: dict[str, Any], where: str, *,
          resume: bool = False, overwrite: bool = False, progress: bool = True,
          init: tuple[str, Any] | None = None) -> int:
    """Train `model` (module doc); `init`, (a checkpoint's path, its HF config or None): the
    weights the first step starts from."""
    from pytyr.train import distributed, rundir

    cfg = load_run_config(raw, where)
    cls = task_class(cfg.task, where)
    options = task_options(cls, cfg.task, where)
    sampling = sample_options(cls, cfg.sample, where)
    out = rundir.check_out(cfg.out, model, where)
    with distributed.session() as env, rundir.claim(out, resume=resume,
                                                    overwrite=overwrite) as claimed:
        micro, accum = cfg.train.accumulation(env.world, where)
        task = cls(options, TaskContext(micro, cfg.train.seed, distributed.rank(), env.world,
                                        where, accum))
        checked = _check(RunModel(source, model, cfg.model), task, cfg, sampling, where)
        return _train(checked, claimed, resume, progress, init)


def _check(model: RunModel, task: Task, cfg: RunConfig, sampling: Any, where: str) -> Checked:
    """Everything before the first step (module doc), the data prepared on the way."""
    from pytyr.train import distributed

    decl, feeds, expects = model.declaration(), task.feeds(), task.expects()
    # Check everything the config alone decides before the data is touched; fields the data
    # decides (`c.vocab` from the corpus) wait for it.
    values, waiting = fill_config_fields(decl, cfg.model, feeds, expects, task.sizes())
    graph = None if waiting else _fitting(model.with_values(values), task, cfg, task.sizes(),
                                          where)
    with distributed.main_first():  # rank 0 builds caches; the others read them
        about = task.prepare()
    sizes = {**task.sizes(), **task.data_sizes()}
    model = model.with_values(fill_config_fields(decl, values, feeds, expects, sizes)[0])
    graph = _fitting(model, task, cfg, sizes, where, graph)
    task.check_sampling(model, sampling)
    _check_eval_iters(task, cfg.train.eval_iters, where)
    return Checked(model, graph, task, cfg, sampling, about)


def _check_eval_iters(task: Task, iters: int, where: str) -> None:
    """`train.eval_iters` bounded by the batches each split holds (`Task.eval_batch_limit`)."""
    limits = [(limit, split) for split in task.splits
              if (limit := task.eval_batch_limit(split)) is not None]
    if limits and iters > min(limits)[0]:
        limit, split = min(limits)
        raise ConfigError(f"{where}: 'train.eval_iters' is {show(iters)}, more batches of "
                          f"{task.ctx.global_batch} rows than the {split} split holds "
                          f"({limit}); give at most {limit}")


def _fitting(model: RunModel, task: Task, cfg: RunConfig, sizes: dict[str, int], where: str,
             graph: Graph | None = None) -> Graph:
    """The model's graph (`graph`, or built for `sizes`), checked against the task's feeds and
    outputs and the optimizer's name lists."""
    from pytyr.train.optim import check_names

    graph = graph or model.graph(task.feeds(), sizes, task.name)
    check_graph(graph, model.where, task.feeds(), task.expects(), sizes, task.name, cfg.model,
                task.roles_at_least)
    check_names(cfg.train, [p.path for p in graph.params], where, graph.model)
    return graph


# Task options that say only where something is kept, not what it is: free on resume.
_PLACE_OPTIONS = ("cache_dir",)


def _train(run: Checked, claimed: Any, resume: bool, progress: bool,
           init: tuple[str, Any] | None = None) -> int:
    from pytyr.train import distributed
    from pytyr.train.engine import Engine, resolve_device

    out, task, graph, train = claimed.path, run.task, run.graph, run.cfg.train
    device = resolve_device(train.device)
    module = module_from_graph(graph, seed=train.seed, kernels=train.kernels,
                               checkpoint_blocks=train.checkpoint_blocks).to(device)
    if init is not None:  # a resumed run's checkpoint replaces them
        from pytyr.train.pretrained import initial_weights

        initial_weights(module, init[0], init[1], say=print if distributed.is_main() else None)
    sizes = {**task.sizes(), **task.data_sizes()}
    if distributed.is_main():
        _announce(run, module, device)
        claimed.start()  # with --overwrite, the old run goes now that every check passed
        atomic_write_text(out / "run.json", json.dumps(stamped(
            {"origin": {k: str(Path(v).resolve()) for k, v in run.model.source.origin.items()},
             "model": run.model.name, "values": run.model.values,
             **({"init": str(Path(init[0]).resolve())} if init is not None else {}),
             "task": task_record(task, run.cfg.task), "sample": run.cfg.sample,
             "train": dataclasses.asdict(train)}), indent=1))
    engine = Engine(module, task, train, [i.name for i in graph.inputs], out,
                    accum=task.ctx.accum, row_tokens=sizes.get("seq", 1),
                    title=f"{graph.model} on {task.name}")
    engine.fixed = {"model": run.model.values,
                    "task": {k: v for k, v in task.describe_for_run().items()
                             if k not in _PLACE_OPTIONS}}
    history = engine.run(resume=resume, progress=progress)
    weights = engine.weights()  # on every rank: a sharded model gathers its tensors
    distributed.parting()  # the last collective: a rank that ends from here on is no news
    if not distributed.is_main():
        return 0
    last = history["evals"][-1]
    if not progress:  # with progress, the engine has printed it
        print(f"step {last['step']}: " + ", ".join(f"{k} {v:.4f}" for k, v in last.items()
                                                   if k != "step"))
    wrote = [out / "ckpt", out / "loss.png", out / "metrics.json"]
    trained = run.model.with_weights(weights, "the trained weights")
    if checkpoint_dir(out, "best") != out / "ckpt":
        wrote.insert(1, out / "best")
        if task.SampleOptions is not None:
            print(f"sampling with {describe_checkpoint(out, 'best')}")
            trained = run.model.with_weights(run_weights(out, "best"), "the trained weights")
    with threads_kept(engine.threads.threads if engine.threads is not None else None):
        made = task.sample(trained, run.sampling, out)
    text = _keep_sample(made, out)
    wrote += made.files if made is not None else []
    print(f"wrote {', '.join(map(str, wrote))}")
    if text is not None:
        print("--- sample ---\n" + text)
    return 0


def _announce(run: Checked, module: Any, device: Any) -> None:
    """The run's first line: model, size, task, data, processes, device."""
    from pytyr.train import distributed

    n = sum(p.numel() for p in module.parameters())
    task, world, accum = run.task, distributed.world(), run.task.ctx.accum
    print(f"model {run.graph.model} from {run.model.origin}: {len(run.graph.nodes)} nodes, "
          f"{n:,} parameters; task {task.name}: {run.about}"
          + (f"; {world} processes, batch {task.ctx.micro_batch} each" if world > 1 else "")
          + (f"; {accum} micro-batches per step" if accum > 1 else "")
          + (f"; on {device}" if device.type != "cpu" else ""))


def _keep_sample(made: SampleOutput | None, out: Path) -> str | None:
    """Save a sample's text as `sample.txt` beside what the task wrote; return the text."""
    if made is None or made.text is None:
        return None
    atomic_write_text(out / "sample.txt", made.text)
    made.files.insert(0, out / "sample.txt")
    return made.text


def sample(source: ModelSource, run_dir: Path, overrides: dict[str, Any],
           checkpoint: str = "best", task_module: str | None = None,
           say: Callable[[str], None] | None = None) -> SampleOutput:
    """`tyr sample --run DIR`: the run's task and trained weights, its sampling options with
    `overrides` on top; the sample's text and files are saved in a new `samples/NNN/`.
    `task_module`: the user's `--set task.module` (`tasks.recorded_task_class`); `say`: told
    which weights, once the task is known."""
    run = read_run(run_dir)
    where = f"{run_dir}/run.json"
    cls = recorded_task_class(run["task"], where, task_module)
    if cls.SampleOptions is None:
        raise ConfigError(f"{run_dir}: task '{cls.name}' does not sample")
    if say is not None:
        say(f"weights: {describe_checkpoint(run_dir, checkpoint)}")
    options = sample_options(cls, merge(run.get("sample", {}), overrides), "the command line")
    task = cls(task_options(cls, run["task"], where, record=True), TaskContext(1, 0))
    task.prepare()
    model = RunModel.trained(source, run, run_dir, checkpoint)
    out = sample_dir(run_dir)
    with threads_kept(run_threads(run_dir, checkpoint)):
        made = task.sample(model, options, out) or SampleOutput()
    _keep_sample(made, out)
    return made
