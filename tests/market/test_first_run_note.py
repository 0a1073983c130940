"""``market.numerics.kernels_compiled``: true exactly when numba's cache holds the
allocation's weight kernels (index files) (what ``serve`` and ``demo`` announce on)."""

from pathlib import Path

import pytest

from market import numerics


def test_an_empty_cache_dir_means_not_compiled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    assert not numerics.kernels_compiled()
    other = tmp_path / "x" / "_one_seller_search._grow-215.py311.nbi"
    other.parent.mkdir(parents=True)
    other.touch()
    assert not numerics.kernels_compiled()  # another module's code is not enough
    index = tmp_path / "x" / "_weights_kernel._theta_step-43.py311.nbi"
    index.touch()
    assert numerics.kernels_compiled()
    assert "once" in numerics.FIRST_RUN_NOTE
