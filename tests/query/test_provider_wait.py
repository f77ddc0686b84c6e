"""timings_ms.own leaves out the waits for the providers: which part of a wait for the
vector search beside BM25 is the embedding's (app.query.service.provider_wait)."""

import pytest

from app.query.retrieval import VectorHits
from app.query.service import Trace, provider_wait

HITS = VectorHits([1], [0.1], "exact", embedded=True, timing_ms=2.0)


def trace(vector_from: float, vector_ready: float) -> Trace:
    t = Trace()
    t.vector_from, t.vector_ready = vector_from, vector_ready
    return t


def test_waiting_for_the_vector_itself_is_all_the_providers():
    assert provider_wait(trace(0.0, 0.0), 0.010, 0.010, [0.1, 0.2], 0.160) == pytest.approx(150.0)


def test_a_vector_there_in_time_leaves_the_search_to_us():
    # Context read at 0, vector there at once, BM25 done at 2 ms, the search at 2.5 ms.
    assert provider_wait(trace(0.0, 0.0), 0.002, 0.002, HITS, 0.0025) == 0.0


def test_a_late_vector_counts_by_how_much_it_delayed_the_search():
    # The vector came 150 ms after the context; the 2 ms search after it is ours.
    assert provider_wait(trace(0.0, 0.150), 0.003, 0.003, HITS, 0.152) == pytest.approx(149.0)
    # It came 1.5 ms after: the search would have ended with BM25 at 2 ms, not at 3.5 ms.
    assert provider_wait(trace(0.0, 0.0015), 0.002, 0.002, HITS, 0.0035) == pytest.approx(1.5)
