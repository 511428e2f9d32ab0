"""A prompt as FLUX.2 [klein]'s text encoder reads it: the user's turn in the tokenizer's chat
template (with `add_generation_prompt` and `enable_thinking=False`, as the pipeline applies
it), tokenized, truncated and padded to `max_sequence_length` with its attention mask.

The template is the directory's own (`tokenizer/chat_template.jinja`, or the
`chat_template` of `tokenizer_config.json`), rendered by jinja2 in a sandbox with the
environment transformers gives chat templates (`trim_blocks`, `lstrip_blocks`, loop
controls, `raise_exception`, a `tojson` that does not escape HTML) and the tokenizer's special
tokens as variables; `tokenizer.json` is read by `tokenizers`. Padding and truncation are on
the side `tokenizer_config.json` names (the right where it names none), with its `pad_token`.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytyr.config import read_json
from pytyr.errors import ConfigError
from pytyr.paths import read_text

_SPECIAL = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token",
            "mask_token")


def _token_text(value: Any) -> str | None:
    """A special token as tokenizer_config.json writes it: text, or an AddedToken's dict."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


@dataclass(frozen=True)
class PromptTokens:
    """`input_ids` and `attention_mask` of one prompt, each `max_sequence_length` long."""

    ids: list[int]
    mask: list[int]


class PromptEncoder:
    """The tokenizer directory of a pipeline (`tokenizer/`), read once."""

    def __init__(self, folder: Path) -> None:
        from tokenizers import Tokenizer

        self.where = str(folder)
        config = read_json(folder / "tokenizer_config.json", "tokenizer config")
        self.special = {k: _token_text(config.get(k)) for k in _SPECIAL}
        template = folder / "chat_template.jinja"
        text = (read_text(template, "chat template") if template.is_file()
                else config.get("chat_template"))
        if not isinstance(text, str) or not text:
            raise ConfigError(f"{folder}: no chat template (chat_template.jinja, or "
                              f"'chat_template' in tokenizer_config.json)")
        self.template = _compile(text, str(template))
        path = folder / "tokenizer.json"
        read_text(path, "tokenizer")  # a missing or unreadable file: one line naming it
        try:
            self.tokenizer = Tokenizer.from_file(str(path))
        except Exception as err:  # tokenizers' own parse errors
            raise ConfigError(f"{path}: not a tokenizers file: {err}") from None
        pad = self.special["pad_token"]
        self.pad_id = self.tokenizer.token_to_id(pad) if pad is not None else None
        self.pad_left = config.get("padding_side", "right") == "left"
        self.cut_left = config.get("truncation_side", "right") == "left"

    def chat_text(self, prompt: str) -> str:
        """The prompt as the user's turn, rendered for the assistant's answer."""
        import jinja2

        messages = [{"role": "user", "content": prompt}]
        try:
            return self.template.render(messages=messages, add_generation_prompt=True,
                                        enable_thinking=False,
                                        **{k: v for k, v in self.special.items() if v})
        except jinja2.TemplateError as err:
            raise ConfigError(f"{self.where}: the chat template failed: {err}") from None

    def encode(self, prompt: str, length: int) -> PromptTokens:
        """The prompt's tokens, cut or padded to `length`."""
        ids = self.tokenizer.encode(self.chat_text(prompt)).ids
        if len(ids) > length:
            ids = ids[len(ids) - length:] if self.cut_left else ids[:length]
        pad = length - len(ids)
        if pad and self.pad_id is None:
            raise ConfigError(f"{self.where}: the prompt needs padding to {length} tokens, but "
                              f"the tokenizer has no pad_token in its vocabulary")
        mask = [1] * len(ids)
        fill, zeros = [self.pad_id] * pad, [0] * pad
        if self.pad_left:
            return PromptTokens(fill + ids, zeros + mask)
        return PromptTokens(ids + fill, mask + zeros)


def _compile(text: str, where: str) -> Any:
    """The template in the sandbox transformers renders chat templates in."""
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise jinja2.TemplateError(message)

    def tojson(x: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None,
               sort_keys: bool = False) -> str:
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    try:
        return env.from_string(text)
    except jinja2.TemplateSyntaxError as err:
        raise ConfigError(f"{where}:{err.lineno}: the chat template does not parse: "
                          f"{err.message}") from None
