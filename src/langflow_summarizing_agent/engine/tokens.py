"""Token counting and cutting, in the model's own tokens: the one place the package counts.

A `TokenCounter` counts as the model does:

1. with the model's tokenizer where one loads offline: OpenAI's `tiktoken` encodings, for the model names tiktoken
   knows (`gpt-4o-mini`: `o200k_base`), else `o200k_base` for any other model. The encoding files are read from a
   local copy (the one the `litellm` wheel Langflow installs ships, or tiktoken's own cache), checked against their
   published SHA-256; nothing is downloaded at run time;
2. scaled per session by what the provider reported: `scale` is the input tokens the provider billed for the
   agent's calls over what this counter counts for the same calls (`wiring.usage`). Models whose tokenizer does
   not load offline (Anthropic, Gemini, ...) are counted in `o200k_base` and corrected this way;
3. the 4-characters estimate (`count_tokens_approximately`) only when no encoding loads, scaled the same way.

A message is counted as OpenAI frames it: its encoded text plus `MESSAGE_FRAMING` tokens (start, role, separator,
end).
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import logging
import math
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cache, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.messages.utils import count_tokens_approximately

from langflow_summarizing_agent.engine.records import StoredMessage

if TYPE_CHECKING:
    from tiktoken import Encoding

logger = logging.getLogger(__name__)

CUT_MARKER = "\n[... cut to fit the history budget]"
"""Ends a message cut to fit the History Token Budget."""
MESSAGE_FRAMING = 4
"""Tokens OpenAI adds around a chat message: `<|start|>`, the role, `<|message|>` and `<|end|>`."""
DEFAULT_ENCODING = "o200k_base"
"""The encoding of the gpt-4o, gpt-4.1 and gpt-5 families; used for models whose own tokenizer is not offline."""
ENCODING_SHA256 = {
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
}
"""The encodings that load offline, with the SHA-256 tiktoken publishes for each file."""
_SPLIT_PATTERNS = {
    "o200k_base": "|".join(
        [
            r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
            r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
            r"""\p{N}{1,3}""",
            r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
            r"""\s*[\r\n]+""",
            r"""\s+(?!\S)""",
            r"""\s+""",
        ]
    ),
    "cl100k_base": (
        r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+|"""
        r""" ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
    ),
}
_SPECIAL_TOKENS = {
    "o200k_base": {"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
    "cl100k_base": {
        "<|endoftext|>": 100257,
        "<|fim_prefix|>": 100258,
        "<|fim_middle|>": 100259,
        "<|fim_suffix|>": 100260,
        "<|endofprompt|>": 100276,
    },
}
"""How each encoding splits text and its special tokens, as tiktoken builds them (`tiktoken_ext/openai_public.py`):
the encoding is built from the verified file directly, without tiktoken's loader, which finds its file through the
environment and may download it."""
SCALE_STEP = 2 ** (1 / 8)
"""A message is cut at the session's scale rounded up to a power of this step (`TokenCounter.steady`), offset by half
a step so that 1.0, the scale before any report, sits mid-step: the scale moves a little with each provider report,
and where a message is cut must not move with it."""
MAX_REMEMBERED_CHARS = 20_000
"""Texts up to this long have their token count remembered (at most 8,192 of them)."""
_ENCODING_URL = "https://openaipublic.blob.core.windows.net/encodings/{}.tiktoken"


@dataclass(frozen=True)
class TokenCounter:
    """Counts tokens as one model does. `encoding` is a tiktoken encoding name, or None for the 4-characters
    estimate; `scale` corrects the count by what the provider reported for this session."""

    encoding: str | None = None
    scale: float = 1.0

    @property
    def name(self) -> str:
        """How this counter counts, for the status and the logs."""
        base = self.encoding or "4-characters estimate"
        return base if self.scale == 1.0 else f"{base} x {self.scale:.2f} (provider-reported usage)"

    def text(self, text: str) -> int:
        """Tokens of one user message whose content is `text`."""
        return self._scaled(self._raw([HumanMessage(content=text)]))

    def message(self, message: StoredMessage) -> int:
        return self._scaled(self._raw([as_lc_message(message)]))

    def prompt(self, messages: Sequence[BaseMessage], tools: Sequence[Any] = ()) -> int:
        """Tokens of a model call: its messages, and the JSON of the tools bound to it."""
        return self._scaled(self.raw_prompt(messages, tools))

    def raw_prompt(self, messages: Sequence[BaseMessage], tools: Sequence[Any] = ()) -> int:
        """`prompt()` before the per-session scale."""
        total = self._raw(messages)
        if tools:
            total += self._raw_text(json.dumps(list(tools), default=str))
        return total

    def _raw(self, messages: Sequence[BaseMessage]) -> int:
        if self._encoder() is None:
            return count_tokens_approximately(list(messages))
        return sum(self._raw_text(_content_text(m)) + MESSAGE_FRAMING for m in messages)

    def _raw_text(self, text: str) -> int:
        encoder = self._encoder()
        if encoder is None:
            return math.ceil(len(text) / 4)
        if len(text) > MAX_REMEMBERED_CHARS:
            return len(encoder.encode_ordinary(text))
        return _encoded_length(encoder, text)

    def _encoder(self) -> Encoding | None:
        return load_encoding(self.encoding) if self.encoding else None

    def scaled(self, scale: float) -> TokenCounter:
        return replace(self, scale=scale)

    def steady(self) -> TokenCounter:
        """This counter at its scale rounded up to a step of `SCALE_STEP`: it counts at least as many tokens as this
        one, and the same for every scale within the step."""
        step = math.ceil(math.log(self.scale, SCALE_STEP) - 0.5) + 0.5
        return replace(self, scale=SCALE_STEP**step)

    def _scaled(self, tokens: int) -> int:
        return tokens if self.scale == 1.0 else math.ceil(tokens * self.scale)


@lru_cache(maxsize=8_192)
def _encoded_length(encoder: Encoding, text: str) -> int:
    """Tokens of `text` in `encoder`, remembered: a turn counts the same window and summary many times, and the next
    turn counts them again."""
    return len(encoder.encode_ordinary(text))


ESTIMATE = TokenCounter()
"""The 4-characters estimate: the last resort, and what a counter with no model uses."""


def counter_for(model_name: str | None, scale: float = 1.0) -> TokenCounter:
    """The counter for a model: its tiktoken encoding when tiktoken knows the name, else `o200k_base`; the
    estimate when no encoding loads offline."""
    for encoding in (_encoding_name(model_name), DEFAULT_ENCODING):
        if encoding in ENCODING_SHA256 and load_encoding(encoding) is not None:
            return TokenCounter(encoding, scale)
    return TokenCounter(None, scale)


def _encoding_name(model_name: str | None) -> str:
    """The tiktoken encoding of a model tiktoken knows by name, else `DEFAULT_ENCODING`."""
    if not model_name:
        return DEFAULT_ENCODING
    try:
        from tiktoken.model import encoding_name_for_model

        return encoding_name_for_model(model_name)
    except (ImportError, KeyError):
        return DEFAULT_ENCODING


@cache
def load_encoding(name: str) -> Encoding | None:
    """The tiktoken encoding `name` from a local copy whose SHA-256 is the published one; None when there is none
    (then nothing is downloaded)."""
    expected = ENCODING_SHA256.get(name)
    contents = _local_copy(name, expected) if expected else None
    if contents is None:
        logger.info("Summarizing Agent: no offline copy of the %s encoding; counting with the estimate", name)
        return None
    try:
        import tiktoken

        return tiktoken.Encoding(
            name,
            pat_str=_SPLIT_PATTERNS[name],
            mergeable_ranks=_mergeable_ranks(contents),
            special_tokens=_SPECIAL_TOKENS[name],
        )
    except Exception:  # noqa: BLE001 - a tokenizer that does not load leaves the estimate
        logger.warning("Summarizing Agent: the %s encoding did not load; counting with the estimate", name)
        return None


def _local_copy(name: str, expected_sha256: str) -> bytes | None:
    """The encoding file's content with the published SHA-256, from a folder holding it under tiktoken's cache file
    name: the copy the `litellm` wheel ships, or tiktoken's cache."""
    file_name = hashlib.sha1(_ENCODING_URL.format(name).encode()).hexdigest()
    folders = [os.environ.get("TIKTOKEN_CACHE_DIR"), os.environ.get("DATA_GYM_CACHE_DIR")]
    spec = importlib.util.find_spec("litellm")
    if spec is not None and spec.submodule_search_locations:
        folders.insert(0, str(Path(next(iter(spec.submodule_search_locations))) / "litellm_core_utils" / "tokenizers"))
    folders.append(str(Path(tempfile.gettempdir()) / "data-gym-cache"))
    for folder in filter(None, folders):
        try:
            contents = (Path(folder) / file_name).read_bytes()
        except OSError:
            continue
        if hashlib.sha256(contents).hexdigest() == expected_sha256:
            return contents
    return None


