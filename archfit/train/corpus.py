"""The sources of a corpus for ``archfit data prepare``, checked for what they are before any
work: text files (cut into documents at newlines), JSONL (a text field per record) and parquet
(a text column); gzip, bzip2, xz and zstd compression read through a decompressor (known by
their first bytes, whatever their name); binary "text" and non-string fields refused."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import os
from dataclasses import dataclass
from typing import Any, Iterator

from archfit.errors import DataError
from archfit.io import file_sha256

TEXT_BLOCK = 1 << 16  # text files are cut into documents of about this many bytes, at newlines
SNIFF_BYTES = 1 << 16  # how much of a text source is read up front to see that it is text
BINARY_SHARE = 0.05  # more than this share of undecodable bytes (or any NUL): not text
# first bytes of the compressed formats read through a decompressor
MAGIC = ((b"\x1f\x8b", "gzip"), (b"BZh", "bzip2"), (b"\xfd7zXZ\x00", "xz"),
         (b"\x28\xb5\x2f\xfd", "zstd"))
COMPRESSED_SUFFIXES = (".gz", ".gzip", ".bz2", ".xz", ".zst", ".zstd")


@dataclass(frozen=True)
class Source:
    path: str
    kind: str  # text | jsonl | parquet
    size: int
    sha256: str
    compression: str | None = None  # gzip | bzip2 | xz | zstd

    def to_dict(self) -> dict[str, Any]:
        d = {"path": self.path, "kind": self.kind, "bytes": self.size, "sha256": self.sha256}
        if self.compression:
            d["compression"] = self.compression
        return d


def _kind(path: str) -> str:
    base = path.lower()
    for suffix in COMPRESSED_SUFFIXES:
        base = base.removesuffix(suffix)
    if base.endswith(".parquet"):
        return "parquet"
    if base.endswith((".jsonl", ".ndjson", ".jsonl.txt")):
        return "jsonl"
    return "text"


def _compression(path: str) -> str | None:
    with open(path, "rb") as f:
        head = f.read(8)
    return next((name for magic, name in MAGIC if head.startswith(magic)), None)


def _open(raw: Any, compression: str | None, path: str) -> Any:
    """A binary file object giving the decompressed bytes of ``raw`` (the file on disk, whose
    position then says how much of it has been read)."""
    if compression is None:
        return raw
    if compression == "gzip":
        return gzip.GzipFile(fileobj=raw, mode="rb")
    if compression == "bzip2":
        return bz2.BZ2File(raw, "rb")
    if compression == "xz":
        return lzma.LZMAFile(raw, "rb")
    try:
        from compression import zstd  # type: ignore[import-not-found]  # Python >= 3.14

        return zstd.ZstdFile(raw, "rb")
    except ImportError:
        pass
    try:
        import zstandard  # type: ignore[import-not-found]
    except ImportError:
        raise DataError(f"{path}: is zstd-compressed, and reading zstd needs Python >= 3.14 or "
                        "the zstandard package (pip install zstandard); or decompress it "
                        "first (zstd -d)") from None
    import io

    return io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(  # type: ignore[arg-type]
        raw, read_across_frames=True))


def _sniff(path: str, compression: str | None) -> None:
    """Refuse a text/JSONL source whose first bytes are not text (or not a valid stream of its
    compression), before any work."""
    try:
        with open(path, "rb") as raw, _open(raw, compression, path) as f:
            head = f.read(SNIFF_BYTES)
    except DataError:
        raise
    except (OSError, EOFError, lzma.LZMAError) as e:
        raise DataError(f"{path}: not a readable {compression} file ({type(e).__name__}: "
                        f"{str(e).splitlines()[0][:80] if str(e) else ''}); check the file "
                        "or decompress it yourself") from None
    except Exception as e:  # noqa: BLE001 - zstd readers raise their own error types
        raise DataError(f"{path}: not a readable {compression} file ({type(e).__name__})") \
            from None
    if not head:
        return
    text = head.decode("utf-8", errors="replace")
    bad = text.count("\ufffd") - (1 if text.endswith("\ufffd") else 0)  # a cut last character
    share = bad / max(1, len(text))
    if b"\x00" in head or share > BINARY_SHARE:
        why = "it holds NUL bytes" if b"\x00" in head else \
            f"{share:.0%} of its first {len(head) // 1024} KiB is not UTF-8 text"
        raise DataError(f"{path}: looks like binary data, not text ({why}); give text, JSONL "
                        "or parquet sources (compressed with gzip, bzip2, xz or zstd is fine)")


def check_sources(paths: list[str], field: str, column: str) -> list[Source]:
    """Every source exists, is what its kind says (text is text, a compressed file is read
    through its decompressor), and its field/column is there (checked before any work)."""
    if not paths:
        raise DataError("give at least one source file (text, .jsonl or .parquet)")
    out = []
    for p in paths:
        if not os.path.isfile(p):
            raise DataError(f"{p}: no such file" + ("; give files, not folders"
                                                     if os.path.isdir(p) else ""))
        kind, comp = _kind(p), _compression(p)
        if kind == "parquet":
            if comp is not None:
                raise DataError(f"{p}: a {comp}-compressed parquet file; decompress it first "
                                "(parquet compresses its own pages)")
            _check_parquet(p, column)
        else:
            _sniff(p, comp)
        out.append(Source(p, kind, os.path.getsize(p), file_sha256(p), comp))
    return out


def _check_parquet(p: str, column: str) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        schema = pq.ParquetFile(p).schema_arrow
    except Exception as e:  # noqa: BLE001 - pyarrow raises several types
        raise DataError(f"{p}: not a readable parquet file ({type(e).__name__})") from None
    if column not in schema.names:
        raise DataError(f"{p}: no column {column!r} (columns: {', '.join(schema.names)}); "
                        "name the text column with --column")
    t = schema.field(column).type
    is_text = pa.types.is_string(t) or pa.types.is_large_string(t) or (
        hasattr(pa.types, "is_string_view") and pa.types.is_string_view(t))
    if not is_text:
        raise DataError(f"{p}: column {column!r} holds {t}, not text; name the text column "
                        "with --column")


def _type_name(v: Any) -> str:
    return {type(None): "null", bool: "a boolean", int: "a number", float: "a number",
            list: "a list", dict: "an object"}.get(type(v), type(v).__name__)


def documents(src: Source, field: str, column: str) -> Iterator[tuple[str, int]]:
    """(document, bytes of the file read for it) in order; text files in blocks of about
    TEXT_BLOCK bytes at newlines."""
    if src.kind == "parquet":
        import pyarrow.parquet as pq

        f = pq.ParquetFile(src.path)
        per_row = src.size / max(1, f.metadata.num_rows)
        for batch in f.iter_batches(columns=[column], batch_size=1024):
            for v in batch.column(0).to_pylist():
                if v is not None:  # a missing document
                    yield v, int(per_row)
        return
    with open(src.path, "rb") as raw, _open(raw, src.compression, src.path) as fh:
        pos = 0

        def read() -> int:  # bytes of the file on disk consumed since the last document
            nonlocal pos
            now = raw.tell()
            done, pos = now - pos, now
            return max(0, done)

        if src.kind == "jsonl":
            for i, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except ValueError:
                    raise DataError(f"{src.path} line {i}: not valid JSON") from None
                if not isinstance(rec, dict) or field not in rec:
                    raise DataError(f"{src.path} line {i}: no field {field!r}; name the text "
                                    "field with --field")
                if not isinstance(rec[field], str):
                    raise DataError(f"{src.path} line {i}: field {field!r} is "
                                    f"{_type_name(rec[field])}, not a string; fix that record "
                                    "or name the text field with --field")
                yield rec[field], read()
            return
        while True:
            block = fh.read(TEXT_BLOCK)
            if not block:
                return
            if len(block) == TEXT_BLOCK:
                block += fh.readline()
            yield block.decode("utf-8", errors="replace"), read()
