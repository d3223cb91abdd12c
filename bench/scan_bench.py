"""Leak-scanning throughput: Sentinel's detectors vs detect-secrets vs a `grep -c` ceiling.

Builds >= 200 MB of synthetic log lines (gateway JSON, vLLM stats, access logs, kubelet lines,
tracebacks, UUID/hex/base64 noise, key-ish bait) with planted leaks from the test corpus, then
measures in the same run:

* Sentinel end to end from lines (``sentinel.scan.scan_lines``: prefilter, detectors,
  fingerprints, masked rows), single process and across 2 processes;
* detect-secrets 1.5 default plugins, line by line, on a slice (it is ~1000x slower);
* ``grep -c -F`` with the fixed literals (a memory-bandwidth-ish ceiling);
* recall on planted values and precision of provider detectors.

Run: ``python bench/scan_bench.py [--mb 200] [--check]`` from the repository root.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import multiprocessing
import random
import string
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


from sentinel.detectors.engine import all_detectors
from sentinel.fingerprint import DEMO_KEY
from sentinel.scan import Settings, scan_lines
from tests.leak_corpus import CANARY, positives

HEX = "0123456789abcdef"
B64 = string.ascii_letters + string.digits + "+/"
GENERIC = {"generic_secret_assignment", "jwt", "authorization_header", "database_url_password"}


def _hex(rng: random.Random, n: int) -> str:
    return "".join(rng.choices(HEX, k=n))


def _noise(rng: random.Random, i: int) -> str:
    r = rng.randrange
    kind = i % 9
    if kind == 0:
        return (
            f'{{"ts":"2026-11-29T10:00:{i % 60:02d}.{i % 1000:03d}Z","level":"info",'
            f'"msg":"request done","path":"/v1/chat/completions","status":200,'
            f'"latency_ms":{r(2000)},"prompt_tokens":{r(4096)},"completion_tokens":{r(512)},'
            f'"request_id":"{_hex(rng, 32)}","model":"llama-3.1-70b-instruct"}}'
        )
    if kind == 1:
        return (
            f"INFO 11-29 10:00:00 [metrics.py:455] Avg prompt throughput: {r(3000)}.4 tokens/s, "
            f"Avg generation throughput: {r(300)}.1 tokens/s, Running: {r(64)} reqs, Swapped: 0 "
            f"reqs, Pending: 0 reqs, GPU KV cache usage: {r(100)}.2%, CPU KV cache usage: 0.0%."
        )
    if kind == 2:
        return f'10.{r(255)}.{r(255)}.{r(255)}:5{r(9999)} - "POST /v1/completions HTTP/1.1" 200 OK'
    if kind == 3:
        return (
            f'I1129 10:00:00.{r(10**6):06d}    1 kubelet.go:2451] "SyncLoop (PLEG): event for '
            f'pod" pod="inference/vllm-{_hex(rng, 5)}" event={{"ID":"{_hex(rng, 36)}",'
            f'"Type":"ContainerStarted"}}'
        )
    if kind == 4:
        return (
            '  File "/usr/lib/python3.11/site-packages/vllm/engine/llm_engine.py", '
            f"line {r(2000)}, in step"
        )
    if kind == 5:
        return f"DEBUG cache blob sha256={_hex(rng, 64)} size={r(10**9)} etag={_hex(rng, 32)}"
    if kind == 6:
        return "DEBUG attachment data=" + "".join(rng.choices(B64, k=160))
    if kind == 7:
        return (
            f"INFO token_refresh: token_ttl=3600 api_key_id=key-{r(100)} "
            "secret_name=model-weights-reader password_policy=strong auth=oidc"
        )
    return (
        f"INFO gen_ai.usage.input_tokens={r(4000)} gen_ai.usage.output_tokens={r(800)} "
        "gen_ai.request.model=gpt-4o"
    )


def build(mb: int, seed: int = 1) -> tuple[list[str], dict[int, tuple[str, str]]]:
    rng = random.Random(seed)
    planted_pool = list(positives(seed=seed, per_detector=6))
    target = mb * 1_000_000
    lines: list[str] = []
    planted: dict[int, tuple[str, str]] = {}
    size = 0
    every = max(1, (target // 160) // len(planted_pool))
    i = 0
    while size < target:
        if i % every == every // 2 and len(planted) < len(planted_pool):
            detector, value, line = planted_pool[len(planted)]
            planted[len(lines)] = (detector, value)
        else:
            line = _noise(rng, i)
        lines.append(line)
        size += len(line) + 1
        i += 1
    return lines, planted


def _sentinel(lines: list[str]) -> list[Any]:
    settings = Settings(fingerprint_key=DEMO_KEY, canaries=(CANARY,))
    return list(scan_lines(lines, settings))


_LINES: list[str] = []  # each worker builds its own copy (no pickling, no copy-on-write storm)


def _init_worker(mb: int) -> None:
    _LINES[:] = build(mb)[0]


def _sentinel_worker(bounds: tuple[int, int]) -> tuple[float, list[tuple[int, str]]]:
    """Scan a slice of this worker's corpus; returns its own wall time (start skew excluded)."""
    start, end = bounds
    part = _LINES[start:end]
    wall = time.perf_counter()
    rows = _sentinel(part)
    wall = time.perf_counter() - wall
    return wall, [(int(str(r["line"])) - 1 + start, str(r["detector"])) for r in rows]


def _detect_secrets(lines: list[str]) -> int:
    from detect_secrets.core.scan import scan_line
    from detect_secrets.settings import default_settings

    found = 0
    with default_settings():
        for line in lines:
            found += sum(1 for _ in scan_line(line))
    return found


