"""The five task models on the current Keras backend: real text, a tiny random encoder.

Numbers are checked against hand computations (losses, masking) and against the model
itself across a `.keras` round trip; "training works" means `fit` lowers the loss on a
handful of real sentences. Parity with transformers is in test_task_parity.py.
"""

import os

import keras
import numpy as np
import pytest

from keras_bert_suite import (
    BertClassifier, BertEncoder, BertFeatureExtractor, BertMultipleChoice, BertPreprocessor,
    BertSpanLabeler, BertTokenClassifier)
from keras_bert_suite.data import corpora
from keras_bert_suite.tasks.multiple_choice.preprocessor import MultipleChoicePreprocessor
from keras_bert_suite.tasks.token_classifier import conll
from keras_bert_suite.tasks.token_classifier.preprocessor import TokenClassifierPreprocessor
from keras_bert_suite.training.losses import IGNORE_LABEL
from keras_bert_suite.training import create_optimizer
from keras_bert_suite.training.optimizers import AdamW
from tests.conftest import alternating_reviews, to_numpy
from tests.numerics import assert_close
from tests.tiny_pretraining import RUN_EAGERLY

SEQUENCE_LENGTH = 24
# A random 1-layer encoder over the real uncased vocabulary: fast, and text goes through it.
# Initialised 10x wider than BERT so that random features already tell sentences apart
# (at 0.02 every [CLS] vector is nearly the same and a few steps cannot move the loss).
HIDDEN = 16
TINY_TEXT_ENCODER = dict(vocabulary_size=30522, num_layers=1, num_heads=2, hidden_dim=HIDDEN,
                         intermediate_dim=32, max_sequence_length=64, dropout=0.0,
                         initializer_range=0.2)


def tiny_encoder(**overrides):
    return BertEncoder(**{**TINY_TEXT_ENCODER, **overrides})


@pytest.fixture(scope="module")
def preprocessor():
    return BertPreprocessor.from_preset("bert_uncased_L-2_H-128_A-2",
                                        sequence_length=SEQUENCE_LENGTH)


@pytest.fixture(scope="module")
def reviews():
    """16 Rotten Tomatoes sentences, alternately fresh (1) and rotten (0)."""
    texts, labels = alternating_reviews(8)
    return texts, labels.astype("int32")


def _compile(model, **kwargs):
    # A high rate so a few steps on a tiny model visibly move the loss.
    model.compile(optimizer=create_optimizer(learning_rate=1e-2), run_eagerly=RUN_EAGERLY,
                  **kwargs)


def _round_trip(model, tmp_path):
    path = os.path.join(tmp_path, "model.keras")
    model.save(path)
    return keras.saving.load_model(path)


def _assert_same_outputs(restored, model, x):
    """Called directly (eagerly): no extra compiled predict function per model."""
    expected, actual = model(x), restored(x)
    for value, reference in zip(keras.tree.flatten(actual), keras.tree.flatten(expected)):
        assert_close(value, reference)


def _assert_loss_went_down(history):
    assert history["loss"][-1] < history["loss"][0] - 0.05, history["loss"]


def _log_softmax(logits):
    shifted = logits - logits.max(-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))


# === Classification ===


def test_classifier_fits_raw_text_and_round_trips(reviews, preprocessor, tmp_path):
    texts, labels = reviews
    classifier = BertClassifier(tiny_encoder(), num_classes=2, preprocessor=preprocessor,
                                dropout=0.0, label_names=["rotten", "fresh"])
    _compile(classifier)
    _assert_loss_went_down(classifier.fit(texts, labels, batch_size=8, epochs=5,
                                          verbose=0).history)

    # (predict on raw text is checked against transformers in test_task_parity.py)
    restored = _round_trip(classifier, tmp_path)
    assert restored.label_names == ["rotten", "fresh"] and restored.num_classes == 2
    assert restored.preprocessor.sequence_length == SEQUENCE_LENGTH
    _assert_same_outputs(restored, classifier, preprocessor(texts[:6]))


def test_classifier_evaluates_a_tf_data_of_text_pairs(reviews, preprocessor):
    """A tf.data of ((a, b), label) batches goes through the preprocessor."""
    import tensorflow as tf

    texts, labels = reviews
    classifier = BertClassifier(tiny_encoder(), num_classes=2, preprocessor=preprocessor)
    classifier.compile(run_eagerly=RUN_EAGERLY)
    pairs = (texts[:8], texts[8:16])
    dataset = tf.data.Dataset.from_tensor_slices((pairs, labels[:8])).batch(3)
    results = classifier.evaluate(dataset, verbose=0, return_dict=True)
    packed = preprocessor(pairs)
    assert packed["segment_ids"].max() == 1
    cross_entropy = -_log_softmax(to_numpy(classifier(packed)))[np.arange(8), labels[:8]].mean()
    np.testing.assert_allclose(results["loss"], cross_entropy, rtol=1e-5)


