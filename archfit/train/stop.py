"""Stopping a run on a signal, in bounded time: SIGTERM/SIGUSR2 checkpoint at the next step
boundary, a watchdog enforces the grace period even inside one long kernel, a second SIGTERM
exits at once (see :class:`StopSignals`)."""

from __future__ import annotations

import os
import signal
import threading
from typing import Any

from archfit.train.config import EXIT_PREEMPTED, STOP_GRACE_S


class Preempted(Exception):
    pass


class StopSignals:
    """SIGTERM/SIGUSR2 set a flag the loop checks at each step boundary (there it checkpoints
    and stops); the handlers installed before are restored afterwards (and called after the
    checkpoint: submitit's requeue).

    The stop is bounded even when the signal lands inside one long operation (a torch kernel
    holds the main thread, so a Python handler would run only when it returns): the C-level
    handler writes each signal to a pipe (:func:`signal.set_wakeup_fd`) at once, and a watchdog
    thread reading it starts the grace period then. A step still running ``grace_s`` after the
    signal is abandoned: the process exits with :data:`EXIT_PREEMPTED`, keeping the last
    checkpoint (written atomically, so intact). A second SIGTERM exits at once."""

    SIGNALS = (signal.SIGTERM, signal.SIGUSR2)

    def __init__(self) -> None:
        self.signum: int | None = None
        self.previous: dict[int, Any] = {}
        self.grace_s = float(os.environ.get("ARCHFIT_STOP_GRACE_S", STOP_GRACE_S))
        self.timer: threading.Timer | None = None
        self.terms = 0  # SIGTERMs seen (counted by the watchdog alone)
        self._pipe: tuple[int, int] | None = None
        self._old_fd = -1
        self._lock = threading.Lock()

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is not threading.main_thread():
            return self  # signals reach the main thread only: its owner handles them
        for sig in self.SIGNALS:
            self.previous[sig] = signal.signal(sig, self._on_signal)
        r, w = os.pipe()
        os.set_blocking(w, False)
        try:
            self._old_fd = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
        except ValueError:  # pragma: no cover - not the main thread of the main interpreter
            os.close(r)
            os.close(w)
            return self
        self._pipe = (r, w)
        threading.Thread(target=self._watch, args=(r,), name="archfit-stop-watchdog",
                         daemon=True).start()
        return self

    def _on_signal(self, signum: int, frame: Any) -> None:
        # runs when the main thread is between bytecodes: raise the flag now, so the loop
        # stops at the very next step boundary; the watchdog counts each signal (here when
        # set_wakeup_fd is unavailable) and starts the grace period
        if self._pipe is None:
            self._seen(signum)
        elif self.signum is None:
            self.signum = signum

    def _watch(self, fd: int) -> None:
        try:
            while True:
                data = os.read(fd, 64)
                if not data:  # the write end was closed: the run is over
                    return
                for signum in data:
                    if signum in self.SIGNALS:
                        self._seen(signum)
        except OSError:
            return
        finally:
            os.close(fd)  # the reader closes its own end, so the number is never reused under it

    def _seen(self, signum: int) -> None:
        with self._lock:
            if signum == signal.SIGTERM:
                self.terms += 1
                if self.terms > 1 or (self.signum is not None and self.signum != signum):
                    os._exit(EXIT_PREEMPTED)  # asked twice: now
            if self.signum is None:
                self.signum = signum
            if self.timer is None:
                self.timer = threading.Timer(self.grace_s, os._exit, args=(EXIT_PREEMPTED,))
                self.timer.daemon = True
                self.timer.start()

    def chain(self) -> None:
        prev = self.previous.get(self.signum)  # type: ignore[arg-type]
        if callable(prev):  # e.g. submitit's handler: requeue the job, then exit
            self._restore()
            prev(self.signum, None)

    def _restore(self) -> None:
        if self._pipe is not None:
            signal.set_wakeup_fd(self._old_fd)
            _, w = self._pipe
            self._pipe = None
            os.close(w)
        for sig, h in self.previous.items():
            signal.signal(sig, h)
        self.previous = {}

    def __exit__(self, *exc: Any) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self._restore()
