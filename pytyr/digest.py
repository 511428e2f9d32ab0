"""Checksums that prove a file or a JSON record is what was written.

A file is named by the SHA-256 of its bytes (`file_sha256`), recorded where it is listed (a
checkpoint's state.json, a data set's meta.json). A JSON record that must not change after
it is written (state.json, run.json, meta.json) carries the SHA-256 of its own value under
`checksum` (`stamped`): of the value, not the text, so re-indenting the file or writing
`1E0` for `1e0` is harmless, while any change of a value, key or structure is found by
`stamp_problem`. hashlib's SHA-256 reads about 1 GiB/s on one loaded core here
(docs/own-data.md#where-the-runs-go).
"""
from __future__ import annotations

import hashlib
import json
import os
from typing import Any

STAMP = "checksum"
_BLOCK = 1 << 22


def file_sha256(path: str | os.PathLike[str]) -> str:
    """The SHA-256 of a file's bytes, read in blocks (shards and checkpoints can be GBs)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(_BLOCK), b""):
            h.update(block)
    return h.hexdigest()


def json_digest(value: Any) -> str:
    """The SHA-256 of a JSON value's canonical text (sorted keys, no spaces, ASCII)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def stamped(record: dict[str, Any]) -> dict[str, Any]:
    """`record` with the digest of its value under `checksum` (see the module doc)."""
    body = {k: v for k, v in record.items() if k != STAMP}
    return {**body, STAMP: json_digest(body)}


def stamp_problem(record: Any) -> str | None:
    """None when `record` (a parsed JSON object) matches its `checksum`, else what is wrong:
    no checksum (written before records carried one), or a value changed since."""
    if not isinstance(record, dict) or STAMP not in record:
        return "it carries no checksum"
    body = {k: v for k, v in record.items() if k != STAMP}
    if record[STAMP] != json_digest(body):
        return "its contents do not match its checksum (changed or damaged since written)"
    return None
