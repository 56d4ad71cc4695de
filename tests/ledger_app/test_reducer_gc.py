"""The cyclic collector's pause (:func:`ledger_app.reducer.apply.gc_paused`) is counted per
process: overlapping pauses from several threads, ending in any order, leave the collector
as it was before the first one (a context build and a fold in another thread both pause)."""

from __future__ import annotations

import gc
import threading

import pytest

from ledger_app.reducer.apply import gc_paused


@pytest.fixture
def collector_on():
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_nested_pauses_restore_the_collector_at_the_last_end(collector_on):
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer pause is still open
    assert gc.isenabled()


def test_pauses_of_two_threads_ending_out_of_order_leave_it_on(collector_on):
    """Thread A pauses, B pauses, A ends, B ends: on after B (a pause that read the switch
    while A held it off used to leave the collector off for good)."""
    a_in, b_in, a_may_end, b_may_end, a_out = (threading.Event() for _ in range(5))
    seen: dict[str, bool] = {}

    def a() -> None:
        with gc_paused():
            a_in.set()
            a_may_end.wait(5)
        seen["after_a"] = gc.isenabled()
        a_out.set()

    def b() -> None:
        a_in.wait(5)
        with gc_paused():
            b_in.set()
            b_may_end.wait(5)

    ta, tb = threading.Thread(target=a), threading.Thread(target=b)
    ta.start()
    tb.start()
    b_in.wait(5)
    a_may_end.set()
    a_out.wait(5)
    b_may_end.set()
    ta.join(5)
    tb.join(5)
    assert seen["after_a"] is False  # B's pause is still open when A ends
    assert gc.isenabled()


def test_a_pause_with_the_collector_off_leaves_it_off():
    was = gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        if was:
            gc.enable()


def test_an_exception_inside_still_ends_the_pause(collector_on):
    with pytest.raises(ValueError), gc_paused():
        raise ValueError("x")
    assert gc.isenabled()
