"""Iterative unmasking (`pytyr.train.tasks.mdlm.unmask`) with hand-made logits functions, and its
terminal view (`pytyr.train.tasks.mdlm.unmask_view`), live and plain."""
from __future__ import annotations

import io
import re

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pytyr.errors import ConfigError
from pytyr.train.tasks.mdlm.unmask import (
    SCHEDULES,
    UnmaskStep,
    prompt_template,
    reveal_counts,
    unmask,
)
from pytyr.train.tasks.mdlm.unmask_view import UnmaskView

V = 6  # characters 0..5; [MASK] is 6
MASK = V
ITOS = list("abcde\n")


def oracle(target: list[int], peak: float = 20.0, calls: list | None = None):
    """Logits that prefer `target[pos]` at each position, more sharply further right."""
    def fn(ids: torch.Tensor) -> torch.Tensor:
        assert ids.shape == (1, len(target)) and ids.dtype == torch.int64
        if calls is not None:
            calls.append(ids.clone())
        z = torch.zeros(1, len(target), V)
        for pos, tok in enumerate(target):
            z[0, pos, tok] = peak * (1 + pos) / len(target)
        return (z,)  # a tuple, as a TyrModule returns
    return fn


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 500), st.integers(1, 100), st.sampled_from(sorted(SCHEDULES)))
def test_reveal_counts_sum_to_the_holes(n, steps, schedule):
    counts = reveal_counts(n, steps, schedule)
    assert len(counts) == steps and sum(counts) == n and min(counts) >= 0
    if schedule == "linear":  # even: the counts differ by at most one
        assert max(counts) - min(counts) <= 1


def test_reveal_counts_shapes():
    assert reveal_counts(12, 4) == [3, 3, 3, 3]
    cos = reveal_counts(100, 4, "cosine")
    assert cos == sorted(cos) and cos[0] < 25 < cos[-1]  # MaskGIT: few first, many last
    assert reveal_counts(2, 4) == [0, 1, 0, 1] and reveal_counts(0, 3) == [0, 0, 0]


def test_prompt_template():
    t = prompt_template(7, MASK, [1, 2], [3])
    assert t.tolist() == [1, 2, MASK, MASK, MASK, MASK, 3]
    assert prompt_template(3, MASK).tolist() == [MASK] * 3
    with pytest.raises(ConfigError, match=r"\(2 \+ 2 tokens\) does not fit in a sequence of 3"):
        prompt_template(3, MASK, [1, 2], [3, 4])


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_fills_every_hole_keeps_the_prompt_and_never_draws_mask(temperature):
    target = [0, 1, 2, 3, 4, 5, 0, 1, 2, 3]
    template = prompt_template(10, MASK, [4, 4], [5])  # prefix and suffix: infilling
    steps_seen: list[UnmaskStep] = []
    out = unmask(oracle(target), template, MASK, 4, temperature=temperature,
                 on_step=steps_seen.append)
    assert out.dtype == torch.int64 and out.shape == (10,)
    assert out[:2].tolist() == [4, 4] and out[-1].item() == 5
    assert out[2:9].tolist() == target[2:9]  # peaked logits: the oracle's tokens
    assert [s.step for s in steps_seen] == [1, 2, 3, 4] and all(s.steps == 4 for s in steps_seen)
    # each step reveals what the schedule says, and a revealed token never changes
    assert [len(s.revealed) for s in steps_seen] == reveal_counts(7, 4)
    fixed: dict[int, int] = {}
    for s in steps_seen:
        for pos in s.revealed.tolist():
            assert pos not in fixed and template[pos] == MASK
            fixed[pos] = int(s.ids[pos])
        for pos, tok in fixed.items():
            assert int(s.ids[pos]) == tok
        assert int((s.ids == MASK).sum()) == 7 - len(fixed)
    assert torch.equal(steps_seen[-1].ids, out)


def test_reveals_the_most_confident_positions_first():
    # confidence grows to the right: one token a step, right to left
    target = [1, 2, 3, 4, 5]
    order = []
    unmask(oracle(target, peak=5.0), [MASK] * 5, MASK, 5, temperature=0,
           on_step=lambda s: order.extend(s.revealed.tolist()))
    assert order == [4, 3, 2, 1, 0]


