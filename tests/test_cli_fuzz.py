"""Every `tyr` command driven with generated arguments and config values: it succeeds, or it
fails with exit 1/2 and one `tyr <cmd>:` line (or located Lean errors); never a traceback,
never a hang."""
from __future__ import annotations

import io
import os
import re
import signal
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytyr.cli import main

LEAN_ERROR = re.compile(r"^.+?:\d+:\d+: error: ")


@pytest.fixture(scope="module")
def zoo(tmp_path_factory):
    """Paths of every kind a user may hand a command by mistake."""
    d = tmp_path_factory.mktemp("zoo")
    (d / "dir").mkdir()
    (d / "binary.lean").write_bytes(b"\x00\xff\xfe\x80 import")
    (d / "text.json").write_text('{"model": {"c": 1}}')
    (d / "empty").write_bytes(b"")
    (d / "list.json").write_text("[1, 2]")
    (d / "run").mkdir()
    (d / "run" / "run.json").write_text('{"origin": {"file": 3}, "model": "m", "values": [], '
                                        '"task": {}}')
    if hasattr(os, "mkfifo"):
        os.mkfifo(d / "fifo")
    paths = [str(d / n) for n in ("dir", "binary.lean", "text.json", "empty", "list.json",
                                  "run", "fifo", "missing.lean", "no/such/dir/x.json")]
    return paths


REPO_INPUTS = ["examples/mlp/MLP.lean", "examples/gpt/GPT.lean", "examples/mlp/config.json"]


NUMBERS = st.sampled_from(["0", "-1", "1", "2", "1e999", "-1e999", "NaN", "Infinity",
                           "9" * 30, "0.5", "true", "null", "[1]", "{}", "x", "", "1e-320"])
KEYS_LIST = [
    "train.lr", "train.batch", "train.micro_batch", "train.max_iters", "train.warmup_iters",
    "train.precision", "train.device", "train.optimizer", "train.muon.lr", "train.seed",
    "task.name", "task.seq", "task.corpus", "task.data", "task.label", "model.c.vocab",
    "model.c.n_layer", "model.c.hidden", "model.b", "model.c", "sample.top_k",
    "sample.temperature", "sample.prompt", "out", "zz", "train"]
KEYS = st.sampled_from(KEYS_LIST)


def sets(keys: st.SearchStrategy = KEYS) -> st.SearchStrategy:
    return st.lists(st.builds(lambda k, v: ["--set", f"{k}={v}"], keys, NUMBERS),
                    max_size=3).map(lambda xs: [a for x in xs for a in x])


def argv_for(zoo: list[str]) -> st.SearchStrategy:
    path = st.sampled_from(zoo + REPO_INPUTS)  # read only
    out = st.sampled_from(zoo)  # where a command may write: never the repository
    model = st.sampled_from(["mlp", "gpt", "gptLogits", "nope"])
    # bounded work when a generated config happens to be valid
    small = ["--set", "train.max_iters=1", "--set", "train.eval_iters=1",
             "--set", "sample.max_new_tokens=1", "--set", "model.c.n_layer=1", "-q"]
    return st.one_of(
        st.builds(lambda p: ["check", p], path),
        st.builds(lambda p, m, s: ["graph", p, "--model", m, *s], path, model, sets()),
        st.builds(lambda p: ["validate", p], path),
        st.builds(lambda p, m, s, o: ["train", p, "--model", m, *small, *s, "--set", f"out={o}"],
                  path, model, sets(st.sampled_from([k for k in KEYS_LIST if k != "out"])), out),
        st.builds(lambda p, m, c, o: ["train", p, "--model", m, "--config", c, *small,
                                      "--set", f"out={o}"], path, model, path, out),
        st.builds(lambda p, m, i, w, o: ["run", p, "--model", m, "--inputs", i, "--weights", w,
                                         "-o", o], path, model, path, path, out),
        st.builds(lambda r, s: ["sample", "--run", r, *s], path, sets(st.just("sample.top_k"))),
        st.builds(lambda r, s: ["chat", "--run", r, *s], path, sets(st.just("sample.top_k"))),
        st.builds(lambda r, o: ["export", "--format", "hf-gpt2", r, o], path, out),
        st.builds(lambda d, x, o: ["generate", d, "--prompt", "x", *x, "-o", o, "-q"], path,
                  st.sampled_from([[], ["--height", "8"], ["--steps", "0"], ["--latents", "x"],
                                   ["--text-layers", "a,b,c"]]), out),
        st.builds(lambda p, o, s: ["import", "nanochat", p, o, *s], path, out,
                  st.sampled_from([[], ["--step", "3"], ["--lean", "nope.lean"]])),
        st.builds(lambda p, o: ["data", "prepare", p, "--tokenizer", p, "--out", o], path, out),
        st.builds(lambda p, o: ["tokenizer", "train", p, "--out", o], path, out),
        st.builds(lambda p: ["safetensors", "inspect", p], path),
        st.builds(lambda p, o: ["safetensors", "provide", p, "--module", "m", "--out", o],
                  path, out),
        st.builds(lambda p, o: ["safetensors", "schema", p, "-o", o], path, out),
        st.builds(lambda o, x: ["data", "news", "--out", o, *x], out,
                  st.sampled_from([["--help"], ["--bogus"]])),
        st.builds(lambda p, c, n: ["shapes", p, "--config", c, "--line", n], path, path,
                  NUMBERS),
        st.builds(lambda p: ["shapes", p], path),
        st.just(["lsp", "--bogus"]),  # the server itself: tests/test_lsp_*.py
        st.lists(st.sampled_from(["train", "--model", "-q", "--set", "x", "--resume", "check"]),
                 max_size=4),
    )


# Every subcommand of the parser; `test_cli_surface` checks this is all of them.
COVERED = {"check", "graph", "validate", "train", "run", "sample", "chat", "export", "import",
           "generate",
           "data prepare", "data news", "tokenizer train", "safetensors inspect",
           "safetensors provide", "safetensors schema", "shapes", "lsp"}


class Hang(Exception):
    pass


def _alarm(*_):
    raise Hang()


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_every_command_fails_cleanly(zoo, data, capsys, monkeypatch, tmp_path):
    argv = data.draw(argv_for(zoo))
    before = {p: os.stat(p).st_mtime_ns for p in REPO_INPUTS}
    monkeypatch.setattr(sys, "stdin", io.StringIO("ROMEO:\n"))  # for `tyr chat`
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(60)
    try:
        rc = main(argv)
    except SystemExit as e:  # argparse: usage errors (2) and --help (0)
        rc = e.code
    except Hang:
        pytest.fail(f"tyr {' '.join(argv)} did not finish in 60 s")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    err = capsys.readouterr().err
    assert {p: os.stat(p).st_mtime_ns for p in REPO_INPUTS} == before, ("wrote an input", argv)
    assert rc in (0, 1, 2), (argv, rc, err)
    assert "Traceback" not in err, (argv, err)
    if rc:
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert lines, (argv, "failed without a message")
        if not all(LEAN_ERROR.match(ln) or re.match(r"\d+ errors? in \d+ file", ln)
                   for ln in lines):
            # one line; gathered problems (IR, checkpoint fit) follow it as "  - " items
            assert lines[0].startswith("tyr") and all(
                ln.startswith("  - ") for ln in lines[1:]), (argv, err)
