"""townsquare.plugins.monitors.blas: a small product's BLAS on one thread, the setting put back afterwards."""

from __future__ import annotations

import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from townsquare.plugins.monitors.blas import _controller, one_blas_thread


def numpy_blas_threads() -> list[int]:
    """Threads of the BLAS libraries loaded with numpy (the ones the helper holds; a library
    another package loads later, scipy's or torch's, is not numpy's)."""
    numpys = {lib.filepath for lib in _controller().lib_controllers if lib.user_api == "blas"}
    return [lib["num_threads"] for lib in threadpool_info() if lib["filepath"] in numpys]


@pytest.mark.parametrize("threads", [None, 2])
def test_one_blas_thread_limits_numpys_blas_and_puts_the_setting_back(threads):
    with threadpool_limits(limits=threads, user_api="blas"):  # the machine's setting, then 2 where it has 2 cores
        before = numpy_blas_threads()
        assert before  # numpy's BLAS is found (its wheels bundle OpenBLAS)
        with one_blas_thread():
            assert set(numpy_blas_threads()) == {1}
        assert numpy_blas_threads() == before
        with pytest.raises(ZeroDivisionError), one_blas_thread():
            1 / 0
        assert numpy_blas_threads() == before
