"""The parts of `tyr generate` that are not models, each against diffusers' or transformers'
own on a tiny random FLUX.2 [klein] pipeline directory (`flux2_pipeline.build`): FLUX.2's
shifted schedule equals `FlowMatchEulerDiscreteScheduler`'s after the pipeline sets it, a
prompt's tokens equal the pipeline's tokenizer's through its chat template, the VAE runs from
its folder alone (`tyr run --weights DIR/vae`) and decodes as diffusers does, and a malformed
directory is one line naming the file."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from safetensors.torch import load_file, save_file

from flux2_pipeline import build  # noqa: E402  (tests/ is on sys.path)
from pytyr.cli import main
from pytyr.errors import ConfigError
from pytyr.generate.layout import read_pipeline
from pytyr.generate.prompt import PromptEncoder
from pytyr.generate.schedule import FlowSchedule


@pytest.fixture(scope="module")
def pipe(tmp_path_factory):
    return build(tmp_path_factory.mktemp("klein") / "pipe")


@settings(max_examples=30, deadline=None)
@given(steps=st.integers(1, 60), seq=st.integers(1, 9000),
       dynamic=st.booleans(), shift_type=st.sampled_from(["exponential", "linear"]))
def test_the_schedule_is_the_pipelines(pipe, steps, seq, dynamic, shift_type):
    import diffusers
    from diffusers.pipelines.flux2.pipeline_flux2_klein import (
        compute_empirical_mu,
        retrieve_timesteps,
    )

    raw = json.loads((pipe / "scheduler" / "scheduler_config.json").read_text())
    raw.update(use_dynamic_shifting=dynamic, time_shift_type=shift_type)
    theirs = diffusers.FlowMatchEulerDiscreteScheduler.from_config(raw)
    retrieve_timesteps(theirs, steps, "cpu", sigmas=np.linspace(1.0, 1 / steps, steps),
                       mu=compute_empirical_mu(seq, steps))
    ours = FlowSchedule.from_config(raw, "scheduler_config.json").sigmas(steps, seq)
    assert torch.equal(ours, theirs.sigmas)  # to the last bit


@pytest.mark.parametrize("key,value", [("use_karras_sigmas", True), ("shift_terminal", 0.1),
                                       ("stochastic_sampling", True),
                                       ("time_shift_type", "cosine"), ("shift", -1)])
def test_a_scheduler_the_pipeline_does_not_sample_with_is_named(key, value):
    with pytest.raises(ConfigError, match=f"'{key}'"):
        FlowSchedule.from_config({"_class_name": "FlowMatchEulerDiscreteScheduler",
                                  key: value}, "scheduler_config.json")


@settings(max_examples=25, deadline=None)
@given(prompt=st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=40),
       length=st.integers(4, 48))
def test_a_prompts_tokens_are_the_pipelines(pipe, prompt, length):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(pipe / "tokenizer")
    text = tok.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False,
                                   add_generation_prompt=True, enable_thinking=False)
    want = tok(text, padding="max_length", truncation=True, max_length=length)
    got = PromptEncoder(pipe / "tokenizer").encode(prompt, length)
    assert (got.ids, got.mask) == (want["input_ids"], want["attention_mask"])


def test_the_vae_runs_from_its_folder_as_diffusers_decodes(pipe, tmp_path, capsys):
    import diffusers

    vae = diffusers.AutoencoderKLFlux2.from_pretrained(pipe / "vae").eval()
    z = torch.randn(1, 4, 2, 3, generator=torch.Generator().manual_seed(0))
    save_file({"z": z}, tmp_path / "z.safetensors")
    assert main(["run", "--weights", str(pipe / "vae"), "--inputs",
                 str(tmp_path / "z.safetensors"), "-o", str(tmp_path / "x.safetensors")]) == 0
    assert "family flux2_vae" in capsys.readouterr().out
    with torch.no_grad():
        want = vae.decode(z).sample
    torch.testing.assert_close(load_file(tmp_path / "x.safetensors")["out"], want,
                               rtol=1e-5, atol=1e-5)


def _edit(pipe: Path, tmp_path: Path, file: str, change) -> Path:
    copy = tmp_path / "copy"
    shutil.copytree(pipe, copy)
    path = copy / file
    if change is None:
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    else:
        raw = json.loads(path.read_text())
        change(raw)
        path.write_text(json.dumps(raw))
    return copy


@pytest.mark.parametrize("file,change,said", [
    ("model_index.json", lambda r: r.update(_class_name="Flux2Pipeline"), "FLUX.2 [dev]'s"),
    ("model_index.json", lambda r: r.update(is_distilled="yes"), "'is_distilled'"),
    ("model_index.json", lambda r: r.update(vae=["diffusers", "AutoencoderKL"]),
     "'vae' is AutoencoderKL"),
    ("model_index.json", lambda r: r.pop("tokenizer"), "'tokenizer' must name"),
    ("model_index.json", None, "model_index.json"),
    ("transformer", None, "transformer folder is missing"),
    ("text_encoder/model.safetensors", None, "no model.safetensors"),
    ("scheduler/scheduler_config.json", None, "scheduler_config.json"),
])
def test_a_malformed_pipeline_directory_is_one_line(pipe, tmp_path, file, change, said):
    with pytest.raises(ConfigError, match=said.replace("[", r"\[").replace("]", r"\]")):
        read_pipeline(_edit(pipe, tmp_path, file, change))
