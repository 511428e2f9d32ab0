"""`tyr shapes`: every binding with its type and its type under the config, on the command
line; bad input (a missing file, a FIFO, a bad config, a line out of range) is one line."""
from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

from pytyr.cli import main

GPT = "examples/gpt/GPT.lean"
MLP = "examples/mlp/MLP.lean"


def _rows(out: str) -> dict[str, str]:
    """`name : type [config: …]` rows, by name (the last one of a name wins)."""
    rows = {}
    for line in out.splitlines():
        m = re.match(r"^  \d+:\d+\s+(\S+)\s+: (.*)$", line)
        if m:
            rows[m.group(1)] = m.group(2)
    return rows


def test_shapes_of_the_gpt_with_its_config(capsys):
    assert main(["shapes", GPT]) == 0
    out = capsys.readouterr().out
    assert out.startswith("config: examples/gpt/config.json (b = 12, t = 64")
    assert "examples/gpt/GPT.lean:72:4: def attention : T #[b, t, c.n_embd]   " \
           "[config: T #[12, 64, 128]]" in out
    rows = _rows(out)
    assert rows["qkv"] == "T #[b, t, 3 * c.n_embd]   [config: T #[12, 64, 384]]"
    assert rows["q"] == "T #[b, c.n_head, t, c.head_dim]   [config: T #[12, 4, 64, 32]]"
    assert rows["c_attn"] == "T #[3 * c.n_embd, c.n_embd]   [config: T #[384, 128]]"
    assert rows["z"] == "T #[b, t, c.vocab]   [config: T #[12, 64, 75]]"
    assert rows["blk"] == "Block c"
    assert rows["h"].startswith("t ≤ c.block   [config: 64 ≤ 64]")


def test_another_config_gives_other_numbers(tmp_path, capsys):
    cfg = json.loads(Path("examples/gpt/config.json").read_text())
    cfg["model"]["c"]["n_head"] = 8
    cfg["train"]["batch"] = 3
    (tmp_path / "c.json").write_text(json.dumps(cfg))
    assert main(["shapes", GPT, "--config", str(tmp_path / "c.json"), "--line", "74"]) == 0
    out = capsys.readouterr().out
    assert _rows(out)["qkv"] == "T #[b, t, 3 * c.n_embd]   [config: T #[3, 64, 768]]"
    assert "terms on line 74:" in out
    assert "linearBias3 x p.c_attn p.c_attn_bias : T #[b, t, 3 * c.n_embd]   " \
           "[config: T #[3, 64, 768]]" in out
    assert "def logits" not in out  # only the declaration that holds the line


def test_without_a_config_the_types_are_symbolic(tmp_path, capsys):
    shutil.copy(GPT, tmp_path / "GPT.lean")
    assert main(["shapes", str(tmp_path / "GPT.lean")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("config: none")
    assert _rows(out)["qkv"] == "T #[b, t, 3 * c.n_embd]" and "[config" not in out


def test_a_file_with_errors_shows_what_checked_and_fails(tmp_path, capsys):
    text = Path(GPT).read_text().replace("linearBias3 y p.c_proj p.c_proj_bias",
                                    "linearBias3 y p.c_attn p.c_proj_bias")
    (tmp_path / "GPT.lean").write_text(text)
    assert main(["shapes", str(tmp_path / "GPT.lean")]) == 1
    cap = capsys.readouterr()
    assert "argument 'M' of 'linearBias3'" in cap.err and "1 error" in cap.err
    assert _rows(cap.out)["qkv"] == "T #[b, t, 3 * c.n_embd]"  # before the error


def test_bad_input_is_one_line(tmp_path, capsys):
    os.mkfifo(tmp_path / "fifo.lean")
    (tmp_path / "bad.json").write_text("{ not json")
    cases = [
        (["shapes", str(tmp_path / "missing.lean")], "Lean file not found"),
        (["shapes", str(tmp_path / "fifo.lean")], "is a FIFO, not a regular file"),
        (["shapes", str(tmp_path)], "is a directory, not a regular file"),
        (["shapes", MLP, "--config", str(tmp_path / "bad.json")], "not valid JSON"),
        (["shapes", MLP, "--config", str(tmp_path / "none.json")], "config not found"),
        (["shapes", MLP, "--line", "0"], "--line 0 is out of range (the file has"),
        (["shapes", MLP, "--line", "100000"], "--line 100000 is out of range"),
        (["shapes", MLP, "--line", "1"], "no declaration (def, structure, inductive) holds"),
    ]
    for argv, want in cases:
        assert main(argv) == 1, argv
        err = capsys.readouterr().err
        assert want in err and err.startswith("tyr shapes: ") and err.count("\n") == 1, err
        assert "Traceback" not in err


def test_a_config_that_does_not_fit_the_model_is_named(tmp_path, capsys):
    cfg = json.loads(Path("examples/gpt/config.json").read_text())
    cfg["train"]["batch"] = "twelve"
    (tmp_path / "c.json").write_text(json.dumps(cfg))
    assert main(["shapes", GPT, "--config", str(tmp_path / "c.json")]) == 1
    err = capsys.readouterr().err
    assert "'train.batch' must be an integer, got 'twelve'" in err and err.count("\n") == 1
