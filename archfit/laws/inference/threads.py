"""One BLAS thread inside every fit. A law's fit is many small dense problems (an SVD of a
Jacobian of a few thousand rows, a least-squares step): a second BLAS thread only contends, the
more so on a busy machine or beside a bootstrap worker (a 2,702 x 17 SVD took 32 ms at 2 threads
on a busy 2-core machine and 1.4 ms at one).

threadpoolctl limits only the libraries loaded when the limit is entered, and scipy ships an
OpenBLAS of its own beside numpy's, loaded by the first import of scipy's compiled modules. So
:func:`one_blas_thread` imports them first, then limits every library loaded."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator


def load_blas() -> None:
    """Import the compiled modules a fit calls, so that every BLAS they bring is loaded."""
    import numpy.linalg  # noqa: F401  numpy's OpenBLAS
    import scipy.linalg  # noqa: F401  scipy's own OpenBLAS (libscipy_openblas)
    import scipy.optimize  # noqa: F401
    import scipy.special  # noqa: F401


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """Every BLAS (and OpenMP pool) loaded by numpy and scipy held to one thread inside."""
    from threadpoolctl import threadpool_limits

    load_blas()
    with threadpool_limits(1):
        yield