def _mergeable_ranks(contents: bytes) -> dict[bytes, int]:
    """The ranks of a `.tiktoken` file: one base64 token and its rank a line (tiktoken's `load_tiktoken_bpe`)."""
    ranks = {}
    for line in contents.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def _content_text(message: BaseMessage) -> str:
    content = message.content if isinstance(message.content, str) else json.dumps(message.content, default=str)
    if isinstance(message, AIMessage) and message.tool_calls:
        content += json.dumps([{"name": c["name"], "arguments": c["args"]} for c in message.tool_calls], default=str)
    return content


def as_lc_message(message: StoredMessage) -> BaseMessage:
    if message.role == "user":
        return HumanMessage(content=message.text)
    return AIMessage(content=message.text)


def cut_to_tokens(message: StoredMessage, room: int, counter: TokenCounter) -> StoredMessage:
    """A copy of `message` cut to at most `room` tokens, with a marker; the payload is rebuilt by the caller."""
    if counter.message(message) <= room:
        return message
    overhead = counter.message(replace(message, text="")) - counter.text("")
    return replace(message, text=cut_text_to_tokens(message.text, room - overhead, counter), payload=None)


def cut_text_to_tokens(text: str, room: int, counter: TokenCounter) -> str:
    """`text` cut to at most `room` tokens (as `counter.text` counts them), ending with `CUT_MARKER`."""
    keep = len(text)
    while keep > 0:
        keep = min(keep - 1, int(keep * room / max(counter.text(text[:keep] + CUT_MARKER), 1)))
        cut = text[: max(keep, 0)] + CUT_MARKER
        if counter.text(cut) <= room:
            return cut
    return CUT_MARKER
