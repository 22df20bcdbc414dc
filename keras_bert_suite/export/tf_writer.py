"""Writes a model's serving signatures as a SavedModel, in a TensorFlow-backend process.

Generic: the model declares its signatures (`model.serving_signatures(**options)`, each a
`ServingSignature`); this module adds the `encoder_inputs` signature every export has,
traces each function once, saves, checks the ops, and writes warmup requests and metadata.
A model without task signatures (a `BertEncoder`) is served as packed text -> its outputs.
"""

import json
import os
import tempfile

import keras
import tensorflow as tf

from keras_bert_suite.export import op_check, serving_graph, warmup
from keras_bert_suite.export.signature import (
    ServingSignature, encoder_inputs_signature, text_outputs_signature)
from keras_bert_suite.names import DEFAULT_SIGNATURE, ENCODER_INPUTS, ENCODER_INPUTS_SIGNATURE

METADATA_FILE = os.path.join("assets.extra", "keras_bert_suite.json")


def model_signatures(model, options):
    """{name: ServingSignature}: the model's own (serving_default first) + encoder_inputs."""
    if hasattr(model, "serving_signatures"):
        signatures = dict(model.serving_signatures(**options))
    else:
        if options:
            raise ValueError(f"A {type(model).__name__} takes no export options; got "
                             f"{sorted(options)}.")
        signatures = {DEFAULT_SIGNATURE: text_outputs_signature(model, model.preprocessor)}
    if DEFAULT_SIGNATURE not in signatures:
        raise ValueError(f"{type(model).__name__}.serving_signatures() must include "
                         f"'{DEFAULT_SIGNATURE}'.")
    signatures[ENCODER_INPUTS_SIGNATURE] = encoder_inputs_signature(model)
    return signatures


def write_saved_model(model, directory, options, model_name, write_warmup=True,
                      precision="float32", calibration_texts=None):
    """Builds `model`'s signatures, saves, checks the ops, writes warmup and metadata.
    `model.preprocessor` (text -> inputs) is traced into the raw-text signatures; the
    encoder runs as a ServingEncoder in `precision` (int8_vnni: calibrated on `calibration_texts`
    when given)."""
    if keras.backend.backend() != "tensorflow":
        raise RuntimeError("write_saved_model runs under KERAS_BACKEND=tensorflow; "
                           "use export_saved_model, which re-exports other backends' models.")
    calibration = None if calibration_texts is None else serving_graph.calibration_inputs(
        model.preprocessor, calibration_texts)
    with serving_graph.serving_precision(precision, calibration):
        signatures = model_signatures(model, options)
        # Each function is traced exactly once, here. (keras.export.ExportArchive traces
        # every endpoint twice, once to find its variables and again inside
        # tf.saved_model.save, whose save context is part of tf.function's cache key: that
        # doubled the cost of an export.)
        functions = {name: _trace(signature) for name, signature in signatures.items()}
    root = tf.Module()
    # The variables the functions read (the model's weights), nothing else of the Keras
    # objects: a serving host needs no Python object graph, only the signatures.
    root.weights = _unique(v for f in functions.values() for v in f.variables)
    root.text_resources = model.preprocessor.tokenizer.trackables()  # e.g. BPE's lookup tables
    label_names = getattr(model, "label_names", None)
    with tempfile.TemporaryDirectory() as staging:
        # Assets hanging off the root are copied into assets/ (and listed as asset files).
        root.asset_files = [tf.saved_model.Asset(path)
                            for path in _asset_files(staging, model.preprocessor, label_names)]
        tf.saved_model.save(root, directory, signatures=functions)
    op_check.check_servable_ops(directory)  # before the version becomes visible
    default = signatures[DEFAULT_SIGNATURE]
    if write_warmup and default.warmup_inputs:
        warmup.write_warmup_requests(directory, model_name, default.warmup_inputs)
    _write_metadata(directory, model, options, label_names, signatures, precision,
                    None if calibration_texts is None else len(calibration_texts))


def _write_metadata(directory, model, options, label_names, signatures, precision,
                    calibration_texts):
    preprocessor = model.preprocessor
    metadata = {"task": getattr(model, "task_name", type(model).__name__),
                "model_class": type(model).__name__, "options": options,
                "precision": precision, "calibration_texts": calibration_texts,
                "label_names": label_names,
                "preprocessor": type(preprocessor).__name__,
                "sequence_length": preprocessor.sequence_length,
                "tokenizer": type(preprocessor.tokenizer).__name__,
                "lowercase": getattr(preprocessor.tokenizer, "lowercase", None),  # WordPiece's
                "signatures": {name: signature.input_names
                               for name, signature in signatures.items()}}
    metadata["signatures"][ENCODER_INPUTS_SIGNATURE] = list(ENCODER_INPUTS)
    os.makedirs(os.path.join(directory, "assets.extra"), exist_ok=True)
    with open(os.path.join(directory, METADATA_FILE), "w") as f:
        json.dump(metadata, f, indent=2)


def _trace(signature: ServingSignature):
    return tf.function(signature.function, input_signature=signature.input_signature,
                       autograph=False).get_concrete_function()


def _unique(variables):
    seen = {}
    for variable in variables:
        seen.setdefault(id(variable), variable)
    return list(seen.values())


def _asset_files(staging, preprocessor, label_names):
    """vocab.txt (and labels.txt) travel in assets/ for clients and people reading the export
    (every tokenizer's pieces, one per line, id = line number)."""
    paths = [os.path.join(staging, "vocab.txt")]
    with open(paths[0], "w", encoding="utf-8") as f:
        f.writelines(token + "\n" for token in preprocessor.tokenizer.vocabulary)
    if label_names:
        paths.append(os.path.join(staging, "labels.txt"))
        with open(paths[1], "w", encoding="utf-8") as f:
            f.writelines(name + "\n" for name in label_names)
    return paths
