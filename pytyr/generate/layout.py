"""A FLUX.2 [klein] pipeline directory as diffusers writes it (`save_pretrained`), read as it
is: `model_index.json` (the pipeline's class, `is_distilled`, each component's class) and one
folder a component: `transformer/`, `vae/` (config.json and safetensors, one file or shards
with their index), `text_encoder/` (a transformers Qwen3 checkpoint), `tokenizer/` and
`scheduler/`. Everything is checked before any tensor is read, each problem one line naming
the file.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytyr.config import read_json, show
from pytyr.errors import ConfigError
from pytyr.paths import input_dir

PIPELINE = "Flux2KleinPipeline"
# component → the (library, class) model_index.json must name, or None: any tokenizer class
COMPONENTS = {"transformer": ("diffusers", "Flux2Transformer2DModel"),
              "vae": ("diffusers", "AutoencoderKLFlux2"),
              "text_encoder": ("transformers", "Qwen3ForCausalLM"),
              "scheduler": ("diffusers", "FlowMatchEulerDiscreteScheduler"),
              "tokenizer": None}
WEIGHTS = {"transformer": "diffusion_pytorch_model", "vae": "diffusion_pytorch_model",
           "text_encoder": "model"}


@dataclass(frozen=True)
class PipelineDir:
    root: Path
    distilled: bool  # a step-distilled model: no classifier-free guidance
    scheduler: dict[str, Any]

    def folder(self, component: str) -> Path:
        return self.root / component

    def config(self, component: str) -> Path:
        return self.folder(component) / "config.json"


def read_pipeline(root: str | Path) -> PipelineDir:
    """The pipeline in `root`, checked (module doc)."""
    root = input_dir(root, "pipeline directory")
    index_path = root / "model_index.json"
    index = read_json(index_path, "pipeline index")
    name = index.get("_class_name")
    if name != PIPELINE:
        hint = (" (FLUX.2 [dev]'s, with a Mistral text encoder: not read)"
                if name == "Flux2Pipeline" else "")
        raise ConfigError(f"{index_path}: '_class_name' is {show(name)}, not {PIPELINE}{hint}")
    distilled = index.get("is_distilled", False)
    if not isinstance(distilled, bool):
        raise ConfigError(f"{index_path}: 'is_distilled' must be true or false, "
                          f"got {show(distilled)}")
    for component, want in COMPONENTS.items():
        _check_component(root, index_path, index, component, want)
    scheduler = read_json(root / "scheduler" / "scheduler_config.json", "scheduler config")
    return PipelineDir(root, distilled, scheduler)


def _check_component(root: Path, index_path: Path, index: dict[str, Any], component: str,
                     want: tuple[str, str] | None) -> None:
    entry = index.get(component)
    if not (isinstance(entry, list) and len(entry) == 2 and all(isinstance(x, str)
                                                                for x in entry)):
        raise ConfigError(f"{index_path}: '{component}' must name its library and class "
                          f"(as [\"diffusers\", \"…\"]), got {show(entry)}")
    if want is not None and tuple(entry) != want:
        raise ConfigError(f"{index_path}: '{component}' is {entry[1]} ({entry[0]}); the FLUX.2 "
                          f"[klein] pipeline reads {want[1]}")
    folder = root / component
    if not folder.is_dir():
        raise ConfigError(f"{folder}: the pipeline's {component} folder is missing")
    if component in WEIGHTS:
        stem = WEIGHTS[component]
        if not any(folder.glob(f"{stem}*.safetensors")):
            pickled = [p.name for p in folder.glob(f"{stem}*.bin")]
            also = (f" ({', '.join(pickled)} is a PyTorch pickle, which tyr does not load)"
                    if pickled else "")
            raise ConfigError(f"{folder}: no {stem}.safetensors (or its shards){also}")
