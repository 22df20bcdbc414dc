"""Length buckets in every task's `evaluate` / `predict` on raw text, on every backend:
batches are cut to their bucket, and the loss, metrics and predictions are those of
fixed-length batches (padding never changes a real token's output). `fit` on raw text buckets
by default, so every raw-text `fit` of the suite (test_task_lifecycle.py) trains that way."""

import pytest

from keras_bert_suite.tasks.classifier.rotten_tomatoes import load_rotten_tomatoes
from tests.tasks.test_task_lifecycle import CASES, _build
from tests.numerics import assert_close


def _batch_lengths(model, x, y, **options):
    batches = model.keras_data(x, y, batch_size=2, **options)[0]
    return [int((batch[0] if isinstance(batch, tuple) else batch)["token_ids"].shape[-1])
            for batch in batches]


@pytest.mark.parametrize("name", sorted(CASES))
def test_buckets_compute_what_fixed_length_batches_compute(name):
    _, _, (x, y), _ = CASES[name]
    model = _build(name)
    full = model.preprocessor.sequence_length
    boundaries = [6, full] if full < 16 else "auto"  # "auto" starts at 16
    bucketed = _batch_lengths(model, x, y, bucket_boundaries=boundaries)
    assert all(length < full for length in bucketed), (bucketed, full)
    # fixed length: the preprocessed rows go to Keras as they are
    assert model.keras_data(x, y, bucket_boundaries=None)[0]["token_ids"].shape[-1] == full

    fixed = model.evaluate(x, y, bucket_boundaries=None, return_dict=True, verbose=0)
    cut = model.evaluate(x, y, bucket_boundaries=boundaries, return_dict=True, verbose=0)
    assert sorted(cut) == sorted(fixed)
    for metric in fixed:
        assert_close(cut[metric], fixed[metric], rtol=1e-5, atol=1e-6, err_msg=metric)


def test_predict_on_real_reviews_keeps_the_callers_order():
    """predict() sorts rows by length to cut the most, then puts them back in order."""
    texts = list(load_rotten_tomatoes()[0][:48])
    model = _build("classifier")
    cut = model.predict(texts, batch_size=8, verbose=0)
    fixed = model.predict(texts, batch_size=8, bucket_boundaries=None, verbose=0)
    assert_close(cut, fixed, rtol=1e-5, atol=1e-6)
    lengths = _batch_lengths(model, texts, None, bucket_boundaries="auto")
    assert max(lengths) <= 64 < model.preprocessor.sequence_length


def test_bad_bucket_boundaries_are_refused_before_training():
    _, _, (x, y), _ = CASES["classifier"]
    model = _build("classifier")
    with pytest.raises(ValueError, match="strictly increasing"):
        model.fit(x, y, bucket_boundaries=[32, 16], verbose=0)
    with pytest.raises(ValueError, match="go past sequence_length=128"):
        model.evaluate(x, y, bucket_boundaries=[64, 256], verbose=0)
