"""Rectified-flow pieces: training times, the straight path and its velocity, class
conditioning, the Euler sampler with guidance, the PNG grid, and the training batches the
`image_flow` task makes of them (`training_batch`: noise, times, label dropout)."""
from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pytyr.errors import ConfigError
from pytyr.train.task import TaskContext
from pytyr.train.tasks import make_task
from pytyr.train.tasks.flow.image_grid import class_grid_labels, grid_array, write_grid
from pytyr.train.tasks.flow.rectified import (
    NULL_LABEL,
    class_conditioning,
    euler_sample,
    interpolate,
    sample_timesteps,
    timestep_schedule,
    velocity_target,
)


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize("kind", ["uniform", "logit_normal"])
def test_timesteps_are_in_the_open_unit_interval_and_follow_the_generator(kind):
    t = sample_timesteps(20000, gen(1), kind=kind)
    assert t.shape == (20000,) and t.dtype == torch.float32
    assert 0 < t.min() and t.max() < 1
    assert torch.equal(t, sample_timesteps(20000, gen(1), kind=kind))
    assert not torch.equal(t, sample_timesteps(20000, gen(2), kind=kind))
    assert abs(float(t.median()) - 0.5) < 0.02


def test_logit_normal_weights_the_middle_of_the_path():
    u = sample_timesteps(20000, gen(), kind="uniform")
    ln = sample_timesteps(20000, gen(), kind="logit_normal")
    middle = lambda t: float(((t > 0.25) & (t < 0.75)).float().mean())  # noqa: E731
    assert middle(u) == pytest.approx(0.5, abs=0.02)
    assert middle(ln) == pytest.approx(0.728, abs=0.02)  # P(|z| < log 3), z ~ N(0, 1)
    shifted = sample_timesteps(20000, gen(), mean=1.0)
    assert float(shifted.median()) == pytest.approx(1 / (1 + math.exp(-1)), abs=0.02)


@pytest.mark.parametrize("kwargs,fragment", [
    ({"kind": "cosine"}, "unknown timestep sampling 'cosine'"),
    ({"std": 0.0}, "positive std"),
    ({"mean": float("nan")}, "finite mean"),
])
def test_bad_timestep_settings_are_config_errors(kwargs, fragment):
    with pytest.raises(ConfigError, match=fragment):
        sample_timesteps(4, gen(), **kwargs)


@given(st.floats(0, 1), st.floats(1e-3, 0.5))
@settings(max_examples=40, deadline=None)
def test_the_path_runs_from_data_to_noise_at_the_target_velocity(t, h):
    x0, noise = torch.randn(3, 1, 2, 2, generator=gen(3)), torch.randn(3, 1, 2, 2, generator=gen(4))
    tt = torch.full((3,), t, dtype=torch.float64)
    x0, noise = x0.double(), noise.double()
    step = interpolate(x0, noise, tt + h) - interpolate(x0, noise, tt)
    torch.testing.assert_close(step, h * velocity_target(x0, noise))
    torch.testing.assert_close(interpolate(x0, noise, torch.zeros(3, dtype=torch.float64)), x0)
    torch.testing.assert_close(interpolate(x0, noise, torch.ones(3, dtype=torch.float64)), noise)


def test_each_example_has_its_own_time():
    x0, noise = torch.zeros(2, 3), torch.ones(2, 3)
    out = interpolate(x0, noise, torch.tensor([0.25, 0.75]))
    assert torch.equal(out, torch.tensor([[0.25] * 3, [0.75] * 3]))


def test_class_conditioning_is_one_hot_and_null_is_zero():
    txt, y = class_conditioning(torch.tensor([3, NULL_LABEL, 0]), 4, txt_len=2)
    assert txt.shape == (3, 2, 4) and y.shape == (3, 4)
    assert torch.equal(y, torch.tensor([[0, 0, 0, 1], [0, 0, 0, 0], [1, 0, 0, 0]]).float())
    assert torch.equal(txt[:, 0], y) and torch.equal(txt[:, 1], y)


@pytest.mark.parametrize("labels,fragment", [
    (torch.tensor([0, 4]), "label 4 is outside 0 … 3"),
    (torch.tensor([-2]), "label -2 is outside"),
    (torch.tensor([0.0]), "1-D int64"),
    (torch.tensor([[0]]), "1-D int64"),
])
def test_bad_labels_are_config_errors(labels, fragment):
    with pytest.raises(ConfigError, match=fragment):
        class_conditioning(labels, 4)


def _task(label_dropout: float = 0.1, micro: int = 8):
    """The `image_flow` task on the digits: the only maker of training batches."""
    table = {"name": "image_flow", "label_dropout": label_dropout}
    task = make_task(table, TaskContext(micro, 3), "test")
    task.prepare()
    return task


