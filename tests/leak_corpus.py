"""A labelled corpus for the leak detectors, generated at run time.

Every planted value is assembled from pieces and random characters, so the repository holds
nothing that looks like a real credential. ``positives()`` yields (detector, value, line) with
exactly one planted leak per line; ``negatives()`` yields lines that must never fire: UUIDs,
hashes, base64 blobs, documented example keys, placeholders, token counts, model names, etc.
"""

from __future__ import annotations

import base64
import binascii
import json
import random
import string
import uuid
from collections.abc import Callable, Iterator

from sentinel.detectors.secrets import base62

ALNUM = string.ascii_letters + string.digits
B64 = ALNUM + "+/"
URLSAFE = ALNUM + "-_"
WORDS = [
    "please",
    "summarize",
    "the",
    "quarterly",
    "revenue",
    "report",
    "for",
    "our",
    "board",
    "meeting",
    "and",
    "list",
    "the",
    "main",
    "risks",
    "you",
    "see",
    "in",
    "the",
    "supply",
    "chain",
    "section",
    "explain",
    "why",
    "the",
    "model",
    "weights",
    "bucket",
    "should",
    "be",
    "private",
    "write",
    "a",
    "short",
    "poem",
    "about",
    "the",
    "ocean",
    "at",
    "night",
    "translate",
    "this",
    "paragraph",
    "into",
    "french",
]


def _r(rng: random.Random, n: int, chars: str = ALNUM) -> str:
    return "".join(rng.choice(chars) for _ in range(n))


def _mixed(rng: random.Random, n: int, chars: str = ALNUM) -> str:
    while True:
        value = _r(rng, n, chars)
        kinds = (str.isdigit, str.isupper, str.islower)
        if all(any(k(c) for c in value) for k in kinds):
            return value


def sentence(rng: random.Random, n: int = 12) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "?"


def _crc_token(rng: random.Random, prefix: str) -> str:
    body = _mixed(rng, 30)
    return prefix + body + base62(binascii.crc32(body.encode()))


