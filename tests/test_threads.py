"""The run's thread count: measured on its own step where nobody chose it, kept otherwise."""
from __future__ import annotations

import json
import time

import pytest
import torch

from pytyr.config import load_dataclass
from pytyr.errors import ConfigError
from pytyr.train import threads
from pytyr.train.settings import TrainConfig
from pytyr.train.threads import choose_threads

CPU = torch.device("cpu")


@pytest.fixture(autouse=True)
def _clean(monkeypatch):
    for var in threads.ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)  # torch's default: idle threads spin
    monkeypatch.setattr(threads, "usable_cores", lambda: 4)
    monkeypatch.setattr(threads, "load_average", lambda: 0.5)  # the cores free: measured
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def step_taking(seconds: dict[int, float]):
    """A step that takes `seconds[n]` at n threads, counting its calls."""
    calls = []

    def step():
        n = torch.get_num_threads()
        calls.append(n)
        time.sleep(seconds[n])

    return step, calls


@pytest.mark.parametrize("t1,t4,want", [(0.030, 0.010, 4), (0.010, 0.030, 1),
                                        (0.020, 0.019, 1),  # 5% faster is not enough
                                        (0.020, 0.016, 1)])  # nor 20% where threads spin
def test_auto_keeps_the_faster_count_measured_alternately(t1, t4, want):
    step, calls = step_taking({1: t1, 4: t4})
    choice = choose_threads("auto", step, device=CPU)
    assert choice.threads == want == torch.get_num_threads()
    assert calls.count(1) >= 4 and calls.count(4) >= 4  # both sides timed, warm-ups apart
    assert f"{t1 * 1e3:.0f} ms at 1 thread" in choice.line()


def test_a_timed_step_follows_a_step_at_the_same_count():
    calls: list[int] = []

    def step():  # 10 ms at 4 threads once the team is awake, 40 ms right after a switch
        n = torch.get_num_threads()
        switched = bool(calls) and calls[-1] != n
        calls.append(n)
        time.sleep(0.020 if n == 1 else 0.040 if switched else 0.010)

    choice = choose_threads("auto", step, device=CPU)
    assert choice.threads == 4 and "10 ms at 4" in choice.reason


@pytest.mark.parametrize("wait,want", [("PASSIVE", 4), ("ACTIVE", 1), (None, 1)])
def test_where_idle_threads_spin_more_threads_must_save_a_quarter(monkeypatch, wait, want):
    if wait is None:
        monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    else:
        monkeypatch.setenv("OMP_WAIT_POLICY", wait)
    step, _ = step_taking({1: 0.020, 4: 0.016})  # 20% faster at 4 threads
    choice = choose_threads("auto", step, device=CPU)
    assert choice.threads == want
    assert ("threads sleep" if wait == "PASSIVE" else "threads spin") in choice.reason


def test_a_tiny_step_is_not_shared():
    step, calls = step_taking({1: 0.0, 4: 0.0})
    choice = choose_threads("auto", step, device=CPU)
    assert choice.threads == 1 and set(calls) == {1} and "too small" in choice.reason


@pytest.mark.parametrize("setting,env,recorded,device,want,why", [
    (3, None, 2, CPU, 3, "train.threads"),  # an explicit setting wins over everything
    ("auto", "2", None, CPU, None, "OMP_NUM_THREADS=2"),
    ("auto", None, 2, CPU, 2, "resumed run"),
    ("auto", None, None, torch.device("cuda"), None, "default on cuda"),
])
def test_no_measuring_where_the_choice_is_made(monkeypatch, setting, env, recorded, device,
                                               want, why):
    if env is not None:
        monkeypatch.setenv("OMP_NUM_THREADS", env)
    step, calls = step_taking({})
    choice = choose_threads(setting, step, device=device, recorded=recorded)
    assert calls == [] and why in choice.reason
    assert choice.threads == (want or torch.get_num_threads())


def test_one_usable_core_means_one_thread(monkeypatch):
    monkeypatch.setattr(threads, "usable_cores", lambda: 1)
    step, calls = step_taking({})
    assert choose_threads("auto", step, device=CPU).threads == 1 and calls == []


@pytest.mark.parametrize("value", [0, -1, 1025, 2.5, "many", True])
def test_bad_thread_settings_are_refused_by_name(value):
    with pytest.raises(ConfigError, match="train.threads"):
        load_dataclass(TrainConfig, {"threads": value}, "cfg.json", prefix="train.")


def test_a_resume_reuses_the_recorded_count(tmp_path, monkeypatch):
    from test_engine import BigramLM, _train

    monkeypatch.setattr(threads, "TINY_S", 0.0)  # measure even this tiny model
    first = _train(BigramLM(), tmp_path, threads="auto", max_iters=10)
    recorded = json.loads((tmp_path / "ckpt" / "state.json").read_text())["extra"]["threads"]
    assert recorded in (1, 4)
    seen = []
    monkeypatch.setattr(threads, "_timed", lambda step, n: seen.append(n) or 0.0)
    resumed = _train(BigramLM(), tmp_path, threads="auto", max_iters=20, resume=True)
    assert seen == [] and len(resumed["steps"]) == 20 and first["steps"]


def test_measuring_stops_once_the_choice_is_decided():
    # 3 rounds planned for a long step; every core clearly slower: 2 agree, the third is not run
    step, calls = step_taking({1: 0.40, 4: 0.60})
    choice = choose_threads("auto", step, device=CPU)
    assert choice.threads == 1 and calls.count(4) == 4  # 2 rounds, a warm-up step each


def test_a_stalled_step_at_every_core_ends_the_measuring_at_once():
    # a loaded machine: a step at 4 threads takes 5x one thread's; its first step is enough
    step, calls = step_taking({1: 0.02, 4: 0.10})
    choice = choose_threads("auto", step, device=CPU)
    assert choice.threads == 1 and calls.count(4) == 1


@pytest.mark.parametrize("load,measured", [(3.4, True), (3.5, False), (6.5, False),
                                           (None, True)])
def test_every_core_taken_means_one_thread_unmeasured(monkeypatch, load, measured):
    monkeypatch.setattr(threads, "load_average", lambda: load)
    step, calls = step_taking({1: 0.030, 4: 0.010})
    choice = choose_threads("auto", step, device=CPU)
    assert bool(calls) == measured
    assert choice.threads == (4 if measured else 1)
    if not measured:
        assert f"load {load:.1f} on 4 usable cores, taken" in choice.reason
