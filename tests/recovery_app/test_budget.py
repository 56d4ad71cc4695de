"""The attempt's budget (pure): each limit ends the attempt, naming itself."""

import dataclasses

import pytest

from recovery_app.budget import Budget, BudgetExhausted, BudgetMeter
from recovery_app.services import recovery_budget


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def budget(**limits):
    """The settings' budget with ``limits`` changed."""
    return dataclasses.replace(recovery_budget(), **limits)


def test_defaults_are_the_design_numbers_and_live_in_settings_only():
    assert recovery_budget().to_dict() == {
        "rounds": 3, "searches": 4, "reads": 8, "sources": 4, "tokens": 8000, "seconds": 30.0,
    }  # fmt: skip
    with pytest.raises(TypeError):
        Budget()  # type: ignore[call-arg]  # no second copy of the figures


def test_the_budget_follows_the_settings(settings):
    settings.RECOVERY_MAX_READS = 2
    assert recovery_budget().reads == 2


@pytest.mark.parametrize(
    ("limit", "charge"),
    [("rounds", "start_round"), ("searches", "charge_search"), ("reads", "charge_read")],
)
def test_counted_limits_allow_exactly_their_number(limit, charge):
    meter = BudgetMeter(budget(**{limit: 2}), Clock())
    getattr(meter, charge)()
    getattr(meter, charge)()
    with pytest.raises(BudgetExhausted) as exc:
        getattr(meter, charge)()
    assert exc.value.limit == limit and meter.usage()[limit] == 2


def test_sources_count_distinct_entries():
    meter = BudgetMeter(budget(sources=1), Clock())
    assert meter.add_source("a") is True
    assert meter.add_source("a") is False
    with pytest.raises(BudgetExhausted) as exc:
        meter.add_source("b")
    assert exc.value.limit == "sources" and meter.usage()["sources"] == 1


def test_a_read_that_would_pass_the_token_limit_is_not_admitted():
    meter = BudgetMeter(budget(tokens=100), Clock())
    meter.admit_tokens(60)
    with pytest.raises(BudgetExhausted) as exc:
        meter.admit_tokens(41)
    assert exc.value.limit == "tokens" and meter.tokens == 60
    meter.admit_tokens(40)
    assert meter.tokens == 100


def test_time_runs_out_on_the_next_action():
    clock = Clock()
    meter = BudgetMeter(budget(seconds=30), clock)
    meter.charge_search()
    clock.now = 30.0
    with pytest.raises(BudgetExhausted) as exc:
        meter.charge_read()
    assert exc.value.limit == "seconds" and meter.reads == 0
    assert meter.usage()["seconds"] == 30.0