def test_default_compile_is_bert_adamw():
    classifier = BertClassifier(tiny_encoder(), num_classes=3)
    classifier.compile()
    assert isinstance(classifier.optimizer, AdamW)
    np.testing.assert_allclose(float(to_numpy(classifier.optimizer.learning_rate)), 5e-5)
    assert classifier.optimizer.global_clipnorm == 1.0
    assert isinstance(classifier.loss, keras.losses.SparseCategoricalCrossentropy)


def test_regression_uses_mean_squared_error(reviews, preprocessor):
    texts, _ = reviews
    regressor = BertClassifier(tiny_encoder(), num_classes=1)
    regressor.compile(run_eagerly=RUN_EAGERLY)
    x = preprocessor(texts[:8])
    scores = np.linspace(0.0, 5.0, 8).astype("float32")  # STS-B style similarity scores
    results = regressor.evaluate(x, scores, batch_size=8, verbose=0, return_dict=True)
    predictions = to_numpy(regressor(x))[:, 0]
    np.testing.assert_allclose(results["loss"], ((predictions - scores) ** 2).mean(), rtol=1e-5)
    np.testing.assert_allclose(results["mae"], np.abs(predictions - scores).mean(), rtol=1e-5)


# === Token classification ===


@pytest.fixture(scope="module")
def wnut_windows(preprocessor):
    """(chunk inputs, label ids [N, T], number of tags) of 16 real WNUT-16 tweets."""
    sentences = conll.read_conll(corpora.fetch_wnut16())[:16]
    labels = conll.learn_labels(sentences)
    index = {tag: i for i, tag in enumerate(labels)}
    chunks = TokenClassifierPreprocessor(preprocessor.tokenizer, SEQUENCE_LENGTH).chunks(
        [list(s.words) for s in sentences], labels=[[index[t] for t in s.tags] for s in sentences])
    inputs = {name: np.asarray(value) for name, value in chunks.inputs.items()}
    return inputs, np.asarray(chunks.labels), len(labels)


def test_token_loss_ignores_ignored_positions(wnut_windows):
    x, labels, num_classes = wnut_windows
    labels = labels[:8].astype("int32")
    x = {name: value[:8] for name, value in x.items()}
    tagger = BertTokenClassifier(tiny_encoder(), num_classes=num_classes)
    tagger.compile(run_eagerly=RUN_EAGERLY)
    results = tagger.evaluate(x, labels, batch_size=8, verbose=0, return_dict=True)

    logits = to_numpy(tagger(x))  # [B, T, C]
    labelled = labels != IGNORE_LABEL
    assert 0 < labelled.sum() < labelled.size  # sub-tokens, [CLS]/[SEP], padding are ignored
    log_probs = np.take_along_axis(_log_softmax(logits), np.maximum(labels, 0)[..., None], -1)
    np.testing.assert_allclose(results["loss"], -log_probs[..., 0][labelled].mean(), rtol=1e-5)
    accuracy = (logits.argmax(-1) == labels)[labelled].mean()
    np.testing.assert_allclose(results["accuracy"], accuracy, rtol=1e-6)
    # Whatever the model predicts at ignored positions does not matter.
    other = tagger.evaluate(x, np.where(labelled, labels, IGNORE_LABEL), batch_size=8,
                            verbose=0, return_dict=True)
    np.testing.assert_allclose(other["loss"], results["loss"], rtol=1e-6)


def test_token_classifier_fits_wnut(wnut_windows, tmp_path):
    x, labels, num_classes = wnut_windows
    labels = labels.astype("int32")
    tagger = BertTokenClassifier(tiny_encoder(), num_classes=num_classes, dropout=0.0)
    _compile(tagger)
    _assert_loss_went_down(tagger.fit(x, labels, batch_size=8, epochs=4, verbose=0).history)
    # The [CLS] pooler feeds nothing here, so it is frozen rather than left gradient-less.
    assert not any("pooler" in w.path for w in tagger.trainable_weights)
    _assert_same_outputs(_round_trip(tagger, tmp_path), tagger, x)


# === Span labeling ===


