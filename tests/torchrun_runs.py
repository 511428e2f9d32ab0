"""Two-process `tyr` runs under torchrun for the tests, and what their run directories hold."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_two_processes(cmd: list[str], timeout: int) -> str:
    """Run `cmd` (a torchrun or launcher command line) with gloo, one thread per process and
    no inherited rank variables; return the ranks' stdout, or fail with their output."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHON": sys.executable,
           "TYR_DIST_BACKEND": "gloo"}  # gloo even where CUDA is: 2 ranks, maybe 1 GPU
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(var, None)
    res = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    assert res.returncode == 0, f"torchrun failed ({res.returncode}):\n{res.stdout}\n{res.stderr}"
    return res.stdout


def torchrun_cli(*args: str) -> list[str]:
    """`python -m torch.distributed.run` of `tyr ARGS` on 2 local processes."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
            "-m", "pytyr.cli", *args]


def history(run: Path) -> dict:
    return json.loads((run / "metrics.json").read_text())["history"]


def losses(run: Path) -> list[float]:
    return [s["loss"] for s in history(run)["steps"]]