def _measure_sentinel(
    lines: list[str], total: int, mb: int
) -> tuple[float, float, float, list[Any]]:
    """Wall-clock MB/s on 1 and 2 processes, and MB per CPU-second (contention-free figure)."""
    t, cpu = time.perf_counter(), time.process_time()
    rows = _sentinel(lines)
    single = total / 1e6 / (time.perf_counter() - t)
    per_cpu = total / 1e6 / (time.process_time() - cpu)
    half = len(lines) // 2
    spawn = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(
        2, mp_context=spawn, initializer=_init_worker, initargs=(mb,)
    ) as pool:
        parts = list(pool.map(_sentinel_worker, [(0, half), (half, len(lines))]))
        dual = total / 1e6 / max(wall for wall, _ in parts)
    expected = sorted((int(str(r["line"])) - 1, str(r["detector"])) for r in rows)
    assert sorted(x for _, p in parts for x in p) == expected
    return single, dual, per_cpu, rows


def _measure_detect_secrets(lines: list[str], mb: float) -> tuple[float, float, int]:
    n, size = 0, 0
    while size < mb * 1e6:
        size += len(lines[n]) + 1
        n += 1
    t = time.perf_counter()
    found = _detect_secrets(lines[:n])
    return size / 1e6, size / 1e6 / (time.perf_counter() - t), found


def _grep(cmd: list[str], total: int) -> tuple[float, str]:
    subprocess.run(cmd, capture_output=True, check=False)  # warm the page cache
    t = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    return total / 1e6 / (time.perf_counter() - t), out.stdout.strip()


def _measure_grep(lines: list[str], total: int) -> tuple[int, float, str, float]:
    """`grep -c -F` with the provider literals, and with one absent literal (the ceiling)."""
    # Fixed provider prefixes only: the generic keywords would match most lines.
    literals = sorted(
        {
            x
            for d in all_detectors(canaries=[CANARY])
            if d.rule_id == "logs.secret_leak" and d.name not in GENERIC
            for x in d.literals
        }
    )
    with tempfile.NamedTemporaryFile("w", suffix=".log", delete=False) as handle:
        handle.write("\n".join(lines) + "\n")
        path = handle.name
    try:
        cmd = ["grep", "-c", "-F"] + [arg for x in literals for arg in ("-e", x)] + [path]
        many, count = _grep(cmd, total)
        ceiling, _ = _grep(["grep", "-c", "-F", "SENTINEL-ABSENT-LITERAL", path], total)
        return len(literals), many, count, ceiling
    finally:
        Path(path).unlink()


def _quality(rows: list[Any], planted: dict[int, tuple[str, str]]) -> tuple[int, float]:
    hits: dict[int, set[str]] = {}
    for r in rows:
        hits.setdefault(int(str(r["line"])) - 1, set()).add(str(r["detector"]))
    found = sum(1 for i, (d, _) in planted.items() if d in hits.get(i, set()))
    tp: Counter[str] = Counter()
    fp: Counter[str] = Counter()
    for i, detectors in hits.items():
        for d in detectors:
            (tp if i in planted and planted[i][0] == d else fp)[d] += 1
    provider = [d for d in set(tp) | set(fp) if d not in GENERIC]
    return found, min((tp[d] / max(1, tp[d] + fp[d]) for d in provider), default=1.0)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=200)
    parser.add_argument("--ds-mb", type=float, default=2.0, help="detect-secrets slice (MB)")
    parser.add_argument("--check", action="store_true", help="exit 1 if a target is missed")
    args = parser.parse_args()

    t = time.perf_counter()
    lines, planted = build(args.mb)
    total = sum(len(x) + 1 for x in lines)
    kinds = len({d for d, _ in planted.values()})
    print(
        f"corpus: {total / 1e6:.1f} MB, {len(lines):,} lines, {len(planted)} planted "
        f"({kinds} detectors); built in {time.perf_counter() - t:.1f}s"
    )
    single, dual, per_cpu, rows = _measure_sentinel(lines, total, args.mb)
    ds_mb, ds, ds_found = _measure_detect_secrets(lines, args.ds_mb)
    n_literals, grep, grep_lines, ceiling = _measure_grep(lines, total)
    found, worst = _quality(rows, planted)
    recall = found / len(planted)

    print(f"\n{'engine':44} {'MB/s':>9} {'vs detect-secrets':>18}")
    print(f"{'sentinel scan_lines, 1 process':44} {single:9.1f} {single / ds:17.0f}x")
    print(f"{'sentinel scan_lines, 2 processes':44} {dual:9.1f} {dual / ds:17.0f}x")
    label = "sentinel, MB per CPU-second (1 process)"
    print(f"{label:44} {per_cpu:9.1f} {per_cpu / ds:17.0f}x   (wall figures share 2 cores)")
    label = f"detect-secrets 1.5 defaults (first {ds_mb:.1f} MB)"
    print(f"{label:44} {ds:9.2f} {1:17.0f}x   ({ds_found} findings in the slice)")
    label = f"grep -c -F {n_literals} provider literals"
    print(f"{label:44} {grep:9.1f}   (matching lines: {grep_lines})")
    print(f"{'grep -c -F one absent literal (ceiling)':44} {ceiling:9.1f}")
    print(
        f"\nrecall on planted values: {recall:.3f} ({found}/{len(planted)}); "
        f"worst provider-detector precision: {worst:.3f}; findings: {len(rows)}"
    )
    ok = max(single, dual) >= 100 and dual / ds >= 50 and recall == 1.0 and worst >= 0.99
    print(
        "targets (>=100 MB/s on 2 cores, >=50x detect-secrets, recall 1.0, precision >=0.99):",
        "met" if ok else "MISSED",
    )
    return 0 if ok or not args.check else 1


if __name__ == "__main__":
    raise SystemExit(main())
