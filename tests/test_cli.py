"""The `tyr` command: exit codes and messages a person sees."""
from __future__ import annotations

import json

import pytest

from pytyr.cli import main
from pytyr.kernels import native

MLP = "examples/mlp/MLP.lean"


def test_check_ok(capsys):
    assert main(["check", MLP, "Tyr.lean"]) == 0
    assert "ok: 2 file(s) checked" in capsys.readouterr().out


def test_check_reports_located_errors_and_fails(tmp_path, capsys):
    f = tmp_path / "Bad.lean"
    f.write_text("import Tyr\nopen torch\n"
                 "def bad (x : T #[32, 768]) (w : T #[768, 512]) : T #[32, 512] := linear x w\n")
    assert main(["check", str(f)]) == 1
    err = capsys.readouterr().err
    assert f"{f}:3:74: error: argument 'M' of 'linear' has type T #[768, 512]" in err
    assert "1 error in 1 file(s)" in err


def test_graph_prints_ir(tmp_path, capsys):
    # the same --set keys as `tyr train`: the task's batch fills the model's b
    assert main(["graph", MLP, "--model", "mlp", "--set", "train.batch=4"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["inputs"][0]["shape"] == [4, 2]
    # without a task, every value comes from the model table
    assert main(["graph", MLP, "--model", "mlp", "--config", str(_write_model_only(tmp_path))]) == 0
    assert json.loads(capsys.readouterr().out)["inputs"][1]["shape"] == [5]


def _write_model_only(tmp_path):
    path = tmp_path / "m.json"
    path.write_text(json.dumps({"model": {"c": {"inputs": 2, "hidden": 8, "classes": 3},
                                          "b": 5}}))
    return path


def test_graph_names_a_bad_key(capsys):
    assert main(["graph", MLP, "--model", "mlp", "--set", "model.c.width=1"]) == 1
    assert "unknown key c.width for MLPConfig" in capsys.readouterr().err


def test_validate_accepts_and_rejects(tmp_path, capsys):
    out = tmp_path / "g.json"
    assert main(["graph", MLP, "--model", "mlp", "--config", "examples/mlp/config.json",
                 "-o", str(out)]) == 0
    assert main(["validate", str(out)]) == 0
    doc = json.loads(out.read_text())
    doc["nodes"][0]["shape"] = [1, 1]
    doc["nodes"][1]["op"] = "frobnicate"
    out.write_text(json.dumps(doc))
    capsys.readouterr()
    assert main(["validate", str(out)]) == 1
    err = capsys.readouterr().err
    assert "%0" in err and "frobnicate" in err


@pytest.mark.parametrize("override,frag", [
    ("train.stepz=3", "unknown key 'train.stepz'"),
    ("train.lr=fast", "'train.lr' must be"),
    ("model.b=-3", "with b = -3 (model.b) but task 'classification' feeds x : T [batch=128"),
    ("task.name=mnist", "unknown task 'mnist'"),
])
def test_train_rejects_bad_config_before_training(override, frag, capsys):
    assert main(["train", MLP, "--model", "mlp", "--set", override, "-q"]) == 1
    assert frag in capsys.readouterr().err


@pytest.mark.slow
def test_train_mlp_reaches_95_percent(tmp_path, capsys):
    rc = main(["train", MLP, "--model", "mlp", "--set", f"out={tmp_path}",
               "--set", "train.max_iters=300", "-q"])
    assert rc == 0
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["final"]["val_accuracy"] >= 0.95
    assert (tmp_path / "loss.png").stat().st_size > 1000


def test_check_skips_lean_only_meta_modules(capsys):
    # Metaprograms (the deriving handler, the attribute) are checked by `lake build` only.
    assert main(["check", "Tyr/Meta.lean", "Tyr/Meta/Deriving.lean", "Tyr/Core.lean"]) == 0


def test_graph_explains_the_kernel_choice(capsys):
    assert main(["graph", "examples/gpt/GPT.lean", "--model", "gpt", "--explain",
                 "--device", "cuda"]) == 0
    out = capsys.readouterr().out
    assert "kernel layer_norm (inside its contract)" in out and "mode auto, device cuda" in out
    assert main(["graph", "examples/gpt/GPT.lean", "--model", "gpt", "--explain",
                 "--device", "cuda", "--kernels", "off"]) == 0
    assert "0 of 14 nodes with a kernel use it (mode off" in capsys.readouterr().out
    assert main(["graph", "examples/gpt/GPT.lean", "--model", "gpt", "--explain",
                 "--device", "cpu"]) == 0
    out = capsys.readouterr().out  # Triton kernels are for CUDA only; the C one runs on CPU
    assert "kernels run on CUDA only, not on cpu" in out
    # 4 layers: an attention each (GELU has no kernel)
    assert ("4 of 14 nodes" if native.unavailable() is None else "0 of 14 nodes") in out


def _leaves(parser):
    import argparse

    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield parser
        return
    for sub in subs:
        for child in sub.choices.values():
            yield from _leaves(child)


def test_every_command_has_a_description_and_examples():
    from pytyr.cli import build_parser

    leaves = list(_leaves(build_parser()))
    assert len(leaves) >= 12
    for p in leaves:
        text = p.format_help()
        assert p.description and "examples:\n  tyr " in text, p.prog
