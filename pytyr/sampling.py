"""`tyr sample` and `tyr chat`: generating from a trained run directory.

Both read the run's record, its model source (`source_from_origin`: the Lean file or library
it names) and the `sample` table of `--set` under the command's own options, each text option
refused unless it is UTF-8.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from pytyr.config import parse_set, refuse_unread
from pytyr.errors import ConfigError
from pytyr.paths import input_file


def source_from_origin(origin: Any, where: str) -> Any:
    """The model source a run's record names: its Lean file or its compiled library."""
    if isinstance(origin, dict) and isinstance(origin.get("file"), str):
        from pytyr.pipeline import LeanModels

        input_file(origin["file"], "Lean file of the run")
        return LeanModels(origin["file"])
    if isinstance(origin, dict) and isinstance(origin.get("lib"), str):
        from pytyr.abi import LibraryModels

        input_file(origin["lib"], "model library of the run")
        return LibraryModels(origin["lib"])
    raise ConfigError(f"{where}: 'origin' names no Lean file or library")


def cmd_sample(args: argparse.Namespace) -> int:
    from pytyr.train.record import describe_checkpoint, read_run
    from pytyr.train.run import sample

    overrides = _sample_overrides(args, ("prompt", "max_new_tokens", "temperature", "top_k",
                                         "seed", "model"))
    run_dir = Path(args.run)
    run = read_run(run_dir)
    source = source_from_origin(run["origin"], f"{run_dir}/run.json")
    print(f"weights: {describe_checkpoint(run_dir, args.checkpoint)}", file=sys.stderr)
    made = sample(source, run_dir, overrides, args.checkpoint)
    if made.text is not None:
        print(made.text)
    for path in made.files:
        print(f"wrote {path}", file=sys.stderr)
    return 0


def _sample_overrides(args: argparse.Namespace, keys: tuple[str, ...]) -> dict[str, Any]:
    """The `sample` table of `--set` with the command's own options on top."""
    refuse_unread(args.set, args.command, ("sample",))
    overrides = parse_set(args.set or []).get("sample", {})
    for key in keys:
        value = getattr(args, key)
        if value is not None:
            overrides[key] = _utf8(value, f"--{key.replace('_', '-')}")
    return overrides


def _utf8(value: Any, option: str) -> Any:
    """A text argument, refused when the bytes given are not UTF-8 (Python carries them as
    lone surrogates, which no tokenizer takes)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as err:
            raw = value.encode("utf-8", "surrogateescape")
            raise ConfigError(f"{option} is not UTF-8 text (byte 0x{raw[err.start]:02x} at "
                              f"offset {err.start})") from None
    return value


def cmd_chat(args: argparse.Namespace) -> int:
    from pytyr.train.record import describe_checkpoint, read_run
    from pytyr.train.tasks.lm.chat import converse, newest_chat_run, open_chat

    run_dir = Path(args.run) if args.run else newest_chat_run(Path("runs"))
    run = read_run(run_dir)
    source = source_from_origin(run["origin"], f"{run_dir}/run.json")
    overrides = _sample_overrides(args, ("max_new_tokens", "temperature", "top_k", "seed"))
    session = open_chat(source, run_dir, overrides, stop=_utf8(args.stop, "--stop"),
                        checkpoint=args.checkpoint)
    interactive = sys.stdin.isatty()
    if interactive or not args.run:
        print(f"chatting with {describe_checkpoint(run_dir, args.checkpoint)}"
              + ("" if args.run else ", the newest language model under runs/")
              + (" (the model continues your text; Ctrl-D ends)" if interactive else ""),
              file=sys.stderr)

    def write(text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()

    def warn(message: str) -> None:
        print(f"tyr chat: {message}", file=sys.stderr)

    lines = getattr(sys.stdin, "buffer", sys.stdin)  # bytes: a line that is not UTF-8 is named
    converse(session, lines, write, warn, prompt="> " if interactive else "")
    return 0
