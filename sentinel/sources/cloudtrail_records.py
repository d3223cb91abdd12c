"""Split CloudTrail files into one record per line, before DuckDB reads them.

A CloudTrail file is ONE JSON object, ``{"Records": [...]}``. Given to DuckDB's JSON reader, it
is parsed whole, each record is serialized back to text, and that text is parsed again to
extract fields: two parses and a serialization per record, most of the ingest time. Here msgspec
walks the envelope once and returns each record's exact bytes (``msgspec.Raw``: validated, not
decoded), and each record goes to a spool file as one line, ``<index>\\x01<record>``. DuckDB's CSV
reader splits those lines in parallel and each record is parsed once. The raw record kept for
investigation is therefore the original text, byte for byte.

Decompression uses ISA-L (``isal``), several times faster than zlib; it and the file writes release
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
from collections.abc import Callable, Generator, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import cast

import msgspec
from isal import igzip
from isal.igzip_lib import IsalError

from sentinel.errors import SourceError
from sentinel.ingest import InputFile

# \x01 cannot appear raw in valid JSON (control characters must be escaped inside strings and are
# not whitespace), and split() turns the only raw newlines JSON allows (whitespace between
# tokens) into spaces, so each line splits unambiguously into index and record.
FIELD_SEPARATOR = b"\x01"
_NEWLINE = b"\n"
_CR = b"\r"
_BOM = b"\xef\xbb\xbf"
_SPLIT_THREADS = 2
# JSON text split ahead of the loader: enough to keep DuckDB fed while it loads a batch. The
# spool then holds at most one batch plus this (~1.4 GiB).
_AHEAD_BYTES = 384 * 1024**2
_GZIP_RATIO = 10  # typical for CloudTrail JSON; only used when the trailer cannot be read
_INDEX_PREFIXES = [b"%d" % i + FIELD_SEPARATOR for i in range(8192)]
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
    ``meta['records']``, ``meta['longest_record']`` and ``meta['text_bytes']``), or with
    ``unreadable`` set. A spool that cannot be written is an error for the whole run."""
    try:
        data = f.path.read_bytes()
    except OSError as exc:
        return dataclasses.replace(f, unreadable=("unreadable", f"cannot read: {exc}"))
    if f.compression == "gzip":
        try:
            data = _gunzip(data)
        except _CORRUPT_GZIP as exc:
            return dataclasses.replace(f, unreadable=("corrupt_compression", f"gzip: {exc}"))
    if data.startswith(_BOM):
        data = data[len(_BOM) :]
    if len(data) < 16 and not data.strip():
        return dataclasses.replace(f, unreadable=("no_records_envelope", "the file is empty"))
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
    if _NEWLINE in data or _CR in data:
        # Pretty-printed or CRLF input. In valid JSON these bytes are whitespace between tokens
        # (inside strings they must be escaped), so a space keeps the record's meaning.
        lines = [bytes(r).replace(_NEWLINE, b" ").replace(_CR, b" ") for r in records]
    pieces = zip(_prefixes(len(lines)), lines, itertools.repeat(_NEWLINE))
    try:
        target.write_bytes(b"".join(itertools.chain.from_iterable(pieces)))
    except OSError as exc:
        raise SourceError(
            f"cannot write the split copy of {f.uri} to {target.parent}: {exc}",
            hint="free space there, or point SENTINEL_SPOOL_DIR at a larger directory",
        ) from exc
    meta = {
        **f.meta,
        "records": str(len(lines)),
        "longest_record": str(max(map(len, lines), default=0)),
        "text_bytes": str(len(data)),
    }
    return dataclasses.replace(f, path=target, compression="none", meta=meta)


def text_size(f: InputFile) -> int:
    """The JSON text a file holds: measured once split, else estimated from the gzip trailer."""
    if "text_bytes" in f.meta:
        return int(f.meta["text_bytes"])
    if f.compression != "gzip" or f.unreadable:
        return f.size
    # gzip's trailer holds the uncompressed length modulo 2**32 (ISIZE, RFC 1952 section 2.3.1).
    try:
        with f.path.open("rb") as handle:
            handle.seek(-4, os.SEEK_END)
            isize = int.from_bytes(handle.read(4), "little")
    except OSError:
        return f.size * _GZIP_RATIO
    # Deflate cannot expand more than ~1032x; a damaged trailer must not look like gigabytes.
    return max(f.size, min(isize, f.size * 1032))


def _prefixes(count: int) -> Iterable[bytes]:
    if count <= len(_INDEX_PREFIXES):
        return _INDEX_PREFIXES
    return itertools.chain(
        _INDEX_PREFIXES,
        (b"%d" % i + FIELD_SEPARATOR for i in range(len(_INDEX_PREFIXES), count)),
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
) -> Generator[InputFile, None, None]:
    """``split`` every file into ``spool``, in order, on a thread pool that stays up to
    ``_AHEAD_BYTES`` of JSON text ahead of the consumer. ``discard_originals`` deletes each input
    once split (downloaded copies). Closing the iterator cancels queued work and waits for the
    running splits, so the spool can be removed right after."""
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

    pool = ThreadPoolExecutor(max_workers=_SPLIT_THREADS, thread_name_prefix="split")
    try:
        while True:
            while not pending or in_flight < _AHEAD_BYTES:
                nxt = next(source, None)
                if nxt is None:
                    break
                target = spool / f"records-{next(counter):07d}.txt"
                weight = text_size(nxt)
                pending.append((pool.submit(work, nxt, target), weight))
                in_flight += weight
            if not pending:
                return
            future, weight = pending.popleft()
            in_flight -= weight
            yield future.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
