"""The bottom layer: atomic writes, file hashes and JSON-safe values. Every writer in archfit
goes through :func:`atomic_write` or :func:`atomic_path`, so a file is either its old self or
its new self, never torn, even when the process is killed mid-write."""

from __future__ import annotations

import threading
import contextlib
import hashlib
import math
import os
from typing import Any, Callable, Iterable, Iterator

from archfit.errors import OutputError
from archfit.interval import Interval

TMP_MARK = ".tmp-"  # every temporary file's name holds this (sweeps clean such leftovers)


def _fsync_dir(folder: str) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory handles
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover - some file systems refuse fsync on directories
        pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[str]:
    """Yield a temporary path beside ``path`` for a writer that needs a file name (parquet,
    ``torch.save``, ``savefig``). On success the file is fsynced, renamed over ``path`` and the
    directory fsynced; on any failure the temporary file is removed and ``path`` is untouched."""
    target = os.path.abspath(os.fspath(path))
    folder = os.path.dirname(target)
    os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, f"{TMP_MARK}{os.getpid()}-{threading.get_ident()}-"
                               f"{os.path.basename(target)}")
    try:
        yield tmp
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, target)
        _fsync_dir(folder)
    except OSError as e:
        if e.filename is None or e.filename == tmp:
            e.filename = target  # name the user's file (and so its disk), not our temp file
        raise
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def atomic_write(path: str | os.PathLike[str], data: str | bytes) -> None:
    """Write ``data`` (text as UTF-8, or bytes) to ``path`` atomically."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        f.write(raw)


def held_by_another(lock: str | os.PathLike[str]) -> bool:
    """Whether another process holds an exclusive ``flock`` on the file ``lock`` (False where
    it does not exist): the one probe of a sweep's run locks and a campaign's lock."""
    import fcntl

    if not os.path.exists(lock):
        return False
    with open(lock, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # BlockingIOError where held; any other failure: not ours to take
            return True
        fcntl.flock(f, fcntl.LOCK_UN)
    return False


def file_sha256(path: str | os.PathLike[str]) -> str:

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def jsonable(obj: Any) -> Any:
    """Make ``obj`` JSON-safe: NaN/inf become null, numpy scalars and arrays become Python, an
    :class:`archfit.interval.Interval` its one JSON shape."""
    if isinstance(obj, Interval):
        return jsonable(obj.to_json())
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if hasattr(obj, "item") and callable(obj.item) and not isinstance(obj, (str, bytes)):
        try:
            return jsonable(obj.item())
        except (TypeError, ValueError):
            pass
    if hasattr(obj, "tolist") and not isinstance(obj, (str, bytes)):
        return jsonable(obj.tolist())
    return obj


def _same(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)


def _writable_ancestor(path: str) -> None:
    """The nearest existing ancestor of ``path`` must be a folder this process can write."""
    anc = os.path.dirname(os.path.abspath(path))
    while not os.path.exists(anc):
        anc = os.path.dirname(anc)
    if not os.path.isdir(anc):
        raise OutputError(f"{anc}: is a file, not a folder; choose another output path")
    if not os.access(anc, os.W_OK | os.X_OK):
        raise OutputError(f"{anc}: cannot write here (permission denied); choose a folder you "
                          "can write to")


def check_output(path: str | os.PathLike[str], what: str, *,
                 inputs: Iterable[str | os.PathLike[str]] = (), force: bool = False,
                 ours: Callable[[str], bool] | None = None, folder: bool = False,
                 files: Iterable[str] = (), file_ours: Callable[[str], bool] | None = None
                 ) -> None:
    """The one rule for every output archfit writes, checked before any work:

    - never an input of the same command, even with ``force`` (for a ``folder``, neither the
      folder nor any of the ``files`` the command writes into it);
    - never a file or folder that archfit did not make, unless ``force``: an existing file is
      replaced only when ``ours(path)`` says it is archfit's ``what``; an existing folder whose
      ``files`` are already there is written into only when ``ours(folder)`` says so (without
      ``ours``, a folder is archfit's to fill, as a sweep or figures folder is), and each of
      those files is replaced only when ``file_ours(file)`` says it is archfit's;
    - never a directory where a file is due, a file where a folder is due, or a place this
      process cannot write.
    """
    p = os.fspath(path)
    if not p.strip():
        raise OutputError(f"the {what}'s path is empty; give a {'folder' if folder else 'file'} "
                          "name")
    names = list(files)
    targets = [p] + [os.path.join(p, f) for f in names] if folder else [p]
    for i in inputs:
        for t in targets:
            if _same(t, os.fspath(i)):
                raise OutputError(f"{t}: is also an input of this command; write the {what} "
                                  "elsewhere (--force never replaces an input)")
    if folder:
        if os.path.exists(p):
            if not os.path.isdir(p):
                raise OutputError(f"{p}: is a file; give a folder for the {what}")
            if not os.access(p, os.W_OK | os.X_OK):
                raise OutputError(f"{p}: cannot write here (permission denied); choose a folder "
                                  "you can write to")
            there = [f for f in names if os.path.lexists(os.path.join(p, f))]
            if there and ours is not None and not ours(p) and not force:
                raise OutputError(f"{p}: already holds {', '.join(there)}, not made by archfit; "
                                  f"refusing to replace them (choose another folder for the "
                                  f"{what}, or --force to overwrite)")
            for f in there:
                if os.path.isdir(os.path.join(p, f)):
                    raise OutputError(f"{os.path.join(p, f)}: is a directory where the {what} "
                                      "writes a file; choose another folder")
            foreign = [f for f in there if file_ours is not None and not force
                       and not file_ours(os.path.join(p, f))]
            if foreign:
                raise OutputError(f"{os.path.join(p, foreign[0])}: exists and was not made by "
                                  f"archfit; refusing to replace it (move it, choose another "
                                  f"folder for the {what}, or --force to overwrite)")
            return
        _writable_ancestor(p)
        return
    if os.path.isdir(p):
        raise OutputError(f"{p}: is a directory; give a file path for the {what}")
    _writable_ancestor(p)
    if os.path.exists(p):
        if not os.access(p, os.W_OK) and not force:
            raise OutputError(f"{p}: exists and is read-only; refusing to replace it")
        if not force and not (ours is not None and ours(p)):
            raise OutputError(f"{p}: exists and is not an archfit {what}; refusing to replace it "
                              "(choose another path, or --force to overwrite)")
