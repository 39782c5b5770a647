"""Token sources: nanoGPT ``.bin``, modded-nanogpt shards, ``.npy``, plain text (bytes), and the
embedded default corpus (this interpreter's standard-library sources, tokenized to bytes).

Everything is memory-mapped; training windows are random, validation windows fixed, so every run
of a sweep is evaluated on the same tokens.
"""

from __future__ import annotations

import hashlib
import os
import sysconfig
import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from archfit.errors import DataError
from archfit.io import atomic_path, atomic_write
from archfit.io import file_sha256 as _hash_file

SHARD_MAGIC = 20240520  # modded-nanogpt: 256 int32 header, [0]=magic, [1]=version, [2]=n_tokens
HEADER_INTS = 256
DEFAULT = "stdlib"
TEXT_EXTS = (".txt", ".py", ".md", ".rst", ".json", ".c", ".h", ".js", ".html", ".csv", ".tex")


def cache_dir() -> str:
    d = os.environ.get("ARCHFIT_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "archfit")
    os.makedirs(d, exist_ok=True)
    return d


@dataclass
class TokenSplit:
    tokens: np.ndarray  # 1-D, memory-mapped where possible
    path: str


@dataclass
class TokenData:
    """Train and validation tokens, the vocabulary and a content hash."""

    train: TokenSplit
    val: TokenSplit
    vocab_size: int
    data_hash: str
    name: str

    def check_window(self, ctx: int) -> None:
        for split in (self.train, self.val):
            if len(split.tokens) < ctx + 2:
                raise DataError(f"{split.path}: {len(split.tokens)} tokens, fewer than one window "
                                f"of {ctx + 1}; use a shorter --ctx or more data")

    def batch(self, rng: np.random.Generator, batch_size: int, ctx: int) -> tuple[Any, Any]:
        """Random training windows: (inputs, targets) as int64 numpy arrays."""
        t = self.train.tokens
        starts = rng.integers(0, len(t) - ctx - 1, batch_size)
        x = np.stack([t[s:s + ctx + 1] for s in starts]).astype(np.int64)
        return x[:, :-1], x[:, 1:]

    def val_windows(self, n: int, ctx: int) -> np.ndarray:
        """A fixed set of ``n`` validation windows (evenly spaced: the same for every run)."""
        t = self.val.tokens
        span = len(t) - ctx - 1
        n = max(1, min(n, span // max(1, ctx // 2) + 1))
        starts = np.linspace(0, span, n).astype(np.int64)
        return np.stack([t[s:s + ctx + 1] for s in starts]).astype(np.int64)


def _check_vocab(arr: np.ndarray, path: str, vocab: int | None) -> int:
    if len(arr) == 0:
        raise DataError(f"{path}: holds no tokens")
    top = 0
    for i in range(0, len(arr), 1 << 24):
        top = max(top, int(np.max(arr[i:i + (1 << 24)])))
    if vocab is not None and top >= vocab:
        raise DataError(f"{path}: token id {top} is >= the vocabulary size {vocab}; raise --vocab "
                        "or fix the data")
    return top


def read_tokens(path: str, dtype: str = "uint16") -> np.ndarray:
    """One token file: modded-nanogpt shard (magic header), raw ``.bin`` (uint16, or ``dtype``
    as a prepared dataset's manifest says), or ``.npy``."""
    if not os.path.exists(path):
        raise DataError(f"{path}: no such file")
    size = os.path.getsize(path)
    if size == 0:
        raise DataError(f"{path}: the file is empty")
    if path.endswith(".npy"):
        try:
            arr = np.load(path, mmap_mode="r")
        except ValueError as e:
            raise DataError(f"{path}: not a readable .npy array ({e})") from None
        if arr.ndim != 1 or arr.dtype.kind not in "iu":
            raise DataError(f"{path}: expected a 1-D integer array, got {arr.dtype} {arr.shape}")
        return arr
    if size >= HEADER_INTS * 4:
        head = np.fromfile(path, dtype=np.int32, count=3)
        if head[0] == SHARD_MAGIC:
            n = int(head[2])
            if HEADER_INTS * 4 + 2 * n > size:
                raise DataError(f"{path}: shard header says {n} tokens but the file is truncated")
            return np.memmap(path, dtype=np.uint16, mode="r", offset=HEADER_INTS * 4, shape=(n,))
    width = np.dtype(dtype).itemsize
    if size % width:
        what = "odd byte count" if size % 2 else f"{size} bytes"
        raise DataError(f"{path}: {what}: not a whole number of {dtype} tokens (nanoGPT .bin)")
    return np.memmap(path, dtype=np.dtype(dtype).newbyteorder("<"), mode="r")


def _bytes_cache(name: str, chunks: list[bytes]) -> tuple[str, str]:
    h = hashlib.sha256()
    for c in chunks:
        h.update(c)
    digest = h.hexdigest()
    path = os.path.join(cache_dir(), f"{name}-{digest[:16]}.bin")
    if not os.path.exists(path):
        arr = np.frombuffer(b"".join(chunks), dtype=np.uint8).astype(np.uint16)
        with atomic_path(path) as tmp:
            arr.tofile(tmp)
    return path, digest


def _text_files(folder: str) -> list[str]:
    out = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in (
            "site-packages", "dist-packages", "__pycache__"))
        for f in sorted(files):
            if f.endswith(TEXT_EXTS):
                out.append(os.path.join(root, f))
    return out


def _split_by_file(folder: str, files: list[str], name: str, val_every: int = 20
                   ) -> tuple[str, str, str]:
    """Bytes of the files, split by file: a file whose path hashes to 0 mod ``val_every`` is
    validation. Returns (train cache, val cache, content hash)."""
    import json

    sig = hashlib.sha256()
    for f in files:
        st = os.stat(f)
        sig.update(f"{f}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    manifest = os.path.join(cache_dir(), f"{name}-manifest-{sig.hexdigest()[:16]}.json")
    if os.path.exists(manifest):  # same files, same sizes and times: reuse the split
        with open(manifest) as fh:
            m = json.load(fh)
        if os.path.exists(m["train"]) and os.path.exists(m["val"]):
            return m["train"], m["val"], m["hash"]
    train, val = [], []
    h = hashlib.sha256()
    for f in files:
        rel = os.path.relpath(f, folder).replace(os.sep, "/")
        with open(f, "rb") as fh:
            b = fh.read()
        if not b:
            continue
        h.update(rel.encode() + b"\0" + b)
        (val if zlib.crc32(rel.encode()) % val_every == 0 else train).append(b)
    if not train or not val:
        raise DataError(f"{folder}: too few non-empty text files to split into train and "
                        "validation by file (need at least a few dozen)")
    tp, _ = _bytes_cache(f"{name}-train", train)
    vp, _ = _bytes_cache(f"{name}-val", val)
    atomic_write(manifest, json.dumps({"train": tp, "val": vp, "hash": h.hexdigest()}))
    return tp, vp, h.hexdigest()


def stdlib_root() -> str:
    return sysconfig.get_paths()["stdlib"]


def load(source: str | None = None, vocab_size: int | None = None) -> TokenData:
    """Open a token source.

    ``None``/``"stdlib"``: the embedded default (this Python's standard library sources, bytes,
    split by file). A folder holding ``train.bin`` and ``val.bin``: nanoGPT data (vocab from
    ``vocab_size`` or max token + 1). A folder or file of text: bytes (vocab 256), split by file
    for folders and 95/5 by position for one file. A token file (``.bin`` / shard / ``.npy``):
    the last 5% is validation.
    """
    if source in (None, "", DEFAULT):
        root = stdlib_root()
        tp, vp, digest = _split_by_file(root, _text_files(root), "stdlib")
        return _finish(tp, vp, 256, digest, f"stdlib:{root}")
    path = os.path.expanduser(str(source))
    if not os.path.exists(path):
        raise DataError(f"{path}: no such file or folder; give a nanoGPT folder (train.bin, "
                        "val.bin), a .bin/.npy token file, or text")
    if path.endswith("manifest.json") and os.path.isfile(path):
        path = os.path.dirname(path) or "."
    if os.path.isdir(path) and os.path.exists(os.path.join(path, "manifest.json")):
        return _prepared(path, vocab_size)
    if os.path.isdir(path):
        tb, vb = os.path.join(path, "train.bin"), os.path.join(path, "val.bin")
        if os.path.exists(tb) and os.path.exists(vb):
            train, val = read_tokens(tb), read_tokens(vb)
            top = max(_check_vocab(train, tb, vocab_size), _check_vocab(val, vb, vocab_size))
            digest = hashlib.sha256((_hash_file(tb) + _hash_file(vb)).encode()).hexdigest()
            return TokenData(TokenSplit(train, tb), TokenSplit(val, vb),
                             vocab_size or top + 1, digest, path)
        files = _text_files(path)
        if not files:
            raise DataError(f"{path}: no train.bin/val.bin and no text files in this folder")
        tp, vp, digest = _split_by_file(path, files, "text")
        return _finish(tp, vp, 256, digest, path)
    if path.endswith((".bin", ".npy")):
        arr = read_tokens(path)
        top = _check_vocab(arr, path, vocab_size)
        cut = int(len(arr) * 0.95)
        return TokenData(TokenSplit(arr[:cut], path), TokenSplit(arr[cut:], path + "[val]"),
                         vocab_size or top + 1, _hash_file(path), path)
    with open(path, "rb") as f:
        b = f.read()
    if not b:
        raise DataError(f"{path}: the file is empty")
    cut = int(len(b) * 0.95)
    tp, digest = _bytes_cache("text-train", [b[:cut]])
    vp, _ = _bytes_cache("text-val", [b[cut:]])
    return _finish(tp, vp, 256, hashlib.sha256(b).hexdigest(), path)


def _prepared(folder: str, vocab_size: int | None) -> TokenData:
    """A dataset written by ``archfit data prepare``: dtype and vocabulary from its manifest,
    identified by the manifest's hash."""
    import json

    man = os.path.join(folder, "manifest.json")
    try:
        with open(man) as f:
            m = json.load(f)
        dtype, vocab = m["dtype"], int(m["vocab_size"])
        files = [os.path.join(folder, m[s]["file"]) for s in ("train", "val")]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise DataError(f"{man}: not a readable archfit manifest ({e})") from None
    if vocab_size is not None and vocab > vocab_size:
        raise DataError(f"{man}: the tokenizer's vocabulary {vocab} exceeds the model's "
                        f"{vocab_size}; raise vocab_size")
    train, val = (read_tokens(p, dtype) for p in files)
    return TokenData(TokenSplit(train, files[0]), TokenSplit(val, files[1]),
                     vocab_size or vocab, _hash_file(man), folder)


def _finish(tp: str, vp: str, vocab: int, digest: str, name: str) -> TokenData:
    return TokenData(TokenSplit(np.memmap(tp, dtype=np.uint16, mode="r"), tp),
                     TokenSplit(np.memmap(vp, dtype=np.uint16, mode="r"), vp), vocab, digest,
                     name)
