"""Typed exceptions raised by the archfit API.

Every bad input raises a subclass of :class:`ArchfitError` whose message is one
line saying what is wrong and how to mend it. The CLI turns these into
``Error: <message>`` on stderr and exit status 2.
"""

from __future__ import annotations


class ArchfitError(ValueError):
    """Base class of every error archfit raises on bad input."""


class ShapeError(ArchfitError):
    """An impossible transformer shape (e.g. width not divisible by heads)."""


class NumberError(ArchfitError):
    """A number that cannot be parsed (``50M``, ``1.3B`` and ``1e12`` are fine)."""


class DataError(ArchfitError):
    """A token source that is missing, empty or inconsistent."""


class SpecError(ArchfitError):
    """A sweep specification that does not validate; lists every problem found."""

    def __init__(self, problems: list[str] | str, path: str | None = None):
        if isinstance(problems, str):
            problems = [problems]
        self.problems = list(problems)
        self.path = path
        where = f"{path}: " if path else ""
        if len(self.problems) == 1:
            msg = f"{where}{self.problems[0]}"
        else:
            msg = f"{where}{len(self.problems)} problems: " + "; ".join(self.problems)
        super().__init__(msg)


class IntervalError(ArchfitError):
    """An interval that cannot be one: an unknown kind, ends that are not numbers or are out of
    order, a level outside (0, 1)."""


class FitError(ArchfitError):
    """A law could not be fitted: too few points, degenerate input or no convergence."""


class FitInputError(ArchfitError):
    """A table of runs that cannot be read or lacks the columns a law needs."""


class RecommendError(ArchfitError):
    """A recommendation that cannot be made from the given law or options."""


class OutputError(ArchfitError):
    """An output path that would destroy or cannot hold a result (an input, a foreign file, a
    directory where a file is due, a folder that cannot be written)."""


class WorkerError(ArchfitError):
    """A worker process (a bootstrap chunk, a run) failed where this process did not: the
    worker's exception in one line, and its own traceback (:attr:`worker_traceback`) for the
    crash log."""

    def __init__(self, msg: str, worker_traceback: str = ""):
        super().__init__(msg)
        self.worker_traceback = worker_traceback


class Stopped(BaseException):
    """A stop signal (SIGTERM) reached a command while its workers trained: raised in the main
    thread so the command stops the workers it started before it exits (status 143, as a job
    stopped by SIGTERM). A BaseException, like KeyboardInterrupt: no ``except Exception``
    swallows it."""

    def __init__(self, signum: int):
        super().__init__(f"stopped by signal {signum}")
        self.signum = signum


class UninformativeWarning(UserWarning):
    """An answer whose verdict is ``uninformative``: the evidence does not support it (pass
    ``strict=True`` to raise :class:`RecommendError` instead). The CLI prints the verdict itself."""


class RunDirError(ArchfitError):
    """A run directory that cannot be used as asked (another run's checkpoint, say)."""


def describe_os_error(e: OSError) -> str:
    """One line for a failure of the operating system: what, which file, how to mend."""
    import errno

    where = e.filename if e.filename is not None else \
        "a file archfit was writing or reading (the system did not say which)"
    hints = {
        errno.ENOSPC: "no space left on the disk that holds it; free space or write elsewhere",
        errno.EDQUOT: "disk quota exceeded; free space or write elsewhere",
        errno.EACCES: "permission denied; choose a folder you can write to",
        errno.EPERM: "operation not permitted; choose a folder you can write to",
        errno.EROFS: "the file system is read-only; write elsewhere",
        errno.ENOENT: "no such file or directory",
        errno.EISDIR: "is a directory; give a file path",
        errno.ENOTDIR: "a part of the path is a file, not a directory",
        errno.ENAMETOOLONG: "the file name is too long",
    }
    hint = hints.get(e.errno or -1, e.strerror or type(e).__name__)
    return f"{where}: {hint}"