def test_span_labeler_loss_and_fit(reviews, preprocessor, tmp_path):
    texts, _ = reviews
    questions = ["what is the last word?"] * 16
    x = preprocessor((questions, texts[:16]))
    # The answer span: the context's last piece (just before the final [SEP]).
    ends = (x["padding_mask"].sum(1) - 2).astype("int32")
    starts = (ends - 1).astype("int32")
    y = {"start_positions": starts, "end_positions": ends}
    labeler = BertSpanLabeler(tiny_encoder())
    _compile(labeler)
    before = labeler.evaluate(x, y, batch_size=16, verbose=0, return_dict=True)
    outputs = {name: to_numpy(value) for name, value in labeler(x).items()}
    start_ce = -_log_softmax(outputs["start_logits"])[np.arange(16), starts].mean()
    end_ce = -_log_softmax(outputs["end_logits"])[np.arange(16), ends].mean()
    np.testing.assert_allclose(before["loss"], (start_ce + end_ce) / 2, rtol=1e-5)  # BERT's
    assert set(before) >= {"start_logits_accuracy", "end_logits_accuracy"}

    _assert_loss_went_down(labeler.fit(x, y, batch_size=8, epochs=4, verbose=0).history)
    _assert_same_outputs(_round_trip(labeler, tmp_path), labeler, x)


