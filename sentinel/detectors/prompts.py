"""Prompt-leak detectors: LLM prompts and completions written to logs.

A line leaks content when it shows *provenance* (a model-server request template, a content field
of an OpenAI-compatible body, an OTel GenAI content attribute, chat-template control tokens, or a
configured canary) and the payload has *substance* (natural-language text, or a token-id list),
and no exclusion applies (empty, redaction markers, hashes or counts only).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from sentinel.detectors import PROMPT_RULE, Detector, Hit

_REDACTED = re.compile(
    r"(?i)\[redacted\]|redacted-by-|<redacted>|<omitted|\*{3,}|^sha256:|^\[?hidden\]?$|^null$"
)
_WORD = re.compile(r"[^\W\d_]{2,}")
_STRUCTURAL = re.compile(
    r"\\?[\"'](?:role|user|assistant|system|tool|parts|type|text|content|message|messages"
    r"|finish_reason|stop|index)\\?[\"']"
)
_ESCAPES = re.compile(r"\\+([nrt\"'/\\])")


def has_substance(payload: str) -> bool:
    """At least 20 characters and 4 words of text once escapes and JSON keys are set aside."""
    text = _ESCAPES.sub(" ", _STRUCTURAL.sub(" ", payload)).strip()
    if not text or _REDACTED.search(text):
        return False
    return len(text) >= 20 and len(_WORD.findall(text)) >= 4


def _hit(name: str, start: int, end: int, line: str, confidence: str = "high") -> Hit:
    value = line[start:end]
    return Hit(name, PROMPT_RULE, "high", start, end, value, "prompt", confidence)


# -- model-server request logs ----------------------------------------------------------------

_VLLM = re.compile(
    r"(?:Received request|Request) \S+(?: details)?: prompt: (['\"])(.*?)(?:\1(?:, |\.?$)|$)"
    r"|Generated response \S+(?: \([^)]*\))?: output: (['\"])(.*?)(?:\3(?:, |\.?$)|$)",
    re.DOTALL,
)
_TOKEN_IDS = re.compile(r"(?:prompt|output)_token_ids: \[(\d+(?:, ?\d+){15,})")


def _vllm(line: str) -> Iterator[Hit]:
    for m in _VLLM.finditer(line):
        group = 2 if m.group(2) is not None else 4
        if has_substance(m.group(group)):
            yield _hit("vllm_request_log", *m.span(group), line)
            return
    ids = _TOKEN_IDS.search(line)
    if ids:
        yield _hit("vllm_request_log", *ids.span(1), line, "medium")


_TGI = re.compile(r"(?:^|[\s\"{:])(?:Input|Output): (.{20,})")


def _tgi(line: str) -> Iterator[Hit]:
    if "text_generation" not in line:
        return
    m = _TGI.search(line)
    if m:
        payload = m.group(1)
        # JSON log lines: the message ends at the next unescaped quote.
        quote = re.search(r'(?<!\\)"', payload)
        end = m.start(1) + (quote.start() if quote else len(payload))
        if has_substance(line[m.start(1) : end]):
            yield _hit("tgi_debug_log", m.start(1), end, line)


_REPR_FIELD = re.compile(
    r"\b(?:text|prompt|content|output_text|messages)\s*[=:]\s*(['\"])((?:\\.|(?!\1).)*)\1"
    r"|'(?:text|content|prompt)':\s*(['\"])((?:\\.|(?!\3).)*)\3"
)


def _sglang(line: str) -> Iterator[Hit]:
    for m in _REPR_FIELD.finditer(line):
        group = 2 if m.group(2) is not None else 4
        if has_substance(m.group(group)):
            yield _hit("sglang_request_log", *m.span(group), line)
            return


# -- OpenAI-compatible bodies, LiteLLM debug dumps ---------------------------------------------

_JSON_CONTENT = re.compile(
    r"\\{0,3}\"(?:content|text|prompt|generated_text|inputs|instructions|system|input)\\{0,3}\""
    r"\s*:\s*\[?\s*\\{0,3}\"((?:[^\"\\]|\\.){1,65536}?)\\{0,3}\""
)


def _json_content(name: str, line: str) -> Iterator[Hit]:
    for m in _JSON_CONTENT.finditer(line):
        if has_substance(m.group(1)):
            yield _hit(name, *m.span(1), line)
            return


def _openai_body(line: str) -> Iterator[Hit]:
    yield from _json_content("openai_compatible_body", line)


def _litellm(line: str) -> Iterator[Hit]:
    yield from _json_content("litellm_debug_log", line)


# -- OpenTelemetry GenAI attributes and events ------------------------------------------------

_OTEL_KEYS = (
    r"gen_ai\.(?:prompt|completion|input\.messages|output\.messages|system_instructions"
    r"|request\.messages|content\.prompt|content\.completion)(?:\.\d+(?:\.content)?)?"
    r"|llm\.(?:input|output)_messages(?:\.\d+\.message\.content)?|\b(?:input|output)\.value"
)
_OTEL_VALUE = re.compile(
    r"(?:" + _OTEL_KEYS + r")\\{0,3}[\"']?\s*[:=]\s*"
    r"(\\{0,3}\"(?:[^\"\\]|\\.){0,65536}\\{0,3}\"|'[^']{0,65536}'|[\[{].{0,65536})"
)
_OTEL_EVENTS = re.compile(
    r"gen_ai\.(?:user|system|assistant|tool)\.message|gen_ai\.choice"
    r"|gen_ai\.client\.inference\.operation\.details"
)


def _otel(line: str) -> Iterator[Hit]:
    for m in _OTEL_VALUE.finditer(line):
        if has_substance(m.group(1)):
            yield _hit("otel_genai_content", *m.span(1), line)
            return
    if _OTEL_EVENTS.search(line):
        yield from _json_content("otel_genai_content", line)


# -- chat-template control tokens --------------------------------------------------------------

_TEMPLATE_FAMILIES = (
    ("<|im_start|>", "<|im_end|>"),
    ("<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"),
    ("[INST]", "[/INST]", "<<SYS>>"),
    ("<start_of_turn>", "<end_of_turn>"),
    ("<|user|>", "<|assistant|>", "<|system|>", "<|end|>"),
)
_ROLE = re.compile(r"\b(?:system|user|assistant|model)\b")


def _chat_template(line: str) -> Iterator[Hit]:
    if "{%" in line or "{{" in line:
        return  # a Jinja chat template printed at startup, not a rendered conversation
    for family in _TEMPLATE_FAMILIES:
        found = [line.find(tok) for tok in family if tok in line]
        if not found:
            continue
        start = min(found)
        if len(found) >= 2 or _ROLE.search(line, start):
            end = max(line.rfind(tok) + len(tok) for tok in family if tok in line)
            end = max(end, min(len(line), start + 200))
            if has_substance(line[start:end]):
                yield _hit("chat_template_markers", start, end, line)
                return


# -- canaries ----------------------------------------------------------------------------------


def canary_detector(canaries: Sequence[str]) -> Detector | None:
    """Configured canary strings: always a leak, whatever surrounds them."""
    values = tuple(c for c in canaries if c)
    if not values:
        return None

    def find(line: str) -> Iterator[Hit]:
        for canary in values:
            start = line.find(canary)
            if start >= 0:
                end = start + len(canary)
                yield Hit("canary", PROMPT_RULE, "critical", start, end, canary, "canary")

    trigger = "|".join(re.escape(c) for c in values)
    return Detector("canary", PROMPT_RULE, trigger, find, values, values)


_PROVENANCE = (
    r"\\{0,3}\"(?:messages|prompt|choices|generated_text|inputs|instructions)\\{0,3}\"\s*:"
)

DETECTORS: tuple[Detector, ...] = (
    Detector(
        "vllm_request_log",
        PROMPT_RULE,
        r"(?:Received request|Request) [^ ]+(?: details)?: prompt: |Generated response [^ ]+"
        r"|_token_ids: \[\d",
        _vllm,
        ("prompt: ", "output: ", "_token_ids: ["),
        ("prompt: ", "output: ", "_token_ids: ["),
    ),
    Detector(
        "sglang_request_log",
        PROMPT_RULE,
        r"(?:Receive(?: OpenAI)?|Finish): obj=",
        _sglang,
        ("obj=",),
        ("obj=",),
    ),
    Detector(
        "tgi_debug_log",
        PROMPT_RULE,
        r"(?:Input|Output): ",
        _tgi,
        ("Input: ", "Output: "),
        ("text_generation",),
    ),
    Detector(
        "litellm_debug_log",
        PROMPT_RULE,
        r"Request Sent from LiteLLM",
        _litellm,
        ("Request Sent from LiteLLM",),
        ("LiteLLM",),
    ),
    Detector(
        "otel_genai_content",
        PROMPT_RULE,
        _OTEL_KEYS + r"|gen_ai\.(?:user|system|assistant|tool)\.message|gen_ai\.choice"
        r"|gen_ai\.client\.inference",
        _otel,
        ("gen_ai.", "llm.input_messages", "llm.output_messages", "input.value", "output.value"),
        ("gen_ai.", "llm.", ".value"),
    ),
    Detector(
        "openai_compatible_body",
        PROMPT_RULE,
        _PROVENANCE,
        _openai_body,
        ('"messages"', '"prompt"', '"choices"', '"generated_text"', '"inputs"', '"instructions"'),
        ("messages", "prompt", "choices", "generated_text", "inputs", "instructions"),
    ),
    Detector(
        "chat_template_markers",
        PROMPT_RULE,
        r"<\|(?:im_start|begin_of_text|start_header_id|user|assistant|system)\|>|\[INST\]"
        r"|<start_of_turn>|<<SYS>>",
        _chat_template,
        ("<|", "[INST]", "<start_of_turn>", "<<SYS>>"),
        ("<|", "[INST]", "<start_of_turn>", "<<SYS>>"),
    ),
)
