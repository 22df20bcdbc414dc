"""Every task built on JAX or PyTorch is exported through a TensorFlow-backend subprocess (the
.keras re-export path): a plain TF graph (no XlaCallModule), served from a TF-only host, whose
answers equal the model's own `predict` on the same raw input on this backend — answers, tags
and choices exactly, scores within rtol 1e-4.

One export per task (the module fixture) and one serving-host process for every request.
Not marked `needs_savedmodel`: that marker skips outside the TensorFlow process, and this
module exists for the other two (TensorFlow exports directly: test_task_exports.py).
"""

import keras
import numpy as np
import pytest

from keras_bert_suite import BertFeatureExtractor, BertPreprocessor
from keras_bert_suite.export import export_saved_model, unservable_ops
from keras_bert_suite.export.op_check import saved_model_ops
from tests.conftest import to_numpy
from tests.export.conftest import (
    AWKWARD_TEXTS, PRESET, SENTIMENT, SEQUENCE_LENGTH, as_strings, run_on_serving_host,
    small, small_task_models)

pytestmark = pytest.mark.skipif(keras.backend.backend() == "tensorflow",
                                reason="TensorFlow exports directly (test_task_exports.py)")

# Served TF graph vs this backend's kernels: values agree to a relative 1e-4; atol for ~0.
RTOL, ATOL = 1e-4, 1e-5
NAMES = ["classifier", "pair_regression", "span_labeler", "token_classifier",
         "multiple_choice", "feature_extractor", "encoder"]


def _decoded(texts):
    """What the graph reads: ill-formed UTF-8 replaced by U+FFFD."""
    return [t.decode("utf-8", "replace") for t in texts]


@pytest.fixture(scope="module")
def served(tmp_path_factory, real_sentences):
    sentences, long_text = real_sentences
    texts = as_strings(sentences + AWKWARD_TEXTS)
    base = str(tmp_path_factory.mktemp("saved_models"))
    models = {**small_task_models(),
              "feature_extractor": small(BertFeatureExtractor, pooling="mean", normalize=True)}
    encoder_preprocessor = BertPreprocessor.from_preset(PRESET, sequence_length=SEQUENCE_LENGTH)
    paths, export_errors = {}, {}
    for name, model in models.items():
        options = {"pair": True} if name == "pair_regression" else {}
        if name == "encoder":
            options = {"preprocessor": encoder_preprocessor}
        try:  # one task's failure fails its own test, not the module
            paths[name] = export_saved_model(model, base, name=name, **options)
        except Exception as error:
            export_errors[name] = f"{type(error).__name__}: {error}"[-3000:]
    # a context long enough for many windows (1,000 characters ~ 20 windows)
    contexts = texts.copy()
    contexts[0] = long_text[:1000].encode()
    questions = as_strings(["What is the duty of the government?"] * len(texts))
    choices = np.stack([texts, texts[::-1], as_strings(["yes"] * len(texts)),
                        as_strings(["no"] * len(texts))], axis=1)
    words = [s.split() for s in sentences] + [["Barack", "Obama", "visited", "Paris"], ["a"]]
    width = max(len(w) for w in words)
    padded_words = np.array([[x.encode() for x in w] + [b""] * (width - len(w))
                             for w in words], object)
    inputs = {
        "classifier": ("serving_default", {"text": texts}),
        "pair_regression": ("serving_default", {"text_a": texts, "text_b": texts[::-1]}),
        "span_labeler": ("serving_default", {"question": questions, "context": contexts}),
        "token_classifier": ("serving_default", {"text": texts}),
        "tag_words": ("tag_words", {"words": padded_words}),
        "multiple_choice": ("serving_default", {"question": texts, "choices": choices}),
        "feature_extractor": ("serving_default", {"text": texts}),
        "encoder": ("serving_default", {"text": texts}),
    }
    exported = [key for key in inputs
                if ("token_classifier" if key == "tag_words" else key) in paths]
    requests = [{"export": paths["token_classifier" if key == "tag_words" else key],
                 "signature": inputs[key][0], "inputs": inputs[key][1]} for key in exported]
    results, leaked = run_on_serving_host(requests, str(tmp_path_factory.mktemp("host")))
    return {"paths": paths, "export_errors": export_errors, "models": models, "leaked": leaked,
            "texts": texts, "inputs": {k: v[1] for k, v in inputs.items()}, "words": words,
            "encoder_preprocessor": encoder_preprocessor,
            "results": dict(zip(exported, results))}


def _answer(served, key):
    name = "token_classifier" if key == "tag_words" else key
    assert name not in served["export_errors"], served["export_errors"][name]
    result = served["results"][key]
    assert "error" not in result, result.get("error")
    return result


