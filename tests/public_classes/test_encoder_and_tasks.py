"""BertEncoder and every task model through the harness: `run_layer_test` for the encoder,
`run_task_test` (fit step in graph mode, predict on raw text, `.keras` round trip) for each
task on real text, and `run_preset_test` from the real uncased vocabulary's preset.

Tiny random encoders over the real 30,522-token vocabulary keep this fast; expected shapes
come from the arguments, expected numbers from NumPy."""

import keras
import numpy as np
import pytest

from keras_bert_suite import (
    BertClassifier, BertEncoder, BertFeatureExtractor, BertMultipleChoice, BertPreprocessor,
    BertPretrainer, BertSpanLabeler, BertTokenClassifier, BertTokenizer, ReplacedTokenDetector)
from keras_bert_suite.tasks.multiple_choice.preprocessor import MultipleChoicePreprocessor
from keras_bert_suite.tasks.span_labeler.preprocessor import SpanLabelerPreprocessor
from keras_bert_suite.tasks.token_classifier.preprocessor import TokenClassifierPreprocessor
from tests.conftest import alternating_reviews
from tests.harness import (
    assert_all_close, check_config_round_trip, run_layer_test, run_preset_test,
    run_quantization_test, run_task_test, to_numpy)

PRESET = "bert_uncased_L-2_H-128_A-2"
VOCABULARY = 30522
HIDDEN = 16
LENGTH = 16  # packed sequence length
TINY = dict(vocabulary_size=VOCABULARY, num_layers=1, num_heads=2, hidden_dim=HIDDEN,
            intermediate_dim=32, max_sequence_length=64)


def tiny_encoder(**overrides):
    return BertEncoder(**{**TINY, **overrides})


@pytest.fixture(scope="module")
def tokenizer():
    return BertTokenizer.from_preset(PRESET)


@pytest.fixture(scope="module")
def reviews():
    """8 Rotten Tomatoes sentences, alternately fresh (1) and rotten (0)."""
    return alternating_reviews(4)


# === BertEncoder ===


def test_bert_encoder():
    batch, length = 2, 10
    rng = np.random.default_rng(0)
    padding_mask = np.ones((batch, length), "int32")
    padding_mask[1, 6:] = 0
    inputs = {"token_ids": rng.integers(0, VOCABULARY, (batch, length)).astype("int32"),
              "segment_ids": (np.arange(length) >= 4).astype("int32")[None].repeat(batch, 0),
              "padding_mask": padding_mask}
    init = {**TINY, "num_layers": 2, "dropout": 0.05, "layer_norm_epsilon": 1e-6,
            "initializer_range": 0.05, "return_hidden_states": True, "num_segments": 3}
    encoder, outputs = run_layer_test(
        BertEncoder, init, inputs,
        expected_output_shape={"sequence_output": (batch, length, HIDDEN),
                               "pooled_output": (batch, HIDDEN),
                               "hidden_states": (batch, 3, length, HIDDEN)})
    # hidden_states ends with the last layer's output, and the pooler is tanh(W [CLS] + b).
    assert_all_close(outputs["hidden_states"][:, -1], outputs["sequence_output"])
    cls = to_numpy(outputs["sequence_output"])[:, 0]
    pooled = np.tanh(cls @ to_numpy(encoder.pooler.kernel) + to_numpy(encoder.pooler.bias))
    assert_all_close(outputs["pooled_output"], pooled)
    run_quantization_test(encoder, inputs)


# === BertClassifier ===


def test_bert_classifier(reviews, tokenizer):
    texts, labels = reviews
    preprocessor = BertPreprocessor(tokenizer, sequence_length=LENGTH)
    classifier = BertClassifier(tiny_encoder(), num_classes=2, preprocessor=preprocessor,
                                dropout=0.2, label_names=["rotten", "fresh"])
    restored, logits = run_task_test(classifier, (texts, labels), raw_predict_input=texts[:3],
                                     expected_output_shape=(8, 2))
    assert logits.shape == (3, 2)
    assert restored.label_names == ["rotten", "fresh"] and restored.dropout == 0.2


