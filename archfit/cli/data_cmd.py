"""``archfit data prepare``: tokenize a local corpus into nanoGPT-format shards."""

from __future__ import annotations

import sys

import click

from archfit.cli.common import PATH, NUMBER, emit_json


@click.group()
def data() -> None:
    """Prepare training data (tokenized .bin shards with a manifest)."""


@data.command()
@click.argument("sources", nargs=-1, required=True, metavar="SRC...")
@click.option("-o", "--out", "out_dir", required=True, type=PATH, metavar="DIR",
              help="Folder for train.bin, val.bin and manifest.json.")
@click.option("--tokenizer", default="gpt2", show_default=True,
              help="gpt2 (tiktoken), bytes, a tokenizer.json (HF tokenizers), a .tiktoken BPE "
                   "file, or a folder with GPT-2's vocab.bpe and encoder.json.")
@click.option("--field", default="text", show_default=True, help="JSONL: the text field.")
@click.option("--column", default="text", show_default=True, help="Parquet: the text column.")
@click.option("--dtype", type=click.Choice(["uint16", "uint32"]), default=None,
              help="Token width (default uint16; vocabularies over 65,536 need uint32).")
@click.option("--val-fraction", type=NUMBER, default=0.01, show_default=True,
              help="Share of documents (every 1/f-th) that go to validation.")
@click.option("--force", is_flag=True, help="Replace prepared data already in DIR.")
@click.option("--json", "as_json", is_flag=True, help="Print the manifest as JSON.")
def prepare(sources, out_dir, tokenizer, field, column, dtype, val_fraction, force, as_json):
    """Tokenize text files, JSONL (--field) or parquet (--column) into DIR/train.bin and
    DIR/val.bin (nanoGPT format) with DIR/manifest.json. Streams (flat memory), shows progress,
    and resumes an interrupted run. A sweep names the data by DIR (data = "DIR").

    Example: archfit data prepare corpus/*.jsonl -o data/mine --tokenizer tokenizer.json
    """
    from archfit.train.prepare import prepare as run

    cb, bar = _progress(as_json)
    try:
        m = run(list(sources), out_dir, tokenizer, field=field, column=column, dtype=dtype,
                val_fraction=val_fraction, force=force, progress=cb)
    finally:
        if bar is not None:
            bar.stop()
    if as_json:
        emit_json(m)
        return
    t = m["tokenizer"]
    click.echo(f"wrote {out_dir}: {m['train']['tokens']:,} train and {m['val']['tokens']:,} "
               f"validation tokens ({m['train']['documents']:,} + {m['val']['documents']:,} "
               f"documents), {m['dtype']}")
    click.echo(f"tokenizer {t['name']} ({t['kind']}), vocabulary {t['vocab_size']:,}, "
               f"end-of-text {t['eot']}; {len(m['sources'])} source(s), hashes in "
               f"{out_dir}/manifest.json" + (" (resumed)" if m["resumed"] else ""))


def _progress(quiet: bool):  # type: ignore[no-untyped-def]
    if quiet:
        return None, None
    if sys.stderr.isatty():
        from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn

        bar = Progress("prepare", BarColumn(), DownloadColumn(), TimeRemainingColumn(),
                       transient=True)
        task = bar.add_task("prepare", total=None)
        bar.start()
        return (lambda done, total: bar.update(task, completed=done, total=total)), bar
    state = {"next": 0.0}

    def plain(done: int, total: int) -> None:
        if total and done / total >= state["next"]:
            state["next"] = done / total + 0.1
            click.echo(f"prepare: {done / total:.0%} of {total / 2**20:,.1f} MiB", err=True)

    return plain, None
