"""The exported encoder graph (ServingEncoder) and its precisions.

* float32: the same function as the Keras encoder, for a pruned encoder with hidden states
  too (every weight read by its canonical name);
* bfloat16 (`export_saved_model(..., precision="bfloat16")`, `kbs export --precision`),
  int8 (`precision="int8"`, `kbs export --quantize int8`: int8 kernels computed in float32)
  and int8_vnni (oneDNN's int8 arithmetic, on CPUs with VNNI / AMX only): a fine-tuned Rotten
  Tomatoes classifier, served from a TF-only process, keeps its held-out accuracy within one
  point of the float32 export (400 reviews), and MiniLM sentence embeddings keep a cosine
  >= 0.999 (bf16) / 0.99 (int8, int8_vnni) to the Keras model's (32 reviews); `kbs serve`
  serves the int8 export. These real-data checks run once, in the TensorFlow process.
* int8 answers right on a CPU without VNNI (oneDNN capped to AVX2, in a subprocess), and
  int8_vnni is refused there; int8_vnni's own numeric checks run only where the CPU has
  VNNI / AMX.

On every backend: ServingEncoder reads any backend's variables, and JAX and PyTorch models
reach it through the TensorFlow re-export.
"""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_suite import BertClassifier, BertEncoder, BertFeatureExtractor, cli
from keras_bert_suite.export import cpu_features, export_saved_model, unservable_ops
from keras_bert_suite.export.op_check import saved_model_ops
from keras_bert_suite.layers.serving.int8_matmul import int8_copy, int8_dense, smoothing_factors
from keras_bert_suite.export.serving_encoder import ServingEncoder, check_precision
from keras_bert_suite.names import QUANTIZED_PRECISIONS, SERVING_PRECISIONS as PRECISIONS
from keras_bert_suite.tasks.classifier.rotten_tomatoes import load_rotten_tomatoes
from keras_bert_suite.training.optimizers import create_optimizer
from tests.conftest import to_numpy
from tests.export.conftest import AWKWARD_TEXTS, as_strings, run_on_serving_host
from tests.numerics import assert_close

MINILM = "minilm_l6_h384_uncased"
EMBEDDED = 32  # held-out reviews whose sentence embeddings are compared
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# oneDNN's quantized matmul is right only on VNNI / AMX (export/cpu_features.py).
VNNI = cpu_features.int8_vnni_flags()
needs_vnni = pytest.mark.skipif(
    not VNNI, reason="int8_vnni runs right only on CPUs with AVX512_VNNI, AVX_VNNI or AMX "
                     f"(not under ONEDNN_MAX_CPU_ISA={cpu_features.isa_cap() or 'unset'})")
# The precisions this CPU exports (int8_vnni is refused without VNNI / AMX).
EXPORTED = tuple(p for p in PRECISIONS if p != "int8_vnni" or VNNI)


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


