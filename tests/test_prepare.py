"""``archfit data prepare`` with real tokenizers and offline resources only: a BPE trained here
with HF ``tokenizers`` on the embedded corpus, a local tiktoken BPE file and the byte tokenizer;
text, JSONL and parquet sources; resume; flat memory; and a 6-run sweep on the prepared shards."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import sysconfig
from pathlib import Path

import numpy as np
import pytest

from archfit.train import prepare as prep

ROOT = Path(__file__).resolve().parents[1]
STDLIB = Path(sysconfig.get_paths()["stdlib"])


def _stdlib_texts(n: int) -> list[str]:
    files = sorted(p for p in STDLIB.glob("*.py"))[:n]
    return [p.read_text(encoding="utf-8", errors="replace") for p in files]


@pytest.fixture(scope="module")
def bpe(tmp_path_factory):
    """A byte-level BPE (vocabulary 1,000, <|endoftext|> special) trained here on stdlib text."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    d = tmp_path_factory.mktemp("bpe")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(_stdlib_texts(40), trainers.BpeTrainer(
        vocab_size=1000, special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    path = d / "tokenizer.json"
    tok.save(str(path))
    return path


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    d = tmp_path_factory.mktemp("corpus")
    texts = _stdlib_texts(60)
    with open(d / "docs.jsonl", "w") as f:
        for t in texts[:30]:
            f.write(json.dumps({"body": t, "id": 1}) + "\n")
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"content": texts[30:50]}), d / "docs.parquet")
    (d / "notes.txt").write_text("\n".join(texts[50:60]))
    return d


def _read(out: Path, split: str, dtype="uint16") -> np.ndarray:
    return np.fromfile(out / f"{split}.bin", dtype=np.dtype(dtype).newbyteorder("<"))


def test_jsonl_with_a_local_bpe_writes_nanogpt_shards_and_a_manifest(bpe, corpus, tmp_path):
    from tokenizers import Tokenizer

    out = tmp_path / "data"
    m = prep.prepare([str(corpus / "docs.jsonl")], str(out), str(bpe), field="body",
                     val_fraction=0.1)
    tok = Tokenizer.from_file(str(bpe))
    eot = tok.token_to_id("<|endoftext|>")
    texts = [json.loads(x)["body"] for x in (corpus / "docs.jsonl").read_text().splitlines()]
    ids = [tok.encode(t, add_special_tokens=False).ids + [eot] for t in texts]
    val = [x for i, x in enumerate(ids) if i % 10 == 0]
    train = [x for i, x in enumerate(ids) if i % 10]
    assert _read(out, "val").tolist() == [t for doc in val for t in doc]
    assert _read(out, "train").tolist() == [t for doc in train for t in doc]
    assert m["train"]["tokens"] == sum(map(len, train)) and m["val"]["documents"] == 3
    assert m["tokenizer"]["kind"] == "tokenizers" and m["vocab_size"] == 1000
    assert m["tokenizer"]["eot"] == eot and m["dtype"] == "uint16"
    assert m["sources"][0]["sha256"] == prep.file_sha256(str(corpus / "docs.jsonl"))
    assert json.loads((out / "manifest.json").read_text()) == m
    assert not (out / prep.STATE).exists() and not list(out.glob("*.partial"))
    # the trainer reads it through its manifest
    from archfit.train import data as data_mod

    td = data_mod.load(str(out))
    assert td.vocab_size == 1000 and len(td.train.tokens) == m["train"]["tokens"]
    assert td.data_hash == prep.manifest_hash(str(out))


def test_text_parquet_and_jsonl_together(bpe, corpus, tmp_path):
    m = prep.prepare([str(corpus / "notes.txt"), str(corpus / "docs.parquet"),
                      str(corpus / "docs.jsonl")], str(tmp_path / "d"), str(bpe),
                     field="body", column="content", val_fraction=0.05)
    assert [s["kind"] for s in m["sources"]] == ["text", "parquet", "jsonl"]
    assert m["train"]["documents"] + m["val"]["documents"] > 50


