"""Tokenizers with one interface: byte-level BPE (the `tokenizers` library) and characters.

Both have `vocab_size`, `bos_id` (None when no BOS is declared), `special_tokens` (name → id),
`encode(text) -> list[int]`, `encode_batch(texts) -> list[list[int]]`,
`decode(ids) -> str` and `save(path)`. `load_tokenizer(path)` reads either back.

* `BPETokenizer`: trained locally by `train_bpe` (byte-level pre-tokenizer and decoder, so any
  text encodes without unknown tokens); saved as the library's `tokenizer.json`. The special
  tokens (BOS first, `<|bos|>` by default) are added tokens of that file: they survive the
  round trip and are never split or merged.
* `CharTokenizer`: one id per character (the GPT example's Shakespeare vocabulary); a BOS,
  if declared, takes the id after the characters. Saved as JSON `{"type": "tyr.char", ...}`.

`encode_documents` turns a list of documents into one token array with a BOS before each,
the layout that BOS-aligned batches (`pytyr.data.iterators`) expect.
"""
from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np

from pytyr.atomic import atomic_write_text
from pytyr.errors import DataError
from pytyr.paths import read_text

BOS = "<|bos|>"
CHAR_TYPE = "tyr.char"
MAX_BPE_VOCAB = 1 << 22  # far beyond any tokenizer in use; ids stay well inside 32 bits
MAX_MIN_FREQUENCY = (1 << 63) - 1


def _not_unicode(texts: Sequence[str], source: str) -> DataError | None:
    """A DataError naming the first text that holds a lone surrogate (undecodable input as
    Python carries it), which `tokenizers` cannot take; None when every text is fine."""
    for i, text in enumerate(texts):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as err:
            which = f"text {i}" if len(texts) > 1 else "the text"
            return DataError(f"{source}: {which} is not valid Unicode (a lone surrogate "
                             f"{text[err.start]!r} at character {err.start}: bytes that were "
                             f"not UTF-8?)")
    return None


def _check_ids(ids: Any, vocab_size: int, where: str) -> list[int]:
    flat = np.asarray(ids.tolist() if hasattr(ids, "tolist") else ids, dtype=np.int64).reshape(-1)
    bad = np.flatnonzero((flat < 0) | (flat >= vocab_size))
    if bad.size:
        raise DataError(f"{where}: token id {int(flat[bad[0]])} at position {int(bad[0])} is "
                        f"beyond the vocabulary (vocab_size {vocab_size})")
    return flat.tolist()


class BPETokenizer:
    """A byte-level BPE `tokenizers.Tokenizer` with the declared BOS looked up by name."""

    def __init__(self, tokenizer: Any, bos: str | None = BOS, source: str = "<BPE tokenizer>"):
        self.tokenizer, self.source = tokenizer, source
        added = tokenizer.get_added_tokens_decoder()  # id -> AddedToken
        self.special_tokens = {t.content: int(i) for i, t in sorted(added.items()) if t.special}
        self.bos_id = self.special_tokens.get(bos) if bos is not None else None
        self.vocab_size = tokenizer.get_vocab_size(with_added_tokens=True)

    def encode(self, text: str) -> list[int]:
        try:
            return self.tokenizer.encode(text, add_special_tokens=False).ids
        except TypeError:
            error = _not_unicode([text], self.source)
            if error is None:
                raise
            raise error from None

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        # the fast variant skips the offsets, which ids do not need
        try:
            return [e.ids for e in self.tokenizer.encode_batch_fast(list(texts),
                                                                    add_special_tokens=False)]
        except TypeError:
            error = _not_unicode(list(texts), self.source)
            if error is None:
                raise
            raise error from None

    def decode(self, ids: Any, skip_special: bool = False) -> str:
        return self.tokenizer.decode(_check_ids(ids, self.vocab_size, self.source),
                                     skip_special_tokens=skip_special)

    def save(self, path: str | os.PathLike[str]) -> Path:
        path = Path(path)
        atomic_write_text(path, self.tokenizer.to_str(pretty=True))
        self.source = str(path)
        return path


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 30 else f"{text[:12]}...{text[-6:]} ({len(text)} digits)"


