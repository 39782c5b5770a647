"""``archfit data prepare``: a corpus (text files, JSONL, parquet) -> nanoGPT-format token files.

Writes ``train.bin`` and ``val.bin`` (raw little-endian uint16, or uint32 for vocabularies over
65,536) and ``manifest.json``: the tokenizer (kind, file hash, vocabulary, end-of-text id), the
token dtype and counts, and every source with its SHA-256. A sweep names its data by the
manifest, and the manifest's hash is part of each run's id.

It streams: documents are read, tokenized and appended in batches, so memory stays flat
whatever the corpus size. Its progress is saved after every batch (``prepare-state.json``); an
interrupted run resumes where it stopped. Documents go to validation deterministically (every
1/val_fraction-th document, the first one included). Tokenizers: tiktoken (``gpt2``, or a local ``.tiktoken`` BPE
file, or a folder holding GPT-2's ``vocab.bpe`` and ``encoder.json``), a Hugging Face
``tokenizers`` ``tokenizer.json``, or ``bytes`` (UTF-8 bytes, vocabulary 256).

Inputs are checked for what they are before any work: compressed sources (gzip, bzip2, xz,
zstd; by their first bytes, whatever their name) are read through a decompressor; a text or
JSONL source that looks binary is refused; a JSONL record whose text field is not a string is
refused, naming the field and the line; a tokenizer whose largest id does not fit the token
dtype is refused. The output folder follows archfit's one output rule
(:func:`archfit.io.check_output`): never an input, and never a folder of someone else's token
files without ``--force``.
"""

from __future__ import annotations

import bz2
import contextlib
import gzip
import hashlib
import json
import lzma
import os
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import numpy as np

from archfit.errors import ArchfitError, DataError
from archfit.io import atomic_write, check_output, file_sha256

MANIFEST = "manifest.json"
STATE = "prepare-state.json"
TEXT_BLOCK = 1 << 16  # text files are cut into documents of about this many bytes, at newlines
BATCH_BYTES = 1 << 22  # text tokenized per batch (and progress saved after each)
EOT_NAMES = ("<|endoftext|>", "</s>", "<eos>", "[EOS]", "<|end_of_text|>")
# every file prepare writes into its output folder
OUTPUTS = ("train.bin", "val.bin", MANIFEST, STATE, "train.bin.partial", "val.bin.partial")
SNIFF_BYTES = 1 << 16  # how much of a text source is read up front to see that it is text
BINARY_SHARE = 0.05  # more than this share of undecodable bytes (or any NUL): not text
# first bytes of the compressed formats read through a decompressor
MAGIC = ((b"\x1f\x8b", "gzip"), (b"BZh", "bzip2"), (b"\xfd7zXZ\x00", "xz"),
         (b"\x28\xb5\x2f\xfd", "zstd"))
COMPRESSED_SUFFIXES = (".gz", ".gzip", ".bz2", ".xz", ".zst", ".zstd")


class TokenizerError(ArchfitError):
    """A tokenizer that cannot be loaded."""


@dataclass
class Tokenizer:
    name: str
    kind: str  # tiktoken | tokenizers | bytes
    vocab_size: int
    eot: int | None
    sha256: str
    encode: Callable[[list[str]], list[Any]]  # token ids per text (lists or integer arrays)
    max_id: int = -1  # the largest id it can emit (-1: vocab_size - 1)

    @property
    def top_id(self) -> int:
        return self.max_id if self.max_id >= 0 else self.vocab_size - 1

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "vocab_size": self.vocab_size,
                "eot": self.eot, "sha256": self.sha256}


def _tiktoken(enc: Any, name: str, sha: str) -> Tokenizer:
    eot = enc.eot_token if "<|endoftext|>" in enc.special_tokens_set else None
    return Tokenizer(name, "tiktoken", enc.n_vocab, eot, sha,
                     lambda texts: enc.encode_ordinary_batch(texts),
                     max_id=int(getattr(enc, "max_token_value", enc.n_vocab - 1)))