def test_a_training_batch_is_keyed_by_the_models_inputs_and_pure_in_k():
    task = _task(0.5)
    a, b = task.training_batch(4), task.training_batch(4)
    assert list(a) == list(task.feeds()) == ["img", "timesteps", "txt", "y", "target"]
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not torch.equal(a["img"], task.training_batch(5)["img"])
    assert a["txt"].shape == (8, 1, 10) and a["y"].shape == (8, 10) and a["timesteps"].shape == (8,)
    # x_t = x0 + t · (noise - x0): the image is on the path the target is the velocity of
    x0 = task.batch(4)["x0"]
    t = a["timesteps"].reshape(8, 1, 1, 1)
    torch.testing.assert_close(a["img"], x0 + t * a["target"], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("p", [0.0, 0.1, 1.0])
def test_labels_are_dropped_at_the_configured_rate(p):
    task = _task(p, micro=160)
    batches = [task.training_batch(k) for k in range(10)]  # an epoch of the training split
    dropped = torch.cat([b["y"].sum(1) == 0 for b in batches]).float().mean()
    assert float(dropped) == pytest.approx(p, abs=0.02)
    for k, b in enumerate(batches):  # a kept label is the image's own class, one-hot
        labels, kept = task.batch(k)["labels"], b["y"].sum(1) == 1
        assert torch.equal(b["y"][kept].argmax(1), labels[kept])


def test_schedule_runs_from_noise_to_data_and_shifts_towards_noise():
    plain = timestep_schedule(4)
    assert torch.equal(plain, torch.tensor([1.0, 0.75, 0.5, 0.25, 0.0]))
    shifted = timestep_schedule(4, shift=3.0)
    assert shifted[0] == 1 and shifted[-1] == 0 and bool((shifted[1:-1] > plain[1:-1]).all())
    assert float(shifted[2]) == pytest.approx(0.75)  # 3·0.5 / (1 + 2·0.5)


@pytest.mark.parametrize("steps,shift,fragment", [
    (0, 1.0, "positive whole number of steps"), (2.5, 1.0, "positive whole number"),
    (4, 0.0, "time shift must be a positive number"), (4, float("inf"), "time shift"),
])
def test_bad_schedules_are_config_errors(steps, shift, fragment):
    with pytest.raises(ConfigError, match=fragment):
        timestep_schedule(steps, shift)


@pytest.mark.parametrize("steps", [1, 7])
def test_a_constant_velocity_is_integrated_exactly(steps):
    noise, target = torch.randn(5, 2), torch.randn(5, 2)
    calls = []

    def v(x, t, labels):
        calls.append(labels)
        return noise - target

    out = euler_sample(v, noise, torch.arange(5), steps=steps)
    torch.testing.assert_close(out, target)
    assert len(calls) == steps and all(torch.equal(c, torch.arange(5)) for c in calls)


def test_guidance_extrapolates_from_the_unconditional_velocity():
    noise = torch.zeros(3, 1)
    cond, uncond = torch.full((3, 1), 2.0), torch.full((3, 1), 0.5)
    seen = []

    def v(x, t, labels):
        seen.append(labels.tolist())
        return uncond if bool((labels == NULL_LABEL).all()) else cond

    out = euler_sample(v, noise, torch.tensor([1, 2, 3]), steps=3, cfg_scale=4.0)
    torch.testing.assert_close(out, -(uncond + 4.0 * (cond - uncond)))
    assert seen.count([-1, -1, -1]) == 3 and seen.count([1, 2, 3]) == 3


def test_the_optimal_velocity_carries_noise_to_the_data_distribution():
    # For data x0 ~ N(m, s²) the best velocity is E[ε - x0 | x_t], linear in x_t; integrating
    # it from t = 1 to 0 must turn N(0, 1) noise into N(m, s²).
    m, s = 1.5, 0.3

    def v(x, t, labels):
        t = t.double().reshape(-1, 1)
        cov = t - (1 - t) * s * s
        var = (1 - t) ** 2 * s * s + t * t
        return (-m + cov / var * (x.double() - (1 - t) * m)).float()

    noise = torch.randn(20000, 1, generator=gen(9))
    out = euler_sample(v, noise, torch.zeros(20000, dtype=torch.int64), steps=200)
    assert float(out.mean()) == pytest.approx(m, abs=0.02)
    assert float(out.std()) == pytest.approx(s, rel=0.05)


@pytest.mark.parametrize("scale", [float("nan"), "2", None, True])
def test_bad_guidance_scales_are_config_errors(scale):
    with pytest.raises(ConfigError, match="guidance scale must be a finite number"):
        euler_sample(lambda x, t, y: x, torch.zeros(1, 1), torch.zeros(1, dtype=torch.int64),
                     steps=1, cfg_scale=scale)


def test_grid_has_one_row_per_class(tmp_path):
    labels = class_grid_labels(3, 2)
    assert labels.tolist() == [0, 0, 1, 1, 2, 2]
    images = torch.stack([torch.full((1, 2, 2), -1.0 + k / 2.5) for k in range(6)])
    arr = grid_array(images, rows=3, scale=2, pad=1)
    assert arr.shape == (3 * 5 + 1, 2 * 5 + 1, 1) and arr.dtype == torch.uint8
    assert int(arr[1, 1, 0]) == 0 and int(arr[0, 0, 0]) == 128  # image 0 is black, pad gray
    assert int(arr[1 + 2 * 5, 1 + 5, 0]) == 255  # image 5 (row 2, column 1) is +1: white
    assert int(arr[1 + 5, 1, 0]) == round(255 * 0.4)  # image 2 (row 1, column 0)
    path = write_grid(images, tmp_path / "samples.png", rows=3, scale=2)
    from PIL import Image
    with Image.open(path) as img:
        assert img.size == (11, 16) and img.mode == "L"


@pytest.mark.parametrize("shape,rows,fragment", [
    ((5, 1, 2, 2), 2, "do not fill 2 rows"),
    ((4, 2, 2, 2), 2, "images \\[n, 1 or 3, h, w\\]"),
    ((4, 2, 2), 2, "images \\[n, 1 or 3, h, w\\]"),
    ((4, 1, 2, 2), 0, "do not fill 0 rows"),
])
def test_bad_grids_are_config_errors(shape, rows, fragment):
    with pytest.raises(ConfigError, match=fragment):
        grid_array(torch.zeros(shape), rows)


@pytest.mark.parametrize("n,k", [(0, 2), (2, 0), (True, 2)])
def test_bad_grid_label_counts_are_config_errors(n, k):
    with pytest.raises(ConfigError, match="must be a positive integer"):
        class_grid_labels(n, k)
