"""`tyr chat`: a conversation with a trained language model, one reply per line of input.

The transcript is one token sequence: the document start (a BOS, where the tokenizer has
one), then each turn's text and the model's reply. A reply is sampled as `tyr sample`
samples (`pick_token`: temperature, top-k, one seeded generator for the whole session) and
streamed as it is decoded; it ends after `max_new_tokens`, at the end of a document (the
model emitting the document start again, which is left out of the transcript) or at the
`stop` text.

With the run's `sample.step_model` the turns extend one set of key/value caches
(`CachedDecoder.extend`): the user's tokens are one prefill at the next positions, the
reply one token at a time, so a turn costs its own tokens, not the transcript's. Without
one, every token runs the model over the last `block` tokens. Both see the same logits
while the transcript fits the context (a test checks it); beyond it, the cached side keeps
the last `block // 2` tokens, as `tyr sample` does.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import torch

from pytyr.config import merge
from pytyr.errors import ConfigError, DataError, TyrError
from pytyr.train.model import RunModel
from pytyr.train.record import checkpoint_dir, read_run
from pytyr.train.task import ModelFactory, TaskContext
from pytyr.train.tasks import recorded_task_class, sample_options, task_options
from pytyr.train.tasks.lm.kvcache import CachedDecoder
from pytyr.train.tasks.lm.sample import check_sampling_args, pick_token
from pytyr.train.tasks.lm.task import LanguageModelTask


class WindowLogits:
    """Logits of the last position, the model run over the last `block` tokens each time."""

    def __init__(self, factory: ModelFactory, model: str | None, feeds: dict[str, Any],
                 block: int):
        self.factory, self.model, self.feeds, self.block = factory, model, feeds, block
        self.trained = "targets" in feeds
        self.history: list[int] = []
        self._graphs: dict[int, Any] = {}

    @torch.no_grad()
    def extend(self, ids: list[int]) -> torch.Tensor:
        self.history.extend(ids)
        ctx = torch.tensor([self.history[-self.block:]], dtype=torch.int64)
        t = ctx.shape[1]
        if t not in self._graphs:
            self._graphs[t] = self.factory(self.model, self.feeds, {"batch": 1, "seq": t})
        batch = {"idx": ctx, **({"targets": torch.zeros_like(ctx)} if self.trained else {})}
        return self._graphs[t](batch)[0][0, -1]


class CachedLogits:
    """Logits of the last position over the key/value caches of a step model."""

    def __init__(self, factory: ModelFactory, step_model: str, block: int):
        self.decoder = CachedDecoder(factory, step_model, block)
        self.history: list[int] = []

    @torch.no_grad()
    def extend(self, ids: list[int]) -> torch.Tensor:
        self.history.extend(ids)
        return self.decoder.extend(ids, self.history)


class ChatSession:
    """The transcript of one conversation with a language-model task's trained model."""

    def __init__(self, task: LanguageModelTask, factory: ModelFactory, options: Any,
                 stop: str | None = None):
        check_sampling_args(options.max_new_tokens, options.temperature, options.top_k)
        if options.max_new_tokens == 0:
            raise ConfigError("sample.max_new_tokens is 0: a chat needs replies of 1 token or more")
        if stop == "":
            raise ConfigError("--stop must not be empty")
        self.task, self.options, self.stop = task, options, stop
        block = task.options.seq
        if options.step_model is not None:
            self.logits: CachedLogits | WindowLogits = CachedLogits(factory, options.step_model,
                                                                    block)
        else:
            self.logits = WindowLogits(factory, options.model, task.logits_feeds(options),
                                       block)
        self.start = task.encode("")  # the document start: a BOS, or nothing
        self.vocab = task.data_sizes().get("vocab")  # the data's rows of a padded table
        self.gen = torch.Generator().manual_seed(options.seed)
        self.transcript: list[int] = []
        self._unfed: list[int] = []  # the last reply's last token: the model has not seen it

    def tokens(self, text: str) -> list[int]:
        """`text`'s tokens, the document start first only at the top of the transcript; a
        `TyrError` where the task cannot encode it (a character outside its vocabulary)."""
        ids = self.task.encode(text)
        if self.transcript and ids[:len(self.start)] == self.start:
            ids = ids[len(self.start):]
        return ids

    def reply(self, text: str) -> Iterator[str]:
        """The model's reply to `text`, streamed as decoded pieces."""
        return self.answer(self.tokens(text))

    def answer(self, ids: list[int]) -> Iterator[str]:
        """The model's reply to the tokens `ids` (of `tokens`), streamed as decoded pieces."""
        if not ids:
            return
        self.transcript.extend(ids)
        logits = self.logits.extend(self._unfed + ids)
        self._unfed = []
        out: list[int] = []
        shown = ""
        end = self.start[0] if len(self.start) == 1 else None
        for k in range(self.options.max_new_tokens):
            token = pick_token(logits[:self.vocab], self.options.temperature, self.options.top_k,
                               self.gen)
            if token == end:
                break
            out.append(token)
            self.transcript.append(token)
            text = self.task.decode(out)
            if self.stop is not None and self.stop in text:
                self._unfed = [token]
                if text.index(self.stop) > len(shown):
                    yield text[len(shown):text.index(self.stop)]
                return
            ready = len(text) - _held_back(text, self.stop)
            if ready > len(shown):
                yield text[len(shown):ready]
                shown = text[:ready]
            if k + 1 < self.options.max_new_tokens:
                logits = self.logits.extend([token])
            else:
                self._unfed = [token]
        rest = self.task.decode(out)[len(shown):]
        if rest:
            yield rest


