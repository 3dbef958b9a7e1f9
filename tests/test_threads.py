"""use_threads sets numba's pool and the BLAS pool together and restores both; the BLAS pools are
scanned once and again after an import, not on every call (tests/micro times the call)."""

import sys
import types

import numba
import pytest
from threadpoolctl import threadpool_info

from rooflab import threads


def _blas_threads():
    return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]


def test_use_threads_limits_numba_and_blas_and_restores_them():
    if not _blas_threads():
        pytest.skip("no BLAS library that threadpoolctl can see")
    before_numba, before_blas = numba.get_num_threads(), _blas_threads()
    with threads.use_threads(1) as n:
        assert n == 1 and numba.get_num_threads() == 1 and set(_blas_threads()) == {1}
    assert numba.get_num_threads() == before_numba and _blas_threads() == before_blas


def test_the_blas_scan_is_kept_until_a_module_is_imported(monkeypatch):
    first = threads.blas_pools()
    assert threads.blas_pools() is first  # no new scan per call
    monkeypatch.setitem(sys.modules, "rooflab_test_new_module", types.ModuleType("rooflab_test_new_module"))
    assert threads.blas_pools() is not first  # an import may have brought a library: scanned again