def load_tokenizer(spec: str) -> Tokenizer:
    """``bytes``, ``gpt2`` (tiktoken), a ``.tiktoken`` BPE file, a folder with GPT-2's
    ``vocab.bpe`` + ``encoder.json``, or a ``tokenizer.json`` (HF tokenizers)."""
    if spec == "bytes":
        return Tokenizer("bytes", "bytes", 256, None, hashlib.sha256(b"utf-8 bytes").hexdigest(),
                         lambda texts: [np.frombuffer(t.encode("utf-8"), dtype=np.uint8)
                                        for t in texts])
    if spec == "gpt2":
        import tiktoken

        try:
            enc = tiktoken.get_encoding("gpt2")
        except Exception as e:  # noqa: BLE001 - network errors come in many types
            raise TokenizerError(
                "tiktoken could not load the gpt2 BPE (it downloads it on first use, and this "
                f"machine could not: {type(e).__name__}); give a local copy: --tokenizer "
                "path/to/gpt2.tiktoken, a folder with vocab.bpe and encoder.json, or a "
                "tokenizer.json") from None
        ranks = b"".join(k + v.to_bytes(4, "little") for k, v in
                         sorted(enc._mergeable_ranks.items(), key=lambda kv: kv[1]))
        return _tiktoken(enc, "gpt2", hashlib.sha256(ranks).hexdigest())
    if not os.path.exists(spec):
        raise TokenizerError(f"--tokenizer {spec}: no such file; use gpt2, bytes, a "
                             "tokenizer.json, a .tiktoken file or a folder with vocab.bpe and "
                             "encoder.json")
    if os.path.isdir(spec):
        return _data_gym(spec)
    if spec.endswith(".json"):
        return _hf_tokenizer(spec)
    return _tiktoken_file(spec)


def _gpt2_encoding(name: str, ranks: dict[bytes, int]) -> Any:
    import tiktoken
    from tiktoken_ext.openai_public import r50k_pat_str  # GPT-2's pre-tokenization pattern

    return tiktoken.Encoding(name=name, pat_str=r50k_pat_str, mergeable_ranks=ranks,
                             special_tokens={"<|endoftext|>": len(ranks)})


def _tiktoken_file(path: str) -> Tokenizer:
    from tiktoken.load import load_tiktoken_bpe

    try:
        ranks = load_tiktoken_bpe(path)
    except Exception as e:  # noqa: BLE001 - a file that does not parse, in any way
        raise TokenizerError(f"--tokenizer {path}: not a tiktoken BPE file (base64 token and "
                             f"rank per line): {type(e).__name__}") from None
    if not ranks:
        raise TokenizerError(f"--tokenizer {path}: the BPE file holds no tokens")
    return _tiktoken(_gpt2_encoding(os.path.basename(path), ranks), os.path.basename(path),
                     file_sha256(path))


def _data_gym(folder: str) -> Tokenizer:
    from tiktoken.load import data_gym_to_mergeable_bpe_ranks

    bpe, enc = os.path.join(folder, "vocab.bpe"), os.path.join(folder, "encoder.json")
    if not (os.path.exists(bpe) and os.path.exists(enc)):
        raise TokenizerError(f"--tokenizer {folder}: a folder must hold GPT-2's vocab.bpe and "
                             "encoder.json")
    try:
        ranks = data_gym_to_mergeable_bpe_ranks(bpe, enc)
    except Exception as e:  # noqa: BLE001
        raise TokenizerError(f"--tokenizer {folder}: vocab.bpe/encoder.json do not parse "
                             f"({type(e).__name__})") from None
    sha = hashlib.sha256((file_sha256(bpe) + file_sha256(enc)).encode()).hexdigest()
    return _tiktoken(_gpt2_encoding("gpt2-local", ranks), "gpt2-local", sha)