def test_bert_classifier_regression(reviews, tokenizer):
    texts, labels = reviews
    scores = (labels * 4.0 + 0.5).astype("float32")  # STS-B-like scores in [0, 5]
    preprocessor = BertPreprocessor(tokenizer, sequence_length=LENGTH, truncate="longest_first")
    regressor = BertClassifier(backbone=tiny_encoder(), num_classes=1, preprocessor=preprocessor,
                               label_names=["similarity"])
    pairs = (texts[:4], texts[4:])
    restored, predictions = run_task_test(regressor, (pairs, scores[:4]),
                                          raw_predict_input=pairs,
                                          expected_output_shape=(4, 1))
    assert predictions.shape == (4, 1)
    assert restored.num_classes == 1 and restored.label_names == ["similarity"]
    assert isinstance(restored.loss, keras.losses.MeanSquaredError)


# === BertSpanLabeler ===


QUESTIONS = ["Who wrote the review?", "What did the critic call the film?"]
CONTEXTS = ["The review was written by Anna in the spring.",
            "The critic called the film a gripping drama."]
ANSWERS = ["Anna", "a gripping drama"]


def test_bert_span_labeler(tokenizer):
    preprocessor = SpanLabelerPreprocessor(tokenizer, sequence_length=32, doc_stride=8,
                                           max_question_length=10)
    labeler = BertSpanLabeler(tiny_encoder(), preprocessor=preprocessor)
    labels = {"answer_start": [c.index(a) for c, a in zip(CONTEXTS, ANSWERS)],
              "answer_text": ANSWERS}
    # Every question + context fits in one 32-piece window: one row per example.
    _, answers = run_task_test(
        labeler, ((QUESTIONS, CONTEXTS), labels), raw_predict_input=(QUESTIONS, CONTEXTS),
        expected_output_shape={"start_logits": (2, 32), "end_logits": (2, 32)})
    assert answers["answer"].shape == (2,)
    for context, answer in zip(CONTEXTS, answers["answer"]):
        assert answer in context  # an extracted span of the context


# === BertTokenClassifier ===


WORDS = [["Anna", "lives", "in", "New", "York"], ["Paris", "is", "nice"]]
TAGS = [[1, 0, 0, 1, 2], [1, 0, 0]]


def test_bert_token_classifier(tokenizer):
    preprocessor = TokenClassifierPreprocessor(tokenizer, sequence_length=LENGTH)
    tagger = BertTokenClassifier(tiny_encoder(), num_classes=3, preprocessor=preprocessor,
                                 label_names=["O", "B-LOC", "I-LOC"])
    restored, tags = run_task_test(tagger, (WORDS, TAGS), raw_predict_input=WORDS,
                                   expected_output_shape=(2, LENGTH, 3))
    assert restored.label_names == ["O", "B-LOC", "I-LOC"]
    np.testing.assert_array_equal(tags["num_words"], [5, 3])
    assert set(np.asarray(tags["tags"][0]).tolist()) <= {"O", "B-LOC", "I-LOC"}


# === BertMultipleChoice ===


def test_bert_multiple_choice(reviews, tokenizer):
    texts, _ = reviews
    preprocessor = MultipleChoicePreprocessor(tokenizer, sequence_length=LENGTH)
    chooser = BertMultipleChoice(tiny_encoder(), num_choices=3, preprocessor=preprocessor,
                                 dropout=0.0)
    contexts = ["The film opens in a small town.", "The critic left early."]
    choices = [texts[0:3], texts[3:6]]
    restored, logits = run_task_test(chooser, ((contexts, choices), np.array([2, 0])),
                                     raw_predict_input=(contexts, choices),
                                     expected_output_shape=(2, 3))
    assert logits.shape == (2, 3) and restored.num_choices == 3


# === BertFeatureExtractor ===


def test_bert_feature_extractor_scalar_mix(reviews, tokenizer):
    """The one option with weights of its own, trained through `fit` (an MSE on the sentence
    embedding: the extractor has no default loss). Not normalized: a unit-norm embedding
    does not depend on the mix's scale gamma, which would then get no gradient."""
    texts, _ = reviews
    preprocessor = BertPreprocessor(tokenizer, sequence_length=LENGTH)
    extractor = BertFeatureExtractor(tiny_encoder(num_layers=2, return_hidden_states=True),
                                     layers="scalar_mix", pooling="mean", normalize=False,
                                     preprocessor=preprocessor)
    targets = {"sentence_embedding": np.random.default_rng(0).normal(
        size=(8, HIDDEN)).astype("float32")}
    _, features = run_task_test(
        extractor, (texts, targets), raw_predict_input=texts[:2],
        expected_output_shape={"token_embeddings": (8, LENGTH, HIDDEN),
                               "sentence_embedding": (8, HIDDEN)},
        renamed={"layers": "feature_layers"},
        compile_kwargs={"loss": {"sentence_embedding": "mse"}})
    assert features["sentence_embedding"].shape == (2, HIDDEN)