def _held_back(text: str, stop: str | None) -> int:
    """How many characters at the end of `text` to hold back: an unfinished character (a
    byte-level BPE may stop inside one) or the start of the stop text."""
    if text.endswith("\ufffd"):
        return len(text) - len(text.rstrip("\ufffd"))
    for n in range(min(len(stop or "") - 1, len(text)), 0, -1):
        if text.endswith(stop[:n]):  # type: ignore[index]
            return n
    return 0


def newest_chat_run(root: Path) -> Path:
    """The run under `root` (`runs/`) of a language model trained most recently: what
    `tyr chat` talks to when no `--run` is given (never one of a task module of the user's,
    which is not imported unless named: `recorded_task_class`)."""
    found = []
    for run_json in root.glob("*/run.json") if root.is_dir() else []:
        try:
            cls = recorded_task_class(read_run(run_json.parent)["task"], str(run_json))
        except TyrError:
            continue  # not a run, one of a task this version does not know, or of a module
        if issubclass(cls, LanguageModelTask) and checkpoint_dir(run_json.parent).is_dir():
            found.append((run_json.stat().st_mtime, run_json.parent))
    if not found:
        raise ConfigError(f"no trained language model under {root}/ to chat with: train one "
                          "(`make train`) or give --run DIR")
    return max(found)[1]


def open_chat(source: Any, run_dir: Path, overrides: dict[str, Any],
              stop: str | None = None, checkpoint: str = "best",
              task_module: str | None = None) -> ChatSession:
    """A chat over the run in `run_dir`: its task, trained weights and sampling options with
    `overrides` on top (`task_module`: the user's `--set task.module`). Every setting is
    checked before the first line is read."""
    run = read_run(run_dir)
    where = f"{run_dir}/run.json"
    cls = recorded_task_class(run["task"], where, task_module)
    if not issubclass(cls, LanguageModelTask):
        raise ConfigError(f"{run_dir}: task '{cls.name}' is not a language model, so there is "
                          f"no text to chat in; `tyr sample --run {run_dir}` samples it")
    options = sample_options(cls, merge(run.get("sample", {}), overrides), "the command line")
    task = cls(task_options(cls, run["task"], where, record=True), TaskContext(1, 0))
    task.prepare()
    task.check_sampling(RunModel(source, run["model"], run["values"]), options)
    return ChatSession(task, RunModel.trained(source, run, run_dir, checkpoint), options, stop)


def line_text(line: str | bytes) -> str:
    """A line of input as text; a DataError naming the first byte that is not UTF-8 (a str
    may carry such bytes as lone surrogates, as Python reads undecodable input)."""
    if isinstance(line, str):
        try:
            line.encode("utf-8")
            return line
        except UnicodeEncodeError as err:
            try:
                data = line.encode("utf-8", "surrogateescape")
            except UnicodeEncodeError:
                raise DataError(f"not valid Unicode text (a lone surrogate at character "
                                f"{err.start})") from None
    else:
        data = line
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise DataError(f"not UTF-8 text (byte 0x{data[err.start]:02x} at offset "
                        f"{err.start})") from None


def converse(session: ChatSession, lines: Iterable[str | bytes], write: Any, warn: Any,
             prompt: str = "") -> int:
    """Reply to each line of `lines` (text, or bytes decoded as UTF-8) through
    `write(text)`; a line that is not UTF-8 or that the task cannot encode is named through
    `warn(message)` and skipped. Returns the number of turns."""
    turns = 0
    write(prompt)
    for n, line in enumerate(lines, 1):
        try:
            text = line_text(line).rstrip("\r\n")
        except TyrError as err:
            warn(f"line {n} skipped: {err}")
            write(prompt)
            continue
        if text.strip():
            try:
                ids = session.tokens(text + "\n")
            except TyrError as err:
                warn(f"line {n} skipped: {err}")
            else:
                for piece in session.answer(ids):
                    write(piece)
                write("\n")
                turns += 1
        write(prompt)
    return turns
