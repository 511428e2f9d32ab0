"""The whole CLI surface against values out of range: every numeric key of every example's
config and of the `train` table, with values no run can use, is refused before any work by
one line naming the key; every subcommand is covered by the fuzz (`test_cli_fuzz.py`)."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytyr.cli import build_parser, main
from pytyr.config import describe
from pytyr.train.settings import TrainConfig

ROOT = Path(__file__).resolve().parents[1]
# every directory of examples/ with a config.json, nested ones too (examples/flux2/transformer)
EXAMPLES = {cfg.parent.relative_to(ROOT / "examples").as_posix():
            (next(cfg.parent.glob("*.lean")), json.loads(cfg.read_text()))
            for cfg in sorted((ROOT / "examples").rglob("config.json"))}
MODEL = {"gpt": "gpt", "mlp": "mlp", "diffusion": "diffusion", "flux": "flux",
         "nanochat": "nanochat", "bert": "bert", "llama": "llama", "gpt2": "gpt2",
         "moe": "qwen3MoeTrain", "flux2": "vaeDecode", "flux2/transformer": "flux2Velocity",
         "flux2/digits": "digits"}
# What a model's graph needs beyond its config (BERT's, Llama's and GPT-2's batch and length
# are the models' own binders, which `tyr graph` takes from --set).
DIMS = {"bert": ["--set", "model.b=1", "--set", "model.t=8"],
        "llama": ["--set", "model.b=1", "--set", "model.t=8"],
        "gpt2": ["--set", "model.b=1", "--set", "model.t=8"],
        "moe": ["--set", "model.b=1", "--set", "model.t=8"],
        "flux2": ["--set", "model.b=1", "--set", "model.h=2", "--set", "model.w=2"],
        "flux2/transformer": ["--set", "model.b=1", "--set", "model.img=4",
                              "--set", "model.txt=3"]}
# Float fields any finite value of which computes: a scale (a negative q,k scaling flips the
# attention's logits, as the user asked); every other float's range is checked
# (`pytyr.ir.ranges`).
ANY_FLOAT = {"model.c.qk_scale", "model.c.aux_coef"}  # and the weight of a MoE's aux loss
BAD_INT = ["9" * 5000, "-1", "1e999", "-1e999", "NaN", "true", "[1]"]
BAD_FLOAT = ["9" * 5000, "1e999", "-1e999", "NaN", "-1", "true", "[1]"]


def _leaves(value, prefix=""):
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(v, f"{prefix}.{k}" if prefix else k)
    else:
        yield prefix, value


def _numeric_keys() -> list[tuple[str, str, bool]]:
    """(example, key, is_int) for every number in an example's config and every numeric
    train.* key."""
    out = []
    train_keys = {f"train.{k}": default for k, default, _ in describe(TrainConfig)}
    for name, (_, cfg) in EXAMPLES.items():
        for key, value in _leaves(cfg):
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                out.append((name, key, isinstance(value, int)))
        for key, default in train_keys.items():
            value = json.loads(default) if default != "required" else None
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                out.append((name, key, isinstance(value, int)))
    return out


KEYS = _numeric_keys()


def test_the_sweep_covers_every_example_and_many_keys():
    assert {e for e, _, _ in KEYS} == set(EXAMPLES) >= set(MODEL) - {"bert"}
    assert len(KEYS) > 150


@settings(max_examples=150, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_value_out_of_range_is_refused_by_name(data, capsys):
    example, key, is_int = data.draw(st.sampled_from(KEYS))
    bad = data.draw(st.sampled_from(BAD_INT if is_int else BAD_FLOAT))
    if key in ANY_FLOAT and bad == "-1":
        return
    lean, _ = EXAMPLES[example]
    capsys.readouterr()
    rc = main(["graph", str(lean), "--model", MODEL[example], *DIMS.get(example, []),
               "--set", f"{key}={bad}"])
    err = capsys.readouterr().err
    assert rc == 1, (example, key, bad[:20], "accepted")
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tyr graph: "), (key, err[:400])
    short = key.split(".", 1)[1] if key.startswith("model.") else key
    assert short in lines[0] or key in lines[0], (key, lines[0])


def _subcommands(parser: argparse.ArgumentParser, prefix=()) -> set[str]:
    out = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                inner = _subcommands(sub, (*prefix, name))
                out |= inner or {" ".join((*prefix, name))}
    return out


def test_every_subcommand_is_in_the_fuzz_and_has_help(capsys):
    from test_cli_fuzz import COVERED

    commands = _subcommands(build_parser())
    assert commands == COVERED, "a new subcommand: add it to test_cli_fuzz.argv_for"
    for command in sorted(commands):
        with pytest.raises(SystemExit) as done:
            main([*command.split(), "--help"])
        assert done.value.code == 0
        assert "examples:" in capsys.readouterr().out or command.startswith(("data", "tok",
                                                                              "safe"))


def _options(parser: argparse.ArgumentParser, name: str):
    """(command, option) for every argument of every subcommand, help flags aside."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub, p in action.choices.items():
                yield from _options(p, f"{name} {sub}")
        elif not isinstance(action, argparse._HelpAction):
            yield name, action


def test_every_option_of_every_subcommand_says_what_it_does():
    options = list(_options(build_parser(), "tyr"))
    assert {c for c, _ in options} >= {"tyr sample", "tyr data prepare", "tyr export"}
    bare = [f"{c} {'/'.join(a.option_strings) or a.dest}" for c, a in options
            if not (a.help or "").strip()]
    assert bare == [], bare
    sample = {a.dest: a.help for c, a in options if c == "tyr sample"}
    assert "0 is greedy" in sample["temperature"]
