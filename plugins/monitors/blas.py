"""Small matrix products on one BLAS thread.

numpy's OpenBLAS splits a product of a few hundred rows over every core, and its worker
threads then spin, waiting for more work, before they sleep: after one 200 x 384 product
on a 2-core machine the other thread burnt about 0.1 s of CPU, more than the product itself.
A monitor that multiplies a small matrix once a round paid that every round (the
``homogenisation`` monitor: 20 % of a 1,000-agent scripted round's CPU, measured). Products
of this size gain nothing from a second thread; :func:`one_blas_thread` runs them on one,
which also makes their float32 results independent of the machine's number of cores
(OpenBLAS splits them differently by thread count). threadpoolctl sets the limit and puts
the previous one back.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any, Iterator


@functools.cache
def _controller() -> Any:
    import numpy  # noqa: F401 - the BLAS library must be loaded for the controller to find it
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """numpy's BLAS on one thread for the duration, then as it was (the BLAS libraries loaded
    with numpy, found once at the first use; one that another package loads later is left alone)."""
    with _controller().limit(limits=1, user_api="blas"):
        yield