def train_bpe(texts: Iterable[str], vocab_size: int, *, special_tokens: Sequence[str] = (BOS,),
              min_frequency: int = 2) -> BPETokenizer:
    """Train a byte-level BPE on `texts` (any iterable of strings, streamed).

    `vocab_size` counts the 256 bytes, the merges and the special tokens; a small corpus may
    end with fewer merges. The first special token is the BOS."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    specials = list(special_tokens)
    if not (isinstance(vocab_size, int) and 256 + len(specials) <= vocab_size <= MAX_BPE_VOCAB):
        raise DataError(f"train_bpe: vocab_size must be an integer from {256 + len(specials)} "
                        f"(256 bytes + {len(specials)} special tokens) to {MAX_BPE_VOCAB:,}, "
                        f"got {_short(vocab_size)}")
    if not (isinstance(min_frequency, int) and 0 <= min_frequency <= MAX_MIN_FREQUENCY):
        raise DataError(f"train_bpe: min_frequency must be an integer from 0 to 2^63 - 1, got "
                        f"{_short(min_frequency)}")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency,
                                  special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    seen = 0

    def counted() -> Iterable[str]:
        nonlocal seen
        for t in texts:
            seen += 1
            yield t

    tok.train_from_iterator(counted(), trainer=trainer)
    if seen == 0:
        raise DataError("train_bpe: empty corpus (no texts to train on)")
    return BPETokenizer(tok, specials[0] if specials else None)


class CharTokenizer:
    """One id per character: `itos[i]` is the character of id i; a declared BOS is the
    last id. `encode` of a character outside the vocabulary is a DataError."""

    def __init__(self, itos: Sequence[str], bos: str | None = None, source: str = "<chars>"):
        self.itos = list(itos)
        if any(not isinstance(c, str) or len(c) != 1 for c in self.itos):
            raise DataError(f"{source}: a character vocabulary must hold single characters")
        if len(set(self.itos)) != len(self.itos):
            raise DataError(f"{source}: the character vocabulary has duplicates")
        self.stoi = {c: i for i, c in enumerate(self.itos)}
        self.bos, self.source = bos, source
        self.bos_id = len(self.itos) if bos is not None else None
        self.special_tokens = {bos: self.bos_id} if bos is not None else {}
        self.vocab_size = len(self.itos) + len(self.special_tokens)

    @classmethod
    def from_text(cls, text: str, bos: str | None = None) -> CharTokenizer:
        """The sorted characters of `text` (as the GPT example builds its vocabulary)."""
        if not text:
            raise DataError("CharTokenizer.from_text: empty corpus")
        return cls(sorted(set(text)), bos)

    @classmethod
    def from_shakespeare(cls, data: Any) -> CharTokenizer:
        """The vocabulary of a prepared `pytyr.data.shakespeare.ShakespeareData` (same ids)."""
        return cls(data.itos, None, source=str(data.meta_path))

    def encode(self, text: str) -> list[int]:
        try:
            return [self.stoi[c] for c in text]
        except KeyError as e:
            raise DataError(f"{self.source}: character {e.args[0]!r} is not in the vocabulary "
                            f"({len(self.itos)} characters)") from None

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return [self.encode(t) for t in texts]

    def decode(self, ids: Any, skip_special: bool = False) -> str:
        out = []
        for i in _check_ids(ids, self.vocab_size, self.source):
            if i < len(self.itos):
                out.append(self.itos[i])
            elif not skip_special:
                out.append(self.bos)
        return "".join(out)

    def save(self, path: str | os.PathLike[str]) -> Path:
        path = Path(path)
        atomic_write_text(path, json.dumps({"type": CHAR_TYPE, "itos": self.itos,
                                            "bos": self.bos}, indent=1))
        self.source = str(path)
        return path


Tokenizer = BPETokenizer | CharTokenizer


def load_tokenizer(path: str | os.PathLike[str], bos: str | None = BOS) -> Tokenizer:
    """A tokenizer saved by `save`: a character tokenizer's JSON or a `tokenizer.json`.
    `bos` names the BPE's BOS token, which must be one of its special tokens (None: the
    documents get no BOS)."""
    path = Path(path)
    text = read_text(path, "tokenizer")  # the kind of path first: a FIFO must not block
    try:
        doc = json.loads(text)
    except RecursionError:
        raise DataError(f"{path}: the tokenizer JSON is nested too deeply") from None
    except json.JSONDecodeError as err:
        raise DataError(f"{path}: the tokenizer is not valid JSON ({err.msg} at line "
                        f"{err.lineno})") from None
    if isinstance(doc, dict) and doc.get("type") == CHAR_TYPE:
        if not isinstance(doc.get("itos"), list):
            raise DataError(f"{path}: a character tokenizer needs an 'itos' list")
        return CharTokenizer(doc["itos"], doc.get("bos"), source=str(path))
    from tokenizers import Tokenizer as HFTokenizer

    try:
        tok = HFTokenizer.from_str(text)
    except Exception as err:  # the library raises plain Exception with its parser's message
        raise DataError(f"{path}: not a tokenizers `tokenizer.json` ({err})") from None
    out = BPETokenizer(tok, bos, source=str(path))
    if bos is not None and out.bos_id is None:  # documents would run on with no separator
        known = ", ".join(out.special_tokens) or "none"
        raise DataError(f"{path}: the tokenizer has no special token {bos!r} to mark each "
                        f"document's start (its special tokens: {known}); name its BOS with "
                        f"--bos, or say --no-bos")
    return out


def token_byte_lengths(tokenizer: Tokenizer) -> np.ndarray:
    """int64 [vocab_size]: the UTF-8 bytes each token stands for, 0 for special tokens
    (nanochat's `token_bytes`, the denominator of bits per byte). A byte-level BPE token is
    a string over the 256-character byte alphabet, one character per byte; other tokens are
    measured by decoding them alone."""
    special = set(tokenizer.special_tokens.values())
    out = np.zeros(tokenizer.vocab_size, dtype=np.int64)
    if isinstance(tokenizer, CharTokenizer):
        for i, ch in enumerate(tokenizer.itos):
            out[i] = 0 if i in special else len(ch.encode("utf-8"))
        return out
    from tokenizers import pre_tokenizers

    alphabet = set(pre_tokenizers.ByteLevel.alphabet())
    hf = tokenizer.tokenizer
    for i in range(tokenizer.vocab_size):
        if i in special:
            continue
        piece = hf.id_to_token(i) or ""
        out[i] = (len(piece) if set(piece) <= alphabet
                  else len(hf.decode([i], skip_special_tokens=False).encode("utf-8")))
    return out


def encode_documents(tokenizer: Tokenizer, texts: Sequence[str], *, bos: bool = True,
                     dtype: Any = np.uint16) -> np.ndarray:
    """The documents as one token array [sum of lengths (+1 BOS each)], BOS first per document.

    `dtype` uint16 (the shard format) refuses a vocabulary larger than 65,536."""
    if bos and tokenizer.bos_id is None:
        raise DataError(f"{tokenizer.source}: the tokenizer declares no BOS token, so documents "
                        f"cannot be BOS-delimited (train it with a BOS special token)")
    if np.iinfo(dtype).max < tokenizer.vocab_size - 1:
        raise DataError(f"{tokenizer.source}: vocab_size {tokenizer.vocab_size} does not fit "
                        f"{np.dtype(dtype).name} token ids")
    encoded = tokenizer.encode_batch(texts)
    n = sum(map(len, encoded)) + (len(encoded) if bos else 0)
    head = [tokenizer.bos_id] if bos else []
    # one flat pass in C (chain), no per-document arrays
    pieces = chain.from_iterable(x for e in encoded for x in (head, e))
    return np.fromiter(pieces, dtype=dtype, count=n)