def _hf_tokenizer(path: str) -> Tokenizer:
    from tokenizers import Tokenizer as HF

    try:
        tok = HF.from_file(path)
    except Exception as e:  # noqa: BLE001 - tokenizers raises its own Exception type
        raise TokenizerError(f"--tokenizer {path}: not a tokenizers tokenizer.json "
                             f"({str(e).splitlines()[0][:120]})") from None
    vocab = tok.get_vocab(with_added_tokens=True)
    eot = next((vocab[n] for n in EOT_NAMES if n in vocab), None)

    def encode(texts: list[str]) -> list[list[int]]:
        return [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]

    return Tokenizer(os.path.basename(path), "tokenizers", tok.get_vocab_size(True), eot,
                     file_sha256(path), encode, max_id=max(vocab.values(), default=-1))


# ============================================================================ sources
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


def _documents(src: Source, field: str, column: str) -> Iterator[tuple[str, int]]:
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


# ============================================================================ prepare
def _settings(sources: list[Source], tok: Tokenizer, dtype: str, val_fraction: float,
              field: str, column: str) -> dict[str, Any]:
    return {"sources": [s.to_dict() for s in sources], "tokenizer": tok.to_dict(),
            "dtype": dtype, "val_fraction": val_fraction, "field": field, "column": column}


def _is_val(doc: int, val_fraction: float) -> bool:
    """Documents 0, k, 2k, ... (k = round(1/val_fraction)) are validation."""
    return doc % max(1, round(1 / val_fraction)) == 0


def prepare(paths: list[str], out_dir: str, tokenizer: str = "gpt2", *, field: str = "text",
            column: str = "text", dtype: str | None = None, val_fraction: float = 0.01,
            force: bool = False, progress: Callable[[int, int], None] | None = None
            ) -> dict[str, Any]:
    """Tokenize ``paths`` into ``out_dir`` (see the module doc); returns the manifest.
    ``progress(bytes_done, bytes_total)`` is called after every batch."""
    if not 0 < val_fraction < 1:
        raise DataError(f"--val-fraction must be between 0 and 1, got {val_fraction}")
    tok_file = [tokenizer] if tokenizer not in ("gpt2", "bytes") else []
    check_output(out_dir, "prepared data", inputs=[*paths, *tok_file], force=force,
                 ours=is_prepared_folder, folder=True, files=OUTPUTS)
    tok = load_tokenizer(tokenizer)
    if dtype is None:
        dtype = "uint16"
    if dtype not in ("uint16", "uint32"):
        raise DataError(f"--dtype must be uint16 or uint32, got {dtype!r}")
    if tok.top_id >= 1 << (8 * np.dtype(dtype).itemsize):
        raise DataError(f"the tokenizer's ids go up to {tok.top_id:,} (vocabulary "
                        f"{tok.vocab_size:,}), which does not fit {dtype} token ids; add "
                        "--dtype uint32")
    sources = check_sources(paths, field, column)
    settings = _settings(sources, tok, dtype, val_fraction, field, column)
    created = not os.path.exists(out_dir)
    state = _start(out_dir, settings, force)
    try:
        _run(sources, tok, np.dtype(dtype).newbyteorder("<"), state, out_dir, field, column,
             progress)
        return _finish(out_dir, settings, state)
    except DataError:
        if not state.get("resumed"):  # bad input found on the way: leave nothing half-made
            for name in (STATE, "train.bin.partial", "val.bin.partial"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(out_dir, name))
            if created:
                with contextlib.suppress(OSError):
                    os.rmdir(out_dir)
        raise


def is_prepared_folder(folder: str) -> bool:
    """Whether ``folder`` is archfit's prepared data (its manifest), or an interrupted
    ``data prepare`` (its progress file): the only folders prepare writes into without
    ``--force`` when token files are already there."""
    try:
        with open(os.path.join(folder, MANIFEST)) as f:
            m = json.load(f)
        if isinstance(m, dict) and m.get("format") == "nanogpt-bin" and "archfit_version" in m:
            return True
    except (OSError, ValueError):
        pass
    return os.path.isfile(os.path.join(folder, STATE))


