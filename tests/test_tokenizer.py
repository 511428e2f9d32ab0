"""Tokenizers: byte-level BPE trained locally, the char tokenizer, one interface, clear errors."""
from __future__ import annotations

import json

import numpy as np
import pytest

from pytyr.data.tokenizer import (
    BOS,
    BPETokenizer,
    CharTokenizer,
    encode_documents,
    load_tokenizer,
    train_bpe,
)
from pytyr.errors import ConfigError, DataError

CORPUS = ["the quick brown fox jumps over the lazy dog", "a stitch in time saves nine",
          "to be or not to be, that is the question"] * 20


@pytest.fixture(scope="module")
def bpe() -> BPETokenizer:
    return train_bpe(CORPUS, 300)


def test_bpe_trains_round_trips_and_declares_bos(bpe, tmp_path):
    assert bpe.bos_id == 0 and bpe.special_tokens == {BOS: 0}
    assert 256 < bpe.vocab_size <= 300
    text = "the quick fox — ünïcödé 🦊"  # bytes never seen in training still encode
    ids = bpe.encode(text)
    assert bpe.decode(ids) == text and len(ids) < len(text.encode())
    assert bpe.encode_batch([text, "to be"]) == [ids, bpe.encode("to be")]
    path = bpe.save(tmp_path / "tokenizer.json")
    again = load_tokenizer(path)
    assert isinstance(again, BPETokenizer) and again.bos_id == 0
    assert again.encode(text) == ids and again.vocab_size == bpe.vocab_size
    assert json.loads(path.read_text())["added_tokens"][0]["content"] == BOS


def test_bpe_training_is_deterministic(bpe):
    assert train_bpe(CORPUS, 300).encode("the question of time") == \
        bpe.encode("the question of time")


def test_char_tokenizer_same_interface(tmp_path):
    tok = CharTokenizer.from_text("hello world", bos=BOS)
    assert tok.itos == sorted(set("hello world")) and tok.bos_id == len(tok.itos)
    assert tok.vocab_size == len(tok.itos) + 1 and tok.special_tokens == {BOS: tok.bos_id}
    ids = tok.encode("hello")
    assert tok.decode(ids) == "hello" and tok.encode_batch(["lo"]) == [tok.encode("lo")]
    assert tok.decode([tok.bos_id, *ids]) == BOS + "hello"
    assert tok.decode([tok.bos_id, *ids], skip_special=True) == "hello"
    again = load_tokenizer(tok.save(tmp_path / "chars.json"))
    assert isinstance(again, CharTokenizer)
    assert again.itos == tok.itos and again.bos_id == tok.bos_id


def test_char_tokenizer_wraps_the_shakespeare_vocabulary():
    class Data:  # the fields of ShakespeareData it reads
        itos = ["\n", " ", "A", "B"]
        meta_path = "data/cache/shakespeare_char/meta.json"
    tok = CharTokenizer.from_shakespeare(Data())
    assert tok.encode("AB \n") == [2, 3, 1, 0] and tok.bos_id is None


def test_encode_documents_puts_bos_first(bpe):
    docs = ["to be", "", "the fox"]
    out = encode_documents(bpe, docs)
    assert out.dtype == np.uint16
    expected = [t for d in docs for t in [bpe.bos_id, *bpe.encode(d)]]
    assert out.tolist() == expected
    plain = [t for d in docs for t in bpe.encode(d)]
    assert encode_documents(bpe, docs, bos=False).tolist() == plain


def test_errors(bpe, tmp_path):
    with pytest.raises(DataError, match="token id 300 at position 1 is beyond the vocabulary"):
        bpe.decode([1, 300])
    chars = CharTokenizer.from_text("ab")
    with pytest.raises(DataError, match="character 'z' is not in the vocabulary"):
        chars.encode("abz")
    with pytest.raises(DataError, match="declares no BOS"):
        encode_documents(chars, ["ab"])
    with pytest.raises(ConfigError, match="none.json: tokenizer not found"):
        load_tokenizer(tmp_path / "none.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(DataError, match=f"{bad}: the tokenizer is not valid JSON"):
        load_tokenizer(bad)
    bad.write_text('{"model": 3}')
    with pytest.raises(DataError, match=f"{bad}: not a tokenizers"):
        load_tokenizer(bad)
    with pytest.raises(DataError, match="vocab_size must be an integer from 257"):
        train_bpe(CORPUS, 100)
    with pytest.raises(DataError, match=r"vocab_size .* to 4,194,304, got 1000"):
        train_bpe(CORPUS, 10**23)
    with pytest.raises(DataError, match="min_frequency must be an integer from 0"):
        train_bpe(CORPUS, 300, min_frequency=-1)
    with pytest.raises(DataError, match=r"is not valid Unicode \(a lone surrogate"):
        bpe.encode("ab\udcff")
    with pytest.raises(DataError, match="text 1 is not valid Unicode"):
        bpe.encode_batch(["ab", "c\udcff"])
    with pytest.raises(DataError, match="empty corpus"):
        train_bpe([], 300)
    big = CharTokenizer([chr(0x4E00 + i) for i in range(70000)])
    with pytest.raises(DataError, match="does not fit uint16"):
        encode_documents(big, ["x"], bos=False)