def _reference_features(hidden, mask, layers, pooling, normalize):
    """The BERT paper's feature-based choices (section 5.3) from hidden [B, L+1, T, H]."""
    tokens = {"embeddings": lambda: hidden[:, 0],
              "last_hidden": lambda: hidden[:, -1],
              "second_to_last": lambda: hidden[:, -2],
              "sum_all": lambda: hidden[:, 1:].sum(1),
              "sum_last_four": lambda: hidden[:, -4:].sum(1),
              "concat_last_four": lambda: np.concatenate(list(hidden[:, -4:].transpose(
                  1, 0, 2, 3)), axis=-1)}[layers]()
    if pooling == "cls":
        sentence = tokens[:, 0]
    else:
        sentence = (tokens * mask[:, :, None]).sum(1) / mask.sum(1, keepdims=True)
    if normalize:
        sentence = sentence / np.linalg.norm(sentence, axis=-1, keepdims=True)
    return {"token_embeddings": tokens, "sentence_embedding": sentence}


@pytest.fixture(scope="module")
def four_layer_hidden_states(reviews, tokenizer):
    """One 4-layer encoder, 3 packed reviews and its hidden states, shared by every option
    (an extractor reads the encoder's weights without changing them)."""
    encoder = tiny_encoder(num_layers=4, return_hidden_states=True)
    inputs = BertPreprocessor(tokenizer, sequence_length=LENGTH)(reviews[0][:3])
    return encoder, inputs, to_numpy(encoder(inputs)["hidden_states"])


@pytest.mark.parametrize("layers,pooling,normalize", [
    ("embeddings", "cls", False), ("last_hidden", "mean", True),
    ("second_to_last", "cls", True), ("sum_all", "mean", False),
    ("sum_last_four", "cls", False), ("concat_last_four", "mean", True)])
def test_bert_feature_extractor_options(four_layer_hidden_states, layers, pooling, normalize):
    """Each layer / pooling / normalize option: config round trip and the features against
    NumPy from the encoder's hidden states (the whole harness runs in the test above)."""
    encoder, inputs, hidden = four_layer_hidden_states
    extractor = BertFeatureExtractor(encoder, layers=layers, pooling=pooling,
                                     normalize=normalize)
    restored = check_config_round_trip(extractor)
    assert (restored.feature_layers, restored.pooling, restored.normalize) == (
        layers, pooling, normalize)
    expected = _reference_features(hidden, inputs["padding_mask"].astype("float32"), layers,
                                   pooling, normalize)
    width = HIDDEN * (4 if layers == "concat_last_four" else 1)
    assert expected["token_embeddings"].shape == (3, LENGTH, width)
    assert_all_close(extractor(inputs), expected, rtol=1e-5, atol=1e-5)


# === BertPretrainer ===


def _pretraining_batch(batch=4, length=12, predictions=3):
    rng = np.random.default_rng(0)
    padding_mask = np.ones((batch, length), "int32")
    padding_mask[1, 9:] = 0
    positions = np.stack([np.sort(rng.choice(np.arange(1, 8), predictions, replace=False))
                          for _ in range(batch)]).astype("int32")
    weights = np.ones((batch, predictions), "float32")
    weights[1::2, -1] = 0.0  # padded prediction slots
    x = {"token_ids": rng.integers(1000, VOCABULARY, (batch, length)).astype("int32"),
         "segment_ids": (np.arange(length) >= 6).astype("int32")[None].repeat(batch, 0),
         "padding_mask": padding_mask, "mask_positions": positions}
    y = {"mlm_labels": rng.integers(1000, VOCABULARY, (batch, predictions)).astype("int32"),
         "mlm_weights": weights, "nsp_labels": np.array([0, 1, 1, 0], "int32")}
    return x, y


def test_bert_pretrainer_with_next_sentence_prediction():
    x, y = _pretraining_batch()
    pretrainer = BertPretrainer(tiny_encoder(), next_sentence_prediction=True)
    run_task_test(pretrainer, (x, y),
                  expected_output_shape={"mlm_logits": (4, 3, VOCABULARY), "nsp_logits": (4, 2)})


