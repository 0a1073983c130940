"""``one_blas_thread``: one BLAS thread inside, restored after, and a nested block of
the same thread asks the controller nothing more (payment re-solves nest it thousands
of times inside a chunk's block)."""

from __future__ import annotations

from typing import Any

import pytest
from threadpoolctl import threadpool_info

from mechanisms.allocation import _blas


def _blas_threads() -> list[int]:
    return [int(i["num_threads"]) for i in threadpool_info() if i["user_api"] == "blas"]


def test_limit_holds_inside_nested_blocks_and_is_restored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    before = _blas_threads()
    if not before:
        pytest.skip("no BLAS library loaded")
    with _blas.one_blas_thread():  # builds the shared controller
        pass
    controller = _blas._controller[0]
    calls: list[Any] = []
    limit = controller.limit

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs)
        return limit(*args, **kwargs)

    monkeypatch.setattr(controller, "limit", counted)
    with _blas.one_blas_thread():
        assert set(_blas_threads()) == {1}
        with _blas.one_blas_thread():
            assert set(_blas_threads()) == {1}
            with _blas.one_blas_thread():
                assert set(_blas_threads()) == {1}
        assert set(_blas_threads()) == {1}  # the inner exits lift nothing
    assert _blas_threads() == before
    assert len(calls) == 1


def test_limit_is_restored_after_an_exception() -> None:
    before = _blas_threads()
    with pytest.raises(RuntimeError), _blas.one_blas_thread(), _blas.one_blas_thread():
        raise RuntimeError("boom")
    assert _blas_threads() == before
    with _blas.one_blas_thread():  # and the next block limits again
        assert not before or set(_blas_threads()) == {1}
