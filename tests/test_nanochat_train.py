"""NanoChat.lean (today's layout, with sliding windows) trained by `tyr train` on BPE token
shards with the default config's optimizer (today's Muon): bits per byte, the warmdown
schedule, gradient accumulation, cached sampling; under torchrun (2 gloo processes)
with DDP and with FSDP2 it follows the single process with the same global batch, and a
resumed FSDP run continues exactly; `tyr chat` talks to the trained run."""
from __future__ import annotations

import io
import json
import math
import random
import sys
from pathlib import Path

import pytest
import torch

from pytyr.cli import main
from pytyr.safetensors import load_file
from torchrun_runs import history, losses, run_two_processes, torchrun_cli

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not torch.distributed.is_available(),
                                 reason="this torch build has no torch.distributed")]

ROOT = Path(__file__).resolve().parents[1]
LEAN = "examples/nanochat/NanoChat.lean"
WORDS = ("the of and to a in that is was he for it with as his on be at by had not are but "
         "from or have an they which one you were her all she there would their we him been "
         "has when who will more no if out so said what up its about into than them can only "
         "other new some could time these two may then do first any my now such like our over "
         "man me even most made after also did many before must through back years where much "
         "your way well down should because each just those people mr how too little state "
         "good very make world still own see men work long get here between both life "
         "being").split()


