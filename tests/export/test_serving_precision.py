"""The exported encoder graph (ServingEncoder) and its precisions.

* float32: the same function as the Keras encoder, for a pruned encoder with hidden states
  too (every weight read by its canonical name);
* bfloat16 (`export_saved_model(..., precision="bfloat16")`, `kbs export --precision`) and
  int8 (`precision="int8"`, `kbs export --quantize int8`): a fine-tuned Rotten Tomatoes
  classifier, served from a TF-only process, keeps its held-out accuracy within one point of
  the float32 export (400 reviews), and MiniLM sentence embeddings keep a cosine >= 0.999
  (bf16) / 0.99 (int8) to the Keras model's (100 reviews); `kbs serve` serves the int8
  export. These real-data checks run once, in the TensorFlow process.

On every backend: ServingEncoder reads any backend's variables, and JAX and PyTorch models
reach it through the TensorFlow re-export.
"""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_suite import BertClassifier, BertEncoder, BertFeatureExtractor, cli
from keras_bert_suite.export import export_saved_model, unservable_ops
from keras_bert_suite.export.op_check import saved_model_ops
from keras_bert_suite.layers.serving.int8_matmul import int8_copy, int8_dense, smoothing_factors
from keras_bert_suite.export.serving_encoder import ServingEncoder
from keras_bert_suite.names import SERVING_PRECISIONS as PRECISIONS
from keras_bert_suite.tasks.classifier.rotten_tomatoes import load_rotten_tomatoes
from keras_bert_suite.training.optimizers import create_optimizer
from tests.conftest import to_numpy
from tests.export.conftest import AWKWARD_TEXTS, as_strings, run_on_serving_host
from tests.numerics import assert_close

MINILM = "minilm_l6_h384_uncased"
EMBEDDED = 100  # held-out reviews whose sentence embeddings are compared


