"""Detector quality on the labelled corpus: precision and recall per detector, printed and
asserted, plus the evidence rules (no value in previews or fingerprints)."""

from __future__ import annotations

from collections import Counter

import pytest

from sentinel.detectors.engine import Scanner, all_detectors
from sentinel.detectors.secrets import base62, crc32_checksum_ok
from sentinel.fingerprint import DEMO_KEY, Fingerprinter, mask
from sentinel.scan import Settings, scan_lines
from tests.leak_corpus import CANARY, negatives, positives

PROVIDER_MIN_PRECISION = 0.99


@pytest.fixture(scope="module")
def scanner() -> Scanner:
    return Scanner(all_detectors(canaries=[CANARY]))


def test_precision_and_recall_per_detector(scanner: Scanner) -> None:
    tp: Counter[str] = Counter()
    fn: Counter[str] = Counter()
    fp: Counter[str] = Counter()
    planted = list(positives())
    for detector, value, line in planted:
        hits = scanner.detect_line(line)
        matched = [h for h in hits if h.detector == detector and value in h.value]
        tp[detector] += 1 if matched else 0
        fn[detector] += 0 if matched else 1
        for hit in hits:
            if hit.detector != detector:
                fp[hit.detector] += 1
    negative_lines = list(negatives())
    for line in negative_lines:
        for hit in scanner.detect_line(line):
            fp[hit.detector] += 1
    print(f"\n{'detector':36} {'tp':>4} {'fn':>4} {'fp':>4} {'precision':>9} {'recall':>7}")
    failures = []
    for name in sorted(set(tp) | set(fn) | set(fp)):
        precision = tp[name] / max(1, tp[name] + fp[name])
        recall = tp[name] / max(1, tp[name] + fn[name])
        print(f"{name:36} {tp[name]:4} {fn[name]:4} {fp[name]:4} {precision:9.3f} {recall:7.3f}")
        if recall < 1.0 or precision < PROVIDER_MIN_PRECISION:
            failures.append(name)
    print(f"{len(planted)} planted lines, {len(negative_lines)} hard negatives")
    assert not failures
    assert len({d for d, _, _ in planted}) >= 30


def test_every_detector_is_covered_by_the_corpus() -> None:
    covered = {d for d, _, _ in positives(per_detector=1)}
    names = {d.name for d in all_detectors(canaries=[CANARY])}
    assert names == covered


def test_prefilter_finds_every_planted_line(scanner: Scanner) -> None:
    """The RE2 prefilter must be a superset of every detector (recall through the fast path)."""
    lines = [line for _, _, line in positives()] + list(negatives())
    found = {h.index for h in scanner.scan_lines(lines)}
    assert found == {i for i, (_, _, _) in enumerate(positives())}


def test_github_checksum() -> None:
    body = "A" * 15 + "b" * 15
    from binascii import crc32

    good = "ghp_" + body + base62(crc32(body.encode()))
    assert crc32_checksum_ok(good)
    assert not crc32_checksum_ok(good[:-1] + ("A" if good[-1] != "A" else "B"))


def test_evidence_never_contains_the_value() -> None:
    settings = Settings(fingerprint_key=DEMO_KEY, canaries=(CANARY,))
    planted = list(positives(seed=3, per_detector=3))
    rows = list(scan_lines((line for _, _, line in planted), settings))
    assert {r["line"] for r in rows} == set(range(1, len(planted) + 1))
    for row in rows:
        _, value, _ = planted[row["line"] - 1]
        text = " ".join(str(v) for v in row.values())
        assert value not in text
        assert value[-8:] not in text


def test_fingerprints_are_keyed_and_stable() -> None:
    a, b = Fingerprinter(b"k" * 32), Fingerprinter(b"j" * 32)
    assert a("value") == a("value") != b("value")
    with pytest.raises(Exception, match="shorter"):
        Fingerprinter(b"short")
    assert mask("ghp_" + "x" * 36, "ghp_") == "ghp_…xxxx (40 chars)"
    assert mask("a prompt", "prompt") == "[prompt: 8 chars]"


def test_multiline_entries_keep_line_numbers(scanner: Scanner) -> None:
    _, _, leak = next(positives())
    lines = ["first\nsecond", "ok", leak]
    assert [h.index for h in scanner.scan_lines(lines)] == [2]
