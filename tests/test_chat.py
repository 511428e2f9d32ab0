"""`tyr chat` (`pytyr.train.tasks.lm.chat`): the transcript, where a reply ends, streaming, and the
cached and uncached sides giving the same replies on a real (tiny) NanoChat model."""
from __future__ import annotations

import io
import re
import sys
from dataclasses import dataclass

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytyr.cli import main
from pytyr.errors import ConfigError, DataError
from pytyr.train.task import TaskContext
from pytyr.train.tasks.lm.chat import ChatSession, converse
from pytyr.train.tasks.lm.task import LanguageModelTask, TextSampleOptions
from tiny_nanochat import tiny_factory

ALPHABET = "\x00abcdefghijklmnopqrstuvwxyz .\n"  # id 0 plays the BOS
# today's layout, its first layer windowed to 5 positions back: every turn is a prefill at the
# next positions, continuing the smear and the windows of what came before
TINY = {"vocab": len(ALPHABET), "pad_vocab_to": 64, "block": 24, "depth": 2,
        "aspect_ratio": 16, "head_dim": 16, "n_kv_head": 1, "window": 5,
        "rope_base": 100000.0, "qk_scale": 1.2, "softcap": 3.0, "extras": 1}


@dataclass(frozen=True)
class Opts:
    seq: int = 24


class Letters(LanguageModelTask):
    """Characters of ALPHABET; a document starts with id 0 when `bos`."""

    name = "letters"

    def __init__(self, bos: bool = True):
        super().__init__(Opts(), TaskContext(1, 0))
        self.bos = bos

    def encode(self, text: str) -> list[int]:
        bad = next((ch for ch in text if ch not in ALPHABET), None)
        if bad is not None:
            raise DataError(f"character {bad!r} is not in the alphabet")
        return [0] * self.bos + [ALPHABET.index(ch) for ch in text]

    def decode(self, ids: list[int]) -> str:
        return "".join(ALPHABET[i] for i in ids if i)

    def batch(self, k):  # chat never trains
        raise AssertionError("chat asked for a training batch")

    def eval_batches(self, split):
        raise AssertionError("chat asked for an evaluation batch")


class Scripted:
    """Logits that pick the tokens of `script` in turn (one-hot, any temperature)."""

    def __init__(self, script: list[int]):
        self.script, self.fed = list(script), []

    def extend(self, ids: list[int]) -> torch.Tensor:
        self.fed.append(list(ids))
        logits = torch.full((len(ALPHABET),), -1e9)
        logits[self.script.pop(0)] = 0.0
        return logits


def _scripted(text: str, *, stop: str | None = None, bos: bool = True, n: int = 50):
    task = Letters(bos)
    session = ChatSession(task, lambda *a: None, TextSampleOptions(max_new_tokens=n), stop)
    session.logits = Scripted([ALPHABET.index(ch) if ch != "|" else 0 for ch in text])
    return session


def test_a_reply_ends_at_the_end_of_a_document_which_stays_out_of_the_transcript():
    s = _scripted("hi there|")
    assert "".join(s.reply("yo\n")) == "hi there"
    assert s.transcript == Letters().encode("yo\nhi there")  # the BOS once, first
    assert s.logits.fed[0] == Letters().encode("yo\n")  # one run for the user's tokens
    assert all(len(f) == 1 for f in s.logits.fed[1:])  # then a token at a time


def test_later_turns_do_not_start_a_new_document():
    s = _scripted("ab|cd|")
    assert "".join(s.reply("x\n")) == "ab" and "".join(s.reply("y\n")) == "cd"
    assert s.transcript == Letters().encode("x\naby\ncd")


def test_a_reply_ends_before_the_stop_text_and_after_max_new_tokens():
    s = _scripted("one. two.", stop=".")
    assert "".join(s.reply("q\n")) == "one"
    s = _scripted("abcdefgh", n=3)
    assert "".join(s.reply("q\n")) == "abc" and len(s.logits.fed) == 3  # no wasted run


def test_the_model_sees_the_whole_transcript_across_turns():
    # a reply's last token (ended by max_new_tokens or the stop text) is fed with the next turn
    for s in (_scripted("abcxyz", n=3), _scripted("ab.xy.", stop=".")):
        list(s.reply("q\n"))
        list(s.reply("r\n"))
        assert sum(s.logits.fed, []) + s._unfed == s.transcript


def test_streamed_pieces_hold_back_the_start_of_the_stop_text():
    s = _scripted("ab\n\ncd", stop="\n\n")
    assert list(s.reply("q\n")) == ["a", "b"]  # the first "\n" is never shown
    s = _scripted("ab\nc\n\n", stop="\n\n")
    assert list(s.reply("q\n")) == ["a", "b", "\nc"]  # held, then shown with what follows


