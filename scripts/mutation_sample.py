"""Mutation testing of `archfit/designing/`, on a random sample of mutmut's mutants.

`mutmut run` over the whole package makes about 2,750 mutants; at tens of seconds of tests
each, that is a day on 2 cores, and its own runner timed out every mutant here. This script
lets mutmut generate the mutants and say which tests cover each (`mutmut tests-for-mutant`),
then runs a seeded random sample of them itself: a mutant is killed when its tests fail
(`pytest -x`, the mutant switched on with MUTANT_UNDER_TEST), and survives when they pass.

    pip install mutmut
    mutmut run   # once, stopped (Ctrl-C) after "Running mutation testing": makes the mutants
    mutmut results --all true > mutants.txt
    python scripts/mutation_sample.py mutants.txt --n 40 --seed 54

It prints each mutant's fate and the kill rate; `mutmut show NAME` shows a survivor's change.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor


def fate(name: str, timeout: float) -> tuple[str, str, float]:
    """(name, killed | survived | uncovered, seconds) for one mutant."""
    out = subprocess.run(["mutmut", "tests-for-mutant", name], capture_output=True, text=True)
    tests = [t for t in out.stdout.split() if t.startswith("tests/")]
    if not tests:
        return name, "uncovered", 0.0
    t0 = time.time()
    try:
        r = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
                            "-m", "not slow", *tests], cwd="mutants", capture_output=True,
                           text=True, timeout=timeout,
                           env={**os.environ, "MUTANT_UNDER_TEST": name})
        state = "survived" if r.returncode == 0 else "killed"
    except subprocess.TimeoutExpired:
        state = "killed"  # a mutant that hangs its tests is caught by their timeout
    return name, state, time.time() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mutants", help="the output of 'mutmut results --all true'")
    ap.add_argument("--n", type=int, default=40, help="mutants to sample")
    ap.add_argument("--seed", type=int, default=54)
    ap.add_argument("--timeout", type=float, default=240.0, help="seconds per mutant")
    ap.add_argument("--jobs", type=int, default=2)
    a = ap.parse_args()
    if not os.path.isdir("mutants"):
        sys.exit("mutation_sample: no mutants/ here: run 'mutmut run' first (see the docstring)")
    with open(a.mutants) as fh:
        names = [line.split(":")[0].strip() for line in fh if ":" in line]
    if not names:
        sys.exit(f"mutation_sample: no mutant names in {a.mutants}")
    sample = random.Random(a.seed).sample(names, min(a.n, len(names)))
    fates = []
    with ThreadPoolExecutor(a.jobs) as ex:
        for name, state, secs in ex.map(lambda n: fate(n, a.timeout), sample):
            fates.append(state)
            print(f"{state:>9}  {secs:5.0f} s  {name}", flush=True)
    killed = fates.count("killed")
    tested = len(fates) - fates.count("uncovered")
    print(f"\n{killed} of {tested} sampled mutants killed ({killed / max(tested, 1):.0%}); "
          f"{len(names)} mutants in all, seed {a.seed}")


if __name__ == "__main__":
    main()