def _read_state(st: str) -> dict[str, Any]:
    """An interrupted run's progress file, or a one-line refusal when it is damaged."""
    mend = "delete it, or use --force to start over"
    try:
        with open(st, encoding="utf-8") as f:
            state = json.load(f)
    except (ValueError, UnicodeDecodeError) as e:
        raise DataError(f"{st}: not a readable progress file ({type(e).__name__}); {mend}") \
            from None
    keys = ("settings", "source", "doc_in_source", "docs", "bytes", "train", "val")
    if not isinstance(state, dict) or not all(k in state for k in keys) or not all(
            isinstance(state[k], dict) and isinstance(state[k].get("tokens"), int)
            for k in ("train", "val")):
        raise DataError(f"{st}: not a progress file of archfit data prepare (expected an object "
                        f"with {', '.join(keys)}); {mend}")
    return state


def _start(out_dir: str, settings: dict[str, Any], force: bool) -> dict[str, Any]:
    """A fresh state, or the saved one of an interrupted run with the same settings (its
    partial token files cut back to what it recorded)."""
    man, st = os.path.join(out_dir, MANIFEST), os.path.join(out_dir, STATE)
    if os.path.isfile(out_dir):
        raise DataError(f"-o {out_dir}: is a file; give a folder")
    if os.path.exists(man) and not force:
        raise DataError(f"{out_dir}: already holds prepared data ({MANIFEST}); use another -o "
                        "or --force to replace it")
    os.makedirs(out_dir, exist_ok=True)
    if os.path.exists(st) and not force:
        state = _read_state(st)
        if state.get("settings") == settings:
            for split in ("train", "val"):
                part = os.path.join(out_dir, f"{split}.bin.partial")
                width = np.dtype(settings["dtype"]).itemsize
                with open(part, "ab") as fh:
                    fh.truncate(state[split]["tokens"] * width)
            state["resumed"] = True
            return state
    for split in ("train", "val"):
        open(os.path.join(out_dir, f"{split}.bin.partial"), "wb").close()
    state = {"settings": settings, "source": 0, "doc_in_source": 0, "docs": 0, "bytes": 0,
             "train": {"tokens": 0, "docs": 0}, "val": {"tokens": 0, "docs": 0},
             "resumed": False}
    atomic_write(st, json.dumps(state))
    return state


def _run(sources: list[Source], tok: Tokenizer, dt: np.dtype, state: dict[str, Any],
         out_dir: str, field: str, column: str,
         progress: Callable[[int, int], None] | None) -> None:
    total = sum(s.size for s in sources)
    files = {sp: open(os.path.join(out_dir, f"{sp}.bin.partial"), "ab") for sp in ("train",
                                                                                     "val")}
    vf = state["settings"]["val_fraction"]
    try:
        for si in range(state["source"], len(sources)):
            start = state["doc_in_source"] if si == state["source"] else 0
            first, batch, size = start, [], 0
            for di, (doc, nbytes) in enumerate(_documents(sources[si], field, column)):
                if di < start:  # done before an interruption
                    continue
                batch.append(doc)
                size += nbytes
                if size >= BATCH_BYTES:
                    _flush(batch, size, si, first, tok, dt, files, state, vf, out_dir)
                    first, batch, size = di + 1, [], 0
                    if progress:
                        progress(state["bytes"], total)
            if batch:
                _flush(batch, size, si, first, tok, dt, files, state, vf, out_dir)
            state["source"], state["doc_in_source"] = si + 1, 0
            atomic_write(os.path.join(out_dir, STATE), json.dumps(state))
            if progress:
                progress(state["bytes"], total)
    finally:
        for fh in files.values():
            fh.close()