def test_bytes_and_a_local_tiktoken_file(corpus, tmp_path):
    m = prep.prepare([str(corpus / "notes.txt")], str(tmp_path / "b"), "bytes")
    text = (corpus / "notes.txt").read_bytes()
    both = np.concatenate([_read(tmp_path / "b", "train"), _read(tmp_path / "b", "val")])
    assert m["vocab_size"] == 256 and len(both) == len(text)
    ranks = tmp_path / "bytes.tiktoken"  # a BPE of the 256 single bytes, no merges
    ranks.write_text("".join(f"{base64.b64encode(bytes([i])).decode()} {i}\n"
                             for i in range(256)))
    m = prep.prepare([str(corpus / "notes.txt")], str(tmp_path / "t"), str(ranks))
    assert m["tokenizer"]["kind"] == "tiktoken" and m["vocab_size"] == 257
    assert m["tokenizer"]["eot"] == 256
    assert m["train"]["tokens"] + m["val"]["tokens"] == len(text) + m["train"]["documents"] \
        + m["val"]["documents"]


def test_an_interrupted_prepare_resumes_to_the_same_bytes(bpe, corpus, tmp_path, monkeypatch):
    monkeypatch.setattr(prep, "BATCH_BYTES", 20_000)
    src = [str(corpus / "docs.jsonl")]
    ref = prep.prepare(src, str(tmp_path / "ref"), str(bpe), field="body")
    calls = {"n": 0}

    def stop(done, total):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt

    out = tmp_path / "cut"
    with pytest.raises(KeyboardInterrupt):
        prep.prepare(src, str(out), str(bpe), field="body", progress=stop)
    state = json.loads((out / prep.STATE).read_text())
    assert 0 < state["docs"] < 30 and not (out / "manifest.json").exists()
    m = prep.prepare(src, str(out), str(bpe), field="body")
    assert m["resumed"] is True
    for split in ("train", "val"):
        assert (out / f"{split}.bin").read_bytes() == (tmp_path / "ref" / f"{split}.bin"
                                                       ).read_bytes()
        assert m[split] == ref[split]


def test_memory_stays_flat_on_a_large_corpus(tmp_path):
    """64 MiB of text through the byte tokenizer: the process grows by a few batches, not by
    the corpus."""
    big = tmp_path / "big.txt"
    line = ("the quick brown fox jumps over the lazy dog " * 4 + "\n").encode()
    with open(big, "wb") as f:
        for _ in range((64 << 20) // len(line)):
            f.write(line)
    script = (
        "from archfit.train.prepare import prepare\n"
        "def mem(key):  # VmHWM: this process's peak since exec (ru_maxrss keeps the fork's)\n"
        "    return [int(x.split()[1]) for x in open('/proc/self/status') if "
        "x.startswith(key)][0] * 1024\n"
        "base = mem('VmRSS')\n"
        f"prepare([{str(big)!r}], {str(tmp_path / 'o')!r}, 'bytes', val_fraction=0.001)\n"
        "print(mem('VmHWM') - base)\n")
    grow = int(subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                              check=True, timeout=300).stdout.split()[-1])
    print(f"\npeak memory growth preparing 64 MiB: {grow / 2**20:.1f} MiB")
    assert grow < 32 << 20


def _one_line_2(r):
    assert r.exit_code == 2, r.output
    lines = [x for x in r.output.splitlines() if x.strip() and not x.startswith("prepare:")]
    assert len(lines) == 1 and "Traceback" not in r.output, r.output
    return lines[0]


