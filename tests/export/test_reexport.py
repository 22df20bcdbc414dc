"""A model built on JAX or PyTorch is exported through a TensorFlow-backend subprocess: plain
TF graph (no XlaCallModule), same answers as the model on its own backend (<= 1e-5)."""

import keras
import numpy as np
import pytest

from keras_bert_suite.export import export_saved_model, unservable_ops
from keras_bert_suite.export.op_check import saved_model_ops
from keras_bert_suite import BertClassifier
from tests.conftest import to_numpy
from tests.export.conftest import (
    AWKWARD_TEXTS, PRESET, SENTIMENT, SEQUENCE_LENGTH, as_strings, run_on_serving_host)

pytestmark = pytest.mark.skipif(keras.backend.backend() == "tensorflow",
                                reason="TensorFlow exports directly (test_task_exports.py)")


def test_classifier_from_this_backend(tmp_path, real_sentences):
    sentences, _ = real_sentences
    model = BertClassifier.from_preset(PRESET, load_weights=False, num_classes=2,
                                       sequence_length=SEQUENCE_LENGTH, label_names=SENTIMENT)
    path = export_saved_model(model, str(tmp_path / "saved_models"), name="sentiment")
    assert path.endswith("sentiment/1")
    assert unservable_ops(path) == {}
    assert not any(op.startswith("Xla") for op in saved_model_ops(path))
    texts = as_strings(sentences + AWKWARD_TEXTS)
    results, leaked = run_on_serving_host(
        [{"export": path, "signature": "serving_default", "inputs": {"text": texts}}],
        str(tmp_path))
    assert leaked == [] and "error" not in results[0], results[0].get("error")
    logits = to_numpy(model(model.preprocessor(texts), training=False))
    np.testing.assert_allclose(results[0]["logits"], logits, atol=1e-5)
    assert [x.decode() for x in results[0]["predicted_label"]] == [
        SENTIMENT[i] for i in logits.argmax(-1)]