def test_steps_that_reveal_nothing_do_not_call_the_model():
    calls: list = []
    out = unmask(oracle([1, 2], calls=calls), [MASK, MASK], MASK, 4, temperature=0)
    assert out.tolist() == [1, 2] and len(calls) == 2  # counts [0, 1, 0, 1]
    calls.clear()
    full = unmask(oracle([1, 2], calls=calls), [3, 4], MASK, 3)
    assert full.tolist() == [3, 4] and calls == []


def test_a_logits_function_over_the_mask_too_never_yields_it():
    def fn(ids):
        z = torch.zeros(1, ids.shape[1], V + 1)
        z[..., MASK] = 100.0  # the model would love to say [MASK]
        return z
    out = unmask(fn, [MASK] * 8, MASK, 2, temperature=1.0, seed=3)
    assert bool((out < MASK).all())


def test_seeded_and_deterministic():
    flat = lambda ids: torch.zeros(1, ids.shape[1], V)  # noqa: E731
    a = unmask(flat, [MASK] * 32, MASK, 8, seed=1)
    b = unmask(flat, [MASK] * 32, MASK, 8, seed=1)
    c = unmask(flat, [MASK] * 32, MASK, 8, seed=2)
    assert torch.equal(a, b) and not torch.equal(a, c)
    state = torch.get_rng_state()
    unmask(flat, [MASK] * 4, MASK, 2, seed=1)
    assert torch.equal(torch.get_rng_state(), state)


def test_temperature_zero_is_the_argmax():
    z = torch.randn(1, 9, V, generator=torch.Generator().manual_seed(0))
    out = unmask(lambda ids: z, [MASK] * 9, MASK, 3, temperature=0)
    assert torch.equal(out, z[0].argmax(-1))


@pytest.mark.parametrize("call,frag", [
    (lambda: unmask(oracle([1]), [MASK], MASK, 0), "steps must be an integer >= 1"),
    (lambda: unmask(oracle([1]), [MASK], MASK, 1, temperature=-1.0), "temperature must be"),
    (lambda: unmask(oracle([1]), [MASK], MASK, 1, schedule="square"), "unknown schedule 'square'"),
    (lambda: unmask(oracle([1]), [MASK + 1], MASK, 1), "template ids must be in 0..6"),
    (lambda: unmask(oracle([1]), [], MASK, 1), "must be a non-empty sequence"),
    (lambda: unmask(oracle([1]), [[MASK], [MASK]], MASK, 1), "got shape [2, 1]"),
    (lambda: unmask(lambda ids: torch.zeros(1, 2, V), [MASK], MASK, 1), "input of [1, 1]"),
    (lambda: unmask(lambda ids: torch.zeros(1, 1, 0), [MASK], MASK, 1), "returned [1, 1, 0]"),
    (lambda: unmask(lambda ids: "logits", [MASK], MASK, 1), "returned str"),
])
def test_bad_arguments_are_one_line_config_errors(call, frag):
    with pytest.raises(ConfigError) as info:
        call()
    assert frag in str(info.value) and "\n" not in str(info.value)


def test_plain_view_writes_one_line_per_step_without_control_codes():
    out = io.StringIO()  # not a terminal
    with UnmaskView(ITOS, stream=out) as view:
        assert view.live is False
        unmask(oracle([0, 5, 1, 2]), [MASK] * 4, MASK, 2, temperature=0, on_step=view)
    lines = out.getvalue().splitlines()
    assert lines == ["step 1/2: __bc", "step 2/2: a\\nbc"]
    assert "\x1b" not in out.getvalue()


def test_live_view_redraws_in_place_and_leaves_the_last_frame():
    out = io.StringIO()
    with UnmaskView(ITOS, stream=out, live=True, hole=".") as view:
        unmask(oracle([0, 1, 2, 3]), [MASK] * 4, MASK, 4, temperature=0, on_step=view)
    raw = out.getvalue()
    assert "\x1b[" in raw  # control codes: cursor movement and styles
    assert "\x1b[1A" in raw  # the cursor goes up to redraw the frame in place
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", raw)
    assert "step 1/4" in text and "...d" in text  # the most confident position first
    assert text.rstrip().endswith("step 4/4\nabcd")  # the last frame stays


class _FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_live_by_default_on_a_terminal_unless_dumb(monkeypatch):
    monkeypatch.setenv("TERM", "xterm-256color")
    assert UnmaskView(ITOS, stream=_FakeTTY()).live is True
    monkeypatch.setenv("TERM", "dumb")
    assert UnmaskView(ITOS, stream=_FakeTTY()).live is False
    with pytest.raises(ConfigError, match="hole must be one character"):
        UnmaskView(ITOS, hole="__")