def test_raw_text_in_memory_trains_on_the_preprocessors_rows(reviews, preprocessor, capsys):
    """A list of texts is preprocessed once into model rows: `fit` on raw text is `fit` on
    the preprocessor's windows (one step per `batch_size` windows, not examples), and the
    same weights come out; `evaluate` on raw text gives the loss of those rows."""
    from keras_bert_suite.tasks.span_labeler.preprocessor import SpanLabelerPreprocessor

    texts, _ = reviews
    contexts = texts[:6]
    questions = ["what is said?"] * 6
    answers = {"answer_start": [0] * 6, "answer_text": [c.split()[0] for c in contexts]}
    span_preprocessor = SpanLabelerPreprocessor(preprocessor.tokenizer, sequence_length=16,
                                                doc_stride=4)
    inputs, labels = span_preprocessor((questions, contexts), answers)
    windows = len(inputs["token_ids"])
    assert windows > len(contexts)  # long reviews make several windows each

    def trained(x, y, **options):
        keras.utils.set_random_seed(3)
        labeler = BertSpanLabeler(tiny_encoder(), preprocessor=span_preprocessor)
        _compile(labeler)
        steps = []
        labeler.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0,
                    callbacks=[keras.callbacks.LambdaCallback(
                        on_train_batch_end=lambda batch, logs: steps.append(batch))],
                    **options)
        return labeler, len(steps)

    # full-length rows both ways (PyTorch's buckets would cut text batches to their longest
    # row: the same math, summed in another order, on weights of ~1e-6 after one step)
    from_text, text_steps = trained((questions, contexts), answers, bucket_boundaries=None)
    from_rows, row_steps = trained(inputs, labels)
    assert text_steps == row_steps == -(-windows // 4)
    for ours, theirs in zip(from_text.weights, from_rows.weights):
        assert_close(ours, theirs, err_msg=ours.path)
    evaluated = from_text.evaluate((questions, contexts), answers, verbose=0, return_dict=True)
    expected = from_text.evaluate(inputs, labels, verbose=0, return_dict=True)
    np.testing.assert_allclose(evaluated["loss"], expected["loss"], rtol=1e-5)

    capsys.readouterr()
    from_text.evaluate((questions, contexts), answers, verbose=1)
    assert "6/6" in capsys.readouterr().out  # the preprocessing progress bar, over examples


# === Multiple choice ===


def test_multiple_choice_fits_raw_text_and_round_trips(reviews, preprocessor, tmp_path):
    """Which second half continues the review? Real first/second halves, two choices."""
    texts, _ = reviews
    halves = [text.split() for text in texts[:16]]
    contexts = [" ".join(words[:len(words) // 2]) for words in halves]
    endings = [" ".join(words[len(words) // 2:]) for words in halves]
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, 16).astype("int32")
    choices = [[endings[i], endings[(i + 5) % 16]][::1 if label == 0 else -1]
               for i, label in enumerate(labels)]
    chooser = BertMultipleChoice(
        tiny_encoder(), num_choices=2, dropout=0.0, preprocessor=MultipleChoicePreprocessor(
            preprocessor.tokenizer, SEQUENCE_LENGTH, truncate=preprocessor.truncate))
    # [B, C, T] by hand: row (i, c) packs "[CLS] context_i [SEP] choice_ic [SEP]".
    packed = preprocessor(([c for c in contexts for _ in range(2)],
                           [e for pair in choices for e in pair]))
    packed = {name: value.reshape(16, 2, SEQUENCE_LENGTH) for name, value in packed.items()}
    _compile(chooser)
    _assert_loss_went_down(chooser.fit(packed, labels, batch_size=8, epochs=5,
                                       verbose=0).history)

    logits = chooser.predict((contexts, choices), verbose=0)  # text: packed in tf.data
    assert logits.shape == (16, 2)
    assert_close(logits, chooser(packed))
    restored = _round_trip(chooser, tmp_path)
    assert restored.num_choices == 2
    _assert_same_outputs(restored, chooser, packed)


# === Feature extraction ===


def test_feature_extractor_frozen_scalar_mix_round_trip(reviews, preprocessor, tmp_path):
    texts, _ = reviews
    encoder = tiny_encoder(num_layers=2, return_hidden_states=True)
    encoder.trainable = False  # feature-based: only the scalar mix learns
    extractor = BertFeatureExtractor(encoder, layers="scalar_mix", pooling="mean",
                                     normalize=True, preprocessor=preprocessor)
    assert [tuple(w.shape) for w in extractor.trainable_weights] == [(2,), ()]
    outputs = extractor.predict(texts[:4], verbose=0)
    assert outputs["token_embeddings"].shape == (4, SEQUENCE_LENGTH, HIDDEN)
    np.testing.assert_allclose(np.linalg.norm(outputs["sentence_embedding"], axis=-1), 1.0,
                               rtol=1e-5)
    extractor.scalar_mix.gamma.assign(3.0)
    restored = _round_trip(extractor, tmp_path)
    assert restored.feature_layers == "scalar_mix" and not restored.encoder.trainable
    np.testing.assert_allclose(to_numpy(restored.scalar_mix.gamma), 3.0)
    _assert_same_outputs(restored, extractor, preprocessor(texts[:4]))


@pytest.mark.parametrize("layers, width", [("concat_last_four", 4 * HIDDEN), ("sum_all", HIDDEN)])
def test_feature_widths(layers, width):
    extractor = BertFeatureExtractor(tiny_encoder(num_layers=4, vocabulary_size=10,
                                                  return_hidden_states=True), layers=layers)
    x = {"token_ids": np.full((2, 5), 7, "int32"), "segment_ids": np.zeros((2, 5), "int32"),
         "padding_mask": np.ones((2, 5), "int32")}
    outputs = extractor(x)
    assert tuple(outputs["token_embeddings"].shape) == (2, 5, width)
    assert tuple(outputs["sentence_embedding"].shape) == (2, width)


# === Errors ===


def _ids(shape):
    return {"token_ids": np.ones(shape, "int32"), "segment_ids": np.zeros(shape, "int32"),
            "padding_mask": np.ones(shape, "int32")}


def test_bad_arguments_name_the_valid_values():
    encoder = tiny_encoder()
    with pytest.raises(ValueError, match="num_classes must be an integer >= 1"):
        BertClassifier(encoder, num_classes=0)
    with pytest.raises(ValueError, match="label_names has 1 names for num_classes=2"):
        BertClassifier(encoder, num_classes=2, label_names=["only"])
    with pytest.raises(ValueError, match="num_classes must be an integer >= 2"):
        BertTokenClassifier(encoder, num_classes=1)
    with pytest.raises(ValueError, match="num_choices must be an integer >= 2"):
        BertMultipleChoice(encoder, num_choices=1)
    with pytest.raises(ValueError, match="Unknown layers 'top'.*sum_last_four"):
        BertFeatureExtractor(encoder, layers="top")
    with pytest.raises(ValueError, match="Unknown pooling 'max'.*'cls', 'mean'"):
        BertFeatureExtractor(encoder, pooling="max")
    with pytest.raises(ValueError, match="return_hidden_states=True"):
        BertFeatureExtractor(encoder, layers="sum_all")
    with pytest.raises(ValueError, match="at least 4 transformer layers"):
        BertFeatureExtractor(tiny_encoder(num_layers=2, return_hidden_states=True),
                             layers="sum_last_four")


def test_bad_inputs_say_what_to_pass():
    encoder = tiny_encoder()
    classifier = BertClassifier(encoder, num_classes=2)
    with pytest.raises(ValueError, match=r"missing \['padding_mask'\], unexpected \['mask'\]"):
        classifier({**{k: v for k, v in _ids((2, 4)).items() if k != "padding_mask"},
                    "mask": np.ones((2, 4), "int32")})
    with pytest.raises(ValueError, match=r"'token_ids' must be \[batch, sequence_length\]"):
        classifier(_ids((2, 2, 4)))
    with pytest.raises(ValueError, match="raw text; give the model a preprocessor"):
        classifier(["some text"])
    with pytest.raises(ValueError, match="has no preprocessor"):
        classifier.predict(["some text"], verbose=0)
    chooser = BertMultipleChoice(encoder, num_choices=4)
    with pytest.raises(ValueError, match=r"\(num_choices=4\): 'token_ids' has 3 choices"):
        chooser(_ids((2, 3, 5)))
    labeler = BertSpanLabeler(encoder)
    labeler.compile(run_eagerly=RUN_EAGERLY)
    with pytest.raises(ValueError, match=r"expects labels \['end_positions', 'start_positions'\]"):
        labeler.evaluate(_ids((2, 4)), {"start_positions": np.zeros(2, "int32")}, verbose=0)
