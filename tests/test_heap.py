"""A CPU run keeps freed tensors in glibc's heap (pytyr/train/heap.py): the next step's
tensors reuse that memory instead of faulting fresh pages in, unless the choice is someone
else's."""
from __future__ import annotations

import platform
import subprocess
import sys

import pytest

from pytyr.train import heap

# Page faults of allocating and freeing a 16 MB tensor, round by round, in a fresh process.
FAULTS = """
import resource, sys, torch
if sys.argv[1] == "keep":
    from pytyr.train.heap import keep_freed_heap
    print(keep_freed_heap(), file=sys.stderr)
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
out = []
for _ in range(6):
    f0 = faults(); x = torch.ones(4 << 20); del x; out.append(faults() - f0)
print(" ".join(map(str, out)))
"""

glibc = pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
                           reason="glibc's malloc only")


def _faults(mode: str, env: dict[str, str] | None = None) -> tuple[list[int], str]:
    import os

    run_env = {k: v for k, v in os.environ.items() if k not in heap.ENV_VARS}
    run_env.update(env or {})
    done = subprocess.run([sys.executable, "-c", FAULTS, mode], capture_output=True, text=True,
                          check=True, env=run_env)
    return [int(x) for x in done.stdout.split()], done.stderr.strip()


@glibc
def test_a_freed_large_tensor_is_reused_without_faulting_pages_in():
    kept, said = _faults("keep")
    assert said.startswith("kept: glibc's mmap threshold 32 MiB")
    assert all(f < 100 for f in kept[3:]), kept  # 16 MB is 4,096 pages
    plain, _ = _faults("none")
    # glibc's default: mostly a fresh mmap each time (its dynamic threshold may serve a round
    # from the heap now and then: one CI run saw [4132, 4093, 4096, 0, 4096, 4096])
    assert sum(f > 1000 for f in plain[1:]) >= 3, plain


@glibc
def test_a_threshold_in_the_environment_is_left_alone():
    kept, said = _faults("keep", {"MALLOC_MMAP_THRESHOLD_": "131072"})
    assert said == "as it is (MALLOC_MMAP_THRESHOLD_ is set)"
    assert all(f > 1000 for f in kept[3:]), kept


@pytest.mark.parametrize("env,libc,why", [
    ({"LD_PRELOAD": "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"}, "glibc",
     "jemalloc is preloaded"),
    ({"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=0"}, "glibc", "GLIBC_TUNABLES is set"),
    ({}, "musl", "not glibc"),
])
def test_someone_elses_choice_is_named(monkeypatch, env, libc, why):
    for var in (*heap.ENV_VARS, "LD_PRELOAD"):
        monkeypatch.delenv(var, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(platform, "system", lambda: "Linux")
    monkeypatch.setattr(platform, "libc_ver", lambda: (libc, "1.0"))
    assert heap._refusal() == why


# A training run on the CPU, then the same rounds in the same process.
TRAINED = """
import sys
from pytyr.cli import main
assert main(["train", "examples/mlp/MLP.lean", "--model", "mlp", "--quiet", "--set",
             f"out={sys.argv[2]}", "--set", "train.max_iters=2", "--set",
             "train.eval_interval=2", "--set", "train.warmup_iters=0"]) == 0
""" + FAULTS


@glibc
def test_a_cpu_training_run_keeps_the_heap(tmp_path):
    import os

    env = {k: v for k, v in os.environ.items() if k not in heap.ENV_VARS}
    done = subprocess.run([sys.executable, "-c", TRAINED, "none", str(tmp_path / "run")],
                          capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-500:]
    faults = [int(x) for x in done.stdout.split()[-6:]]
    assert all(f < 100 for f in faults[3:]), faults
