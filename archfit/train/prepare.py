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

import contextlib
import json
import os
import time
from typing import Any, Callable

import numpy as np

from archfit.train.corpus import TEXT_BLOCK, Source, check_sources, documents
from archfit.errors import DataError
from archfit.io import atomic_write, check_output, file_sha256
from archfit.train.tokenizers import Tokenizer, load_tokenizer

MANIFEST = "manifest.json"
STATE = "prepare-state.json"
BATCH_BYTES = 1 << 22  # text tokenized per batch (and progress saved after each)
# every file prepare writes into its output folder
OUTPUTS = ("train.bin", "val.bin", MANIFEST, STATE, "train.bin.partial", "val.bin.partial")


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
            for di, (doc, nbytes) in enumerate(documents(sources[si], field, column)):
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
    from archfit._version import __version__

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
