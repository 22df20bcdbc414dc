"""Every task model exported (TensorFlow backend, direct path) and served from a separate process
that has only tensorflow + tensorflow_text: same answers as the Keras model, only servable ops,
every awkward string answered, TF Serving layout, assets and warmup requests.

One export per task for the whole module (the `served` fixture), and one serving-host process
answers every request: an export costs a few seconds of tracing, a TF process start as much.
"""

import contextlib
import io
import os

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_suite import BertClassifier, BertFeatureExtractor, BertPreprocessor, cli
from keras_bert_suite.export import export_saved_model, unservable_ops
from keras_bert_suite.export.op_check import saved_model_ops
from keras_bert_suite.export.warmup import read_warmup_requests
from keras_bert_suite.tasks.span_labeler.postprocessor import NO_ANSWER_SCORE
from tests.conftest import to_numpy
from tests.export import references
from tests.export.conftest import (
    AWKWARD_TEXTS, NER_TAGS, PRESET, SENTIMENT, SEQUENCE_LENGTH, as_strings, run_on_serving_host,
    small_task_models)

pytestmark = pytest.mark.needs_savedmodel(
    reason="direct export runs under TensorFlow; other backends: test_reexport.py")

# Served graph vs eager Keras: oneDNN picks other kernels per shape and CPU, so values agree
# to a relative 1e-4 (MiniLM token vectors reach |5|), with atol for values near 0.
RTOL, ATOL = 1e-4, 1e-5
NAMES = ["classifier", "pair_regression", "span_labeler", "token_classifier",
         "multiple_choice", "encoder", "minilm"]
LONG = 6  # index of the long text in `texts`: 100,000 characters, 10,000 for the windowed tasks
WINDOWED_LENGTH = 10_000  # ~200 span windows / ~100 tagging chunks: every code path, less CPU


def export_with_kbs(model, base, name, work_dir):
    """`kbs export model.keras --name NAME`: the command line path, from a saved file."""
    path = os.path.join(work_dir, f"{name}.keras")
    model.save(path)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        cli.main(["export", path, "--name", name, "--base_dir", base])
    return os.path.join(base, name, "1"), printed.getvalue()


@pytest.fixture(scope="module")
def served(tmp_path_factory, real_sentences):
    """Exports every task once and asks one serving-host process everything."""
    base = str(tmp_path_factory.mktemp("saved_models"))
    sentences, long_text = real_sentences
    texts = as_strings(sentences + [long_text] + AWKWARD_TEXTS)
    models = {
        **small_task_models(),
        # Real weights, used as sentence-transformers uses all-MiniLM-L6-v2.
        "minilm": BertFeatureExtractor.from_preset("minilm_l6_h384_uncased", pooling="mean",
                                                   normalize=True, sequence_length=64),
    }
    preprocessors = {name: getattr(model, "preprocessor", None) for name, model in models.items()}
    preprocessors["encoder"] = BertPreprocessor.from_preset(PRESET, sequence_length=SEQUENCE_LENGTH)
    paths, printed = {}, ""
    for name, model in models.items():
        if name == "classifier":
            paths[name], printed = export_with_kbs(model, base, name,
                                                   str(tmp_path_factory.mktemp("keras")))
        elif name == "pair_regression":
            paths[name] = export_saved_model(model, base, name=name, pair=True)
        elif name == "encoder":
            paths[name] = export_saved_model(model, base, name=name,
                                             preprocessor=preprocessors[name])
        else:  # task, preprocessor and label names come from the model
            paths[name] = export_saved_model(model, base, name=name)
    # The span labeler and the tagger run the model on every window of the text: 100k
    # characters would be 2,000 windows (seconds of CPU here and in the reference).
    windowed = texts.copy()
    windowed[LONG] = long_text[:WINDOWED_LENGTH].encode()
    questions = as_strings(["What is the duty of the government?"] * len(texts))
    choices = np.stack([texts, texts[::-1], as_strings(["yes"] * len(texts)),
                        as_strings(["no"] * len(texts))], axis=1)
    raw_inputs = {
        "classifier": {"text": texts},
        "pair_regression": {"text_a": texts, "text_b": texts[::-1]},
        "span_labeler": {"question": questions, "context": windowed},
        "token_classifier": {"text": windowed},
        "multiple_choice": {"question": texts, "choices": choices},
        "encoder": {"text": texts},
        "minilm": {"text": texts},
    }
    encoder_inputs = {name: _encoder_inputs(name, preprocessors[name], sentences)
                      for name in NAMES}
    requests = [{"export": paths[n], "signature": "serving_default", "inputs": raw_inputs[n]}
                for n in NAMES]
    requests += [{"export": paths[n], "signature": "encoder_inputs", "inputs": encoder_inputs[n]}
                 for n in NAMES]
    requests += [{"export": paths["span_labeler"], "show": True}]
    results, leaked = run_on_serving_host(requests, str(tmp_path_factory.mktemp("host")))
    count = len(NAMES)
    return {
        "paths": paths, "models": models, "preprocessors": preprocessors, "leaked": leaked,
        "raw": dict(zip(NAMES, results[:count])), "inputs": raw_inputs,
        "encoder": dict(zip(NAMES, results[count:2 * count])), "encoder_inputs": encoder_inputs,
        "show": results[-1], "texts": texts, "kbs_printed": printed,
    }


