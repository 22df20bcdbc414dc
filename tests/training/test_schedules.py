"""WarmupPolynomialDecay and PerUpdateSchedule at exact steps, against hand-computed values."""

import keras
import numpy as np
import pytest

from keras_bert_suite.training import PerUpdateSchedule, WarmupPolynomialDecay
from tests.conftest import to_numpy

# peak 1e-3, 10 warm-up steps, 110 steps in all, decaying to 0.
SCHEDULE = dict(peak_learning_rate=1e-3, total_steps=110, warmup_steps=10)


def _at(schedule, step):
    return float(to_numpy(schedule(step)))


@pytest.mark.parametrize("step, expected", [
    (0, 0.0),                  # warm-up starts at 0
    (5, 5e-4),                 # 1e-3 · 5 / 10
    (9, 9e-4),                 # last warm-up step
    (10, 1e-3 * (1 - 10 / 110)),  # decay runs from step 0, as google-research/bert's does
    (55, 5e-4),                # middle of the run: 1e-3 · (1 - 55 / 110)
    (110, 0.0),                # end
    (500, 0.0),                # past the end it stays at end_learning_rate
])
def test_linear_warmup_then_linear_decay(step, expected):
    assert _at(WarmupPolynomialDecay(**SCHEDULE), step) == pytest.approx(expected, abs=1e-9)


def test_polynomial_decay_to_an_end_rate():
    schedule = WarmupPolynomialDecay(**SCHEDULE, end_learning_rate=1e-4, power=2.0)
    assert _at(schedule, 55) == pytest.approx((1e-3 - 1e-4) * 0.5**2 + 1e-4, rel=1e-6)
    assert _at(schedule, 110) == pytest.approx(1e-4, rel=1e-6)


def test_constant_after_warmup_without_total_steps():
    schedule = WarmupPolynomialDecay(1e-3, warmup_steps=4)
    assert [_at(schedule, s) for s in (2, 4, 1000)] == pytest.approx([5e-4, 1e-3, 1e-3])


def test_per_update_schedule_counts_updates():
    schedule = PerUpdateSchedule(WarmupPolynomialDecay(**SCHEDULE), gradient_accumulation_steps=4)
    # Micro-batches 20..23 make update 5.
    assert [_at(schedule, s) for s in (20, 23, 24)] == pytest.approx([5e-4, 5e-4, 6e-4])


def test_serialization_round_trip():
    schedule = PerUpdateSchedule(WarmupPolynomialDecay(**SCHEDULE, power=2.0), 3)
    restored = keras.optimizers.schedules.deserialize(
        keras.optimizers.schedules.serialize(schedule))
    steps = np.arange(0, 400, 7)
    assert [_at(restored, s) for s in steps] == [_at(schedule, s) for s in steps]