def test_bad_inputs_exit_2_with_one_line(cli, bpe, corpus, tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers

    big = Tokenizer(models.WordLevel({f"w{i}": i for i in range(70_000)}, unk_token="w0"))
    big.pre_tokenizer = pre_tokenizers.Whitespace()
    big.save(str(tmp_path / "big.json"))
    (tmp_path / "broken.json").write_text("{\"model\": 12")
    jl = str(corpus / "docs.jsonl")
    cases = [
        (("data", "prepare", tmp_path / "nope.txt", "-o", tmp_path / "a", "--tokenizer",
          "bytes"), "no such file"),
        (("data", "prepare", corpus / "docs.parquet", "-o", tmp_path / "b", "--tokenizer",
          "bytes", "--column", "nope"), "no column 'nope'"),
        (("data", "prepare", jl, "-o", tmp_path / "c", "--tokenizer", tmp_path / "broken.json"),
         "not a tokenizers tokenizer.json"),
        (("data", "prepare", jl, "-o", tmp_path / "d", "--tokenizer", tmp_path / "big.json",
          "--field", "body"), "--dtype uint32"),
        (("data", "prepare", jl, "-o", tmp_path / "e", "--tokenizer", "bytes"),
         "no field 'text'"),
        (("data", "prepare", jl, "-o", tmp_path / "f", "--tokenizer", tmp_path / "none.json"),
         "no such file"),
    ]
    for args, needle in cases:
        assert needle in _one_line_2(cli(*args)), args
    ok = cli("data", "prepare", jl, "-o", tmp_path / "g", "--tokenizer", tmp_path / "big.json",
             "--field", "body", "--dtype", "uint32", "--json")
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.output)["dtype"] == "uint32"
    again = cli("data", "prepare", jl, "-o", tmp_path / "g", "--tokenizer", "bytes",
                "--field", "body")
    assert "already holds prepared data" in _one_line_2(again)


def test_gpt2_tokenizer_loads_or_says_how_to_work_offline(cli, corpus, tmp_path, monkeypatch):
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "cache"))
    r = cli("data", "prepare", corpus / "notes.txt", "-o", tmp_path / "g", "--tokenizer", "gpt2")
    if r.exit_code == 0:  # a machine with internet: tiktoken downloaded GPT-2's BPE
        assert json.loads((tmp_path / "g" / "manifest.json").read_text())["vocab_size"] == 50257
    else:
        assert "local copy" in _one_line_2(r)


@pytest.mark.slow
def test_a_six_run_sweep_trains_on_prepared_shards(bpe, corpus, tmp_path):
    data = tmp_path / "data"
    prep.prepare([str(corpus / "docs.jsonl")], str(data), str(bpe), field="body",
                 val_fraction=0.1)
    spec = tmp_path / "s.toml"
    spec.write_text((ROOT / "sweeps" / "smoke.toml").read_text().replace(
        'name = "smoke"', f'name = "prepared"\ndata = "{data}"'))
    out = tmp_path / "runs"
    r = subprocess.run([sys.executable, "-m", "archfit", "sweep", "run", str(spec), "--out",
                        str(out)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, (r.stdout, r.stderr[-2000:])
    from archfit import sweep as sw

    s = sw.load_spec(str(spec))
    results = [json.loads((out / x.run_id / "result.json").read_text()) for x in s.runs]
    assert len(results) == 6 and all(x["status"] == "ok" for x in results)
    h = prep.manifest_hash(str(data))
    assert all(x["data_hash"] == h and x["config"]["data_sha256"] == h for x in results)
    assert all(x["shape"]["vocab_size"] == 1000 for x in results)
    # other data, other runs: the manifest's hash is in every run id
    other = tmp_path / "other"
    prep.prepare([str(corpus / "docs.jsonl")], str(other), str(bpe), field="body",
                 val_fraction=0.2)
    spec2 = tmp_path / "s2.toml"
    spec2.write_text(spec.read_text().replace(str(data), str(other)))
    assert not {x.run_id for x in s.runs} & {x.run_id for x in sw.load_spec(str(spec2)).runs}