def test_plain_tf_graphs_served_by_a_tf_only_host(served):
    assert served["leaked"] == []
    assert served["export_errors"] == {}
    for name in served["paths"]:
        path = served["paths"][name]
        assert path.endswith(f"{name}/1")
        assert unservable_ops(path) == {}, name
        ops = saved_model_ops(path)
        assert not any(op.startswith("Xla") for op in ops), name
        assert "FastWordpieceTokenizeWithOffsets" in ops, name


def test_classifier(served):
    got = _answer(served, "classifier")
    model = served["models"]["classifier"]
    logits = np.asarray(model.predict(_decoded(served["texts"]), verbose=0))
    np.testing.assert_allclose(got["logits"], logits, rtol=RTOL, atol=ATOL)
    probabilities = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    np.testing.assert_allclose(got["probabilities"], probabilities, rtol=RTOL, atol=ATOL)
    assert [x.decode() for x in got["predicted_label"]] == [
        SENTIMENT[i] for i in logits.argmax(-1)]


def test_pair_regression(served):
    got = _answer(served, "pair_regression")
    model, texts = served["models"]["pair_regression"], _decoded(served["texts"])
    scores = np.asarray(model.predict((texts, texts[::-1]), verbose=0))
    np.testing.assert_allclose(got["score"], scores[:, 0], rtol=RTOL, atol=ATOL)


def test_span_labeler(served):
    got = _answer(served, "span_labeler")
    inputs = served["inputs"]["span_labeler"]
    contexts = _decoded(inputs["context"])
    expected = served["models"]["span_labeler"].predict(
        (_decoded(inputs["question"]), contexts), verbose=0)
    assert [a.decode() for a in got["answer"]] == expected["answer"].tolist()
    np.testing.assert_array_equal(got["start"], expected["start"])
    np.testing.assert_array_equal(got["end"], expected["end"])
    np.testing.assert_allclose(got["score"], expected["score"], rtol=RTOL, atol=ATOL)
    assert 0 <= got["start"][0] < got["end"][0] <= 1000  # from any window of the long context


def _compare_tags(got, expected):
    counts = np.asarray(expected["num_words"])
    np.testing.assert_array_equal(got["num_words"], counts)
    for i, count in enumerate(counts):
        assert [t.decode() for t in got["tags"][i, :count]] == list(expected["tags"][i][:count])
        np.testing.assert_allclose(got["tag_scores"][i, :count],
                                   expected["tag_scores"][i][:count], rtol=RTOL, atol=ATOL)


def test_token_classifier_text_and_tag_words(served):
    model = served["models"]["token_classifier"]
    got = _answer(served, "token_classifier")
    expected = model.predict(_decoded(served["texts"]), verbose=0)
    _compare_tags(got, expected)
    for i, count in enumerate(expected["num_words"]):
        assert [w.decode() for w in got["words"][i, :count]] == list(
            expected["words"][i][:count])
    assert got["num_words"].max() > 10
    got = _answer(served, "tag_words")
    expected = model.predict(served["words"], verbose=0)
    assert expected["num_words"].tolist() == [len(w) for w in served["words"]]
    _compare_tags(got, expected)


def test_multiple_choice(served):
    got = _answer(served, "multiple_choice")
    inputs = served["inputs"]["multiple_choice"]
    choices = [_decoded(row) for row in inputs["choices"]]
    logits = np.asarray(served["models"]["multiple_choice"].predict(
        (_decoded(inputs["question"]), choices), verbose=0))
    np.testing.assert_allclose(got["scores"], logits, rtol=RTOL, atol=ATOL)
    assert got["predicted_choice"].tolist() == logits.argmax(-1).tolist()


def test_feature_extractor(served):
    got = _answer(served, "feature_extractor")
    expected = served["models"]["feature_extractor"].predict(_decoded(served["texts"]),
                                                             verbose=0)
    for key in ("sentence_embedding", "token_embeddings"):
        np.testing.assert_allclose(got[key], to_numpy(expected[key]), rtol=RTOL, atol=ATOL,
                                   err_msg=key)


def test_bare_encoder_with_preprocessor(served):
    got = _answer(served, "encoder")
    packed = served["encoder_preprocessor"](served["texts"])
    expected = served["models"]["encoder"].predict(
        {k: np.asarray(v) for k, v in packed.items()}, verbose=0)
    for key in ("pooled_output", "sequence_output"):
        np.testing.assert_allclose(got[key], to_numpy(expected[key]), rtol=RTOL, atol=ATOL,
                                   err_msg=key)
    np.testing.assert_array_equal(got["padding_mask"], np.asarray(packed["padding_mask"]))
