"""Hand-written mutants of `archfit/record.py`, each run against the tests that hold the
records to the standard library's dataclasses: a mutant is killed when those tests fail.

mutmut (scripts/mutation_sample.py) samples its own mutants of a package; this one names, for
the record module alone, the change a plausible bug would make: the class check of __eq__, the
compared fields, the frozen checks, the required and unknown arguments, inheritance, asdict's
copies and namedtuples, the kept methods. It works in a copy of the package and the tests in a
temporary folder, so the checkout is never changed.

    python scripts/mutation_record.py
"""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
TESTS = ("tests/test_record.py", "tests/test_shapes.py", "tests/test_cli_fast.py")

muts = [
 ("if other.__class__ is not self.__class__:", "if not isinstance(other, type(self)):"),
 ("return hash(tuple([getattr(self, n) for n in names]))", "return hash(tuple([getattr(self, n) for n in names][:1]))"),
 ("compared = tuple(f.name for f in flds if f.compare)", "compared = tuple(f.name for f in flds)"),
 ("methods[\"__repr__\"] = _make_repr(tuple(f.name for f in flds if f.repr))", "methods[\"__repr__\"] = _make_repr(tuple(f.name for f in flds))"),
 ("if type(self) is cls or name in names:\n                raise FrozenInstanceError(f\"cannot assign", "if name in names:\n                raise FrozenInstanceError(f\"cannot assign"),
 ("methods[\"__hash__\"] = _make_hash(compared) if frozen else None", "methods[\"__hash__\"] = _make_hash(compared)"),
 ("            if seen_default and not has:", "            if False:"),
 ("            if isinstance(f.default, (list, dict, set)):", "            if isinstance(f.default, (set,)):"),
 ("                    d[name] = factory()", "                    pass"),
 ("            if post:\n                self.__post_init__()", "            pass"),
 ("            if not known.issuperset(kw):", "            if False:"),
 ("            if not required.issubset(kw):", "            if False:"),
 ("                if len(args) > n:", "                if False:"),
 ("                    if name in kw:\n                        raise TypeError(f\"{qual}.__init__() got multiple", "                    if False:\n                        raise TypeError(f\"{qual}.__init__() got multiple"),
 ("        for base in reversed(cls.__mro__[1:]):", "        for base in cls.__mro__[1:2][:0]:"),
 ("            if name not in own:  # a method", "            if True:  # a method"),
 ("            return type(v)(*[_asdict(x) for x in v])", "            return list(_asdict(x) for x in v)"),
 ("        return copy.deepcopy(v)", "        return v"),
 ("            if f.name not in changes:", "            if True:"),
 ("                if f.default is MISSING:\n                    delattr(cls, name)", "                if f.default is MISSING:\n                    pass"),
 ("                 for f in owner.__record_fields__], return_annotation=None)", "                 for f in owner.__record_fields__[1:]], return_annotation=None)"),
]


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(tmp)
        shutil.copytree(ROOT / "archfit", work / "archfit",
                        ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copytree(ROOT / "tests", work / "tests",
                        ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copy(ROOT / "pyproject.toml", work / "pyproject.toml")
        path = work / "archfit" / "record.py"
        orig = path.read_text()
        cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *TESTS]
        if subprocess.run(cmd, cwd=work, capture_output=True).returncode:  # the control
            sys.exit("the tests fail on the unmutated copy: no mutant can be judged")
        killed = 0
        for i, (a, b) in enumerate(muts):
            if orig.count(a) != 1:
                sys.exit(f"mutant {i}: its text is not once in archfit/record.py; update it")
            path.write_text(orig.replace(a, b))
            r = subprocess.run(cmd, cwd=work, capture_output=True, text=True)
            killed += r.returncode != 0
            print(f"{i:>2} {'killed' if r.returncode else 'SURVIVED':>8}  {b.splitlines()[0].strip()[:70]}")
        print(f"killed {killed} of {len(muts)}")


if __name__ == "__main__":
    main()