def _b64url_json(obj: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")


def _jwt(rng: random.Random, payload: dict[str, object]) -> str:
    header = _b64url_json({"alg": "RS256", "typ": "JWT", "kid": _r(rng, 8)})
    return f"{header}.{_b64url_json(payload)}.{_r(rng, 43, URLSAFE)}"


def _pem_body(rng: random.Random) -> str:
    return "\\n".join(_r(rng, 64, B64) for _ in range(3))


def _secret_values(rng: random.Random) -> dict[str, Callable[[], tuple[str, str]]]:
    """detector -> factory of (value, line)."""
    ts = "2026-11-29T10:00:00Z"

    def aws_id() -> tuple[str, str]:
        v = "AK" + "IA" + _r(rng, 16, string.ascii_uppercase + "234567")
        return v, f"{ts} INFO boto: using credentials access_key={v} region=us-east-1"

    def aws_secret() -> tuple[str, str]:
        v = _mixed(rng, 40, B64)
        return v, f'{ts} DEBUG env dump aws_secret_access_key="{v}" profile=default'

    def gh() -> tuple[str, str]:
        v = _crc_token(rng, "gh" + rng.choice("pousr") + "_")
        return v, f"{ts} ERROR git clone https://x-access-token:{v}@github.com/acme/models failed"

    def gh_fine() -> tuple[str, str]:
        v = "github" + "_pat_" + _mixed(rng, 22) + "_" + _mixed(rng, 59)
        return v, f'{{"level":"warn","msg":"token in request","token":"{v}"}}'

    def gitlab() -> tuple[str, str]:
        v = "gl" + "pat-" + _mixed(rng, 20)
        return v, f"{ts} INFO PRIVATE-TOKEN: {v} GET /api/v4/projects"

    def slack() -> tuple[str, str]:
        v = "xo" + f"xb-{_r(rng, 12, string.digits)}-{_r(rng, 13, string.digits)}-{_mixed(rng, 24)}"
        return v, f"{ts} INFO notifier: posting with {v}"

    def slack_hook() -> tuple[str, str]:
        upper = string.ascii_uppercase + string.digits
        v = (
            "https://hooks.slack.com/services/T"
            + _r(rng, 8, upper)
            + "/B"
            + _r(rng, 8, upper)
            + "/"
            + _mixed(rng, 24)
        )
        return v, f"{ts} INFO alert sink url={v}"

    def stripe() -> tuple[str, str]:
        v = "sk" + "_live_" + _mixed(rng, 24)
        return v, f"{ts} DEBUG billing client key={v}"

    def openai() -> tuple[str, str]:
        v = "sk-" + "proj-" + _mixed(rng, 24, URLSAFE) + "T3Blbk" + "FJ" + _mixed(rng, 24, URLSAFE)
        return v, f'{{"msg":"upstream call","headers":{{"authorization":"Bearer {v}"}}}}'

    def anthropic() -> tuple[str, str]:
        v = "sk-" + "ant-api03-" + _mixed(rng, 93, URLSAFE) + "AA"
        return v, f"{ts} DEBUG x-api-key: {v}"

    def hf() -> tuple[str, str]:
        v = "hf" + "_" + _mixed(rng, 34)
        return v, f"{ts} INFO downloading weights with token {v}"

    def npm() -> tuple[str, str]:
        v = _crc_token(rng, "np" + "m_")
        return v, f"{ts} INFO //registry.npmjs.org/:_authToken={v}"

    def pypi() -> tuple[str, str]:
        v = "pypi-" + "AgEIcHlwaS5vcmc" + _mixed(rng, 61, URLSAFE)
        return v, f"{ts} INFO twine upload --password {v}"

    def gcp_key() -> tuple[str, str]:
        v = "AI" + "za" + _mixed(rng, 35, URLSAFE)
        return v, f"{ts} INFO maps?key={v}&q=x"

    def gcp_sa() -> tuple[str, str]:
        body = _pem_body(rng)
        key = "-----BEGIN " + "PRIVATE KEY-----\\n" + body + "\\n-----END PRIVATE KEY-----"
        doc = (
            '{"type": "service_account", "project_id": "ml-prod", "private_key": "'
            + key
            + '", "client_email": "svc@ml-prod.iam.gserviceaccount.com"}'
        )
        return key, f"{ts} DEBUG loaded credentials {doc}"

    def pem() -> tuple[str, str]:
        key = (
            "-----BEGIN RSA "
            + "PRIVATE KEY-----\\n"
            + _pem_body(rng)
            + "\\n-----END RSA PRIVATE KEY-----"
        )
        return key, f'{{"msg":"tls config","key":"{key}"}}'

    def jwt() -> tuple[str, str]:
        v = _jwt(rng, {"sub": f"user-{rng.randrange(10**6)}", "exp": 1767229200, "iss": "auth"})
        return v, f"{ts} INFO session cookie={v}; path=/"

    def k8s() -> tuple[str, str]:
        v = _jwt(
            rng,
            {
                "iss": "kubernetes/serviceaccount",
                "kubernetes.io/serviceaccount/namespace": "ml",
                "sub": "system:serviceaccount:ml:loader",
            },
        )
        return v, f"{ts} DEBUG mounted token {v}"

    def bearer() -> tuple[str, str]:
        v = _mixed(rng, 32, ALNUM + "._-")
        return v, f"{ts} DEBUG request headers: Authorization: Bearer {v}"

    def db_url() -> tuple[str, str]:
        v = "postgresql://app:" + _mixed(rng, 16) + "@db.ml-prod.internal"
        return v, f"{ts} INFO connecting to {v}:5432/app"

    def azure_storage() -> tuple[str, str]:
        v = _mixed(rng, 86, B64) + "=="
        return v, f"{ts} INFO conn=DefaultEndpointsProtocol=https;AccountName=ml;AccountKey={v};"

    def azure_entra() -> tuple[str, str]:
        v = _r(rng, 3) + "8Q~" + _mixed(rng, 34, ALNUM + "_~.-")
        return v, f"{ts} DEBUG msal client_secret {v} tenant=x"

    def generic() -> tuple[str, str]:
        v = _mixed(rng, 24)
        return v, f'{ts} DEBUG config loaded {{"service_api_key": 1, "api_key": "{v}"}}'

    return {
        "aws_access_key_id": aws_id,
        "aws_secret_access_key": aws_secret,
        "github_token": gh,
        "github_fine_grained_pat": gh_fine,
        "gitlab_token": gitlab,
        "slack_token": slack,
        "slack_webhook": slack_hook,
        "stripe_secret_key": stripe,
        "openai_api_key": openai,
        "anthropic_api_key": anthropic,
        "huggingface_token": hf,
        "npm_token": npm,
        "pypi_token": pypi,
        "gcp_api_key": gcp_key,
        "gcp_service_account_key": gcp_sa,
        "private_key": pem,
        "jwt": jwt,
        "kubernetes_service_account_token": k8s,
        "authorization_header": bearer,
        "database_url_password": db_url,
        "azure_storage_key": azure_storage,
        "azure_entra_client_secret": azure_entra,
        "generic_secret_assignment": generic,
    }


CANARY = "SENTINEL-CANARY-" + "7f3a9c0e5b1d4e2f8a6c9b0d1e2f3a4b"


def _prompt_values(rng: random.Random) -> dict[str, Callable[[], tuple[str, str]]]:
    def vllm_old() -> tuple[str, str]:
        p = sentence(rng)
        line = (
            f"INFO 11-29 10:00:01 [logger.py:39] Received request cmpl-{_r(rng, 8)}: prompt: "
            f"'{p}', params: SamplingParams(n=1, temperature=0.7), prompt_token_ids: [1, 2, 3], "
            "lora_request: None."
        )
        return p, line

    def vllm_debug() -> tuple[str, str]:
        p = sentence(rng)
        return p, (
            f"(APIServer pid=7) DEBUG 11-29 10:00:01 [logger.py:49] Request chatcmpl-{_r(rng, 8)} "
            f"details: prompt: '{p}', prompt_token_ids: [128000, 9906], prompt_embeds shape: None."
        )

    def sglang() -> tuple[str, str]:
        p = sentence(rng)
        return p, (
            f"[2026-11-29 10:00:01] Receive: obj=GenerateReqInput(text='{p}', "
            f"sampling_params={{'max_new_tokens': 64}}, rid='{_r(rng, 12)}')"
        )

    def tgi() -> tuple[str, str]:
        p = sentence(rng)
        doc = {
            "timestamp": "2026-11-29T10:00:01Z",
            "level": "DEBUG",
            "fields": {"message": f"Input: {p}"},
            "target": "text_generation_router::server",
        }
        return p, json.dumps(doc)

    def litellm() -> tuple[str, str]:
        p = sentence(rng)
        body = json.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": p}]})
        return p, (
            "POST Request Sent from LiteLLM: curl -X POST https://api.example.invalid/v1/chat "
            f"-H 'Authorization: Bearer sk-qnW****' -d '{body}'"
        )

    def otel() -> tuple[str, str]:
        p = sentence(rng)
        msgs = json.dumps([{"role": "user", "parts": [{"type": "text", "content": p}]}])
        doc = {"name": "chat gpt-4o", "attributes": {"gen_ai.input.messages": msgs}}
        return p, json.dumps(doc)

    def openai_body() -> tuple[str, str]:
        p = sentence(rng)
        if rng.random() < 0.5:
            doc: dict[str, object] = {"model": "m", "messages": [{"role": "user", "content": p}]}
        else:
            doc = {"id": "cmpl-1", "choices": [{"index": 0, "message": {"content": p}}]}
        return p, "gateway request body=" + json.dumps(doc)

    def template() -> tuple[str, str]:
        p = sentence(rng)
        return p, f"DEBUG rendered=<|im_start|>user\\n{p}<|im_end|>\\n<|im_start|>assistant"

    def canary() -> tuple[str, str]:
        return CANARY, f"INFO tool call arguments: note {CANARY} end"

    return {
        "vllm_request_log": lambda: rng.choice([vllm_old, vllm_debug])(),  # noqa: PLW0108
        "sglang_request_log": sglang,
        "tgi_debug_log": tgi,
        "litellm_debug_log": litellm,
        "otel_genai_content": otel,
        "openai_compatible_body": openai_body,
        "chat_template_markers": template,
        "canary": canary,
    }


def positives(seed: int = 7, per_detector: int = 8) -> Iterator[tuple[str, str, str]]:
    rng = random.Random(seed)  # noqa: S311 (reproducible test data)
    factories = {**_secret_values(rng), **_prompt_values(rng)}
    for detector, make in factories.items():
        for _ in range(per_detector):
            value, line = make()
            yield detector, value, line


def negatives(seed: int = 11) -> Iterator[str]:
    rng = random.Random(seed)  # noqa: S311 (reproducible test data)
    ts = "2026-11-29T10:00:00Z"
    fixed = [
        "aws_access_key_id = AKIA" + "IOSFODNN7EXAMPLE",
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "EXAMPLEKEY",
        "OPENAI_API_KEY=sk-...",
        "export OPENAI_API_KEY=<YOUR_KEY>",
        "api_key = ${OPENAI_API_KEY}",
        "api_key: '{{ .Values.apiKey }}'",
        "password=********",
        "password: ****",
        "token=xxxxxxxxxxxxxxxxxxxxxxxx",
        "Authorization: Bearer <token>",
        "Authorization: Bearer ${TOKEN}",
        "Authorization: Basic dXNlcjpwYXNzd29yZA==",
        "postgresql://app:${DB_PASSWORD}@db:5432/app",
        "postgres://user:password@localhost:5432/db",
        "mysql://root:changeme@127.0.0.1/x",
        "HF_TOKEN is set; hf_transfer enabled",
        "secret_name=model-weights-reader",
        "password_length=16 password_min_digits=2",
        "client_secret: " + str(uuid.UUID(int=rng.getrandbits(128))),
        "ghp_" + _mixed(rng, 36) + " (bad checksum)",
        "npm_" + "a" * 36,
        "eyJ" + _r(rng, 20) + ".eyJ" + _r(rng, 20) + "." + _r(rng, 20),
        "-----BEGIN PRIVATE KEY-----\\nEXAMPLEFAKE\\n-----END PRIVATE KEY-----",
        '{"usage":{"prompt_tokens":512,"completion_tokens":128,"total_tokens":640}}',
        "vllm: prompt_tokens=512 generation_tokens=88",
        '{"model":"meta-llama/Llama-3.1-8B-Instruct","messages":[]}',
        '{"messages":[{"role":"user","content":""}]}',
        '{"messages":[{"role":"user","content":"[REDACTED]"}]}',
        '{"messages":[{"role":"user","content":"redacted-by-litellm"}]}',
        '{"prompt":"sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"}',
        "gen_ai.usage.input_tokens=42 gen_ai.usage.output_tokens=7 gen_ai.request.model=gpt-4o",
        '{"attributes":{"gen_ai.input.messages":"[]","gen_ai.request.model":"gpt-4o"}}',
        "INFO 11-29 10:00:01 [logger.py:39] Received request chatcmpl-9: params: "
        "SamplingParams(n=1, temperature=0.7, max_tokens=256), lora_request: None.",
        "chat template: {% for message in messages %}<|im_start|>{{ message.role }}\\n"
        "{{ message.content }}<|im_end|>{% endfor %}",
        "Input: 3 files, Output: 2 files written to /tmp/out",
        "model=meta-llama/Llama-3.1-70B-Instruct tokenizer=llama3",
        "sk_test_",
    ]
    for line in fixed:
        yield f"{ts} {line}"
    for i in range(300):
        kind = i % 6
        if kind == 0:
            yield f"{ts} INFO request_id={uuid.UUID(int=rng.getrandbits(128))} status=200"
        elif kind == 1:
            yield f"{ts} INFO blob sha256={_r(rng, 64, '0123456789abcdef')} size=1234"
        elif kind == 2:
            yield f"{ts} DEBUG payload={base64.b64encode(rng.randbytes(90)).decode()}"
        elif kind == 3:
            yield (
                f"INFO 11-29 10:00:00 [metrics.py:455] Avg prompt throughput: {rng.random():.1f} "
                "tokens/s, Running: 3 reqs, GPU KV cache usage: 41.2%"
            )
        elif kind == 4:
            yield f'10.0.0.{i % 250} - - [29/Nov/2026:10:00:00 +0000] "GET /health HTTP/1.1" 200 2'
        else:
            yield f"{ts} INFO commit {_r(rng, 40, '0123456789abcdef')} trace={_r(rng, 32, URLSAFE)}"