def _encoder_inputs(name, preprocessor, sentences):
    """Packed ids made by the task's own preprocessor, for the `encoder_inputs` signature."""
    texts = as_strings(sentences)
    if name == "span_labeler":
        x = (as_strings(["What did they say?"] * len(texts)), texts)
    elif name == "multiple_choice":  # [1, 4, T]: four sentences as the choices of one
        x = (texts[:1], texts[None, :4])
    else:
        x = texts
    return {k: np.asarray(v) for k, v in preprocessor(x).items()}


def _answer(served, name):
    result = served["raw"][name]
    assert "error" not in result, result.get("error")
    return result


def _decoded(texts):
    """What the graph reads: ill-formed UTF-8 replaced by U+FFFD."""
    return [t.decode("utf-8", "replace") for t in texts]


def test_serving_host_imported_only_tensorflow(served):
    assert served["leaked"] == []


def test_kbs_export_wrote_version_1(served):
    path = served["paths"]["classifier"]
    assert served["kbs_printed"].strip().endswith(f"-> {path}")
    assert sorted(os.listdir(path)) == ["assets", "assets.extra", "fingerprint.pb",
                                        "saved_model.pb", "variables"]


@pytest.mark.parametrize("name", NAMES)
def test_layout_assets_warmup_and_ops(served, name):
    path = served["paths"][name]
    assert os.path.basename(path) == "1"
    assert sorted(os.listdir(os.path.dirname(path))) == ["1"]  # no temporary left behind
    with open(os.path.join(path, "assets", "vocab.txt"), encoding="utf-8") as f:
        assert f.read().splitlines() == served["preprocessors"][name].tokenizer.vocabulary
    labels = {"classifier": SENTIMENT, "token_classifier": NER_TAGS}.get(name)
    assert os.path.isfile(os.path.join(path, "assets", "labels.txt")) == bool(labels)
    if labels:
        with open(os.path.join(path, "assets", "labels.txt"), encoding="utf-8") as f:
            assert f.read().splitlines() == labels
    warmup = read_warmup_requests(path)
    assert len(warmup) == 1 and warmup[0].model_spec.name == name
    assert set(warmup[0].inputs) == set(served["inputs"][name])
    assert unservable_ops(path) == {}
    assert "FastWordpieceTokenizeWithOffsets" in saved_model_ops(path)


def test_encoder_inputs_signature_matches_keras(served):
    for name, model in served["models"].items():
        got = served["encoder"][name]
        assert "error" not in got, (name, got.get("error"))
        expected = model(served["encoder_inputs"][name], training=False)
        expected = expected if isinstance(expected, dict) else {"logits": expected}
        assert set(got) == set(expected), name
        for key, value in expected.items():
            np.testing.assert_allclose(got[key], to_numpy(value), rtol=RTOL, atol=ATOL,
                                       err_msg=name)


