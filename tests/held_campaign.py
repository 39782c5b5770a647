"""Run ``archfit campaign ...`` and hold it at a moment, to be killed there: the fault injection
of the campaign's SIGKILL tests (archfit itself has no such hook).

    python tests/held_campaign.py MOMENT[:N] campaign run SPEC --out DIR

MOMENT is ``train`` (the N-th run of the campaign has finished), ``fit`` (the N-th fit has
begun) or ``ledger`` (the N-th ledger is written to its temporary file, not yet in place). At
that moment it writes ``DIR/.held`` and waits for the kill."""

from __future__ import annotations

import json
import os
import sys
import time

import archfit.campaign as cp
from archfit.campaign import ledger, loop
from archfit.cli import main
from archfit.io import atomic_path

moment, _, nth = sys.argv[1].partition(":") if __name__ == "__main__" else ("", "", "")
want = int(nth or 1)
out = sys.argv[sys.argv.index("--out") + 1] if __name__ == "__main__" else ""
seen = 0


def hold() -> None:
    global seen
    seen += 1
    if seen == want:
        with open(os.path.join(out, ".held"), "w", encoding="utf-8") as f:
            f.write(moment)
        while True:
            time.sleep(1)


def write(where: str, led: ledger.Ledger) -> None:  # ledger.write, held before the rename
    with atomic_path(os.path.join(where, ledger.LEDGER)) as tmp:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(led.to_dict(), f, indent=1, sort_keys=True)
        if moment == "ledger":
            hold()


real_run = loop.run
event = {"train": "run", "fit": "fitting"}.get(moment)


def run(spec, where, *, restart=False, progress=None):  # type: ignore[no-untyped-def]
    def say(e):  # type: ignore[no-untyped-def]
        if progress is not None:
            progress(e)
        if e["event"] == event:
            hold()

    return real_run(spec, where, restart=restart, progress=say)


if __name__ == "__main__":  # run workers (spawned) import this file again: they must not run
    ledger.write = write  # type: ignore[assignment]
    loop.run = cp.run = run  # type: ignore[assignment]
    main(sys.argv[2:])
