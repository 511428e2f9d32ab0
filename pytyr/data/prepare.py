"""`tyr data prepare`: a parquet text dataset → token shards (+ `meta.json`).

The documents are streamed row group by row group (`ParquetTextStream`), tokenized with a BOS
before each into a temporary file beside the shards; once the total is known the validation
split is decided (`ValSplit`: a fraction or a count, refused when it would leave training the
smaller part, before any shard is written), and the tokens are cut into shards of
`shard_tokens` tokens: the first tokens of the split go to `{name}_val_000000.bin`, ... and
the rest to `{name}_train_000000.bin`, ... (the FineWeb layout of modded-nanogpt; documents
run on across shard boundaries). Every shard is written atomically; `meta.json` is written
last and lists them with their SHA-256, and the SHA-256 of the tokenizer copy, and carries its
own checksum, so a directory with a `meta.json` is complete and a replaced or edited file in
it is found (`shard_lm`). A write that fails (a full disk) or an interruption removes what
this run wrote (the temporary tokens, its shards, its tokenizer copy): an error is one line
naming the file. `name` is a plain file-name prefix and `out_dir` a directory (or
nothing yet), both checked before any work. With `world > 1`, rank r prepares its strided row
groups into `{name}_r{r}_...`.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import numpy as np

from pytyr.atomic import atomic_write_text
from pytyr.data.parquet import ParquetTextStream
from pytyr.data.shards import FORMATS, MAX_VOCAB, TOKEN_DTYPE, write_shard
from pytyr.data.split import ValSplit
from pytyr.data.tokenizer import Tokenizer, encode_documents
from pytyr.digest import file_sha256, stamped
from pytyr.errors import ConfigError, DataError
from pytyr.paths import output_dir

# A shard prefix names files inside --out, nothing else: no separators, no leading dot.
PLAIN_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,99}")

_CHUNK = 1 << 24  # tokens copied from the scratch file at a time


class _ShardWriter:
    """Buffers tokens and writes full shards of `size` tokens (val first, then train)."""

    def __init__(self, out: Path, prefix: str, size: int, val_tokens: int, fmt: str):
        self.out, self.prefix, self.size, self.fmt = out, prefix, size, fmt
        self.val_left = val_tokens
        self.parts: list[np.ndarray] = []
        self.buffered = 0
        self.written: dict[str, list[dict[str, Any]]] = {"val": [], "train": []}
        self.extra: list[Path] = []

    def add(self, tokens: np.ndarray) -> None:
        self.parts.append(tokens)
        self.buffered += len(tokens)
        while self.buffered >= self._next_size():
            self._flush(self._next_size())

    def _next_size(self) -> int:
        return min(self.size, self.val_left) if self.val_left > 0 else self.size

    def _flush(self, n: int) -> None:
        flat = np.concatenate(self.parts)
        split = "val" if self.val_left > 0 else "train"
        name = f"{self.prefix}_{split}_{len(self.written[split]):06d}.bin"
        path = write_shard(self.out / name, flat[:n], self.fmt)
        self.written[split].append({"file": name, "tokens": int(n),
                                    "sha256": file_sha256(path)})
        if split == "val":
            self.val_left -= n
        rest = flat[n:]
        self.parts, self.buffered = ([rest] if len(rest) else []), len(rest)

    def close(self) -> None:
        if self.buffered:
            self._flush(self.buffered)

    def also(self, path: Path) -> None:
        """Another file this run wrote (the tokenizer's copy), removed with the shards."""
        self.extra.append(path)

    def remove(self) -> None:
        """Remove every file written so far (after a failure: none of it is a data set)."""
        for entry in (*self.written["val"], *self.written["train"]):
            (self.out / entry["file"]).unlink(missing_ok=True)
        for path in self.extra:
            path.unlink(missing_ok=True)


def _append(f: Any, tokens: np.ndarray) -> None:
    """Tokens onto the temporary file (every write of `_tokenize` comes here)."""
    tokens.astype(TOKEN_DTYPE, copy=False).tofile(f)


def _tokenize(stream: ParquetTextStream, tokenizer: Tokenizer, path: Path,
              progress: bool | None) -> tuple[int, int]:
    """Append the stream's documents, tokenized with a BOS before each, to `path` as raw
    uint16; return (tokens, documents)."""
    from tqdm import tqdm

    total = docs = 0
    hide = None if progress is None else not progress  # None: tqdm shows it on a terminal
    with open(path, "wb") as f, tqdm(total=len(stream), unit="group", desc="tokenizing",
                                     disable=hide) as bar:
        for _, texts in stream:
            tokens = encode_documents(tokenizer, texts, bos=tokenizer.bos_id is not None)
            try:
                _append(f, tokens)
            except OSError as err:  # `tofile` names no file
                raise OSError(err.errno, err.strerror, str(path)) from None
            total += len(tokens)
            docs += len(texts)
            bar.update(1)
            bar.set_postfix(docs=docs, refresh=False)
    return total, docs


def prepare_parquet(paths: Any, tokenizer: Tokenizer, out_dir: str | os.PathLike[str], *,
                    column: str = "text", shard_tokens: int = 100_000_000,
                    val_tokens: int | None = None, val_fraction: float | None = None,
                    fmt: str = "fineweb", name: str = "data",
                    rank: int = 0, world: int = 1, progress: bool | None = None,
                    tokenizer_path: str | None = None) -> dict[str, Any]:
    """Tokenize the parquet dataset at `paths` into shards in `out_dir`; return the metadata
    (also written to `out_dir/meta.json`). The validation split is `val_tokens` tokens or
    `val_fraction` of them (neither: `DEFAULT_VAL_FRACTION`). `progress=None` shows a bar on
    a terminal only."""
    if fmt not in FORMATS:
        raise ConfigError(f"--format: unknown shard format {fmt!r} (known: "
                          f"{', '.join(FORMATS)})")
    if not (isinstance(shard_tokens, int) and shard_tokens >= 1):
        raise ConfigError(f"--shard-tokens must be a positive integer, got {shard_tokens!r}")
    split = ValSplit(val_fraction, val_tokens)
    if not (isinstance(name, str) and PLAIN_NAME.fullmatch(name)):
        raise ConfigError(f"--name {name!r} must be a plain file-name prefix (letters, digits, "
                          f"'_', '-', '.'; not starting with '.'), so that every shard stays "
                          f"inside --out")
    out = output_dir(out_dir, "shard directory (--out)")
    if tokenizer.vocab_size > MAX_VOCAB:
        raise DataError(f"{tokenizer.source}: vocab_size {tokenizer.vocab_size} does not fit "
                        f"the uint16 ids of token shards (at most {MAX_VOCAB})")
    stream = ParquetTextStream(paths, column, rank=rank, world=world)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ConfigError(f"{out}: cannot make the shard directory (--out): "
                          f"{err.strerror or err}") from None
    prefix = name if world == 1 else f"{name}_r{rank}"
    scratch = out / f".{prefix}.tokens.tmp"  # every token, until the split is known
    writer = _ShardWriter(out, prefix, shard_tokens, 0, fmt)
    source = tokenizer_path or tokenizer.source
    try:
        total, docs = _tokenize(stream, tokenizer, scratch, progress)
        if total == 0:
            raise DataError(f"{', '.join(map(str, stream.files))}: empty dataset: no tokens "
                            f"(every '{column}' value of this rank is empty or null)")
        n_val = split.tokens(total)  # a refusal leaves a data set already there complete
        (out / "meta.json").unlink(missing_ok=True)  # the directory is incomplete until the end
        writer.val_left = n_val
        tokens = np.memmap(scratch, dtype=TOKEN_DTYPE, mode="r", shape=(total,))
        for start in range(0, total, _CHUNK):
            writer.add(np.asarray(tokens[start:start + _CHUNK]))
        writer.close()
        del tokens
        # the data set is self-contained: sampling decodes with this copy
        writer.also(tokenizer.save(out / "tokenizer.json"))
        meta = _meta(total, n_val, docs, stream, tokenizer, source, writer, out,
                     column=column, fmt=fmt, rank=rank, world=world)
        atomic_write_text(out / "meta.json", json.dumps(meta, indent=1))
    except OSError as err:  # a full disk: named, and nothing of this run left
        writer.remove()
        raise DataError(f"{err.filename or out}: cannot write the data set: "
                        f"{err.strerror or err}; the files this run wrote were removed") from None
    except BaseException:
        writer.remove()
        raise
    finally:
        scratch.unlink(missing_ok=True)
    return meta


def _meta(total: int, n_val: int, docs: int, stream: ParquetTextStream, tokenizer: Tokenizer,
          source: str, writer: _ShardWriter, out: Path, **options: Any) -> dict[str, Any]:
    """meta.json (module doc), with its checksum."""
    column, fmt, rank, world = (options[k] for k in ("column", "fmt", "rank", "world"))
    meta = {"format": fmt, "tokens": total, "val_tokens": n_val, "train_tokens": total - n_val,
            "documents": docs, "null_rows": stream.null_rows,
            "vocab_size": tokenizer.vocab_size, "bos_id": tokenizer.bos_id,
            "tokenizer": source, "tokenizer_sha256": file_sha256(out / "tokenizer.json"),
            "column": column, "rank": rank, "world": world,
            "sources": [str(f) for f in stream.files], **writer.written}
    return stamped(meta)