def test_classifier_probabilities_and_labels(served):
    got = _answer(served, "classifier")
    model = served["models"]["classifier"]
    logits = to_numpy(model(model.preprocessor(served["texts"]), training=False))
    probabilities = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    np.testing.assert_allclose(got["probabilities"], probabilities, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(got["logits"], logits, rtol=RTOL, atol=ATOL)
    labels = np.array(SENTIMENT)[probabilities.argmax(-1)]
    assert [x.decode() for x in got["predicted_label"]] == labels.tolist()
    assert got["label_names"].tolist() == [[b"rotten", b"fresh"]] * len(served["texts"])
    lengths = [len(ids) for ids in
               model.preprocessor.tokenizer.encode_batch(_decoded(served["texts"]))]
    assert got["truncated"].tolist() == [n + 2 > SEQUENCE_LENGTH for n in lengths]
    assert got["truncated"].any() and not got["truncated"].all()


def test_pair_regression_scores(served):
    got = _answer(served, "pair_regression")
    assert sorted(got) == ["score", "truncated"]
    model, texts = served["models"]["pair_regression"], served["texts"]
    logits = to_numpy(model(model.preprocessor((texts, texts[::-1])), training=False))
    np.testing.assert_allclose(got["score"], logits[:, 0], rtol=RTOL, atol=ATOL)
    tokenizer = model.preprocessor.tokenizer
    lengths = [len(ids) for ids in tokenizer.encode_batch(_decoded(texts))]
    assert got["truncated"].tolist() == [
        a + b + 3 > SEQUENCE_LENGTH for a, b in zip(lengths, lengths[::-1])]


def test_classifier_default_label_names():
    """Without label_names the classes are named "0", "1", ... (eager call: no export)."""
    model = BertClassifier.from_preset(PRESET, load_weights=False, num_classes=3,
                                       sequence_length=16)
    serve = model.serving_signatures()["serving_default"].function
    got = serve(tf.constant(["a fine film", "dull"]))
    assert got["label_names"].numpy().tolist() == [[b"0", b"1", b"2"]] * 2
    logits = to_numpy(model(model.preprocessor(["a fine film", "dull"]), training=False))
    assert got["predicted_label"].numpy().tolist() == [
        str(i).encode() for i in logits.argmax(-1)]


def test_span_labeler_answers_match_predict(served):
    """The served answers are the library's: `predict` on the same raw strings runs the same
    preprocessor and postprocessor eagerly (their parity with Model Garden's run_squad
    windows and answer rule is tests/tasks/span_labeler/test_squad.py and test_span_postprocessor.py)."""
    got = _answer(served, "span_labeler")
    inputs = served["inputs"]["span_labeler"]
    contexts = _decoded(inputs["context"])
    model = served["models"]["span_labeler"]
    expected = model.predict((_decoded(inputs["question"]), contexts), verbose=0)
    assert [a.decode() for a in got["answer"]] == expected["answer"].tolist()
    np.testing.assert_array_equal(got["start"], expected["start"])
    np.testing.assert_array_equal(got["end"], expected["end"])
    np.testing.assert_allclose(got["score"], expected["score"], rtol=RTOL, atol=ATOL)
    for i, context in enumerate(contexts):
        assert got["answer"][i].decode() == context[got["start"][i]:got["end"][i]], i
    empty = [i for i, c in enumerate(contexts) if not model.preprocessor.tokenizer.encode_batch(
        [c])[0]]
    assert empty and all(got["score"][i] == np.float32(NO_ANSWER_SCORE) for i in empty)
    # the 10,000-character context: the answer can come from any of its windows
    assert 0 <= got["start"][LONG] < got["end"][LONG] <= WINDOWED_LENGTH


def test_token_classifier_tags_every_word(served):
    got = _answer(served, "token_classifier")
    texts = _decoded(served["inputs"]["token_classifier"]["text"])
    model = served["models"]["token_classifier"]
    expected = references.word_tags(model, model.preprocessor.tokenizer, SEQUENCE_LENGTH,
                                    NER_TAGS, texts)
    for i, words in enumerate(expected):
        count = int(got["num_words"][i])
        assert count == len(words), i
        assert [w.decode() for w in got["words"][i, :count]] == [w for w, _, _ in words]
        assert [t.decode() for t in got["tags"][i, :count]] == [t for _, t, _ in words]
        np.testing.assert_allclose(got["tag_scores"][i, :count], [s for _, _, s in words],
                                   rtol=RTOL, atol=ATOL)
        assert set(got["tags"][i, count:].tolist()) <= {b""}
    assert got["num_words"][LONG] > 1_500  # the long text is tagged to its last word


def test_multiple_choice_scores(served):
    got = _answer(served, "multiple_choice")
    inputs = served["inputs"]["multiple_choice"]
    model = served["models"]["multiple_choice"]
    packed = model.preprocessor((inputs["question"], inputs["choices"]))
    logits = to_numpy(model(packed, training=False))
    np.testing.assert_allclose(got["scores"], logits, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(got["probabilities"].sum(-1), 1.0, rtol=RTOL, atol=ATOL)
    assert got["predicted_choice"].tolist() == logits.argmax(-1).tolist()


@pytest.mark.parametrize("name,outputs", [
    ("encoder", ["pooled_output", "sequence_output"]),
    ("minilm", ["sentence_embedding", "token_embeddings"])])
def test_embeddings(served, name, outputs):
    got = _answer(served, name)
    packed = served["preprocessors"][name](served["texts"])
    expected = served["models"][name](packed, training=False)
    for key in outputs:
        np.testing.assert_allclose(got[key], to_numpy(expected[key]),
                                   rtol=RTOL, atol=ATOL)
    np.testing.assert_array_equal(got["padding_mask"], packed["padding_mask"])
    if name == "minilm":  # normalize=True: unit vectors for cosine search
        np.testing.assert_allclose(np.linalg.norm(got["sentence_embedding"], axis=-1), 1.0,
                                   rtol=1e-5, atol=0)


def test_saved_model_cli_lists_signatures(served):
    text = served["show"]["show"]
    assert "signature_def['serving_default']" in text
    assert "signature_def['encoder_inputs']" in text
    for name in ("inputs['question']", "inputs['context']", "outputs['answer']",
                 "outputs['start']", "inputs['token_ids']", "outputs['start_logits']"):
        assert name in text