def _packed(batch, length, seed):
    rng = np.random.default_rng(seed)
    mask = (np.arange(length)[None, :] < rng.integers(2, length + 1, (batch, 1))).astype("int32")
    return {"token_ids": rng.integers(1, 100, (batch, length)).astype("int32") * mask,
            "segment_ids": (np.arange(length)[None, :] >= length // 2).astype("int32") * mask,
            "padding_mask": mask}


def test_serving_encoder_computes_the_keras_encoder_for_a_pruned_encoder():
    encoder = BertEncoder(vocabulary_size=100, num_layers=2, num_heads=4, hidden_dim=32,
                          intermediate_dim=64, layer_num_heads=[4, 1],
                          layer_intermediate_dims=[64, 8], return_hidden_states=True)
    inputs = _packed(3, 12, seed=0)
    expected = encoder(inputs, training=False)
    got = ServingEncoder(encoder)({name: tf.constant(v) for name, v in inputs.items()})
    assert sorted(got) == sorted(expected)
    for name, value in expected.items():
        assert_close(got[name], to_numpy(value), rtol=1e-4, atol=1e-5, err_msg=name)


@pytest.mark.parametrize("precision", ["bfloat16", "int8"])
def test_reduced_precisions_serve_a_pruned_encoder(precision):
    """Per-layer head counts and FFN widths (a pruned model) in bf16 / int8: close to float32
    token by token, and not float32 itself. Weights 15x BERT's initial scale, so that the
    attention and FFN branches, not the embeddings on the residual path, make the outputs
    (at 25x attention is near-argmax, and which token wins flips with the random draw: the
    worst token's cosine then ranged 0.77-0.9997 over seeds)."""
    keras.utils.set_random_seed(0)
    encoder = BertEncoder(vocabulary_size=100, num_layers=2, num_heads=4, hidden_dim=32,
                          intermediate_dim=64, layer_num_heads=[4, 1],
                          layer_intermediate_dims=[64, 8], initializer_range=0.3)
    inputs = {name: tf.constant(v) for name, v in _packed(3, 12, seed=1).items()}
    expected = ServingEncoder(encoder)(inputs)["sequence_output"].numpy()
    got = ServingEncoder(encoder, precision)(inputs)["sequence_output"].numpy()
    cosine = np.sum(got * expected, -1) / (np.linalg.norm(got, axis=-1)
                                           * np.linalg.norm(expected, axis=-1))
    # Worst token measured over 16 seeds: 0.9998-1.0 (bf16), 0.9984-0.9998 (int8: 255 steps
    # over ranges these random weights make wide). A wrong zero-point term puts int8 outputs
    # off by orders of magnitude.
    assert cosine.min() >= (0.999 if precision == "bfloat16" else 0.995), cosine.min()
    assert np.abs(got - expected).max() > 1e-3  # the reduced kernels were used


def test_unknown_precision_is_refused_before_anything_is_written(tmp_path):
    model = BertEncoder(vocabulary_size=100, num_layers=1, num_heads=2, hidden_dim=8,
                        intermediate_dim=16)
    from keras_bert_suite import BertPreprocessor

    with pytest.raises(ValueError, match=r"precision must be one of \('float32', 'bfloat16', "):
        export_saved_model(model, str(tmp_path), name="encoder", precision="int4",
                           preprocessor=BertPreprocessor.from_preset(MINILM, sequence_length=16))
    assert not os.path.exists(tmp_path / "encoder")


def test_int8_kernel_dequantizes_within_half_a_step():
    """values / 127 * column scale is every weight to half a quantization step, and each
    column's largest weight is +-127 exactly. A scale one step off (values * 128 / 127 read
    back) moves the kernel by 0.8% uniformly, which the product check below cannot tell from
    input rounding, and which LayerNorm hides from accuracy tests downstream."""
    rng = np.random.default_rng(1)
    kernel = rng.normal(0.0, 0.05, (64, 48)).astype("float32")
    kernel[:, 0] *= 40.0
    smoothing = rng.uniform(0.5, 2.0, 64).astype("float32")
    for rows in (None, smoothing):
        copy = int8_copy(kernel, rows)
        values = copy.values.numpy().astype(np.float32)
        scales = copy.column_scales.numpy()
        target = kernel if rows is None else kernel * rows[:, None]
        assert np.array_equal(np.abs(values).max(axis=0), np.full(48, 127.0))
        error = np.abs(values / 127.0 * scales - target)
        assert np.all(error <= scales / 254.0 * (1 + 1e-5) + 1e-9), error.max()
        assert_close(copy.column_sums.numpy(), values.sum(axis=0), rtol=0, atol=0)
        if rows is not None:
            assert_close(copy.input_scales.numpy(), 1.0 / rows, rtol=1e-6, atol=0)


def test_int8_matmul_matches_the_float32_product():
    rng = np.random.default_rng(0)
    x = rng.normal(0.3, 2.0, (24, 64)).astype("float32")  # negative inputs: a zero point
    kernel = rng.normal(0.0, 0.05, (64, 48)).astype("float32")
    kernel[:, 0] *= 40.0  # an outlier column, as in MiniLM's FFN output kernels
    bias = rng.normal(0.0, 1.0, 48).astype("float32")
    product = int8_dense(tf.constant(x), int8_copy(kernel), tf.constant(bias)).numpy()
    expected = x @ kernel + bias
    # uint8 inputs and int8 kernels: about 1% of each output column's range, column by
    # column (one kernel-wide scale would lose every column but the outlier).
    error = np.abs(product - expected).max(axis=0) / np.abs(expected).max(axis=0)
    assert error.max() < 0.03, error
    empty = int8_dense(tf.zeros((0, 64)), int8_copy(kernel), tf.constant(bias))
    assert empty.shape == (0, 48)
    # An input channel 30x the others (as LayerNorm outputs have) costs the rest of the
    # input their resolution; smoothing moves it into the kernel's row: same product, less
    # error.
    x[:, 3] *= 30.0
    expected = x @ kernel + bias
    errors = {}
    for smoothing in (None, smoothing_factors(np.abs(x).max(axis=0), kernel, calibrated=True)):
        product = int8_dense(tf.constant(x), int8_copy(kernel, smoothing), tf.constant(bias))
        errors[smoothing is None] = (np.abs(product.numpy() - expected).max(axis=0)
                                     / np.abs(expected).max(axis=0)).max()
    assert errors[False] < 0.03 and errors[False] < errors[True] / 2, errors


def test_calibration_texts_are_checked_before_anything_is_written(tmp_path):
    model = BertFeatureExtractor.from_preset(MINILM, load_weights=False, sequence_length=16)
    for precision, texts, message in (
            ("bfloat16", ["a text"], "Calibration texts are for precision='int8'"),
            ("int8", "one string", "a non-empty list of strings"),
            ("int8", [], "a non-empty list of strings"),
            ("int8", [b"bytes"], "a non-empty list of strings")):
        with pytest.raises(ValueError, match=message):
            export_saved_model(model, str(tmp_path), name="m", precision=precision,
                               calibration_texts=texts)
    assert not os.path.exists(tmp_path / "m")


@pytest.fixture(scope="module")
def served_precisions(tmp_path_factory):
    """A Rotten Tomatoes classifier fine-tuned on 1,024 reviews (its top two blocks and head,
    32 tokens) and MiniLM sentence embeddings, exported in every precision (the int8
    classifier with `kbs export --quantize int8`), and 400 held-out reviews (the embeddings:
    the first 100 of them) plus awkward strings answered by a TF-only serving host."""
    texts, labels = load_rotten_tomatoes()
    order = np.random.default_rng(0).permutation(len(texts))
    # Held-out accuracy measured (1 epoch over 1,024 reviews): 64 tokens, every layer trained
    # at 1e-4: 72.5%; 32 tokens (most reviews fit): 70% in 31 s; 32 tokens with the embeddings
    # and the first 4 of 6 blocks frozen at 2e-4: 70-74% over three seeds in 14-25 s (the
    # fixture's largest cost; 32 tokens also halve what the host and predict compute). At
    # 1e-4 the frozen model learned too little (56%).
    train, held_out = order[:1024], order[1024:1424]
    keras.utils.set_random_seed(0)  # module fixtures run before the per-test seed
    classifier = BertClassifier.from_preset(MINILM, num_classes=2, sequence_length=32)
    classifier.encoder.embeddings.trainable = False
    for block in classifier.encoder.transformer_layers[:4]:
        block.trainable = False
    classifier.compile(optimizer=create_optimizer("adamw", learning_rate=2e-4))
    classifier.fit([texts[i] for i in train], labels[train], batch_size=32, epochs=1,
                   verbose=0)
    extractor = BertFeatureExtractor.from_preset(MINILM, pooling="mean", normalize=True,
                                                 sequence_length=64)
    base = str(tmp_path_factory.mktemp("saved_models"))
    calibration = [texts[i] for i in train[:256]]  # int8 calibrates on training text
    paths = {(kind, precision): export_saved_model(
        model, base, name=kind, precision=precision,
        calibration_texts=calibration if precision == "int8" else None)
             for kind, model in (("sentiment", classifier), ("embedding", extractor))
             for precision in PRECISIONS if (kind, precision) != ("sentiment", "int8")}
    work = tmp_path_factory.mktemp("keras")
    classifier.save(str(work / "sentiment.keras"))
    (work / "calibration.txt").write_text(  # one review per line
        "\n".join(" ".join(text.split()) for text in calibration), encoding="utf-8")
    cli.main(["export", str(work / "sentiment.keras"), "--name", "sentiment", "--base_dir",
              base, "--quantize", "int8", "--calibration_data", str(work / "calibration.txt")])
    newest = max(int(version) for version in os.listdir(os.path.join(base, "sentiment")))
    paths["sentiment", "int8"] = os.path.join(base, "sentiment", str(newest))
    # Keras' own int8 (model.quantize), exported: the SavedModel reads its weights as floats.
    keras_int8 = keras.saving.load_model(str(work / "sentiment.keras"))
    keras_int8.quantize("int8")
    paths["sentiment", "keras int8"] = export_saved_model(keras_int8, base,
                                                          name="sentiment_keras_int8")
    sentences = as_strings([texts[i] for i in held_out] + AWKWARD_TEXTS)
    # Accuracy to a point needs the 400 reviews; the cosine bound holds review by review, so
    # 100 reviews check it (the host's time goes to these MiniLM forward passes).
    embedded = as_strings([texts[i] for i in held_out[:EMBEDDED]] + AWKWARD_TEXTS)
    requests = [{"export": path, "signature": "serving_default",
                 "inputs": {"text": embedded if kind == "embedding" else sentences}}
                for (kind, _), path in paths.items()]
    # int8 answers depend a little on the batch (each matmul quantizes its input over the
    # whole batch's range), so kbs serve's batch of 32 is compared with the same 32 here.
    requests.append({"export": paths["sentiment", "int8"], "signature": "serving_default",
                     "inputs": {"text": sentences[:32]}})
    results, leaked = run_on_serving_host(requests, str(tmp_path_factory.mktemp("host")))
    assert leaked == [] and not any("error" in result for result in results)
    first_32 = results.pop()
    expected = to_numpy(extractor.predict([texts[i] for i in held_out[:EMBEDDED]],
                                          verbose=0)["sentence_embedding"])
    return {"paths": paths, "served": dict(zip(paths, results)), "base": base,
            "labels": labels[held_out], "keras_embeddings": expected, "sentences": sentences,
            "int8_first_32": first_32, "keras_int8": keras_int8,
            "held_out_texts": [texts[i] for i in held_out]}


# The real-data evidence runs once, in the TensorFlow process: it is about the served
# SavedModels (answered by a serving host) and Keras' int8 on a fine-tuned MiniLM; the
# harness quantizes every task model on every backend.
@pytest.mark.real
@pytest.mark.slow
@pytest.mark.needs_tf_serving
@pytest.mark.parametrize("precision,probability_shift,min_cosine",
                         [("bfloat16", 0.005, 0.999), ("int8", 0.02, 0.99)])
def test_reduced_precision_keeps_sentiment_accuracy_and_embeddings(
        served_precisions, precision, probability_shift, min_cosine):
    served, paths = served_precisions["served"], served_precisions["paths"]
    count = len(served_precisions["labels"])
    accuracy = {p: float(np.mean(served["sentiment", p]["probabilities"][:count].argmax(-1)
                                 == served_precisions["labels"])) for p in ("float32", precision)}
    print("served held-out accuracy", accuracy)
    assert accuracy["float32"] > 0.65, accuracy  # the model learned something to keep
    assert abs(accuracy[precision] - accuracy["float32"]) <= 0.01, accuracy
    shift = np.abs(served["sentiment", precision]["probabilities"][:count, 1]
                   - served["sentiment", "float32"]["probabilities"][:count, 1])
    print(precision, "probability shift: mean", shift.mean(), "max", shift.max())
    assert shift.mean() <= probability_shift and shift.max() <= 10 * probability_shift, shift

    expected = served_precisions["keras_embeddings"]
    for p, bound in (("float32", 0.99999), (precision, min_cosine)):
        embeddings = served["embedding", p]["sentence_embedding"][:EMBEDDED]
        cosine = np.sum(embeddings * expected, -1) / (
            np.linalg.norm(embeddings, axis=-1) * np.linalg.norm(expected, axis=-1))
        print(p, "embedding cosine to Keras: min", cosine.min(), "mean", cosine.mean())
        assert cosine.min() >= bound, cosine.min()

    stored = {"bfloat16": {tf.float32, tf.bfloat16},
              "int8": {tf.float32, tf.bfloat16, tf.int8}}[precision]
    for kind in ("sentiment", "embedding"):  # reduced copies stored instead of fp32 kernels
        path = paths[kind, precision]
        with open(os.path.join(path, "assets.extra", "keras_bert_suite.json")) as f:
            metadata = json.load(f)
        assert metadata["precision"] == precision
        assert metadata["calibration_texts"] == (256 if precision == "int8" else None)
        dtypes = {v.dtype for v in tf.saved_model.load(path).weights}
        assert dtypes == stored, dtypes
        assert unservable_ops(path) == {}
        # Kernels shrink; MiniLM's float32 token embeddings (47 MB) stay.
        assert _size(path) < (0.85 if precision == "bfloat16" else 0.75) * _size(
            paths[kind, "float32"])
    if precision == "int8":
        assert "QuantizedMatMulWithBiasAndDequantize" in saved_model_ops(
            paths["sentiment", "int8"])


@pytest.mark.real
@pytest.mark.slow
@pytest.mark.needs_tf_serving
def test_keras_quantize_keeps_sentiment_accuracy_and_embeddings(served_precisions, tmp_path):
    """`model.quantize("int8")`: held-out accuracy within 1.5 points of the
    float model, the same answers after a `.keras` round trip, an export of it that serves
    close to it, and MiniLM sentence embeddings (100 reviews) at cosine >= 0.99."""
    texts, labels = served_precisions["held_out_texts"], served_precisions["labels"]
    quantized = served_precisions["keras_int8"]
    # The float model's probabilities: its float32 export's, not a second MiniLM pass over the
    # reviews (an export computes its model's predict: test_task_exports.py; the embeddings'
    # float32 export here agrees with Keras to a cosine of 0.99999).
    served = served_precisions["served"]
    probabilities = {
        "float32": served["sentiment", "float32"]["probabilities"][:len(texts)],
        # Fixed-length batches: Keras' int8 model's outputs move with how a call batches
        # its rows (below, a .keras copy is compared on other batches).
        "int8": _softmax(to_numpy(quantized.predict(texts, batch_size=32, verbose=0,
                                                    bucket_boundaries=None)))}
    correct = {kind: int(np.sum(p.argmax(-1) == labels)) for kind, p in probabilities.items()}
    print("Keras held-out accuracy", {kind: n / len(labels) for kind, n in correct.items()})
    # Measured over unseeded fine-tuning runs: -1.0 to +0.5 points (4 reviews = 1 point).
    assert correct["float32"] > 0.65 * len(labels), correct
    assert abs(correct["int8"] - correct["float32"]) <= 0.015 * len(labels), correct
    shift = np.abs(probabilities["int8"][:, 1] - probabilities["float32"][:, 1])
    print("Keras int8 probability shift: mean", shift.mean(), "max", shift.max())
    assert 0 < shift.mean() <= 0.02, shift.mean()

    quantized.save(str(tmp_path / "int8.keras"))
    restored = keras.saving.load_model(str(tmp_path / "int8.keras"))
    assert_close(_softmax(to_numpy(restored.predict(texts[:16], verbose=0,
                                                    bucket_boundaries=None))),
                 probabilities["int8"][:16], rtol=1e-5, atol=1e-6)
    # Its export: float activations over the int8 weights, so close to it, not equal.
    served_int8 = served["sentiment", "keras int8"]["probabilities"]
    served_shift = np.abs(served_int8[:len(texts), 1] - probabilities["int8"][:, 1])
    assert served_shift.mean() <= 0.02, served_shift.mean()

    extractor = BertFeatureExtractor.from_preset(MINILM, pooling="mean", normalize=True,
                                                 sequence_length=64)
    extractor.quantize("int8")
    # 100 reviews: Keras' int8 predict is slow off JAX (~0.05x fp32 on PyTorch).
    embeddings = to_numpy(extractor.predict(texts[:EMBEDDED], verbose=0)["sentence_embedding"])
    expected = served_precisions["keras_embeddings"]
    cosine = np.sum(embeddings * expected, -1) / (
        np.linalg.norm(embeddings, axis=-1) * np.linalg.norm(expected, axis=-1))
    print("Keras int8 embedding cosine: min", cosine.min(), "mean", cosine.mean())
    assert cosine.min() >= 0.99, cosine.min()


@pytest.mark.real
@pytest.mark.slow
@pytest.mark.needs_tf_serving
def test_kbs_serve_answers_with_the_int8_export(served_precisions):
    """`kbs serve` loads the int8 export and answers as the TF-only host did."""
    from keras_bert_suite.serving import RestClient
    from keras_bert_suite.serving.model_store import ModelStore
    from keras_bert_suite.serving.server import RestServer

    store = ModelStore(model_base_path=served_precisions["base"], poll_seconds=0)
    version = int(os.path.basename(served_precisions["paths"]["sentiment", "int8"]))
    texts = [t.decode() for t in served_precisions["sentences"][:32]]  # real reviews
    with RestServer(store, port=0) as server:
        rows = RestClient(server.url).predict("sentiment", instances=texts, version=version)
    assert_close([row["probabilities"] for row in rows],
                 served_precisions["int8_first_32"]["probabilities"],
                 rtol=1e-4, atol=1e-5)


def _softmax(logits):
    exp = np.exp(logits - logits.max(-1, keepdims=True))
    return exp / exp.sum(-1, keepdims=True)


def _size(directory):
    return sum(os.path.getsize(os.path.join(root, name))
               for root, _, names in os.walk(directory) for name in names)


@pytest.mark.real
def test_int8_without_calibration_estimates_ranges_from_layer_norms(real_sentences):
    """No calibration texts: smoothing from the LayerNorm weights still keeps MiniLM's
    sentence embeddings close to float32 (0.993 at worst here; 0.988 unsmoothed)."""
    from keras_bert_suite import BertPreprocessor

    encoder = BertEncoder.from_preset(MINILM)
    sentences, long_text = real_sentences
    texts = sentences + [sentence.strip() + "." for sentence in long_text.split(".")[:40]]
    inputs = BertPreprocessor.from_preset(MINILM, sequence_length=64)(texts)
    inputs = {name: tf.constant(to_numpy(value)) for name, value in inputs.items()}
    mask = to_numpy(inputs["padding_mask"])[..., None].astype("float32")
    pooled = {precision: np.sum(ServingEncoder(encoder, precision)(inputs)["sequence_output"]
                                .numpy() * mask, 1) for precision in ("float32", "int8")}
    cosine = np.sum(pooled["int8"] * pooled["float32"], -1) / (
        np.linalg.norm(pooled["int8"], axis=-1) * np.linalg.norm(pooled["float32"], axis=-1))
    print("int8 (uncalibrated) cosine to float32: min", cosine.min())
    assert cosine.min() >= 0.985, cosine.min()
