"""Parquet text datasets: streamed by row group, rank-strided, tokenized on the fly, resumable."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pytyr.data.parquet import ParquetTextStream, parquet_files
from pytyr.data.tokenizer import CharTokenizer
from pytyr.errors import DataError

ALPHABET = "abcdefghij "


def docs(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    return ["".join(rng.choice(list(ALPHABET), size=int(rng.integers(3, 40)))) for _ in range(n)]


def write_dataset(root, files=3, rows=22, group=5) -> list[str]:
    """`files` parquet files of `rows` documents each in row groups of `group` rows."""
    root.mkdir(parents=True, exist_ok=True)
    everything = []
    for i in range(files):
        texts = docs(rows, i)
        everything.extend(texts)
        table = pa.table({"id": list(range(rows)), "text": texts})
        pq.write_table(table, root / f"part-{i:03d}.parquet", row_group_size=group)
    return everything


@pytest.fixture
def dataset(tmp_path):
    texts = write_dataset(tmp_path / "ds")
    return tmp_path / "ds", texts


TOK = CharTokenizer(sorted(ALPHABET), bos="<|bos|>")


def test_stream_reads_every_document_in_order_by_row_group(dataset):
    root, texts = dataset
    stream = ParquetTextStream(root)
    assert pq.ParquetFile(parquet_files(root)[0]).metadata.num_row_groups == 5  # several groups
    got = [t for _, group in stream for t in group]
    assert got == texts and len(stream) == 15 and stream.total_rows == 66


def test_ranks_are_disjoint_deterministic_and_complete(dataset):
    root, texts = dataset
    per_rank = [[t for _, g in ParquetTextStream(root, rank=r, world=4) for t in g]
                for r in range(4)]
    assert per_rank[2] == [t for _, g in ParquetTextStream(root, rank=2, world=4) for t in g]
    assert sorted(t for r in per_rank for t in r) == sorted(texts)
    assert sum(len(r) for r in per_rank) == len(texts)
    groups = [set(ParquetTextStream(root, rank=r, world=4).groups) for r in range(4)]
    assert all(not (groups[i] & groups[j]) for i in range(4) for j in range(i + 1, 4))


def test_nulls_are_skipped_and_counted(tmp_path):
    pq.write_table(pa.table({"text": ["ab", None, "cd"]}), tmp_path / "n.parquet",
                   row_group_size=2)
    s = ParquetTextStream(tmp_path / "n.parquet")
    assert [t for _, g in s for t in g] == ["ab", "cd"] and s.null_rows == 1


def test_bad_datasets_name_the_file_and_problem(tmp_path):
    no_col = tmp_path / "nocol.parquet"
    pq.write_table(pa.table({"content": ["x"]}), no_col)
    with pytest.raises(DataError, match=f"{no_col}: no column 'text' \\(the file has: content\\)"):
        ParquetTextStream(no_col)
    ints = tmp_path / "ints.parquet"
    pq.write_table(pa.table({"text": [1, 2]}), ints)
    with pytest.raises(DataError, match=f"{ints}: column 'text' holds int64, not text"):
        ParquetTextStream(ints)
    corrupt = tmp_path / "corrupt.parquet"
    corrupt.write_bytes(b"PAR1 this is not parquet")
    with pytest.raises(DataError, match=f"{corrupt}: not a readable parquet file"):
        ParquetTextStream(corrupt)
    empty = tmp_path / "empty.parquet"
    pq.write_table(pa.table({"text": pa.array([], pa.string())}), empty)
    with pytest.raises(DataError, match="empty dataset \\(0 rows\\)"):
        ParquetTextStream(empty)
    (tmp_path / "nothing").mkdir()
    with pytest.raises(DataError, match="no \\*.parquet files"):
        ParquetTextStream(tmp_path / "nothing")
    with pytest.raises(DataError, match="no such parquet file"):
        ParquetTextStream(tmp_path / "missing.parquet")
