"""`tyr generate RUN --prompt TEXT`: text to image from a run of `tyr train` whose model is
prompted as FLUX.2 [klein] is (the `image_flow` task with `condition = "prompt"`:
`examples/flux2/digits`), drawn as the pipeline draws.

The run directory is data: its `run.json` is read and verified (`record.read_run`), its task
must be `image_flow` over prompts (no task module is imported), and its model is the Lean file
its record names, with the weights of its best checkpoint (`best/`, else the last) or, with
`--checkpoint last`, the last step's. The prompt is encoded as the run's task encoded its
prompts (the characters of its template and the digits, padded to its `prompt_len`; a character
outside them or a prompt too long is refused before any weight is read). The noise is the
seed's, drawn as the pipeline draws it (`torch.Generator().manual_seed(seed)`, `[1, channels,
height, width]`), or `--latents`; it follows the run's velocity model (`sample.model`, else the
trained one fed a zero target) from sigma 1 to 0 over FLUX.2 [klein]'s shifted schedule
(`KLEIN_SCHEDULER`, with the packed image's token count), with classifier-free guidance against
the empty prompt where the scale is over 1, as `flux2._denoise` does. The image is written as a
gray PNG, each pixel a `SCALE × SCALE` block (nearest neighbour: the 8 × 8 digits become 128 ×
128), gray level `round(255 · clamp(x / 2 + 0.5, 0, 1))` as diffusers' postprocess.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from pytyr.errors import ConfigError
from pytyr.generate.flux2 import initial_noise
from pytyr.generate.schedule import FlowSchedule, euler_step
from pytyr.train.model import RunModel
from pytyr.train.record import describe_checkpoint, read_run
from pytyr.train.task import TaskContext

SCALE = 16  # output pixels a side of one image pixel
# The scheduler of FLUX.2 [klein]'s pipelines (`scheduler/scheduler_config.json`).
KLEIN_SCHEDULER = {"_class_name": "FlowMatchEulerDiscreteScheduler", "num_train_timesteps": 1000,
                   "shift": 3.0, "use_dynamic_shifting": True, "time_shift_type": "exponential"}


@dataclass(frozen=True)
class RunGenerateOptions:
    prompt: str
    steps: int | None = None  # None: the run's `sample.steps`
    guidance: float | None = None  # None: the run's `sample.cfg_scale`
    seed: int = 0
    latents: Path | None = None
    checkpoint: str = "best"  # a run's weights: best or last (`record.checkpoint_dir`)


class PromptedRun:
    """A run of `image_flow` over prompts, its record checked (module doc); no weight read."""

    def __init__(self, run_dir: Path) -> None:
        from pytyr.train.tasks import recorded_task_class, sample_options, task_options

        self.dir, where = run_dir, f"{run_dir}/run.json"
        self.record = read_run(run_dir)
        table = self.record["task"]
        if table.get("name") != "image_flow" or table.get("condition") != "prompt":
            what = (f"task {table.get('name')!r}" if table.get("name") != "image_flow"
                    else f"image_flow conditioned on {table.get('condition', 'class')!r}")
            raise ConfigError(f"{where}: the run trained {what}; tyr generate draws from a run "
                              f"of image_flow with task.condition = \"prompt\" "
                              f"(examples/flux2/digits) or a Flux2KleinPipeline directory")
        cls = recorded_task_class(table, where)
        self.task: Any = cls(task_options(cls, table, where, record=True), TaskContext(1, 0))
        self.sample = sample_options(cls, self.record.get("sample", {}), where)
        self.lean = self.record["origin"].get("file")
        if not isinstance(self.lean, str):
            raise ConfigError(f"{where}: the run's model is a compiled library; tyr generate "
                              f"runs a run's Lean file")

    def velocity(self, checkpoint: str = "best") -> Callable[[dict[str, torch.Tensor]],
                                                             torch.Tensor]:
        """The run's velocity, packed tokens out, for one image's inputs: its Lean file
        checked, its weights read."""
        from pytyr.paths import input_file
        from pytyr.pipeline import LeanModels

        input_file(self.lean, "Lean file of the run")
        model = RunModel.trained(LeanModels(self.lean), self.record, self.dir, checkpoint)
        feeds = self.task.feeds()
        trained = self.sample.model is None
        if not trained:
            feeds.pop("target")
        forward = model(self.sample.model, feeds, {**self.task.sizes(), "batch": 1})

        def run(batch: dict[str, torch.Tensor]) -> torch.Tensor:
            if trained:
                batch = {**batch, "target": torch.zeros_like(batch["hidden_states"])}
            return forward(batch)[0]

        return run


def generate_from_run(run: PromptedRun, opts: RunGenerateOptions, out: Path,
                      progress: Callable[[int], Any] = range,
                      say: Callable[[str], None] = print) -> torch.Tensor:
    """The image of `opts.prompt` (module doc), written to `out`; returns it, `[1, c, h, w]`
    in about [-1, 1]."""
    from pytyr.train.tasks.flow.image_grid import write_grid

    cond, image = run.task.conditioning, run.task.image
    ids, mask = cond.encode([opts.prompt], "--prompt")
    steps = opts.steps or run.sample.steps
    guidance = run.sample.cfg_scale if opts.guidance is None else opts.guidance
    noise = initial_noise((1, *image), opts.seed, opts.latents, "the run's images")
    velocity = run.velocity(opts.checkpoint)
    guided = guidance > 1
    weights = describe_checkpoint(run.dir, opts.checkpoint)
    say(f"{weights}: {image[2]}×{image[1]}, {steps} steps, "
        + (f"guidance {guidance}" if guided else "no guidance")
        + f", seed {opts.seed}" * (opts.latents is None))
    empty = cond.encode([""], "the empty prompt") if guided else None
    schedule = FlowSchedule.from_config(KLEIN_SCHEDULER, "FLUX.2 [klein]'s scheduler")
    tokens = cond.image_sizes(image)["tokens"]
    sigmas = schedule.sigmas(steps, tokens)
    timesteps = sigmas[:-1] * schedule.num_train_timesteps
    x = noise
    for i in progress(steps):
        t = timesteps[i:i + 1] / 1000  # the pipeline's `timestep / 1000`, in float32
        v = velocity(cond.batch(x, t, ids, mask))
        if empty is not None:
            v_empty = velocity(cond.batch(x, t, *empty))
            v = v_empty + guidance * (v - v_empty)
        x = euler_step(x, cond.images(v, image), sigmas[i], sigmas[i + 1])
    write_grid(x, out, rows=1, scale=SCALE, pad=0)
    return x
