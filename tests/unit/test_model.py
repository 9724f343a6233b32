"""The canned model (``tokenwire.core.model``): its 277-token answer keeps its whitespace, a seed fixes its costs, its
stalls and jitter stay in their bounds, and a bad timing is refused by name."""

import pytest

from tokenwire.core.model import ANSWER, ANSWER_TEXT, Model, TimingModel, tokenize


def test_answer_is_277_tokens_that_carry_their_whitespace():
    assert len(ANSWER) == 277
    assert ANSWER[:3] == ("A", " streaming", " inference")
    assert "\n\n" in ANSWER
    assert "".join(ANSWER) == ANSWER_TEXT


def test_tokenize_refuses_uncovered_text():
    with pytest.raises(ValueError, match="text is not covered by the token pattern"):
        tokenize("tab\there")


def test_same_seed_same_costs_and_other_seed_differs():
    a, b, c = TimingModel(seed=1), TimingModel(seed=1), TimingModel(seed=2)
    assert a.costs(50) == b.costs(50)
    assert a.costs(50) != c.costs(50)
    assert a.costs(10) == a.costs(50)[:10]


def test_stall_and_jitter_bounds():
    t = TimingModel(step_ns=1000, ttft_ns=2000, jitter=0.1, stall_at=5, stall_ns=10_000)
    costs = t.costs(10)
    assert 1800 <= costs[0] <= 2200
    assert all(900 <= c <= 1100 for i, c in enumerate(costs[1:], 1) if i != 5)
    assert costs[5] >= 10_900


@pytest.mark.parametrize("kwargs, message", [
    ({"step_ns": -1}, "step_ns must be a non-negative int of nanoseconds, got -1"),
    ({"jitter": 1.0}, "jitter must be in [0, 1), got 1.0"),
    ({"stall_at": -2}, "stall_at must be a non-negative index or None, got -2"),
])
def test_timing_validation(kwargs, message):
    with pytest.raises(ValueError) as err:
        TimingModel(**kwargs)
    assert str(err.value) == message


def test_model_counts_steps():
    m = Model(ANSWER[:3], TimingModel())
    assert [m.generate(i) for i in range(3)] == list(ANSWER[:3])
    assert m.total_steps == 3 and set(m.steps.values()) == {1}