def _flush(batch: list[str], size: int, si: int, first: int, tok: Tokenizer, dt: np.dtype,
           files: dict[str, Any], state: dict[str, Any], vf: float, out_dir: str) -> None:
    """Tokenize a batch of documents, append each to its split, save the progress."""
    ids = tok.encode(batch)
    top = np.iinfo(dt).max
    for toks in ids:
        split = "val" if _is_val(state["docs"], vf) else "train"
        wide = np.asarray(toks, dtype=np.int64)
        if wide.size and (int(wide.max()) > top or int(wide.min()) < 0):
            raise DataError(f"the tokenizer emitted id {int(wide.max()):,}, outside {dt.name} "
                            "token ids; use --dtype uint32")
        arr = wide.astype(dt)
        if tok.eot is not None:
            arr = np.append(arr, np.asarray([tok.eot], dtype=dt))
        _write(files[split], arr.tobytes())
        state[split]["tokens"] += len(arr)
        state[split]["docs"] += 1
        state["docs"] += 1
    for fh in files.values():
        try:
            fh.flush()
            os.fsync(fh.fileno())
        except OSError as e:
            e.filename = e.filename or fh.name  # name the file (and so its disk)
            raise
    state["source"], state["doc_in_source"] = si, first + len(batch)
    state["bytes"] += size
    atomic_write(os.path.join(out_dir, STATE), json.dumps(state))


def _write(fh: Any, data: bytes) -> None:
    try:
        fh.write(data)
    except OSError as e:
        e.filename = e.filename or fh.name  # a full disk names the file it was writing
        raise


def _finish(out_dir: str, settings: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
    tr, va, docs = state["train"]["tokens"], state["val"]["tokens"], state["docs"]
    if va < 2 or tr < 2:
        vf = settings["val_fraction"]
        every = max(1, round(1 / vf))
        if docs < 2:  # document 0 goes to validation: one document leaves training nothing
            mend = (f"there {'is' if docs == 1 else 'are'} {docs} document(s) and each split "
                    "needs one, whatever --val-fraction; add data (a text file is cut into "
                    f"documents of about {TEXT_BLOCK // 1024} KiB at newlines)")
        elif every == 1:
            mend = f"--val-fraction {vf} sends every document to validation; lower it"
        elif tr < 2:
            mend = "the training documents are (nearly) empty; add data"
        else:
            mend = (f"validation took documents 0, {every}, {2 * every}, ... and they are "
                    "(nearly) empty; raise --val-fraction or add data")
        raise DataError(f"{docs} documents made {tr} train and {va} validation tokens: too few "
                        f"for both splits; {mend}")
    splits = {}
    for split in ("train", "val"):
        part, final = (os.path.join(out_dir, f"{split}.bin.partial"),
                       os.path.join(out_dir, f"{split}.bin"))
        os.replace(part, final)
        splits[split] = {"file": f"{split}.bin", "tokens": state[split]["tokens"],
                         "documents": state[split]["docs"], "sha256": file_sha256(final)}
    from archfit import __version__

    manifest = {"format": "nanogpt-bin", "archfit_version": __version__,
                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "tokenizer": settings["tokenizer"], "vocab_size":
                settings["tokenizer"]["vocab_size"], "dtype": settings["dtype"],
                "byte_order": "little", **splits, "val_fraction": settings["val_fraction"],
                "sources": settings["sources"], "field": settings["field"],
                "column": settings["column"], "resumed": state.get("resumed", False)}
    atomic_write(os.path.join(out_dir, MANIFEST), json.dumps(manifest, indent=2))
    os.unlink(os.path.join(out_dir, STATE))
    return manifest


def manifest_hash(path: str) -> str:
    """SHA-256 of a prepared dataset's manifest (a folder holding one, or the file)."""
    p = os.path.join(path, MANIFEST) if os.path.isdir(path) else path
    if not os.path.isfile(p):
        raise DataError(f"{path}: no {MANIFEST} here (run archfit data prepare)")
    return file_sha256(p)