def test_without_a_bos_nothing_ends_a_document():
    s = _scripted("ab\n\ncd", bos=False, n=6)
    assert "".join(s.reply("q")) == "ab\n\ncd"


def test_converse_answers_each_non_blank_line_and_counts_turns():
    s = _scripted("ok|ok|")
    written: list[str] = []
    lines = ["first\n", "  \n", "second\n"]
    assert converse(s, lines, written.append, pytest.fail, prompt="> ") == 2
    assert "".join(written) == "> ok\n> > ok\n> "


def test_a_line_the_task_cannot_encode_is_named_and_skipped():
    s = _scripted("ok|")
    written: list[str] = []
    warned: list[str] = []
    assert converse(s, ["Über\n", "fine\n"], written.append, warned.append) == 1
    assert "".join(written) == "ok\n" and s.transcript == Letters().encode("fine\nok")
    assert len(warned) == 1 and warned[0].startswith("line 1 skipped: ") and "'Ü'" in warned[0]


@pytest.mark.parametrize("bad, message", [
    ({"max_new_tokens": 0}, "a chat needs replies"),
    ({"temperature": -1.0}, "temperature"),
])
def test_settings_that_cannot_chat_are_refused(bad, message):
    with pytest.raises(ConfigError, match=message):
        ChatSession(Letters(), lambda *a: None, TextSampleOptions(**bad))


def test_an_empty_stop_is_refused():
    with pytest.raises(ConfigError, match="--stop"):
        ChatSession(Letters(), lambda *a: None, TextSampleOptions(), stop="")


@pytest.fixture(scope="module")
def factory():
    return tiny_factory(TINY, seed=5, proj_seed=6)


def _talk(factory, step_model: str | None, turns: list[str], **opts) -> tuple[list[str], list]:
    options = TextSampleOptions(model="nanochatLogits", step_model=step_model, top_k=8,
                                seed=11, **opts)
    s = ChatSession(Letters(), factory, options)
    replies = ["".join(s.reply(t)) for t in turns]
    assert s.logits.history + s._unfed == s.transcript  # the model saw every turn and reply
    return replies, s.transcript


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_cached_turns_reply_as_the_model_over_the_whole_transcript(factory, temperature):
    turns = ["the man\n", "said\n"]  # 1 + 8 + 5 tokens of turns, 2 × 4 replied: < block
    cached = _talk(factory, "nanochatStep", turns, max_new_tokens=4, temperature=temperature)
    window = _talk(factory, None, turns, max_new_tokens=4, temperature=temperature)
    assert cached == window and len(cached[1]) <= TINY["block"]


def test_a_transcript_longer_than_the_context_keeps_talking(factory):
    turns = ["a long line that fills the context\n", "and more\n", "still more\n"]
    replies, transcript = _talk(factory, "nanochatStep", turns, max_new_tokens=20)
    assert len(transcript) > 2 * TINY["block"] and len(replies) == 3
    assert all(0 <= t < len(ALPHABET) for t in transcript)


@pytest.fixture(scope="module")
def char_run(tmp_path_factory):
    """A GPT.lean char-level run of 2 steps (its weights barely trained: the replies are not
    the point), the Shakespeare vocabulary of 75 characters."""
    from test_train_gpt import GPT, TINY

    out = tmp_path_factory.mktemp("char") / "run"
    cache = tmp_path_factory.mktemp("corpus")
    assert main(["train", GPT, "--model", "gpt", *TINY, "--set", "train.max_iters=2",
                 "--set", f"out={out}", "--set", f"task.cache_dir={cache}"]) == 0
    return out


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(lines=st.lists(st.text(max_size=40), max_size=4), n=st.integers(1, 6))
def test_chat_answers_any_text_or_names_the_line(char_run, lines, n, monkeypatch, capsys):
    text = "".join(line.replace("\n", " ").replace("\r", " ") + "\n" for line in lines)
    monkeypatch.setattr(sys, "stdin", io.StringIO(text))
    assert main(["chat", "--run", str(char_run), "--max-new-tokens", str(n)]) == 0
    out, err = capsys.readouterr()
    warned = [ln for ln in err.splitlines() if ln]
    assert "Traceback" not in err and all(
        re.match(r"tyr chat: line \d+ skipped: .*character .* is not in", ln) for ln in warned)
    answered = sum(1 for line in lines if line.strip()) - len(warned)
    assert out.count("\n") >= answered  # a reply per answered line (replies may hold \n)
