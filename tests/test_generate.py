"""`tyr generate DIR` against diffusers' `Flux2KleinPipeline` on the same tiny random pipeline
directory (`flux2_pipeline.build`, written by `save_pretrained`): given the same initial
latents, or the same seed, the PNG is the pipeline's (every pixel within 1 of 255), with and
without classifier-free guidance and for a step-distilled model; every setting that cannot
run is one line before any tensor is read."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image
from safetensors.torch import save_file

from flux2_pipeline import build  # noqa: E402  (tests/ is on sys.path)
from pytyr.cli import main

H, W, STEPS, LENGTH, LAYERS = 32, 48, 3, 16, (1, 2, 2)


@pytest.fixture(scope="module")
def pipes(tmp_path_factory):
    root = tmp_path_factory.mktemp("klein")
    return {d: build(root / ("distilled" if d else "base"), distilled=d) for d in (False, True)}


def _reference(path, prompt, guidance, **kw) -> np.ndarray:
    import diffusers

    pipe = diffusers.Flux2KleinPipeline.from_pretrained(path)
    pipe.set_progress_bar_config(disable=True)
    out = pipe(prompt=prompt, height=H, width=W, num_inference_steps=STEPS,
               guidance_scale=guidance, max_sequence_length=LENGTH,
               text_encoder_out_layers=LAYERS, output_type="pil", **kw)
    return np.asarray(out.images[0], dtype=np.int16)


def _tyr(path, tmp_path, prompt, guidance, *more) -> np.ndarray:
    out = tmp_path / "tyr.png"
    assert main(["generate", str(path), "--prompt", prompt, "--height", str(H), "--width",
                 str(W), "--steps", str(STEPS), "--guidance", str(guidance),
                 "--max-sequence-length", str(LENGTH), "--text-layers",
                 ",".join(map(str, LAYERS)), "-o", str(out), "-q", *more]) == 0
    return np.asarray(Image.open(out), dtype=np.int16)


@pytest.mark.parametrize("distilled,guidance", [(False, 4.0), (False, 1.0), (True, 4.0)])
def test_the_image_from_given_latents_is_the_pipelines(pipes, tmp_path, capsys, distilled,
                                                       guidance):
    latents = torch.randn(1, 16, H // 16, W // 16, generator=torch.Generator().manual_seed(5))
    save_file({"latents": latents}, tmp_path / "l.safetensors")
    got = _tyr(pipes[distilled], tmp_path, "the digit seven", guidance, "--latents",
               str(tmp_path / "l.safetensors"))
    want = _reference(pipes[distilled], "the digit seven", guidance, latents=latents)
    assert got.shape == (H, W, 3) and np.abs(got - want).max() <= 1
    said = capsys.readouterr().out
    assert ("no guidance" in said) == (distilled or guidance <= 1), said


def test_the_seed_draws_the_pipelines_noise(pipes, tmp_path):
    got = _tyr(pipes[False], tmp_path, "a red cat", 4.0, "--seed", "7")
    want = _reference(pipes[False], "a red cat", 4.0,
                      generator=torch.Generator().manual_seed(7))
    assert np.abs(got - want).max() <= 1
    other = _tyr(pipes[False], tmp_path, "a red cat", 4.0, "--seed", "8")
    assert np.abs(got - other).max() > 1  # the seed matters


@pytest.mark.parametrize("args,said", [
    (["--height", "40"], "--height 40 is not a positive multiple of 16"),
    (["--steps", "0"], "--steps 0 is out of range"),
    (["--guidance", "nan"], "--guidance nan"),
    (["--text-layers", "2,1,2"], "must not decrease"),
    (["--text-layers", "1,2,3"], "the text encoder has 3 layers"),
    (["--text-layers", "1,2"], "three layer numbers"),
    (["--seed", "-1"], "--seed -1 is out of range"),
    (["--checkpoint", "last"], "--checkpoint is a run's setting"),
])
def test_a_setting_that_cannot_run_is_one_line(pipes, tmp_path, capsys, args, said):
    rc = main(["generate", str(pipes[False]), "--prompt", "x", "--height", str(H), "--width",
               str(W), "--text-layers", "1,2,2", "-o", str(tmp_path / "x.png"), *args])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc in (1, 2) and len(err) == 1 and said in err[0], err
    assert not (tmp_path / "x.png").exists()


@pytest.mark.parametrize("tensors,said", [
    ({"noise": torch.zeros(1, 16, 2, 3)}, "one tensor named 'latents'"),
    ({"latents": torch.zeros(1, 16, 3, 3)}, "starts from float [1, 16, 2, 3]"),
])
def test_latents_of_another_name_or_shape_are_one_line(pipes, tmp_path, capsys, tensors, said):
    save_file(tensors, tmp_path / "l.safetensors")
    rc = main(["generate", str(pipes[False]), "--prompt", "x", "--height", str(H), "--width",
               str(W), "--text-layers", "1,2,2", "--latents", str(tmp_path / "l.safetensors"),
               "-o", str(tmp_path / "x.png")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 1 and len(err) == 1 and said in err[0], err


def test_every_models_parameters_are_the_checkpoints_mapped_tensors(pipes, tmp_path,
                                                                     monkeypatch):
    # the three models hold the folders' tensors themselves (views of the files' maps): no
    # model's weights are copied, whatever its shapes
    from pytyr.generate.flux2 import Component

    seen = {}
    call = Component.__call__

    def spy(self, **inputs):
        out = call(self, **inputs)
        ptrs = {t.data_ptr() for t in self.tensors.values()}
        params = [p for f in self.run._forwards.values() for p in f.module.parameters()]
        seen[self.folder.name] = bool(params) and all(p.data_ptr() in ptrs for p in params)
        return out

    monkeypatch.setattr(Component, "__call__", spy)
    _tyr(pipes[False], tmp_path, "the digit seven", 4.0)
    assert seen == {"text_encoder": True, "transformer": True, "vae": True}
