"""KerasHub's task lifecycle on every backend: a task from `from_preset` trains with no
`compile()`, `backbone=` names the encoder, and a fine-tuned task saved with
`save_to_preset` comes back from `from_preset` with its head, preprocessor and label names,
predicting exactly as before."""

import numpy as np
import pytest

from keras_bert_suite import (
    BertClassifier, BertEncoder, BertFeatureExtractor, BertMultipleChoice, BertSpanLabeler,
    BertTokenClassifier)
from keras_bert_suite.tasks.task_presets import TASK_CONFIG_FILE
from tests.conftest import to_numpy
from tests.tiny_pretraining import RUN_EAGERLY

PRESET = "bert_uncased_L-2_H-128_A-2"  # architecture of a real small BERT, random weights
TEXTS = ["a gripping, beautifully acted film.", "the plot is thin and the jokes fall flat."]
QUESTIONS = (["Who wrote the letter?", "Where did they meet?"],
             ["The letter was written by Anna in Moscow.", "They met in Paris in 1921."])
WORDS = [["Anna", "lives", "in", "Moscow"], ["Paris", "in", "spring"]]
CHOICES = (["Where do you keep milk cold?", "What do you read?"],
           [["in the fridge", "in the oven"], ["a book", "a spoon"]])

# task class, from_preset arguments, training data (x, y), raw input for predict
CASES = {
    "classifier": (BertClassifier, {"num_classes": 2, "label_names": ["rotten", "fresh"]},
                   (TEXTS, [1, 0]), TEXTS),
    "regression": (BertClassifier, {"num_classes": 1}, (TEXTS, [0.8, 0.1]), TEXTS),
    "span_labeler": (BertSpanLabeler, {"sequence_length": 32},
                     (QUESTIONS, {"answer_start": [26, 12], "answer_text": ["Anna", "Paris"]}),
                     QUESTIONS),
    "token_classifier": (BertTokenClassifier,
                         {"num_classes": 3, "label_names": ["O", "B-LOC", "B-PER"],
                          "sequence_length": 8},
                         (WORDS, [[2, 0, 0, 1], [1, 0, 0]]), WORDS),
    "multiple_choice": (BertMultipleChoice, {"num_choices": 2, "sequence_length": 24},
                        (CHOICES, [0, 0]), CHOICES),
}


def _build(name):
    task_class, arguments, _, _ = CASES[name]
    return task_class.from_preset(PRESET, load_weights=False, **arguments)


@pytest.fixture(scope="module")
def trained():
    """name -> (task from `from_preset` fitted 2 steps without `compile()`, its predictions
    on the raw input); each task is built and trained once for the tests of this module."""
    made = {}

    def get(name):
        if name not in made:
            model = _build(name)
            assert model.compiled and model.optimizer is not None
            # Eagerly on TensorFlow: a few steps cost less than tracing (the harness traces
            # every task's training step and predict).
            model.run_eagerly = RUN_EAGERLY
            x, y = CASES[name][2]
            history = model.fit(x, y, epochs=2, batch_size=2, verbose=0)
            assert np.isfinite(history.history["loss"]).all()
            made[name] = model, model.predict(CASES[name][3], verbose=0)
        return made[name]

    return get


def _assert_same_predictions(got, expected):
    if isinstance(expected, dict):
        assert sorted(got) == sorted(expected)
        for key in expected:
            _assert_same_predictions(got[key], expected[key])
    elif np.asarray(expected).dtype == object:
        assert np.asarray(got).tolist() == np.asarray(expected).tolist()
    else:
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", sorted(CASES))
def test_fit_without_compile_then_save_to_preset_and_reload(name, trained, tmp_path):
    model, before = trained(name)
    model.save_to_preset(str(tmp_path / "preset"))
    reloaded = type(model).from_preset(str(tmp_path / "preset"))
    assert type(reloaded) is type(model)
    assert reloaded.get_config() == model.get_config()  # head, preprocessor, label names
    reloaded.run_eagerly = RUN_EAGERLY
    _assert_same_predictions(reloaded.predict(CASES[name][3], verbose=0), before)
    assert reloaded.compiled  # and trains on as it is
    weights = [to_numpy(w) for w in reloaded.trainable_weights]
    reloaded.fit(*CASES[name][2], epochs=1, batch_size=2, verbose=0)
    assert any(not np.array_equal(a, to_numpy(b))
               for a, b in zip(weights, reloaded.trainable_weights))


def test_a_task_preset_is_also_an_encoder_preset_and_other_heads_start_fresh(trained, tmp_path):
    model, _ = trained("classifier")
    model.save_to_preset(str(tmp_path / "preset"))
    assert (tmp_path / "preset" / TASK_CONFIG_FILE).is_file()
    encoder = BertEncoder.from_preset(str(tmp_path / "preset"))
    for ours, theirs in zip(encoder.weights, model.encoder.weights):
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))
    # another task (or other task arguments) takes the encoder and builds a new head
    tagger = BertTokenClassifier.from_preset(str(tmp_path / "preset"), num_classes=4)
    assert tagger.num_classes == 4
    fresh = BertClassifier.from_preset(str(tmp_path / "preset"), num_classes=3)
    assert fresh.num_classes == 3 and fresh.label_names is None


def test_backbone_is_keras_hubs_name_for_the_encoder():
    encoder = BertEncoder.from_preset(PRESET, load_weights=False)
    classifier = BertClassifier(backbone=encoder, num_classes=2)
    assert classifier.backbone is encoder is classifier.encoder
    extractor = BertFeatureExtractor(backbone=encoder)
    assert extractor.encoder is encoder
    with pytest.raises(ValueError, match="not both"):
        BertClassifier(encoder=encoder, backbone=BertEncoder.from_preset(
            PRESET, load_weights=False), num_classes=2)
    with pytest.raises(ValueError, match="must be a BertEncoder"):
        BertClassifier(num_classes=2)


def test_a_trained_model_loads_for_inference_without_optimizer_noise(trained, tmp_path):
    """load_model(compile=False) (what `kbs export` does) skips the saved optimizer state
    silently; load_model(path) restores it (the step counter comes back)."""
    import warnings

    import keras

    from keras_bert_suite import load_model

    model, predicted = trained("classifier")  # 2 steps
    path = str(tmp_path / "trained.keras")
    model.save(path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        served = load_model(path, compile=False)
    assert not [w for w in caught if "optimizer" in str(w.message)], [str(w.message)
                                                                      for w in caught]
    served.run_eagerly = RUN_EAGERLY
    np.testing.assert_allclose(served.predict(TEXTS, verbose=0), predicted, rtol=1e-6, atol=1e-6)
    resumed = load_model(path)
    assert int(keras.ops.convert_to_numpy(resumed.optimizer.iterations)) == 2
