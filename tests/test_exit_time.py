"""Issue 14, item 8: the session's collected heap is frozen out of the cyclic GC, so
pytest's five ``gc.collect()`` passes at exit and the interpreter's final collection
do not traverse the whole imported stack (``tests/conftest.py``)."""

import gc


def test_collected_heap_is_frozen() -> None:
    # well over the imported stack's container objects (~10^5), not a handful
    assert gc.get_freeze_count() > 50_000
