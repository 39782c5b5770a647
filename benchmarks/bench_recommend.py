"""Cold `archfit recommend --params 1e12`, in seconds and against `python -c pass` in the same
run (the goal: at most 0.5 s, median of 9, from a wheel on a 2-core machine, with neither torch
nor matplotlib imported on its path: the script checks that too, and
tests/test_architecture.py asserts it).

    python benchmarks/bench_recommend.py               # the archfit this python imports
    python benchmarks/bench_recommend.py --installed   # the console script of a regular
                                                       # (wheel) install, as a user runs it

With --installed the 'archfit' on PATH must belong to this python's environment and archfit
must not be an editable install (whose import finder slows python's own start, the peer's
too, and flatters the ratio). Both run with bytecode
caching on, as an installed package has it (pip compiles at install); one warm-up run writes the
cache when PYTHONDONTWRITEBYTECODE had kept it from being written."""

import os
import shutil
import statistics
import subprocess
import sys
import time

ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def run(cmd):
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=ENV)
    return time.perf_counter() - t0


installed = "--installed" in sys.argv[1:]
exe = shutil.which("archfit")
if installed:
    import archfit as _af

    if not exe or os.path.dirname(os.path.abspath(exe)) != os.path.dirname(
            os.path.abspath(sys.executable)):
        sys.exit("--installed: no 'archfit' console script beside this python on PATH; install "
                 "the wheel into this environment (pip install dist/archfit-*.whl)")
    if "site-packages" not in _af.__file__:
        sys.exit(f"--installed: archfit here is an editable install ({_af.__file__}); build and "
                 "install the wheel in a fresh venv")
cmd = [exe] if exe else [sys.executable, "-m", "archfit"]
peer, ours = [sys.executable, "-c", "pass"], cmd + ["recommend", "--params", "1e12", "--json"]
run(peer), run(ours)  # the bytecode cache
base, rec = [], []
for _ in range(9):  # interleaved, so a busy moment costs both sides
    base.append(run(peer))
    rec.append(run(ours))
import archfit  # noqa: E402

probe = ("import sys; from archfit.cli import main; "
         "main(['recommend', '--params', '1e12', '--json'], standalone_mode=False); "
         "print(','.join(m for m in ('torch', 'matplotlib') if m in sys.modules) or 'neither', "
         "file=sys.stderr)")
heavy = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                       env=ENV).stderr.strip().splitlines()

# an editable install (the README's) runs its import finder in every python start, the peer's too
mode = "editable" if "site-packages" not in archfit.__file__ else "regular"
mode += " install, run as the console script" if exe else " install, run as python -m archfit"
print(f"archfit recommend --params 1e12: median {statistics.median(rec):.3f} s of 9 cold runs, "
      f"best {min(rec):.3f} s (goal: at most 0.5 s); python -c pass: {min(base):.3f} s "
      f"({min(rec) / min(base):.2f}x python's own start); {mode}")
print(f"imported on its path of torch and matplotlib: {heavy[-1] if heavy else '?'}")
