"""Tokenizers for ``archfit data prepare``: tiktoken (``gpt2``, a local ``.tiktoken`` BPE file,
or a folder holding GPT-2's ``vocab.bpe`` and ``encoder.json``), a Hugging Face ``tokenizers``
``tokenizer.json``, or ``bytes`` (UTF-8 bytes, vocabulary 256). Each says its vocabulary, its
end-of-text id, the largest id it can emit and a hash of its files."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from archfit.errors import ArchfitError
from archfit.io import file_sha256

EOT_NAMES = ("<|endoftext|>", "</s>", "<eos>", "[EOS]", "<|end_of_text|>")


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