def test_bert_pretrainer_masked_lm_only():
    x, y = _pretraining_batch()
    del y["nsp_labels"]
    pretrainer = BertPretrainer(backbone=tiny_encoder(),
                                next_sentence_prediction=False)
    # Without NSP nothing reads the pooled output: the pooler is frozen, as the other
    # sequence-only heads do (tasks/task.py freeze_unused_pooler).
    assert not any("pooler" in w.path for w in pretrainer.trainable_weights)
    run_task_test(pretrainer, (x, y), expected_output_shape={"mlm_logits": (4, 3, VOCABULARY)})


def test_bert_pretrainer_on_packed_rows():
    """Two instances share rows 0 and 2 (padding_mask numbers them); NSP per instance."""
    x, y = _pretraining_batch()
    x["padding_mask"][0, 6:] = 2
    x["padding_mask"][2, 5:] = 2
    y["nsp_labels"] = np.array([[0, 1], [1, 0], [1, 1], [0, 0]], "int32")
    y["nsp_weights"] = np.array([[1, 1], [1, 0], [1, 1], [1, 0]], "float32")
    pretrainer = BertPretrainer(tiny_encoder(), max_instances_per_row=2)
    run_task_test(pretrainer, (x, y), expected_output_shape={
        "mlm_logits": (4, 3, VOCABULARY), "nsp_logits": (4, 2, 2)})


# === Presets: from_preset, save_to_preset, from_preset ===


def _packed(tokenizer, texts):
    return BertPreprocessor(tokenizer, sequence_length=LENGTH)(texts)


def test_bert_encoder_preset(reviews, tokenizer):
    texts, _ = reviews
    run_preset_test(BertEncoder, PRESET, _packed(tokenizer, texts[:2]),
                    init_kwargs={"load_weights": False},
                    expected_output_shape={"sequence_output": (2, LENGTH, 128),
                                           "pooled_output": (2, 128)})


@pytest.mark.parametrize("cls,arguments,shape", [
    (BertClassifier, {"num_classes": 3, "label_names": ["a", "b", "c"]}, (2, 3)),
    (BertTokenClassifier, {"num_classes": 2}, (2, LENGTH, 2)),
    (BertSpanLabeler, {}, {"start_logits": (2, LENGTH), "end_logits": (2, LENGTH)}),
    (BertFeatureExtractor, {"layers": "sum_all", "pooling": "mean"},
     {"token_embeddings": (2, LENGTH, 128), "sentence_embedding": (2, 128)}),
], ids=lambda value: getattr(value, "__name__", None))
def test_task_presets(reviews, tokenizer, cls, arguments, shape):
    texts, _ = reviews
    restored = run_preset_test(
        cls, PRESET, _packed(tokenizer, texts[:2]),
        init_kwargs={"load_weights": False, "sequence_length": LENGTH, **arguments},
        expected_output_shape=shape)
    assert restored.preprocessor.sequence_length == LENGTH


def test_multiple_choice_preset(tokenizer):
    inputs = MultipleChoicePreprocessor(tokenizer, sequence_length=LENGTH)(
        (["A context."], [["one", "two"]]))
    run_preset_test(BertMultipleChoice, PRESET, inputs,
                    init_kwargs={"load_weights": False, "sequence_length": LENGTH,
                                 "num_choices": 2},
                    expected_output_shape=(1, 2))


def test_pretrainer_preset():
    x, _ = _pretraining_batch()
    x["token_ids"] = x["token_ids"] % 1000
    run_preset_test(BertPretrainer, PRESET, x, init_kwargs={"load_weights": False},
                    expected_output_shape={"mlm_logits": (4, 3, VOCABULARY),
                                           "nsp_logits": (4, 2)})


# === ReplacedTokenDetector (ELECTRA's discriminator) ===


def test_replaced_token_detector():
    x, _ = _pretraining_batch()
    del x["mask_positions"]
    replaced = (np.random.default_rng(1).random(x["token_ids"].shape) < 0.15).astype("int32")
    detector = ReplacedTokenDetector(tiny_encoder(embedding_dim=8, pooler_activation="gelu"))
    run_task_test(detector, (x, replaced), expected_output_shape=(4, 12),
                  unchanged=("pooler",))  # the head reads sequence_output only

