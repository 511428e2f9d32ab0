"""The parity suite's command (`python -m pytyr.kernels.suite`) and its script
(`scripts/gpu/test_parity_suite.sh`): fixtures as safetensors with their seed, the vendored
reference runner called after each suite, failures reported in the exit status."""
from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton")

import broken_kernels  # noqa: E402
from pytyr.kernels import (
    contracts,  # noqa: E402
    suite,  # noqa: E402
)

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "gpu" / "test_parity_suite.sh"


def test_suite_writes_each_case_with_its_seed(tmp_path, capsys):
    from safetensors import safe_open

    assert suite.main(["--suite", "copy", "--fixtures", str(tmp_path), "--trials", "1"]) == 0
    files = sorted((tmp_path / "copy").glob("*.safetensors"))
    cases = contracts()["copy"].fixtures("small") + contracts()["copy"].trials("small", 1)
    assert len(files) == len(cases) and files[-1].name.endswith("-random.safetensors")
    with safe_open(str(files[1]), "pt") as f:
        meta = f.metadata()
        assert meta["suite"] == "copy" and meta["seed"] == str(cases[1].seed)
        assert meta["ok"] == "true" and meta["case"] == cases[1].id
        keys = set(f.keys())
        assert {"input.x", "dout.0", "output.0.kernel", "output.0.reference",
                "grad.x.kernel", "grad.x.reference"} <= keys
        assert (f.get_tensor("output.0.kernel") == f.get_tensor("input.x")).all()
    out = capsys.readouterr().out
    assert f"copy: {len(cases)} passed, 0 failed" in out


def test_a_failing_case_fails_the_suite(monkeypatch, capsys):
    broken = dataclasses.replace(contracts()["copy"], kernel=broken_kernels.copy_without_tail)
    monkeypatch.setattr(suite, "contracts", lambda: {"copy": broken})
    assert suite.main(["--suite", "copy"]) == 1
    out = capsys.readouterr().out
    assert "FAIL copy [n=" in out and "output 0: max error" in out


def test_an_unknown_suite_is_named(capsys):
    with pytest.raises(SystemExit) as e:
        suite.main(["--suite", "softmax"])
    assert e.value.code == 2
    assert "unknown suite 'softmax'; the suites are copy, rotary" in capsys.readouterr().err


def _script(tmp_path, runner_rc=0, **env):
    log = tmp_path / "runner.log"
    runner = tmp_path / "runner"
    runner.write_text(f'#!/bin/sh\necho "$1 $2 $(ls "$2" | wc -l)" >> {log}\nexit {runner_rc}\n')
    runner.chmod(0o755)
    full = {**os.environ, "PYTHON": sys.executable, "TYR_SUITE_ONLY": "copy",
            "TYR_GPU_VENDORED_REF_RUNNER": str(runner),
            "TYR_SUITE_FIXTURES": str(tmp_path / "fx"), **env}
    proc = subprocess.run(["bash", str(SCRIPT)], cwd=tmp_path, env=full, capture_output=True,
                          text=True, timeout=300)
    return proc, (log.read_text() if log.exists() else "")


def test_script_calls_the_runner_after_each_suite(tmp_path):
    proc, calls = _script(tmp_path, RANDOMIZED_TRIALS="1")
    assert proc.returncode == 0, proc.stderr + proc.stdout
    n = len(contracts()["copy"].fixtures("small")) + 1
    assert calls.split() == ["copy", str(tmp_path / "fx" / "copy"), str(n)]
    assert "all suites passed: copy" in proc.stdout


def test_script_fails_when_the_runner_fails(tmp_path):
    proc, calls = _script(tmp_path, runner_rc=3)
    assert proc.returncode == 1 and calls
    assert "FAILED: copy (vendored runner)" in proc.stderr


@pytest.mark.parametrize("env,message", [
    ({"RANDOMIZED_MHA_TRIALS": "many"}, "trial counts must be non-negative integers"),
    ({"TYR_GPU_VENDORED_REF_RUNNER": "/nonexistent/runner"}, "is not an executable file"),
])
def test_script_rejects_bad_settings_before_running(tmp_path, env, message):
    proc, calls = _script(tmp_path, **env)
    assert proc.returncode == 2 and message in proc.stderr and not calls


def test_compile_check_builds_cubins_without_a_gpu():
    # the ahead-of-time compile for sm_90 that scripts/gpu/compile_check.py does for every
    # launch of the suite (run by hand: minutes); here only the copy kernel's launches
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run([sys.executable, str(ROOT / "scripts/gpu/compile_check.py"),
                           "--scale", "small", "--only", "copy"], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "compiled for cuda:90, 0 failed, 0 spill registers" in proc.stdout
    assert "_copy_kernel [bf16]" in proc.stdout and "_copy_kernel [fp32]" in proc.stdout
