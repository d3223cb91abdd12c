"""Split CloudTrail files into one record per line, before DuckDB reads them.

A CloudTrail file is ONE JSON object, ``{"Records": [...]}``. Given to DuckDB's JSON reader, it
is parsed whole, each record is serialized back to text, and that text is parsed again to
extract fields: two parses and a serialization per record, most of the ingest time. Here msgspec
walks the envelope once and returns each record's exact bytes (``msgspec.Raw``: validated, not
decoded), and each record goes to a spool file as one line, ``<index>\\x01<record>``. DuckDB's CSV
reader splits those lines in parallel and each record is parsed once. The raw record kept for
investigation is therefore the original text, byte for byte.

Decompression uses ISA-L (``isal``), about 3x faster than zlib; it and the file writes release
the GIL, so a small thread pool splits the next files while DuckDB loads the current batch.
"""

from __future__ import annotations

import ctypes
import dataclasses
import itertools
import os
import shutil
import sys
import tempfile
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import cast

import msgspec
from isal import igzip
from isal.igzip_lib import IsalError

from sentinel.ingest import InputFile

# Neither byte can appear raw in valid JSON (control characters must be escaped inside strings,
# and only space, tab, CR and LF are whitespace), so a line splits unambiguously.
FIELD_SEPARATOR = b"\x01"
_NEWLINE = b"\n"
_SPLIT_THREADS = 2
# Compressed bytes split ahead of the loader (half a batch): enough to keep DuckDB fed, and the
# spool then holds at most ~1.5 batches of text (~1 GiB).
_AHEAD_BYTES = 32 * 1024**2
_INDEX_PREFIXES = [b"%d\x01" % i for i in range(8192)]
# isal's gzip module is untyped; it reads multi-member files like the standard library's.
_gunzip: Callable[[bytes], bytes] = igzip.decompress
# What a damaged gzip stream raises: truncation, a bad deflate block, a CRC or header mismatch.
# (isal's stub declares IsalError as an instance; it is a class.)
_CORRUPT_GZIP: tuple[type[Exception], ...] = (OSError, EOFError, cast("type[Exception]", IsalError))
_SHM = Path("/dev/shm")  # noqa: S108 - a memory-backed spool, chosen on purpose (spool_root)
_SHM_MIN_FREE = 2 * 1024**3


class _Envelope(msgspec.Struct):
    Records: list[msgspec.Raw]


_DECODER = msgspec.json.Decoder(_Envelope)


def split(f: InputFile, target: Path) -> InputFile:
    """Write ``f``'s records to ``target``, one per line; return ``f`` pointing at it (with
    ``meta['records']`` and ``meta['longest_record']``), or with ``unreadable`` set."""
    data = f.path.read_bytes()
    if f.compression == "gzip":
        try:
            data = _gunzip(data)
        except _CORRUPT_GZIP as exc:
            return dataclasses.replace(f, unreadable=("corrupt_compression", f"gzip: {exc}"))
    try:
        records = _DECODER.decode(data).Records
    except msgspec.ValidationError as exc:
        # Valid JSON of another shape: no Records array.
        return dataclasses.replace(f, unreadable=("no_records_envelope", str(exc)))
    except msgspec.DecodeError as exc:
        return dataclasses.replace(f, unreadable=("malformed_json", str(exc)))
    if not data.isascii():  # msgspec does not check the text of the records it skips
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as exc:
            return dataclasses.replace(f, unreadable=("malformed_json", f"not UTF-8: {exc}"))
    lines: list[bytes | msgspec.Raw] = list(records)
    if _NEWLINE in data:
        # Pretty-printed input: a newline in valid JSON is whitespace, so a space replaces it.
        lines = [bytes(r).replace(_NEWLINE, b" ") for r in records]
    pieces = zip(_prefixes(len(lines)), lines, itertools.repeat(_NEWLINE))
    target.write_bytes(b"".join(itertools.chain.from_iterable(pieces)))
    meta = {
        **f.meta,
        "records": str(len(lines)),
        "longest_record": str(max(map(len, lines), default=0)),
    }
    return dataclasses.replace(f, path=target, compression="none", meta=meta)


def _prefixes(count: int) -> Iterable[bytes]:
    if count <= len(_INDEX_PREFIXES):
        return _INDEX_PREFIXES
    return itertools.chain(
        _INDEX_PREFIXES, (b"%d\x01" % i for i in range(len(_INDEX_PREFIXES), count))
    )


def spool_root() -> Path:
    """Where split files go: ``$SENTINEL_SPOOL_DIR`` if set, else ``/dev/shm`` when it has room
    (a memory-backed filesystem: the files live for seconds, and writing gigabytes through a
    disk's page cache costs more CPU than splitting them), else the system temp directory."""
    configured = os.environ.get("SENTINEL_SPOOL_DIR")
    if configured:
        return Path(configured)
    try:
        if os.access(_SHM, os.W_OK) and shutil.disk_usage(_SHM).free >= _SHM_MIN_FREE:
            return _SHM
    except OSError:
        pass
    return Path(tempfile.gettempdir())


def keep_large_buffers() -> None:
    """Ask glibc to keep freed large buffers for reuse instead of unmapping them.

    Each file is decompressed into a fresh ~10 MB buffer; by default glibc maps such buffers
    from the kernel and unmaps them on free, so every file pays for page faults on fresh
    zeroed pages (a third of the split's CPU time here). Best effort, glibc only."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return
    m_trim_threshold, m_mmap_threshold = -1, -3  # from <malloc.h>
    libc.mallopt(m_mmap_threshold, 256 * 1024**2)
    libc.mallopt(m_trim_threshold, 512 * 1024**2)


def split_ahead(
    files: Iterable[InputFile], spool: Path, *, discard_originals: bool
) -> Iterator[InputFile]:
    """``split`` every file into ``spool``, in order, on a thread pool that stays up to
    ``_AHEAD_BYTES`` of input ahead of the consumer. ``discard_originals`` deletes each input
    once split (downloaded copies)."""
    pending: deque[tuple[Future[InputFile], int]] = deque()
    in_flight = 0
    counter = itertools.count()
    source = iter(files)

    def work(f: InputFile, target: Path) -> InputFile:
        try:
            return split(f, target)
        finally:
            if discard_originals:
                f.path.unlink(missing_ok=True)

    with ThreadPoolExecutor(max_workers=_SPLIT_THREADS, thread_name_prefix="split") as pool:
        while True:
            while not pending or in_flight < _AHEAD_BYTES:
                nxt = next(source, None)
                if nxt is None:
                    break
                target = spool / f"records-{next(counter):07d}.txt"
                pending.append((pool.submit(work, nxt, target), nxt.size))
                in_flight += nxt.size
            if not pending:
                return
            future, size = pending.popleft()
            in_flight -= size
            yield future.result()
