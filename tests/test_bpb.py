"""Bits per byte: the bytes each token stands for (byte-level BPE and characters), and the
`bpb_lm` task's metric against a direct computation."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from pytyr.data.tokenizer import CharTokenizer, token_byte_lengths, train_bpe
from pytyr.train.task import TaskContext
from pytyr.train.tasks.lm.bpb_lm import BitsPerByteLM
from pytyr.train.tasks.lm.shard_lm import ShardLMOptions

CORPUS = ["Grüße aus Köln — naïve café, 東京 and “quotes”.", "plain ascii text " * 20,
          "emoji 🙂 and tabs\tand\nnewlines"]


@pytest.fixture(scope="module")
def bpe():
    return train_bpe(CORPUS * 5, 300)


@settings(max_examples=60, deadline=None)
@given(text=st.text(max_size=60))
def test_bpe_tokens_add_up_to_the_utf8_bytes(bpe, text):
    nbytes = token_byte_lengths(bpe)
    assert sum(int(nbytes[i]) for i in bpe.encode(text)) == len(text.encode("utf-8"))


def test_special_tokens_count_no_bytes(bpe):
    nbytes = token_byte_lengths(bpe)
    assert nbytes[bpe.bos_id] == 0 and nbytes.shape == (bpe.vocab_size,)
    assert (nbytes[[i for i in range(bpe.vocab_size) if i != bpe.bos_id]] >= 1).all()


def test_characters_count_their_utf8_bytes():
    tok = CharTokenizer(["a", "é", "東", "🙂"], bos="<|bos|>")
    assert token_byte_lengths(tok).tolist() == [1, 2, 3, 4, 0]


def test_the_task_reports_nats_over_bytes_without_the_bos(bpe):
    task = BitsPerByteLM(ShardLMOptions(data="unused", seq=4), TaskContext(2, 0))
    task.token_bytes = torch.from_numpy(token_byte_lengths(bpe))
    gen = torch.Generator().manual_seed(0)
    targets = torch.tensor([[bpe.bos_id, 5, 260, 7], [9, bpe.bos_id, 100, 299]])
    logits = torch.randn(2, 4, bpe.vocab_size, generator=gen)
    loss = F.cross_entropy(logits.reshape(8, -1), targets.reshape(8))
    m = task.eval_metrics({"idx": targets, "targets": targets}, (logits, loss))
    keep = targets.reshape(-1) != bpe.bos_id
    nats = F.cross_entropy(logits.reshape(8, -1), targets.reshape(8), reduction="none")[keep]
    nbytes = sum(int(task.token_bytes[i]) for i in targets.reshape(-1)[keep])
    assert m["nats"] == pytest.approx(float(nats.sum()), rel=1e-6)
    assert m["bytes"] == nbytes and m["loss"] == pytest.approx(float(loss))
    # the engine averages over batches and ranks; the ratio of the means is the bpb
    out = task.summarize_metrics({"val": 1.0, "val_nats": 6.0, "val_bytes": 4.0,
                                  "train": 2.0, "train_nats": 3.0, "train_bytes": 3.0})
    assert out == {"val": 1.0, "val_bpb": pytest.approx(6 / (4 * math.log(2))),
                   "train": 2.0, "train_bpb": pytest.approx(1 / math.log(2))}
