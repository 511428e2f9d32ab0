"""`tyr data prepare`: a parquet text dataset → token shards (+ `meta.json`).

The documents are streamed row group by row group (`ParquetTextStream`), tokenized with a BOS
before each into a temporary file; once the total is known the validation split is decided
(`ValSplit`: a fraction or a count, refused when it would leave training the smaller part,
before any shard is written), and the tokens are cut into shards of `shard_tokens` tokens: the
first tokens of the split go to `{name}_val_000000.bin`, ... and the rest to
`{name}_train_000000.bin`, ... (the FineWeb layout of modded-nanogpt; documents run on across
shard boundaries). `meta.json` lists the shards with their SHA-256, and the SHA-256 of the
tokenizer copy, and carries its own checksum, so a directory with a `meta.json` is complete and
a replaced or edited file in it is found (`shard_lm`).

The whole data set is written first in `.{name}.prepare/` inside `out_dir` and then renamed
into place, `meta.json` last: a write that fails (a full disk) or an interruption removes
that directory and leaves a data set already in `out_dir` complete and unchanged (the error
is one line naming the file); only the few renames at the end, during which a Ctrl-C waits,
leave the old data set incomplete if the process is killed there. `name` is a plain file-name
prefix and `out_dir` a directory (or nothing yet), both checked before any work. With
`world > 1`, rank r prepares its strided row groups into `{name}_r{r}_...`, a data set of its
own in an `out_dir` of its own.
"""
from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from pytyr.atomic import atomic_write_text, fsync_dir
from pytyr.data.parquet import ParquetTextStream
from pytyr.data.shards import FORMATS, MAX_VOCAB, TOKEN_DTYPE, write_shard
from pytyr.data.split import ValSplit
from pytyr.data.tokenizer import Tokenizer, encode_documents
from pytyr.digest import file_sha256, stamped
from pytyr.errors import ConfigError, DataError
from pytyr.paths import output_dir
from pytyr.process import StopRequest

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

    def files(self) -> list[str]:
        """The shard files written, val first."""
        return [e["file"] for e in (*self.written["val"], *self.written["train"])]


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
    _refuse_another_rank(out, rank, world)
    prefix = name if world == 1 else f"{name}_r{rank}"
    # The new data set is written whole in a directory of its own inside --out and then
    # renamed into place: until then a data set already there stays complete and unchanged.
    stage = out / f".{prefix}.prepare"
    shutil.rmtree(stage, ignore_errors=True)  # left by a run that was killed
    writer = _ShardWriter(stage, prefix, shard_tokens, 0, fmt)
    source = tokenizer_path or tokenizer.source
    try:
        stage.mkdir()
        scratch = stage / "tokens.tmp"  # every token, until the split is known
        total, docs = _tokenize(stream, tokenizer, scratch, progress)
        if total == 0:
            raise DataError(f"{', '.join(map(str, stream.files))}: empty dataset: no tokens "
                            f"(every '{column}' value of this rank is empty or null)")
        n_val = writer.val_left = split.tokens(total)  # a refusal changes nothing
        tokens = np.memmap(scratch, dtype=TOKEN_DTYPE, mode="r", shape=(total,))
        for start in range(0, total, _CHUNK):
            writer.add(np.asarray(tokens[start:start + _CHUNK]))
        writer.close()
        del tokens
        scratch.unlink()
        tokenizer.save(stage / "tokenizer.json")  # self-contained: sampling decodes with it
        meta = _meta(total, n_val, docs, stream, tokenizer, source,
                     writer, stage, column=column, fmt=fmt, rank=rank, world=world)
        atomic_write_text(stage / "meta.json", json.dumps(meta, indent=1))
        _refuse_another_rank(out, rank, world)  # one that finished meanwhile
        with StopRequest():  # a Ctrl-C waits for these few renames
            _publish(stage, out, prefix, writer.files())
    except OSError as err:  # a full disk: named, and nothing of this run left
        raise DataError(f"{err.filename or out}: cannot write the data set: "
                        f"{err.strerror or err}; the files this run wrote were removed") from None
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return meta


def _publish(stage: Path, out: Path, prefix: str, files: list[str]) -> None:
    """Move the data set written in `stage` into `out`: the old `meta.json` goes first (the
    old data set is incomplete from here), the new one's last; the old data set's shards of
    this prefix that the new one does not overwrite are removed."""
    old = {n for n in _listed_shards(out / "meta.json")
           if re.fullmatch(re.escape(prefix) + r"_(val|train)_\d{6}\.bin", n)}
    (out / "meta.json").unlink(missing_ok=True)
    for name in (*files, "tokenizer.json", "meta.json"):
        os.replace(stage / name, out / name)
    for name in old.difference(files):
        (out / name).unlink(missing_ok=True)
    fsync_dir(out)


def _refuse_another_rank(out: Path, rank: int, world: int) -> None:
    """A data set has one `meta.json`: ranks preparing together each need their own `--out`,
    or the last to finish would hide the others' shards."""
    if world == 1:
        return
    try:
        meta = json.loads((out / "meta.json").read_text(encoding="utf-8"))
        theirs = (meta["rank"], meta["world"]) if isinstance(meta, dict) else None
    except (OSError, ValueError, KeyError):
        return
    if theirs is not None and theirs[1] != 1 and theirs[0] != rank:
        raise ConfigError(f"{out}: holds the data set of rank {theirs[0]} of {theirs[1]}; each "
                          f"rank prepares into its own --out (e.g. {out / f'rank{rank}'})")


def _listed_shards(meta_path: Path) -> set[str]:
    """The shard files a data set's `meta.json` lists (none where it is absent or unreadable):
    plain names inside the directory only."""
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        entries = [*meta.get("train", []), *meta.get("val", [])]
        names = {e["file"] for e in entries if isinstance(e, dict)}
    except (OSError, ValueError, AttributeError, TypeError, KeyError):
        return set()
    return {n for n in names if isinstance(n, str) and PLAIN_NAME.fullmatch(n)}


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
