"""A trained language-model run as a Hugging Face directory that `AutoTokenizer` and
`AutoModelForCausalLM` load offline and that generates what `tyr sample` generates.

    config.json, model.safetensors    the model: the GPT example as `GPT2LMHeadModel`
                                      (`hf_gpt2`), nanochat as `NanoChatForCausalLM`
                                      (`hf_nanochat`), a family's own Lean model
                                      (Llama.lean's) as its family (`hf_family`)
    tokenizer.json, tokenizer_config.json, special_tokens_map.json, generation_config.json
                                      the run's tokenizer and sampling (`hf_tokenizer`)

The architecture is the format's (`hf-gpt2`, `hf-nanochat`) or, for `hf`, read from the
weights: an untied `lm_head` is nanochat's, learned positions `wpe` the GPT's. Only language
models are exported: a run of another task (masked diffusion has no `transformers` class) is
refused in one line. Everything is checked (the task, the weights' layout, the tokenizer
against the vocabulary) before anything is written.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytyr.errors import ConfigError
from pytyr.export.output import Output

ARCHITECTURES = ("gpt2", "nanochat")


def _language_task(run: dict[str, Any], run_dir: Path, task_module: str | None) -> type:
    """The run's task class (its module, if any, as the user names it again), refused unless
    it is a language model's."""
    from pytyr.train.tasks import recorded_task_class
    from pytyr.train.tasks.lm.task import LanguageModelTask

    where = f"{run_dir}/run.json"
    cls = recorded_task_class(run["task"], where, task_module)
    if not issubclass(cls, LanguageModelTask):
        raise ConfigError(f"{where}: task '{cls.name}' (model '{run['model']}') is not a "
                          f"language model's; only those have a transformers class to export "
                          f"to (the GPT example: GPT-2, nanochat: NanoChat)")
    return cls


def _tokenizer(cls: type, run: dict[str, Any], run_dir: Path) -> tuple[Any, int | None, Any]:
    """The run's tokenizer, the id put before every text, and its sampling options: the task
    is prepared as `tyr sample` prepares it (its data gives the tokenizer)."""
    from pytyr.train.task import TaskContext
    from pytyr.train.tasks import sample_options, task_options

    where = f"{run_dir}/run.json"
    task = cls(task_options(cls, run["task"], where, record=True), TaskContext(1, 0))
    task.prepare()
    tok, prefix = task.text_tokenizer()
    return tok, prefix, sample_options(cls, run.get("sample", {}), where)


def _architecture(weights: dict[str, Any], run_dir: Path) -> str:
    if "lm_head" in weights or "lm_head.weight" in weights:  # January's layout, or today's
        return "nanochat"
    if "wpe" in weights:
        return "gpt2"
    raise ConfigError(f"{run_dir}/ckpt: the weights are neither the GPT example's (learned "
                      f"positions 'wpe') nor nanochat's (an untied 'lm_head'); no transformers "
                      f"class maps them")


def _position_limit(arch: str, family: Any, positions: int) -> int | None:
    """The context of a model whose positions are a learned table (GPT-2's `wpe`): past it
    transformers' `generate` ends in an IndexError. None for rotary models."""
    return positions if arch == "gpt2" or (arch == "family" and family[0].name == "gpt2") \
        else None


def export_hf(run_dir: Path, out: Output, arch: str | None = None,
              checkpoint: str = "best", task_module: str | None = None,
              say: Callable[[str], None] = print) -> Path:
    """Write the directory (module doc) into `out` (checked: `output.Output`, written whole)
    for the run in `run_dir`, with the weights of its
    `checkpoint` (`best` or `last`, `run.checkpoint_dir`); `arch` None reads it from them;
    `task_module`: the user's `--set task.module` (`tasks.recorded_task_class`). A model
    with a learned position table stops `generate` at its context, and `say`s so."""
    from pytyr.export.hf_family import family_config, family_of_run, family_sizes
    from pytyr.export.hf_gpt2 import gpt2_config, gpt2_tensors
    from pytyr.export.hf_nanochat import nanochat_config, nanochat_tensors
    from pytyr.export.hf_tokenizer import write_tokenizer_files
    from pytyr.train.record import checkpoint_dir, read_run, run_weights

    run = read_run(run_dir)
    cls = _language_task(run, run_dir, task_module)
    where = str(checkpoint_dir(run_dir, checkpoint))
    weights = run_weights(run_dir, checkpoint)
    family = family_of_run(run) if arch is None else None
    arch = "family" if family is not None else arch or _architecture(weights, run_dir)
    if arch == "family":  # the family's own keys: the weights as they are
        tensors, sizes = weights, family_sizes(family[0], run["values"])
        family_config(*family, run["values"], f"{run_dir}/run.json", {})  # checked first
    elif arch == "gpt2":
        tensors, sizes = gpt2_tensors(weights, where)
        gpt2_config(sizes, run["values"], f"{run_dir}/run.json", {})  # checked before writing
    elif arch == "nanochat":
        tensors, sizes = nanochat_tensors(weights, run["values"], f"{run_dir}/run.json")
    else:
        raise ConfigError(f"unknown architecture {arch!r} (known: {', '.join(ARCHITECTURES)})")
    tok, prefix, sample = _tokenizer(cls, run, run_dir)
    if tok.vocab_size > sizes["vocab"]:
        raise ConfigError(f"{run_dir}: the tokenizer has {tok.vocab_size} tokens, more than the "
                          f"model's vocabulary of {sizes['vocab']}")
    limit = _position_limit(arch, family, sizes["positions"])
    with out.writing(source=f"{Path(run_dir).resolve()} ({checkpoint})") as stage:
        ids = write_tokenizer_files(stage, tok, prefix, sample, sizes["positions"],
                                    stop_at=limit)
        if arch == "family":
            config = family_config(*family, run["values"], f"{run_dir}/run.json", ids)
        elif arch == "gpt2":
            config = gpt2_config(sizes, run["values"], f"{run_dir}/run.json", ids)
        else:
            config = nanochat_config(sizes, ids)
        stage.write_tensors("model.safetensors", tensors, {"format": "pt"})
        stage.write_text("config.json", json.dumps(config, indent=2) + "\n")
    if limit is not None:
        say(f"note: {out.shown}: the model has {limit} positions (config.json n_positions): "
            f"generation_config.json's max_length {limit} stops generate there, the prompt "
            f"included; a longer max_length or max_new_tokens feeds it positions it has not "
            f"got, and transformers fails (IndexError)")
    return Path(out.shown)