@pytest.fixture(scope="module")
def shards(tmp_path_factory) -> tuple[Path, int]:
    """A tiny BPE data set: 300 seeded documents of words, 2,000 val tokens."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pytyr.data.prepare import prepare_parquet
    from pytyr.data.tokenizer import train_bpe

    root = tmp_path_factory.mktemp("nanochat-data")
    rng = random.Random(0)
    docs = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 120))).capitalize() + "."
            for _ in range(300)]
    pq.write_table(pa.table({"text": docs}), root / "docs.parquet")
    tok = train_bpe(docs, 320)
    meta = prepare_parquet(root / "docs.parquet", tok, root / "shards", val_tokens=2000,
                           progress=False)
    return root / "shards", meta["vocab_size"]


def _args(out: Path, shards: tuple[Path, int], *extra: str) -> list[str]:
    data, vocab = shards
    sets = {"model.c.vocab": vocab, "model.c.block": 16, "model.c.depth": 2,
            "model.c.aspect_ratio": 16, "model.c.head_dim": 16, "model.c.n_kv_head": 1,
            "model.c.window": 5, "train.warmup_iters": 0,
            "task.data": data, "task.seq": 16, "train.batch": 8, "train.micro_batch": 2,
            "train.lr_decay_iters": 6, "train.warmdown_iters": 4, "train.eval_interval": 3,
            "train.eval_iters": 1, "train.checkpoint_interval": 3, "train.device": "cpu",
            "sample.max_new_tokens": 12, "sample.prompt": "the man", "out": out}
    flat = [a for k, v in sets.items() for a in ("--set", f"{k}={v}")]
    return ["train", LEAN, "--model", "nanochat", *flat, "-q", *extra]


def _torchrun(out: Path, shards, *extra: str) -> str:
    return run_two_processes(
        torchrun_cli(*_args(out, shards, "--set", "sample.max_new_tokens=0", *extra)), timeout=180)


@pytest.fixture(scope="module")
def one(tmp_path_factory, shards) -> Path:
    out = tmp_path_factory.mktemp("one") / "run"
    assert main(_args(out, shards, "--set", "train.max_iters=6")) == 0
    return out


def test_one_process_learns_in_bits_per_byte_and_samples_cached(one):
    h = history(one)
    first, last = h["evals"][0], h["evals"][-1]
    assert {"val", "val_bpb", "train", "train_bpb"} <= set(last)
    assert "val_nats" not in last and "val_bytes" not in last
    assert last["val_bpb"] < first["val_bpb"]
    assert 0 < last["val_bpb"] < last["val"] / math.log(2)  # more than one byte per token
    lrs = [s["lr"] for s in h["steps"]]  # 2 steps at the peak, then the linear warmdown
    assert lrs[:3] == [1.0, 1.0, 1.0] and lrs[3] < 1.0 and lrs[-1] < lrs[-2]
    run = json.loads((one / "run.json").read_text())
    assert run["sample"]["step_model"] == "nanochatStep"
    assert (one / "sample.txt").read_text().startswith("the man")


def test_chat_streams_a_reply_per_line_over_the_run(one, monkeypatch, capsys):
    from pytyr.pipeline import LeanModels
    from pytyr.train.tasks.lm.chat import open_chat

    session = open_chat(LeanModels(ROOT / LEAN), one, {"max_new_tokens": 6, "temperature": 0.0})
    want = "".join("".join(session.reply(line)) + "\n" for line in ("the man\n", "said\n"))
    monkeypatch.setattr(sys, "stdin", io.StringIO("the man\n\nsaid\n"))
    assert main(["chat", "--run", str(one), "--max-new-tokens", "6", "--temperature", "0"]) == 0
    assert capsys.readouterr().out == want and want.strip()


def test_chat_refuses_what_it_cannot_talk_to(one, tmp_path, capsys):
    from pytyr.digest import stamped

    run = json.loads((one / "run.json").read_text())  # a run record of another task, whole
    (tmp_path / "run.json").write_text(json.dumps(stamped({**run, "task": {
        "name": "classification"}})))
    assert main(["chat", "--run", str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("tyr chat: ") and "'classification' is not a language model" in err
    for args, message in ((["--stop", ""], "--stop must not be empty"),
                          (["--top-k", "0"], "sample.top_k"),
                          (["--set", "sample.step_model=nanochat"], "step model 'nanochat'")):
        assert main(["chat", "--run", str(one), *args]) == 1
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and message in err, err


@pytest.fixture(scope="module")
def runs(tmp_path_factory, shards) -> dict[str, tuple[Path, str]]:
    """6 steps on 2 processes, with DDP and with FSDP2: (run directory, stdout)."""
    out = {}
    for mode in ("ddp", "fsdp"):
        run = tmp_path_factory.mktemp(mode) / "run"
        out[mode] = run, _torchrun(run, shards, "--set", "train.max_iters=6",
                                   "--set", f"train.data_parallel={mode}")
    return out


@pytest.mark.parametrize("mode", ["ddp", "fsdp"])
def test_two_processes_follow_one_with_the_global_batch(runs, one, mode):
    two, out = runs[mode]
    assert "2 processes, batch 2 each; 2 micro-batches per step" in out
    assert losses(two) == pytest.approx(losses(one), abs=1e-4)
    a, b = (load_file(r / "ckpt" / "model.safetensors") for r in (one, two))
    assert a.keys() == b.keys()  # whole tensors, also from the sharded run
    # At depth 2 the backout subtracts the last layer's own output, which the final norm makes
    # scale-free: backout_lambda's gradient is rounding noise, which AdamW's normalisation
    # magnifies to steps of its rate; every other weight agrees to float rounding.
    assert max(float((a[k] - b[k]).abs().max()) for k in a if k != "backout_lambda") < 1e-4


def test_a_resumed_fsdp_run_continues_exactly(tmp_path, shards, runs):
    full, part = runs["fsdp"][0], tmp_path / "part"
    fsdp = ("--set", "train.data_parallel=fsdp")
    _torchrun(part, shards, *fsdp, "--set", "train.max_iters=3")
    _torchrun(part, shards, *fsdp, "--set", "train.max_iters=6", "--resume")
    assert losses(part) == losses(full) and history(part)["evals"] == history(full)["evals"]
    a, b = (load_file(r / "ckpt" / "model.safetensors") for r in (full, part))
    assert all(torch.equal(a[k], b[k]) for k in a)
