"""Inference-server log lines for the demo's leak scan: routine lines plus a few planted leaks.

The planted values are assembled from pieces at run time (random, checksummed where the format
has a checksum), so neither this file nor the repository ever holds anything that looks like a
real credential.
"""

from __future__ import annotations

import binascii
import datetime as dt
import random
import string
from collections.abc import Iterator

from sentinel.detectors.secrets import base62
from sentinel.loki import Entry, stream_selector

GATEWAY = {"namespace": "inference-prod", "app": "llm-gateway"}
VLLM = {"namespace": "inference-prod", "app": "vllm-llm-70b"}


def _rand(rng: random.Random, n: int, chars: str = string.ascii_letters + string.digits) -> str:
    return "".join(rng.choice(chars) for _ in range(n))


def _github_token(rng: random.Random) -> str:
    body = _rand(rng, 30)
    return "gh" + "p_" + body + base62(binascii.crc32(body.encode()))


def _aws_key_id(rng: random.Random) -> str:
    return "AK" + "IA" + _rand(rng, 16, string.ascii_uppercase + "234567")


def demo_entries(end: dt.datetime, *, seed: int = 7, lines: int = 2000) -> Iterator[Entry]:
    """``lines`` routine lines over the last hour before ``end`` with three leaks planted."""
    rng = random.Random(seed)  # noqa: S311 (demo data)
    start_ns = int((end - dt.timedelta(hours=1)).replace(tzinfo=dt.UTC).timestamp() * 1e9)
    step = 3_600_000_000_000 // lines
    planted = {
        lines // 4: (
            GATEWAY,
            "ERROR upstream auth failed for key " + _aws_key_id(rng) + " region=us-east-1",
        ),
        lines // 2: (
            GATEWAY,
            "WARN git fetch https://x-access-token:"
            + _github_token(rng)
            + "@github.com/acme/prompts failed",
        ),
        3 * lines // 4: (
            VLLM,
            "INFO 11-29 10:00:01 [logger.py:39] Received request cmpl-7f3a: prompt: "
            "'Summarise the attached board minutes for the acquisition of Example Corp', "
            "params: SamplingParams(n=1, temperature=0.7), prompt_token_ids: [1, 2, 3], "
            "lora_request: None.",
        ),
    }
    for i in range(lines):
        labels, line = planted.get(i, (GATEWAY, _routine(rng, i)))
        yield Entry(start_ns + i * step, stream_selector(labels), line, labels)


def _routine(rng: random.Random, i: int) -> str:
    status = rng.choice([200, 200, 200, 200, 429, 500])
    tokens = f'"prompt_tokens":{rng.randrange(20, 4000)},"completion_tokens":{rng.randrange(800)}'
    return (
        f'{{"level":"info","msg":"request done","route":"/v1/chat/completions",'
        f'"status":{status},{tokens},"request_id":"req-{i:06d}"}}'
    )
