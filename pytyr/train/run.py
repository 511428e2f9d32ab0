"""`tyr train`, `tyr sample` and `tyr run`: a model source, a config, a task, the engine.

A model source is a checked Lean file (`pytyr.pipeline.LeanModels`) or a compiled model
library (`pytyr.abi.LibraryModels`): both give `graph(model, values)`, `declaration(model)`
(None for a library, whose types are only seen in its graphs) and `origin` (for run.json).

`train` does, in this order, and stops at the first problem with one message:
config → task and sampler tables → the run directory (`rundir`: its own, not in use, and
free for a fresh run or holding one to resume) → the model's dims filled from the task's
roles → graph → graph against the task's feeds and the optimizer's name lists → data (rank
0 first) → outputs against the data's sizes → module → the engine's loop → sample. The run
directory then holds `run.json` (what made the run: origin as an absolute path, so the run
works from any directory; model, values, task, sample; with its checksum), `ckpt/` (the last
step, to resume from), `best/` (the weights of the lowest validation loss), `metrics.json`,
`loss.png` and, for tasks that sample, `sample.txt`; `tyr sample --run DIR` needs nothing
else, and verifies what it reads. Commands that use a run's weights take `best/` where it
exists (`--checkpoint last` for the last step's), and `tyr sample` writes into
`samples/NNN/`, never over the training's sample.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Protocol

from pytyr.atomic import atomic_write_text
from pytyr.config import merge
from pytyr.digest import stamp_problem, stamped
from pytyr.errors import ConfigError
from pytyr.ir.graph import Graph
from pytyr.paths import input_dir, input_file, output_file
from pytyr.pipeline import ModelDecl, module_from_graph
from pytyr.train.match import check_graph, fill_config_fields, fill_dims
from pytyr.train.settings import load_run_config
from pytyr.train.task import Feed, SampleOutput, TaskContext
from pytyr.train.tasks import sample_options, task_class, task_options, task_record


class ModelSource(Protocol):
    origin: dict[str, str]

    def graph(self, model: str, values: dict[str, Any]) -> Graph: ...

    def declaration(self, model: str) -> ModelDecl | None: ...


def _where(source: ModelSource, decl: ModelDecl | None, model: str) -> str:
    return decl.where if decl is not None else f"{next(iter(source.origin.values()))}:{model}"


class Forward:
    """A module called with a dict of named inputs (in the graph's input order)."""

    def __init__(self, module: Any, graph: Graph):
        self.module, self.names = module, [i.name for i in graph.inputs]
        self.inputs = graph.inputs  # names, shapes and dtypes, for callers that make inputs
        types = graph.types()
        self.outputs = [types[o.ref] for o in graph.outputs]

    def __call__(self, batch: dict[str, Any]) -> tuple[Any, ...]:
        import torch

        with torch.no_grad():
            return tuple(self.module(*[batch[n] for n in self.names]))


def load_weights(module: Any, weights: dict[str, Any], where: str) -> None:
    """Copy `weights` (name → tensor) into `module`, after listing every mismatch at once."""
    from pytyr.errors import SafeTensorsError
    from pytyr.safetensors import DType, TensorSpec, expected_specs, fit_problems

    specs = {k: TensorSpec(k, DType.from_torch(t.dtype), tuple(t.shape))
             for k, t in weights.items()}
    problems = fit_problems(expected_specs(module), specs)
    if problems:
        raise SafeTensorsError(where, "model-mismatch", f"the weights do not fit the model "
                               f"({len(problems)} problem{'s' * (len(problems) != 1)})", problems)
    module.load_state_dict({k: weights[k] for k in module.state_dict()}, strict=True)


def make_factory(source: ModelSource, default_model: str, values: dict[str, Any],
                 weights: dict[str, Any], where: str = "the trained weights") -> Any:
    """`factory(model | None, feeds, sizes) -> Forward` holding `weights` (see task.py)."""
    cache: dict[Any, Forward] = {}

    def factory(model: str | None, feeds: dict[str, Feed], sizes: dict[str, int]) -> Forward:
        name = model or default_model
        key = (name, tuple(sorted(sizes.items())))
        if key not in cache:
            decl = source.declaration(name)
            graph = source.graph(name, fill_dims(decl, values, feeds, sizes, "sampler"))
            module = module_from_graph(graph)
            load_weights(module, weights, where)
            cache[key] = Forward(module.eval(), graph)
        return cache[key]

    factory.declaration = source.declaration  # type: ignore[attr-defined]
    return factory


def graph_values(source: ModelSource, model: str, raw: dict[str, Any], where: str
                 ) -> dict[str, Any]:
    """The model's values for `tyr graph`: the config's `model` table, plus the dims its
    task's feeds determine (as `tyr train` would instantiate it on one process)."""
    cfg = load_run_config(raw, where)
    if not cfg.task:
        return dict(cfg.model)
    cls = task_class(cfg.task, where)
    sample_options(cls, cfg.sample, where)  # checked as `tyr train` would, though unused here
    micro, accum = cfg.train.accumulation(1, where)
    task = cls(task_options(cls, cfg.task, where),
               TaskContext(micro, cfg.train.seed, accum=accum))
    return fill_dims(source.declaration(model), cfg.model, task.feeds(), task.sizes(),
                     task.name, partial=True)


def instantiator(source: ModelSource, default_model: str, values: dict[str, Any]) -> Any:
    """Like `make_factory`, but only builds (and so type-checks) the graph."""
    def instantiate(model: str | None, feeds: dict[str, Feed], sizes: dict[str, int]) -> Graph:
        name = model or default_model
        return source.graph(name, fill_dims(source.declaration(name), values, feeds, sizes,
                                            "sampler"))

    instantiate.declaration = source.declaration  # type: ignore[attr-defined]
    return instantiate


def train(source: ModelSource, model: str, raw: dict[str, Any], where: str, *,
          resume: bool = False, overwrite: bool = False, progress: bool = True) -> int:
    from pytyr.train import distributed, rundir
    from pytyr.train.optim import check_names

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
        decl = source.declaration(model)
        place = _where(source, decl, model)
        feeds, expects = task.feeds(), task.expects()
        # Check everything the config alone decides before the data is touched; fields the
        # data decides (`c.vocab` from the corpus) wait for it.
        config, waiting = fill_config_fields(decl, cfg.model, feeds, expects, task.sizes())
        if not waiting:
            graph = source.graph(model, fill_dims(decl, config, feeds, task.sizes(), task.name))
            check_graph(graph, place, feeds, expects, task.sizes(), task.name, cfg.model)
            check_names(cfg.train, [p.path for p in graph.params], where, graph.model)
        with distributed.main_first():  # rank 0 builds caches; the others read them
            about = task.prepare()
        sizes = {**task.sizes(), **task.data_sizes()}
        config, _ = fill_config_fields(decl, config, feeds, expects, sizes)
        if waiting:
            graph = source.graph(model, fill_dims(decl, config, feeds, sizes, task.name))
        check_graph(graph, place, feeds, expects, sizes, task.name, cfg.model)
        check_names(cfg.train, [p.path for p in graph.params], where, graph.model)
        task.check_sampling(instantiator(source, model, config), sampling)
        return _train(source, graph, model, config, cfg, task, sampling, claimed, sizes, accum,
                      about, resume, progress)


# Task options that say only where something is kept, not what it is: free on resume.
_PLACE_OPTIONS = ("cache_dir",)


def _train(source: ModelSource, graph: Graph, model: str, config: dict[str, Any], cfg: Any,
           task: Any, sampling: Any, claimed: Any, sizes: dict[str, int], accum: int,
           about: str, resume: bool, progress: bool) -> int:
    from pytyr.train import distributed
    from pytyr.train.engine import Engine, resolve_device

    out = claimed.path
    device = resolve_device(cfg.train.device)
    module = module_from_graph(graph, seed=cfg.train.seed, kernels=cfg.train.kernels,
                               checkpoint_blocks=cfg.train.checkpoint_blocks).to(device)
    main = distributed.is_main()
    world = distributed.world()
    if main:
        n = sum(p.numel() for p in module.parameters())
        print(f"model {graph.model} from {next(iter(source.origin.values()))}: "
              f"{len(graph.nodes)} nodes, {n:,} parameters; task {task.name}: {about}"
              + (f"; {world} processes, batch {sizes['batch']} each" if world > 1 else "")
              + (f"; {accum} micro-batches per step" if accum > 1 else "")
              + (f"; on {device}" if device.type != "cpu" else ""))
        claimed.start()  # with --overwrite, the old run goes now that every check passed
        atomic_write_text(out / "run.json", json.dumps(stamped(
            {"origin": {k: str(Path(v).resolve()) for k, v in source.origin.items()},
             "model": model, "values": config,
             "task": task_record(task, cfg.task), "sample": cfg.sample,
             "train": dataclasses.asdict(cfg.train)}), indent=1))
    engine = Engine(module, task, cfg.train, [i.name for i in graph.inputs], out, accum=accum,
                    row_tokens=sizes.get("seq", 1), title=f"{graph.model} on {task.name}")
    engine.fixed = {"model": config, "task": {k: v for k, v in task.describe_for_run().items()
                                              if k not in _PLACE_OPTIONS}}
    history = engine.run(resume=resume, progress=progress)
    weights = engine.weights()  # on every rank: a sharded model gathers its tensors
    distributed.parting()  # the last collective: a rank that ends from here on is no news
    if not main:
        return 0
    last = history["evals"][-1]
    if not progress:  # with progress, the engine has printed it
        print(f"step {last['step']}: " + ", ".join(f"{k} {v:.4f}" for k, v in last.items()
                                                   if k != "step"))
    wrote = [out / "ckpt", out / "loss.png", out / "metrics.json"]
    if checkpoint_dir(out, "best") != out / "ckpt":
        wrote.insert(1, out / "best")
        if task.SampleOptions is not None:
            print(f"sampling with {describe_checkpoint(out, 'best')}")
            weights = run_weights(out, "best")
    made = task.sample(make_factory(source, model, config, weights), sampling, out)
    text = _keep_sample(made, out)
    wrote += made.files if made is not None else []
    print(f"wrote {', '.join(map(str, wrote))}")
    if text is not None:
        print("--- sample ---\n" + text)
    return 0


def _keep_sample(made: SampleOutput | None, out: Path) -> str | None:
    """Save a sample's text as `sample.txt` beside what the task wrote; return the text."""
    if made is None or made.text is None:
        return None
    atomic_write_text(out / "sample.txt", made.text)
    made.files.insert(0, out / "sample.txt")
    return made.text


_noted: set[str] = set()  # unverifiable run records already noted in this process
_RUN_KEYS = ("origin", "model", "values", "task", "sample", "train", "checksum")


def read_run(run_dir: Path) -> dict[str, Any]:
    """run.json of a run directory, checked to be one and verified against its checksum."""
    import sys

    input_dir(run_dir, "run directory")
    from pytyr.config import read_json

    path = run_dir / "run.json"
    run = read_json(path, "run record (run.json of `tyr train`)")
    unknown = sorted(set(run) - set(_RUN_KEYS))
    if unknown:
        raise ConfigError(f"{path}: unknown key {unknown[0]!r} in the run record (damaged, or "
                          f"not written by `tyr train`)")
    problem = stamp_problem(run)
    if problem and "checksum" in run:
        raise ConfigError(f"{path}: damaged: {problem}; the run cannot be used")
    for key, kind in (("origin", dict), ("model", str), ("values", dict), ("task", dict)):
        if key not in run:
            raise ConfigError(f"{path}: missing '{key}'; is this the output directory of "
                              f"`tyr train`?")
        if not isinstance(run[key], kind):
            raise ConfigError(f"{path}: '{key}' must be a {'string' if kind is str else 'table'}")
    origin = run["origin"]
    if not any(isinstance(origin.get(k), str) for k in ("file", "lib")):
        raise ConfigError(f"{path}: 'origin' names no Lean file or library")
    if problem and str(path) not in _noted:  # a record of an older tyr, otherwise whole
        _noted.add(str(path))
        print(f"note: {path}: written before run records carried checksums; it cannot be "
              f"verified", file=sys.stderr)
    run.pop("checksum", None)
    return run


CHECKPOINTS = ("best", "last")


def checkpoint_dir(run_dir: Path, checkpoint: str = "best") -> Path:
    """The checkpoint of a run that `checkpoint` names: `best` is `best/` (the lowest
    validation loss) where the run has one and `ckpt/` otherwise; `last` is `ckpt/`."""
    from pytyr.train.checkpoint import STATE_FILE, resolve

    if checkpoint not in CHECKPOINTS:
        raise ConfigError(f"--checkpoint must be one of {', '.join(CHECKPOINTS)}, "
                          f"got {checkpoint!r}")
    best = resolve(run_dir / "best")
    if checkpoint == "best" and (best / STATE_FILE).is_file():
        return best
    return resolve(run_dir / "ckpt")


def describe_checkpoint(run_dir: Path, checkpoint: str = "best") -> str:
    """`runs/gpt/best (step 1750, val 1.9032)`: which weights a command uses, for its log."""
    from pytyr.train.checkpoint import read_state

    where = checkpoint_dir(run_dir, checkpoint)
    state = read_state(where)
    val = state.get("extra", {}).get("val")
    return f"{where} (step {state['step']}" + (f", val {val:.4f})" if val is not None else ")")


def run_weights(run_dir: Path, checkpoint: str = "best") -> dict[str, Any]:
    """The trained weights of a run (`checkpoint_dir`), verified against their SHA-256, read
    through the validating reader."""
    from pytyr.train.checkpoint import read_weights

    return read_weights(checkpoint_dir(run_dir, checkpoint))


def sample_dir(run_dir: Path) -> Path:
    """A new directory `samples/NNN/` of the run for one `tyr sample` (the next number)."""
    parent = run_dir / "samples"
    parent.mkdir(exist_ok=True)
    taken = [int(p.name) for p in parent.iterdir() if p.name.isdigit()]
    n = max(taken, default=0) + 1
    while True:
        try:
            (parent / f"{n:03d}").mkdir()
            return parent / f"{n:03d}"
        except FileExistsError:  # another `tyr sample` took it
            n += 1


def sample(source: ModelSource, run_dir: Path, overrides: dict[str, Any],
           checkpoint: str = "best") -> SampleOutput:
    """`tyr sample --run DIR`: the run's task and trained weights, its sampling options with
    `overrides` on top; the sample's text and files are saved in a new `samples/NNN/`."""
    run = read_run(run_dir)
    where = f"{run_dir}/run.json"
    cls = task_class(run["task"], where)
    if cls.SampleOptions is None:
        raise ConfigError(f"{run_dir}: task '{cls.name}' does not sample")
    options = sample_options(cls, merge(run.get("sample", {}), overrides), "the command line")
    task = cls(task_options(cls, run["task"], where), TaskContext(1, 0))
    task.prepare()
    factory = make_factory(source, run["model"], run["values"], run_weights(run_dir, checkpoint),
                           str(checkpoint_dir(run_dir, checkpoint)))
    out = sample_dir(run_dir)
    made = task.sample(factory, options, out) or SampleOutput()
    _keep_sample(made, out)
    return made


def forward(source: ModelSource, model: str, values: dict[str, Any], inputs_path: Path,
            out_path: Path, *, weights: dict[str, Any] | None, weights_from: str = "",
            seed: int = 0, unused: Any = None) -> dict[str, Any]:
    """`tyr run`: the model's outputs for the tensors of a safetensors file (keyed by input
    name; the model's dims follow from their shapes), written as safetensors `out0`, `out1`...
    `unused` (a `pytyr.hf.UnusedKeys`) leaves out the weights' keys that are no parameter of
    the model, before the load checks the rest. Returns the outputs."""
    import torch

    from pytyr.safetensors import SafeTensorsFile, write_file

    input_file(inputs_path, "inputs file")
    output_file(out_path, "outputs file")
    with SafeTensorsFile(inputs_path) as f:
        tensors = {n: f.tensor(n).clone() for n in f.names()}
    feeds, sizes = {}, {}
    for name, t in tensors.items():
        dtype = "i64" if not t.is_floating_point() else "f32"
        roles = tuple(f"{name}[{i}]" for i in range(t.ndim))
        feeds[name] = Feed(dtype, roles)
        sizes.update(zip(roles, t.shape))
    decl = source.declaration(model)
    graph = source.graph(model, fill_dims(decl, values, feeds, sizes, f"inputs {inputs_path}"))
    place = _where(source, decl, model)
    batch = {}
    for i in graph.inputs:
        if i.name not in tensors:
            raise ConfigError(f"{inputs_path}: no tensor '{i.name}' for the input "
                              f"{i.name} : {i.type} of model '{graph.model}' ({place})")
        t = tensors[i.name]
        if tuple(t.shape) != tuple(i.shape):
            raise ConfigError(f"{inputs_path}: tensor '{i.name}' has shape {list(t.shape)}, the "
                              f"model's input {i.name} : {i.type} ({place})")
        batch[i.name] = t.to(torch.int64 if i.dtype == "i64" else torch.float32)
    extra = sorted(set(tensors) - {i.name for i in graph.inputs})
    if extra:
        raise ConfigError(f"{inputs_path}: tensor '{extra[0]}' is no input of model "
                          f"'{graph.model}' (its inputs: {', '.join(i.name for i in graph.inputs)})")
    module = module_from_graph(graph, seed=seed)
    if weights is not None:
        if unused is not None:
            weights = unused.select(weights, set(module.state_dict()))
        load_weights(module, weights, weights_from)
    outputs = Forward(module.eval(), graph)(batch)
    named = {o.name: t.contiguous() for o, t in zip(graph.outputs, outputs)}
    write_file(named, out_path, {"model": graph.model})
    return named
