"""export_saved_model: a task model -> saved_models/<name>/<version>/ for TF Serving."""

import contextlib
import logging
import os

import keras

from keras_bert_suite.export import cpu_features, versions
from keras_bert_suite.export.serving_encoder import check_precision
from keras_bert_suite.transforms import without_lora

logger = logging.getLogger(__name__)


def export_saved_model(model, base_dir="saved_models", name=None, version=None,
                       preprocessor=None, label_names=None, warmup=True, precision="float32",
                       calibration_texts=None, **options):
    """Exports `model` with raw-text signatures; returns the version directory.

    Args:
        model: a task model (BertClassifier, BertSpanLabeler, BertTokenClassifier,
            BertMultipleChoice, BertFeatureExtractor) or a BertEncoder, trained on any backend.
            Its `serving_signatures(**options)` says what is served; its `preprocessor` is
            the text path traced into the graph.
        base_dir, name, version: writes `base_dir/name/version/` (TF Serving's layout);
            `name` defaults to the model's name, `version` to one more than the newest.
        preprocessor: replaces `model.preprocessor` for this export (needed only for a
            model built without one, e.g. a bare BertEncoder).
        label_names: replace `model.label_names` for this export.
        warmup: write assets.extra/tf_serving_warmup_requests.
        precision: "float32" (default); "bfloat16": the encoder's matmuls multiply bf16
            copies of the kernels (fp32 accumulation; LayerNorm, softmax and the task head
            stay fp32), which oneDNN runs on AMX or AVX512_BF16 where the CPU has them;
            "int8": post-training quantization of the kernels: the encoder's matmul kernels
            stored as int8 (a scale per output column) and computed in float32, so the
            SavedModel answers the same on every CPU; "int8_vnni": int8 arithmetic too,
            activations quantized to uint8 per call on oneDNN's VNNI / AMX kernels (the FFN
            output matmul in bf16), faster at large batches but right only on CPUs with
            AVX512_VNNI, AVX_VNNI or AMX: refused on an exporting CPU without them
            (docs/export.md, "Which CPU each export needs"; docs/benchmarks.md, "Raw text to
            prediction", has the measured speed and accuracy cost of each).
        calibration_texts: with precision="int8_vnni", real texts like those the model will
            serve (a few hundred): their activation ranges set how the int8 matmuls are
            smoothed. Without them the ranges are estimated from the LayerNorm weights,
            which keeps less accuracy (docs/export.md, "int8").
        **options: the task's answer options, e.g. `pair=True` (classifier on text_a and
            text_b), `max_answer_length=` / `n_best_size=` / `version_2_with_negative=` /
            `null_score_diff_threshold=` (span labeler).

    Signatures: `serving_default` (raw strings in; each task's module `serving.py` lists its
    outputs) and `encoder_inputs` (token_ids, segment_ids, padding_mask in, the model's
    outputs out). On JAX and PyTorch the model is saved as `.keras` and re-exported by a
    TensorFlow-backend subprocess, so the graph is plain TensorFlow either way.

    Example:
    >>> from keras_bert_suite import BertClassifier
    >>> classifier = BertClassifier.from_preset(
    ...     "bert_uncased_L-2_H-128_A-2", load_weights=False, num_classes=2,
    ...     sequence_length=16, label_names=["rotten", "fresh"])
    >>> export_saved_model(classifier, "saved_models", name="sentiment")
    'saved_models/sentiment/1'
    >>> export_saved_model(classifier, "saved_models", name="sentiment")  # the next version
    'saved_models/sentiment/2'
    """
    name = name or model.name
    model_dir = os.path.join(base_dir, name)
    model = without_lora(model)  # serve W + A B as one kernel, not the adapters
    with _overridden(model, preprocessor, label_names):
        if getattr(model, "preprocessor", None) is None:
            raise ValueError("Exporting raw-text signatures needs a preprocessor: build the "
                             "model with one (from_preset does) or pass preprocessor=.")
        from keras_bert_suite.export.tf_writer import model_signatures

        # Wrong options and precisions fail here, before any file is made (the signatures
        # are built in float32: bf16 / int8 kernel copies and the int8 calibration are made
        # once, by the writer).
        check_precision(precision, calibration_texts)  # int8_vnni: refused without VNNI
        if precision == "int8_vnni":
            logger.warning(cpu_features.int8_vnni_warning(cpu_features.require_int8_vnni()))
        model_signatures(model, options)
        with versions.atomic_version_dir(model_dir, version) as (directory, version):
            if keras.backend.backend() == "tensorflow":
                from keras_bert_suite.export.tf_writer import write_saved_model

                write_saved_model(model, directory, options, name, warmup, precision,
                                  calibration_texts)
            else:
                from keras_bert_suite.export.reexport import reexport_in_tensorflow

                reexport_in_tensorflow(model, directory, options, name, warmup, precision,
                                       calibration_texts)
    return os.path.join(model_dir, str(version))


@contextlib.contextmanager
def _overridden(model, preprocessor, label_names):
    """Sets `preprocessor` / `label_names` on the model for the export, then restores them."""
    changes = {}
    if preprocessor is not None:
        changes["preprocessor"] = preprocessor
    if label_names is not None:
        changes["label_names"] = [str(label) for label in label_names]
    saved = {key: getattr(model, key, None) for key in changes}
    for key, value in changes.items():
        setattr(model, key, value)
    try:
        yield
    finally:
        for key, value in saved.items():
            setattr(model, key, value)