@pytest.mark.parametrize("precision", ["bfloat16", "int8",
                                       pytest.param("int8_vnni", marks=needs_vnni)])
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
    # Worst token measured over 16 seeds: 0.9998-1.0 (bf16), 0.9994-0.9999 (int8: kernels
    # only), 0.9984-0.9997 (int8_vnni: 255 input steps over ranges these random weights make
    # wide). A wrong zero-point term puts int8_vnni outputs off by orders of magnitude.
    assert cosine.min() >= {"bfloat16": 0.999, "int8": 0.998}.get(precision, 0.995), (
        cosine.min())
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
    column's largest weight is +-127 exactly, in both forms. A scale one step off (values *
    128 / 127 read back) moves the kernel by 0.8% uniformly, which the product checks below
    cannot tell from rounding, and which LayerNorm hides from accuracy tests downstream."""
    rng = np.random.default_rng(1)
    kernel = rng.normal(0.0, 0.05, (64, 48)).astype("float32")
    kernel[:, 0] *= 40.0
    smoothing = rng.uniform(0.5, 2.0, 64).astype("float32")
    for vnni, rows in ((False, None), (True, None), (True, smoothing)):
        copy = int8_copy(kernel, vnni=vnni, smoothing=rows)
        values = copy.values.numpy().astype(np.float32)
        scales = copy.column_scales.numpy()
        target = kernel if rows is None else kernel * rows[:, None]
        assert np.array_equal(np.abs(values).max(axis=0), np.full(48, 127.0))
        error = np.abs(values / 127.0 * scales - target)
        assert np.all(error <= scales / 254.0 * (1 + 1e-5) + 1e-9), error.max()
        if vnni:
            assert_close(copy.column_sums.numpy(), values.sum(axis=0), rtol=0, atol=0)
        else:  # the int8 form keeps only values and scales
            assert copy.column_sums is None and copy.input_scales is None
        if rows is not None:
            assert_close(copy.input_scales.numpy(), 1.0 / rows, rtol=1e-6, atol=0)
    with pytest.raises(ValueError, match="Only the int8_vnni form smooths"):
        int8_copy(kernel, smoothing=smoothing)


def _product_case():
    rng = np.random.default_rng(0)
    x = rng.normal(0.3, 2.0, (24, 64)).astype("float32")  # negative inputs: a zero point
    kernel = rng.normal(0.0, 0.05, (64, 48)).astype("float32")
    kernel[:, 0] *= 40.0  # an outlier column, as in MiniLM's FFN output kernels
    bias = rng.normal(0.0, 1.0, 48).astype("float32")
    return x, kernel, bias


def _column_error(product, expected):
    """The worst output column's max error over that column's largest |value|."""
    return (np.abs(product - expected).max(axis=0) / np.abs(expected).max(axis=0)).max()


def test_int8_matmul_matches_the_float32_product():
    """The int8 form: only the kernel is rounded (half a step of its column's scale), in
    plain float ops, none of oneDNN's quantized ones. Worst column here 1.2% of its range
    (int8_vnni: 1.6%); with an input channel 30x the others 2.7% (int8_vnni unsmoothed: 18%)."""
    x, kernel, bias = _product_case()
    copy = int8_copy(kernel)
    function = tf.function(lambda x: int8_dense(x, copy, tf.constant(bias))
                           ).get_concrete_function(tf.TensorSpec([None, 64]))
    for scale, bound in ((1.0, 0.02), (30.0, 0.04)):
        x[:, 3] *= scale
        error = _column_error(function(tf.constant(x)).numpy(), x @ kernel + bias)
        assert error < bound, (scale, error)
    assert function(tf.zeros((0, 64))).shape == (0, 48)
    ops = {op.type for op in function.graph.get_operations()}
    assert not any("Quantize" in op for op in ops), ops


@needs_vnni
def test_int8_vnni_matmul_matches_the_float32_product():
    x, kernel, bias = _product_case()
    copy = int8_copy(kernel, vnni=True)
    product = int8_dense(tf.constant(x), copy, tf.constant(bias)).numpy()
    # uint8 inputs and int8 kernels: about 1% of each output column's range, column by
    # column (one kernel-wide scale would lose every column but the outlier).
    error = _column_error(product, x @ kernel + bias)
    assert error < 0.03, error
    empty = int8_dense(tf.zeros((0, 64)), copy, tf.constant(bias))
    assert empty.shape == (0, 48)
    # An input channel 30x the others (as LayerNorm outputs have) costs the rest of the
    # input their resolution; smoothing moves it into the kernel's row: same product, less
    # error.
    x[:, 3] *= 30.0
    expected = x @ kernel + bias
    errors = {}
    for smoothing in (None, smoothing_factors(np.abs(x).max(axis=0), kernel, calibrated=True)):
        product = int8_dense(tf.constant(x), int8_copy(kernel, vnni=True, smoothing=smoothing),
                             tf.constant(bias))
        errors[smoothing is None] = _column_error(product.numpy(), expected)
    assert errors[False] < 0.03 and errors[False] < errors[True] / 2, errors


# Run by a Python that oneDNN is capped to AVX2 in, as a CPU without VNNI runs (AVX2
# or AVX-512 without VNNI: oneDNN's int8 kernels there sum u8 x s8 pairs in saturating
# int16). Both the int8 matmul and a small encoder's int8 graph, against float32.
WITHOUT_VNNI = """
import json
import keras
import numpy as np
import tensorflow as tf
from keras_bert_suite import BertEncoder
from keras_bert_suite.export.serving_encoder import ServingEncoder
from keras_bert_suite.layers.serving.int8_matmul import int8_copy, int8_dense

def error(got, expected):  # max error over the range of the float32 outputs
    return float(np.abs(got - expected).max() / (expected.max() - expected.min()))

rng = np.random.default_rng(0)
x = rng.normal(size=(24, 64)).astype("float32")
kernel = rng.normal(size=(64, 96)).astype("float32")
bias = rng.normal(size=96).astype("float32")
product = int8_dense(tf.constant(x), int8_copy(kernel), tf.constant(bias)).numpy()
keras.utils.set_random_seed(0)
encoder = BertEncoder(vocabulary_size=100, num_layers=2, num_heads=4, hidden_dim=32,
                      intermediate_dim=64, initializer_range=0.3)
inputs = {"token_ids": tf.constant(rng.integers(1, 100, (3, 12)), tf.int32),
          "segment_ids": tf.zeros((3, 12), tf.int32), "padding_mask": tf.ones((3, 12), tf.int32)}
expected = ServingEncoder(encoder)(inputs)["sequence_output"].numpy()
graph = tf.function(ServingEncoder(encoder, "int8").__call__).get_concrete_function(inputs)
print("RESULT " + json.dumps({
    "matmul_error": error(product, x @ kernel + bias),
    "encoder_error": error(graph(inputs)["sequence_output"].numpy(), expected),
    "ops": sorted({op.type for op in graph.graph.get_operations()})}))
"""


@pytest.mark.own_processes
def test_int8_answers_right_on_a_cpu_without_vnni():
    """precision="int8" (what `kbs export --quantize int8` makes) must serve right on any
    x86-64 CPU. When it ran oneDNN's quantized matmul (now int8_vnni), capped to AVX2 the
    matmul here was off by 17% of the output range (0.5% uncapped, with VNNI) and the
    encoder's process aborted in oneDNN (its bf16 FFN output matmul); on an AMD Zen 3
    every request failed. Now: 0.3% and 1.1%, as uncapped."""
    completed = subprocess.run(
        [sys.executable, "-c", WITHOUT_VNNI], cwd=ROOT, capture_output=True, text=True,
        timeout=300, env={**os.environ, "KERAS_BACKEND": "tensorflow",
                          "TF_CPP_MIN_LOG_LEVEL": "3", "ONEDNN_MAX_CPU_ISA": "AVX2"})
    lines = [line for line in completed.stdout.splitlines() if line.startswith("RESULT ")]
    assert completed.returncode == 0 and lines, completed.stderr[-3000:]
    result = json.loads(lines[-1][len("RESULT "):])
    flags = sorted(cpu_features.cpu_flags() & {"avx2", "avx512f", *cpu_features.VNNI_FLAGS})
    print("CPU flags", flags, "under ONEDNN_MAX_CPU_ISA=AVX2:", result)
    # int8 kernels in float32 matmuls: a fraction of a percent (int8's own error, 2% of the
    # range allowed); no quantized op in the graph.
    assert result["matmul_error"] <= 0.02 and result["encoder_error"] <= 0.02, (flags, result)
    assert not any("Quantize" in op for op in result["ops"]), result["ops"]


def test_int8_vnni_is_refused_on_a_cpu_without_vnni(monkeypatch, tmp_path):
    """Refused before anything is written, saying why, where oneDNN cannot use VNNI or AMX
    (the CPU lacks them, or ONEDNN_MAX_CPU_ISA caps them away); where it can, the export
    warns that the SavedModel must be served on such CPUs."""
    flags = cpu_features.cpu_flags()
    monkeypatch.setattr(cpu_features, "cpu_flags", lambda: flags | {"avx512_vnni"})
    for variable in ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"):
        monkeypatch.delenv(variable, raising=False)
    assert cpu_features.require_int8_vnni() == ["avx512_vnni"]
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "avx2")
    with pytest.raises(ValueError, match="ONEDNN_MAX_CPU_ISA=AVX2 keeps oneDNN from"):
        check_precision("int8_vnni")
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX512_CORE_AMX")
    assert cpu_features.int8_vnni_flags() == ["avx512_vnni"]
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA")
    monkeypatch.setattr(cpu_features, "cpu_flags", lambda: flags - set(cpu_features.VNNI_FLAGS))
    model = BertEncoder(vocabulary_size=100, num_layers=1, num_heads=2, hidden_dim=8,
                        intermediate_dim=16)
    from keras_bert_suite import BertPreprocessor

    preprocessor = BertPreprocessor.from_preset(MINILM, sequence_length=16)
    with pytest.raises(ValueError, match=r"needs a CPU with AVX512_VNNI, AVX_VNNI or AMX.*"
                                         r"Export precision='int8' instead"):
        export_saved_model(model, str(tmp_path), name="encoder", precision="int8_vnni",
                           preprocessor=preprocessor)
    assert not os.path.exists(tmp_path / "encoder")
    with pytest.raises(ValueError, match="needs a CPU with"):
        ServingEncoder(model, "int8_vnni")
    monkeypatch.setattr(cpu_features, "cpu_flags", lambda: frozenset({"avx2", "amx_int8"}))
    assert "serve this SavedModel only on CPUs with AVX512_VNNI, AVX_VNNI or AMX (this one " \
           "has amx_int8)" in cpu_features.int8_vnni_warning(cpu_features.require_int8_vnni())


def test_calibration_texts_are_checked_before_anything_is_written(tmp_path):
    """Calibration is for int8_vnni (the only form that quantizes activations); its texts
    are checked before the CPU is (so this runs on any CPU)."""
    model = BertFeatureExtractor.from_preset(MINILM, load_weights=False, sequence_length=16)
    for precision, texts, message in (
            ("bfloat16", ["a text"], "Calibration texts are for precision='int8_vnni'"),
            ("int8", ["a text"], "int8 quantizes only the kernels"),
            ("int8_vnni", "one string", "a non-empty list of strings"),
            ("int8_vnni", [], "a non-empty list of strings"),
            ("int8_vnni", [b"bytes"], "a non-empty list of strings")):
        with pytest.raises(ValueError, match=message):
            export_saved_model(model, str(tmp_path), name="m", precision=precision,
                               calibration_texts=texts)
    assert not os.path.exists(tmp_path / "m")


@pytest.fixture(scope="module")
def served_precisions(tmp_path_factory):
    """A Rotten Tomatoes classifier fine-tuned on 1,024 reviews (its top two blocks and head,
    32 tokens) and MiniLM sentence embeddings, exported in every precision (the int8
    classifier with `kbs export --quantize int8`), and 400 held-out reviews (the embeddings:
    the first 32 of them) plus awkward strings answered by a TF-only serving host."""
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
    calibration = [texts[i] for i in train[:256]]  # int8_vnni calibrates on training text
    # The quantized sentiment exports go through `kbs export --quantize` (below).
    paths = {(kind, precision): export_saved_model(
        model, base, name=kind, precision=precision,
        calibration_texts=calibration if precision == "int8_vnni" else None)
             for kind, model in (("sentiment", classifier), ("embedding", extractor))
             for precision in EXPORTED
             if kind == "embedding" or precision not in QUANTIZED_PRECISIONS}
    work = tmp_path_factory.mktemp("keras")
    classifier.save(str(work / "sentiment.keras"))
    (work / "calibration.txt").write_text(  # one review per line
        "\n".join(" ".join(text.split()) for text in calibration), encoding="utf-8")
    # int8 last: kbs serve (test_kbs_serve_answers_with_the_int8_export) serves the newest.
    for precision in (p for p in ("int8_vnni", "int8") if p in EXPORTED):
        calibration_flags = ([] if precision == "int8" else
                             ["--calibration_data", str(work / "calibration.txt")])
        cli.main(["export", str(work / "sentiment.keras"), "--name", "sentiment",
                  "--base_dir", base, "--quantize", precision, *calibration_flags])
        newest = max(int(version) for version in os.listdir(os.path.join(base, "sentiment")))
        paths["sentiment", precision] = os.path.join(base, "sentiment", str(newest))
    # Keras' own int8 (model.quantize), exported: the SavedModel reads its weights as floats.
    # The fine-tuned classifier itself, quantized in place: every float export and the
    # .keras file the CLI read are written already (a third load_model cost 2 CPU s).
    keras_int8 = classifier
    keras_int8.quantize("int8")
    paths["sentiment", "keras int8"] = export_saved_model(keras_int8, base,
                                                          name="sentiment_keras_int8")
    sentences = as_strings([texts[i] for i in held_out] + AWKWARD_TEXTS)
    # Accuracy to a point needs the 400 reviews; the cosine bound holds review by review, so
    # one batch of reviews checks it (the host's time goes to these MiniLM forward passes).
    embedded = as_strings([texts[i] for i in held_out[:EMBEDDED]] + AWKWARD_TEXTS)
    requests = [{"export": path, "signature": "serving_default",
                 "inputs": {"text": embedded if kind == "embedding" else sentences}}
                for (kind, _), path in paths.items()]
    # Answers may move in their last bits with the batch (oneDNN blocks a matmul by its
    # rows; int8_vnni's move more: each matmul quantizes its input over the batch's range),
    # so kbs serve's batch of 32 is compared with the same 32 here.
    requests.append({"export": paths["sentiment", "int8"], "signature": "serving_default",
                     "inputs": {"text": sentences[:32]}})
    results, leaked = run_on_serving_host(requests, str(tmp_path_factory.mktemp("host")))
    assert leaked == [] and not any("error" in result for result in results)
    first_32 = results.pop()
    expected = to_numpy(extractor.predict([texts[i] for i in held_out[:EMBEDDED]],
                                          verbose=0)["sentence_embedding"])
    return {"paths": paths, "served": dict(zip(paths, results)), "base": base,
            "labels": labels[held_out], "keras_embeddings": expected, "sentences": sentences,
            "int8_first_32": first_32, "keras_int8": keras_int8, "extractor": extractor,
            "held_out_texts": [texts[i] for i in held_out]}


# The real-data evidence runs once, in the TensorFlow process: it is about the served
# SavedModels (answered by a serving host) and Keras' int8 on a fine-tuned MiniLM; the
# harness quantizes every task model on every backend.
@pytest.mark.real
@pytest.mark.slow
@pytest.mark.needs_tf_serving
@pytest.mark.parametrize("precision,probability_shift,min_cosine",
                         [("bfloat16", 0.005, 0.999), ("int8", 0.02, 0.99),
                          pytest.param("int8_vnni", 0.02, 0.99, marks=needs_vnni)])
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

    stored = {"bfloat16": {tf.float32, tf.bfloat16}, "int8": {tf.float32, tf.int8},
              "int8_vnni": {tf.float32, tf.bfloat16, tf.int8}}[precision]
    for kind in ("sentiment", "embedding"):  # reduced copies stored instead of fp32 kernels
        path = paths[kind, precision]
        with open(os.path.join(path, "assets.extra", "keras_bert_suite.json")) as f:
            metadata = json.load(f)
        assert metadata["precision"] == precision
        assert metadata["calibration_texts"] == (256 if precision == "int8_vnni" else None)
        dtypes = {v.dtype for v in tf.saved_model.load(path).weights}
        assert dtypes == stored, dtypes
        assert unservable_ops(path) == {}
        # Kernels shrink; MiniLM's float32 token embeddings (47 MB) stay.
        size = _size(path) / _size(paths[kind, "float32"])
        print(kind, precision, "size / float32's", size)
        assert size < (0.85 if precision == "bfloat16" else 0.75), size
    # Only int8_vnni runs oneDNN's quantized matmul (and needs VNNI / AMX to serve).
    assert ("QuantizedMatMulWithBiasAndDequantize" in saved_model_ops(
        paths["sentiment", precision])) == (precision == "int8_vnni")


@pytest.mark.real
@pytest.mark.slow
@pytest.mark.needs_tf_serving
def test_keras_quantize_keeps_sentiment_accuracy_and_embeddings(served_precisions, tmp_path):
    """`model.quantize("int8")`: held-out accuracy within 1.5 points of the
    float model, the same answers after a `.keras` round trip, an export of it that serves
    close to it, and MiniLM sentence embeddings (32 reviews) at cosine >= 0.99."""
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

    extractor = served_precisions["extractor"]  # exported already: quantized in place here
    extractor.quantize("int8")
    # 32 reviews: Keras' int8 predict is slow off JAX (~0.05x fp32 on PyTorch).
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
def test_int8_keeps_minilm_close_to_float32_without_calibration(real_sentences):
    """No calibration texts: int8 (kernels only) keeps MiniLM's sentence embeddings at
    cosine >= 0.998 to float32 (0.9990 at worst on 256 held-out reviews); int8_vnni, where
    the CPU runs it, with smoothing from the LayerNorm weights, >= 0.985 (0.993 at worst
    here; 0.988 unsmoothed)."""
    from keras_bert_suite import BertPreprocessor

    encoder = BertEncoder.from_preset(MINILM)
    sentences, long_text = real_sentences
    texts = sentences + [sentence.strip() + "." for sentence in long_text.split(".")[:40]]
    inputs = BertPreprocessor.from_preset(MINILM, sequence_length=64)(texts)
    inputs = {name: tf.constant(to_numpy(value)) for name, value in inputs.items()}
    mask = to_numpy(inputs["padding_mask"])[..., None].astype("float32")
    pooled = {precision: np.sum(ServingEncoder(encoder, precision)(inputs)["sequence_output"]
                                .numpy() * mask, 1)
              for precision in ("float32", "int8") + (("int8_vnni",) if VNNI else ())}
    for precision, bound in (("int8", 0.998), ("int8_vnni", 0.985)):
        if precision in pooled:
            cosine = np.sum(pooled[precision] * pooled["float32"], -1) / (
                np.linalg.norm(pooled[precision], axis=-1)
                * np.linalg.norm(pooled["float32"], axis=-1))
            print(precision, "(uncalibrated) cosine to float32: min", cosine.min())
            assert cosine.min() >= bound, (precision, cosine.min())
