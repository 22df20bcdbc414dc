"""The exported encoder graph (ServingEncoder) and its precisions.

* float32: the same function as the Keras encoder, for a pruned encoder with hidden states
  too (every weight read by its canonical name);
* bfloat16 (`export_saved_model(..., precision="bfloat16")`, `kbs export --precision`): a
  fine-tuned Rotten Tomatoes classifier, served from a TF-only process, keeps its held-out
  accuracy within one point of the float32 export, and MiniLM sentence embeddings keep a
  cosine >= 0.999 to the Keras model's.

On every backend: ServingEncoder reads any backend's variables, and JAX and PyTorch models
reach it through the TensorFlow re-export.
"""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_suite import BertClassifier, BertEncoder, BertFeatureExtractor
from keras_bert_suite.export import export_saved_model
from keras_bert_suite.export.serving_encoder import ServingEncoder
from keras_bert_suite.tasks.classifier.rotten_tomatoes import load_rotten_tomatoes
from tests.conftest import to_numpy
from tests.export.conftest import run_on_serving_host
from tests.numerics import assert_close

MINILM = "minilm_l6_h384_uncased"


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


def test_unknown_precision_is_refused_before_anything_is_written(tmp_path):
    model = BertEncoder(vocabulary_size=100, num_layers=1, num_heads=2, hidden_dim=8,
                        intermediate_dim=16)
    from keras_bert_suite import BertPreprocessor

    with pytest.raises(ValueError, match=r"precision must be one of \('float32', 'bfloat16'\)"):
        export_saved_model(model, str(tmp_path), name="encoder", precision="int4",
                           preprocessor=BertPreprocessor.from_preset(MINILM, sequence_length=16))
    assert not os.path.exists(tmp_path / "encoder")


@pytest.mark.real
@pytest.mark.slow
def test_bfloat16_export_keeps_sentiment_accuracy_and_embeddings(tmp_path):
    texts, labels = load_rotten_tomatoes()
    order = np.random.default_rng(0).permutation(len(texts))
    train, held_out = order[:1024], order[1024:1424]
    classifier = BertClassifier.from_preset(MINILM, num_classes=2, sequence_length=64)
    classifier.fit([texts[i] for i in train], labels[train], batch_size=32, epochs=2,
                   verbose=0)
    extractor = BertFeatureExtractor.from_preset(MINILM, pooling="mean", normalize=True,
                                                 sequence_length=64)
    base = str(tmp_path / "saved_models")
    paths = {(kind, precision): export_saved_model(model, base, name=kind, precision=precision)
             for kind, model in (("sentiment", classifier), ("embedding", extractor))
             for precision in ("float32", "bfloat16")}
    sentences = np.array([texts[i].encode() for i in held_out], object)
    requests = [{"export": path, "signature": "serving_default", "inputs": {"text": sentences}}
                for path in paths.values()]
    results, leaked = run_on_serving_host(requests, str(tmp_path))
    assert leaked == [] and not any("error" in result for result in results)
    served = dict(zip(paths, results))

    accuracy = {precision: float(np.mean(
        served["sentiment", precision]["probabilities"].argmax(-1) == labels[held_out]))
        for precision in ("float32", "bfloat16")}
    assert accuracy["float32"] > 0.65, accuracy  # the model learned something to keep
    print("served held-out accuracy", accuracy)
    assert abs(accuracy["bfloat16"] - accuracy["float32"]) <= 0.01, accuracy
    assert_close(served["sentiment", "bfloat16"]["probabilities"],
                 served["sentiment", "float32"]["probabilities"], rtol=0, atol=0.03)

    expected = to_numpy(extractor.predict([texts[i] for i in held_out],
                                          verbose=0)["sentence_embedding"])
    for precision in ("float32", "bfloat16"):
        embeddings = served["embedding", precision]["sentence_embedding"]
        cosine = np.sum(embeddings * expected, -1) / (
            np.linalg.norm(embeddings, axis=-1) * np.linalg.norm(expected, axis=-1))
        print(precision, "embedding cosine to Keras: min", cosine.min())
        assert cosine.min() >= (0.99999 if precision == "float32" else 0.999), cosine.min()

    for kind in ("sentiment", "embedding"):  # bf16 kernels stored instead of the fp32 ones
        with open(os.path.join(paths[kind, "bfloat16"], "assets.extra",
                               "keras_bert_suite.json")) as f:
            assert json.load(f)["precision"] == "bfloat16"
        loaded = tf.saved_model.load(paths[kind, "bfloat16"])
        dtypes = {v.dtype for v in loaded.weights}
        assert dtypes == {tf.float32, tf.bfloat16}, dtypes
        assert _size(paths[kind, "bfloat16"]) < 0.85 * _size(paths[kind, "float32"])


def _size(directory):
    return sum(os.path.getsize(os.path.join(root, name))
               for root, _, names in os.walk(directory) for name in names)
