"""The FLUX.2 digits demo (`examples/flux2/digits`): a few steps of `tyr train` on prompts, then
`tyr generate RUN --prompt "the digit 7"`. The image is one guided Euler step of the run's own
velocity (`tyr run`) fed inputs built here with diffusers' packing and position ids; the
packing is the pipeline's for any size; a prompt generate cannot draw, a pipeline's setting
given to a run, a run of another kind and a config that cannot train are each one line."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image
from safetensors.torch import load_file, save_file

from pytyr.cli import main
from pytyr.digest import stamped
from pytyr.train.tasks.flow import packing

LEAN = "examples/flux2/digits/Digits.lean"
TINY = ["--set", "train.batch=8", "--set", "train.max_iters=4", "--set", "train.warmup_iters=1",
        "--set", "train.eval_interval=2", "--set", "train.eval_iters=1",
        "--set", "train.checkpoint_interval=2", "--set", "sample.steps=2",
        "--set", "sample.per_class=1", "-q"]
VOCAB = sorted(set("the digit 0123456789"))  # the template's characters and the digits
PROMPT_LEN = 16


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("digits") / "run"
    assert main(["train", LEAN, "--model", "digits", *TINY, "--set", f"out={out}"]) == 0
    return out


def _generate(run, out, prompt, *more):
    return main(["generate", str(run), "--prompt", prompt, "-o", str(out), "-q", *more])


def _pixels(path) -> np.ndarray:
    with Image.open(path) as img:
        return np.asarray(img, dtype=np.int16)


def _size_mode(path) -> tuple[tuple[int, int], str]:
    with Image.open(path) as img:
        return img.size, img.mode


def test_a_few_steps_train_and_generate_draws_the_prompt(run, tmp_path, capsys):
    assert _size_mode(run / "samples.png")[0] == (8 * 4 + 2, 10 * (8 * 4 + 1) + 1)  # a row a digit
    seven = tmp_path / "seven.png"
    assert _generate(run, seven, "the digit 7") == 0
    said = capsys.readouterr().out
    assert "8×8, 2 steps, guidance 3.0, seed 0" in said and f"wrote {seven}" in said
    assert _size_mode(seven) == ((128, 128), "L")
    blocks = _pixels(seven).reshape(8, 16, 8, 16)  # each pixel a 16 × 16 block
    assert (blocks == blocks[:, :1, :, :1]).all()
    again, other = tmp_path / "again.png", tmp_path / "seed.png"
    assert _generate(run, again, "the digit 7") == 0
    assert _generate(run, other, "the digit 7", "--seed", "1") == 0
    assert again.read_bytes() == seven.read_bytes()
    assert np.abs(_pixels(other) - _pixels(seven)).max() > 1  # the seed matters


def test_the_last_checkpoint_is_drawn_when_asked(run, tmp_path, capsys):
    # the best weights by default; `--checkpoint last` the last step's (step 4 of 4)
    assert _generate(run, tmp_path / "best.png", "the digit 3") == 0
    assert f"{run}/best (step " in capsys.readouterr().out
    assert _generate(run, tmp_path / "last.png", "the digit 3", "--checkpoint", "last") == 0
    assert f"{run}/ckpt (step 4)" in capsys.readouterr().out


def _inputs(prompt: str, latents: torch.Tensor) -> dict[str, torch.Tensor]:
    """The digits model's inputs for one image, made with diffusers' own packing and ids."""
    from diffusers import Flux2KleinPipeline as P

    ids = torch.zeros(1, PROMPT_LEN, dtype=torch.int64)
    mask = torch.zeros(1, PROMPT_LEN, dtype=torch.int64)
    ids[0, :len(prompt)] = torch.tensor([VOCAB.index(c) for c in prompt], dtype=torch.int64)
    mask[0, :len(prompt)] = 1
    patches = P._patchify_latents(latents)
    return {"hidden_states": P._pack_latents(patches).contiguous(),
            "timestep": torch.ones(1), "input_ids": ids, "attention_mask": mask,
            "img_ids": P._prepare_latent_ids(patches)[0].float(),
            "txt_ids": P._prepare_text_ids(torch.zeros(1, PROMPT_LEN, 1))[0].float()}


def _velocity(run, tmp_path, prompt, latents) -> torch.Tensor:
    from diffusers import Flux2KleinPipeline as P

    save_file(_inputs(prompt, latents), tmp_path / "in.safetensors")
    assert main(["run", LEAN, "--run", str(run), "--model", "digitsVelocity", "--inputs",
                 str(tmp_path / "in.safetensors"), "-o", str(tmp_path / "v.safetensors")]) == 0
    tokens = load_file(tmp_path / "v.safetensors")["out"]  # [1, 16, 4]
    return P._unpatchify_latents(tokens.permute(0, 2, 1).reshape(1, 4, 4, 4))


def test_the_image_is_a_guided_euler_step_of_the_runs_velocity(run, tmp_path):
    # One step of FLUX.2's schedule goes from sigma 1 to 0: x = noise - v, v guided.
    latents = torch.randn(1, 1, 8, 8, generator=torch.Generator().manual_seed(3))
    save_file({"latents": latents}, tmp_path / "l.safetensors")
    out = tmp_path / "x.png"
    assert _generate(run, out, "the digit 4", "--steps", "1", "--guidance", "2.5",
                     "--latents", str(tmp_path / "l.safetensors")) == 0
    v, v_empty, v_other = (_velocity(run, tmp_path, p, latents)
                           for p in ("the digit 4", "", "the digit 9"))
    assert (v - v_other).abs().max() > 1e-3 and (v - v_empty).abs().max() > 1e-3  # prompted
    x = latents - (v_empty + 2.5 * (v - v_empty))
    want = ((x[0, 0] / 2 + 0.5).clamp(0, 1) * 255).round().numpy()
    assert np.abs(_pixels(out)[::16, ::16] - want).max() <= 1


def test_a_training_batch_is_the_prompt_and_the_image_packed():
    # What training feeds is what generate feeds: the prompt's characters, the image packed
    # by diffusers' functions (x_t - t · target is x0, packed), the null label the empty prompt.
    from pytyr.train.task import StepRNG, TaskContext
    from pytyr.train.tasks import task_class, task_options

    table = {"name": "image_flow", "condition": "prompt"}
    cls = task_class(table, "t")
    task = cls(task_options(cls, table, "t"), TaskContext(3, 5))
    x0 = torch.randn(3, 1, 8, 8, generator=torch.Generator().manual_seed(1))
    batch = task.step_inputs({"x0": x0, "labels": torch.tensor([7, 0, -1])}, StepRNG(5, 0),
                             drop=False)
    for row, prompt in enumerate(("the digit 7", "the digit 0", "")):
        want = _inputs(prompt, x0[row:row + 1])
        for key in ("input_ids", "attention_mask"):
            assert torch.equal(batch[key][row], want[key][0]), (key, prompt)
    assert torch.equal(batch["img_ids"], want["img_ids"])
    assert torch.equal(batch["txt_ids"], want["txt_ids"])
    t = batch["timestep"].reshape(3, 1, 1)
    packed = torch.cat([_inputs("", x0[r:r + 1])["hidden_states"] for r in range(3)])
    assert torch.allclose(batch["hidden_states"] - t * batch["target"], packed, atol=1e-6)


@settings(max_examples=25, deadline=None)
@given(c=st.integers(1, 3), h=st.integers(1, 6), w=st.integers(1, 6))
def test_packing_is_the_pipelines(c, h, w):
    from diffusers import Flux2KleinPipeline as P

    x = torch.randn(2, c, 2 * h, 2 * w)
    patches = P._patchify_latents(x)
    assert torch.equal(packing.pack(x), P._pack_latents(patches))
    assert torch.equal(packing.unpack(packing.pack(x), c, 2 * h, 2 * w), x)
    assert torch.equal(packing.image_ids(h, w), P._prepare_latent_ids(patches)[0].float())
    assert torch.equal(packing.text_ids(w), P._prepare_text_ids(torch.zeros(1, w, 1))[0].float())
    assert packing.packed_sizes(c, 2 * h, 2 * w) == (h * w, 4 * c)


@settings(max_examples=12, deadline=None)
@given(prompt=st.text(alphabet="the digit 0123456789!é", max_size=20))
def test_a_prompt_is_drawn_or_refused_in_one_line(run, tmp_path_factory, prompt):
    out = tmp_path_factory.mktemp("p") / "x.png"
    import io
    import sys

    err, sys.stderr = sys.stderr, io.StringIO()
    try:
        rc = _generate(run, out, prompt, "--steps", "1")
        lines = sys.stderr.getvalue().strip().splitlines()
    finally:
        sys.stderr = err
    drawable = len(prompt) <= PROMPT_LEN and set(prompt) <= set(VOCAB)
    assert (rc == 0) == drawable and out.is_file() == drawable
    if not drawable:
        assert rc == 1 and len(lines) == 1 and lines[0].startswith("tyr generate: --prompt: ")


def _rewritten(run, tmp_path, **task):
    """A copy of the run whose record trained another task table (stamped as tyr train does)."""
    copy = tmp_path / "other"
    shutil.copytree(run, copy)
    record = json.loads((copy / "run.json").read_text())
    record.pop("checksum")
    record["task"] = {**record["task"], **task}
    (copy / "run.json").write_text(json.dumps(stamped(record)))
    return copy


@pytest.mark.parametrize("args,said", [
    (["--height", "16"], "--height is a pipeline's setting"),
    (["--text-layers", "1,2,3"], "--text-layers is a pipeline's setting"),
    (["--max-sequence-length", "8"], "--max-sequence-length is a pipeline's setting"),
    (["--steps", "0"], "--steps 0 is out of range"),
    (["--guidance", "-1"], "--guidance -1.0 must be a finite number >= 0"),
    (["--prompt", "the digit 7?"], "the character '?' is not in the prompts' vocabulary"),
    (["--prompt", "the digit 7 7 7 7"], "is 17 characters, longer than the 16 the model reads"),
])
def test_what_a_run_cannot_draw_is_one_line(run, tmp_path, capsys, args, said):
    rc = main(["generate", str(run), "--prompt", "the digit 7", "-o", str(tmp_path / "x.png"),
               *args])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 1 and len(err) == 1 and said in err[0], err
    assert not (tmp_path / "x.png").exists()


@pytest.mark.parametrize("task,said", [
    ({"condition": "class"}, "the run trained image_flow conditioned on 'class'"),
    ({"name": "char_lm"}, "the run trained task 'char_lm'"),
])
def test_a_run_of_another_kind_is_refused_by_its_record(run, tmp_path, capsys, task, said):
    other = _rewritten(run, tmp_path, **task)
    rc = _generate(other, tmp_path / "x.png", "the digit 7")
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 1 and len(err) == 1 and said in err[0], err


@pytest.mark.parametrize("override,said", [
    ("task.prompt=the digit", "task.prompt 'the digit' must hold '{}' once"),
    ("task.prompt_len=8", "'the digit 0' is 11 characters, longer than the 8 the model reads"),
    ("model.e.vocab=5", "input_ids"),
    ("model.c.joint_attention_dim=95", "joint_attention_dim"),
    ("model.e.k2=4", "k2"),
])
def test_a_config_that_cannot_train_fails_before_training(tmp_path, capsys, override, said):
    rc = main(["train", LEAN, "--model", "digits", *TINY, "--set", f"out={tmp_path}",
               "--set", override])
    err = capsys.readouterr().err
    assert rc == 1 and said in err and not (tmp_path / "ckpt").exists(), err


def test_the_flux_example_does_not_take_prompts(tmp_path, capsys):
    rc = main(["train", "examples/flux/Flux.lean", "--model", "flux", *TINY, "--set",
               f"out={tmp_path}", "--set", "task.condition=prompt"])
    err = capsys.readouterr().err
    assert rc == 1 and "takes input 'img'" in err and "does not feed" in err, err
