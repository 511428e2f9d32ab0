"""`FusedAdamW` (pytyr/train/adamw.py) steps bit for bit like torch's AdamW(fused=True), on its
lean path and on every case that takes torch's own step, and resumes from either's state."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pytyr.config import load_dataclass
from pytyr.train.adamw import FusedAdamW
from pytyr.train.optim import make_optimizers
from pytyr.train.settings import TrainConfig

SHAPES = [(5, 3), (7,), (2, 2), (4, 1, 3)]


def _params(seed: int = 1, dtype: torch.dtype = torch.float32) -> list[torch.nn.Parameter]:
    g = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(s, generator=g).to(dtype)) for s in SHAPES]


def _groups(ps: list[torch.nn.Parameter]) -> list[dict]:
    return [{"params": ps[:2], "weight_decay": 0.1}, {"params": ps[2:], "weight_decay": 0.0}]


def _grads(ps: list[torch.nn.Parameter], step: int, missing: frozenset[int] = frozenset()) -> None:
    g = torch.Generator().manual_seed(100 + step)
    for i, p in enumerate(ps):
        grad = torch.randn(p.shape, generator=g).to(p.dtype)
        p.grad = None if i in missing else grad


def _run(opts_and_params, steps: int, missing=frozenset(), lrs=None) -> None:
    for s in range(steps):
        for opt, ps in opts_and_params:
            _grads(ps, s, missing if s % 2 else frozenset())
            if lrs:
                for group in opt.param_groups:
                    group["lr"] = lrs[s]
            opt.step()


def _same(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a, b))


@settings(max_examples=15, deadline=None)
@given(steps=st.integers(1, 6), missing=st.frozensets(st.integers(0, 3)),
       lrs=st.lists(st.floats(1e-4, 1e-1), min_size=6, max_size=6),
       betas=st.tuples(st.floats(0.0, 0.95), st.floats(0.5, 0.999)))
def test_steps_bit_for_bit_like_torch_fused(steps, missing, lrs, betas):
    ref, mine = _params(), _params()
    o_ref = torch.optim.AdamW(_groups(ref), lr=1e-2, betas=betas, fused=True)
    o_mine = FusedAdamW(_groups(mine), lr=1e-2, betas=betas)
    _run([(o_ref, ref), (o_mine, mine)], steps, missing, lrs)
    assert _same(ref, mine)
    for p, q in zip(ref, mine):
        sr, sm = o_ref.state.get(p, {}), o_mine.state.get(q, {})
        assert sr.keys() == sm.keys() and all(torch.equal(sr[k], sm[k]) for k in sr)


@pytest.mark.parametrize("option", [{"amsgrad": True}, {"maximize": True}])
def test_options_off_the_lean_path_take_torchs_step(option):
    ref, mine = _params(), _params()
    o_ref = torch.optim.AdamW(_groups(ref), lr=1e-2, fused=True, **option)
    o_mine = FusedAdamW(_groups(mine), lr=1e-2, **option)
    _run([(o_ref, ref), (o_mine, mine)], 4)
    assert _same(ref, mine)
    assert o_mine._lean_work() is None


def test_the_lean_path_is_taken_after_the_first_step():
    ps = _params()
    opt = FusedAdamW(_groups(ps), lr=1e-2)
    _grads(ps, 0)
    assert opt._lean_work() is None  # no state yet: torch's step makes it
    opt.step()
    work = opt._lean_work()
    assert work is not None and [len(w[0]) for w in work] == [2, 2]
    ps[1].grad = None
    assert [len(w[0]) for w in opt._lean_work()] == [1, 2]  # no gradient, no update


def test_mixed_dtypes_in_a_group_take_torchs_step():
    ps = _params()
    ps[1] = torch.nn.Parameter(ps[1].detach().double())
    ref = [torch.nn.Parameter(p.detach().clone()) for p in ps]
    o_ref = torch.optim.AdamW(_groups(ref), lr=1e-2, fused=True)
    o_mine = FusedAdamW(_groups(ps), lr=1e-2)
    _run([(o_ref, ref), (o_mine, ps)], 3)
    assert o_mine._lean_work() is None and _same(ref, ps)


def test_a_gradient_scalers_step_takes_torchs_path():
    ref, mine = _params(), _params()
    o_ref = torch.optim.AdamW(_groups(ref), lr=1e-2, fused=True)
    o_mine = FusedAdamW(_groups(mine), lr=1e-2)
    _run([(o_ref, ref), (o_mine, mine)], 2)
    for opt, ps in ((o_ref, ref), (o_mine, mine)):
        _grads(ps, 7)
        for p in ps:
            p.grad.mul_(4.0)
        opt.grad_scale = torch.tensor(4.0)  # as torch.amp.GradScaler.step sets it
        opt.found_inf = torch.tensor(0.0)
        if opt is o_mine:
            assert opt._lean_work() is None
        opt.step()
        del opt.grad_scale, opt.found_inf
    assert _same(ref, mine)


def test_resumes_exactly_from_its_own_and_from_torchs_state():
    straight = _params()
    o_straight = FusedAdamW(_groups(straight), lr=1e-2)
    _run([(o_straight, straight)], 6)
    for make_first in (FusedAdamW, lambda g, lr: torch.optim.AdamW(g, lr=lr, fused=True)):
        first = _params()
        o_first = make_first(_groups(first), lr=1e-2)
        _run([(o_first, first)], 3)
        second = [torch.nn.Parameter(p.detach().clone()) for p in first]
        o_second = FusedAdamW(_groups(second), lr=1e-2)
        o_second.load_state_dict(o_first.state_dict())
        for s in range(3, 6):
            _grads(second, s)
            o_second.step()
        assert _same(straight, second)


def test_make_optimizers_builds_it_where_fused_is_asked():
    net = torch.nn.Linear(3, 2)
    fused = load_dataclass(TrainConfig, {"fused": True}, "test")
    plain = load_dataclass(TrainConfig, {"fused": False}, "test")
    (a,) = make_optimizers(net, fused, torch.device("cpu"))
    (b,) = make_optimizers(net, plain, torch.device("cpu"))
    assert type(a) is FusedAdamW and a.defaults["fused"]
    assert type(b) is torch.optim.AdamW and not b.defaults["fused"]
