"""MDLM's ancestral sampler (`pytyr.train.tasks.mdlm.ancestral`) against an independent rendering of
MDLM's own update (`_ddpm_caching_update` and `_sample` of kuleshov-group/mdlm's
`diffusion.py`, SUBS parameterisation, log-linear schedule): the same uniform draws give the
same tokens. Then its properties: the prompt is kept, no `[MASK]` is left, revealed tokens
never change, a step reveals each hole with probability `(m(t) - m(s)) / m(t)`, the model is
called only when the sequence changed, bad arguments are one-line errors."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pytyr.errors import ConfigError
from pytyr.train.tasks.mdlm.ancestral import SAMPLE_EPS, ancestral
from pytyr.train.tasks.mdlm.unmask import UnmaskStep, prompt_template

V = 7  # characters 0..6; [MASK] is 7
MASK = V


def context_model(seed: int, length: int, calls: list | None = None):
    """Logits [1, l, V] that depend on every id of the sequence (a random bilinear map), so a
    stale cache would show."""
    g = torch.Generator().manual_seed(seed)
    emb = torch.randn(V + 1, 5, generator=g)
    pos = torch.randn(length, 5, generator=g)
    mix = torch.randn(length, length, generator=g) / length
    out = torch.randn(5, V, generator=g) * 3

    def fn(ids: torch.Tensor) -> tuple[torch.Tensor]:
        if calls is not None:
            calls.append(ids.clone())
        h = emb[ids[0]] + pos
        return ((torch.tanh(mix @ h) + h) @ out)[None],
    return fn


def mdlm_reference(logits_fn, x: torch.Tensor, steps: int, seed: int) -> tuple[torch.Tensor, int]:
    """MDLM's sampling loop for one sequence `x` [l] (the mask id is V, the last column):
    returns the tokens and the number of model calls on a sequence with something to fill
    (MDLM also calls the model on a sequence with nothing left to fill: no draw depends on it)."""
    gen = torch.Generator().manual_seed(seed)
    x = x.clone()[None]  # [1, l]
    calls = 0

    def forward(x):  # SUBS: no mass on [MASK]; unmasked positions keep their token
        nonlocal calls
        calls += int((x == MASK).any())
        logits = logits_fn(x)[0]
        logits = torch.cat([logits, torch.full_like(logits[..., :1], -1e6)], dim=-1)
        logits = logits - torch.logsumexp(logits, dim=-1, keepdim=True)
        keep = x != MASK
        logits[keep] = -1e6
        logits[keep, x[keep]] = 0
        return logits

    timesteps = torch.linspace(1, SAMPLE_EPS, steps + 1)
    dt = (1 - SAMPLE_EPS) / steps
    p_x0 = None
    for i in range(steps):
        t = timesteps[i] * torch.ones(1, 1)
        move_chance_t, move_chance_s = t[:, None], (t - dt)[:, None]  # [1, 1, 1]
        if p_x0 is None:
            p_x0 = forward(x).exp()
        q_xs = p_x0 * (move_chance_t - move_chance_s)
        q_xs[:, :, MASK] = move_chance_s[:, :, 0]
        u = torch.rand(q_xs.shape, generator=gen)
        _x = (q_xs / (1e-10 - (u + 1e-10).log())).argmax(dim=-1)
        copy = (x != MASK).to(x.dtype)
        x_next = copy * x + (1 - copy) * _x
        if not torch.equal(x_next, x):
            p_x0 = None
        x = x_next
    if bool((x == MASK).any()):  # noise removal: SUBS keeps the unmasked tokens
        x = forward(x).argmax(dim=-1)
    return x[0], calls


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**31), st.integers(1, 40), st.integers(1, 24), st.integers(0, 5))
def test_the_same_draws_give_mdlm_s_tokens(seed, steps, length, prompt):
    prompt = min(prompt, length)
    template = prompt_template(length, MASK, list(range(prompt)))
    calls: list = []
    ours = ancestral(context_model(seed, length, calls), template, MASK, steps, seed=seed)
    theirs, their_calls = mdlm_reference(context_model(seed, length), template, steps, seed)
    assert torch.equal(ours, theirs)
    assert len(calls) == their_calls  # the same cache: a call only when the sequence changed


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**31), st.integers(1, 30), st.sampled_from(["linear", "cosine"]),
       st.sampled_from([0.0, 0.5, 1.0, 3.0]))
def test_prompt_kept_no_mask_left_and_revealed_tokens_never_change(seed, steps, schedule, temp):
    template = prompt_template(12, MASK, [1, 2], [3])  # infilling between a prefix and suffix
    seen: list[UnmaskStep] = []
    out = ancestral(context_model(seed, 12), template, MASK, steps, temperature=temp,
                    schedule=schedule, seed=seed, on_step=seen.append)
    assert out.dtype == torch.int64 and out.shape == (12,)
    assert out[:2].tolist() == [1, 2] and out[-1].item() == 3
    assert bool((out < V).all())
    assert [s.step for s in seen] == list(range(1, steps + 1))
    fixed: dict[int, int] = {}
    for s in seen:
        for pos in s.revealed.tolist():
            assert pos not in fixed and template[pos] == MASK
            fixed[pos] = int(s.ids[pos])
        assert all(int(s.ids[pos]) == tok for pos, tok in fixed.items())
        assert int((s.ids == MASK).sum()) == 9 - len(fixed)
    assert len(fixed) == 9 and torch.equal(seen[-1].ids, out)


def test_each_step_reveals_a_hole_with_the_posterior_s_probability():
    # 4000 holes, flat logits over two tokens: after step 1 of 4 (linear, t = 1 → s ≈ 3/4)
    # a quarter is revealed, and what is revealed follows the model's distribution
    n = 4000
    z = torch.tensor([2.0, 0.0] + [-30.0] * (V - 2))  # p(0) = 1 / (1 + e^-2) ≈ 0.881

    def flat(ids):
        return z.expand(1, ids.shape[1], V)
    first: list[UnmaskStep] = []
    out = ancestral(flat, [MASK] * n, MASK, 4, seed=5,
                    on_step=lambda s: first.append(s) if s.step == 1 else None)
    share = len(first[0].revealed) / n
    assert abs(share - 0.25) < 0.025, share
    assert abs(float((out == 0).float().mean()) - 0.881) < 0.02
    assert set(out.tolist()) <= {0, 1}


def test_temperature_zero_is_the_argmax_of_each_position_given_the_rest():
    z = torch.randn(1, 9, V, generator=torch.Generator().manual_seed(0))
    out = ancestral(lambda ids: z, [MASK] * 9, MASK, 5, temperature=0)
    assert torch.equal(out, z[0].argmax(-1))


def test_a_logits_function_over_the_mask_too_never_yields_it():
    def fn(ids):
        z = torch.zeros(1, ids.shape[1], V + 1)
        z[..., MASK] = 100.0
        return z
    out = ancestral(fn, [MASK] * 16, MASK, 3, seed=3)
    assert bool((out < MASK).all())


def test_nothing_to_fill_calls_no_model_and_seeds_are_deterministic():
    calls: list = []
    assert ancestral(context_model(0, 3, calls), [3, 4, 5], MASK, 4).tolist() == [3, 4, 5]
    assert calls == []
    fn = context_model(1, 32)
    a = ancestral(fn, [MASK] * 32, MASK, 8, seed=1)
    assert torch.equal(a, ancestral(fn, [MASK] * 32, MASK, 8, seed=1))
    assert not torch.equal(a, ancestral(fn, [MASK] * 32, MASK, 8, seed=2))
    state = torch.get_rng_state()
    ancestral(fn, [MASK] * 32, MASK, 2, seed=1)
    assert torch.equal(torch.get_rng_state(), state)


@pytest.mark.parametrize("call,frag", [
    (lambda f: ancestral(f, [MASK], MASK, 0), "steps must be an integer >= 1"),
    (lambda f: ancestral(f, [MASK], MASK, True), "steps must be an integer >= 1"),
    (lambda f: ancestral(f, [MASK], MASK, 1, temperature=-1.0), "temperature must be"),
    (lambda f: ancestral(f, [MASK], MASK, 1, temperature=float("inf")), "temperature must be"),
    (lambda f: ancestral(f, [MASK], MASK, 1, schedule="square"), "unknown schedule 'square'"),
    (lambda f: ancestral(f, [MASK + 1], MASK, 1), "template ids must be in 0..7"),
    (lambda f: ancestral(f, [], MASK, 1), "must be a non-empty sequence"),
    (lambda f: ancestral(lambda ids: torch.zeros(1, 2, V), [MASK], MASK, 1), "input of [1, 1]"),
])
def test_bad_arguments_are_one_line_config_errors(call, frag):
    with pytest.raises(ConfigError) as info:
        call(context_model(0, 1))
    assert frag in str(info.value) and "\n" not in str(info.value)
