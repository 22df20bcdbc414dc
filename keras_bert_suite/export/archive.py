"""Writes a task model + its preprocessor as a SavedModel, in a TensorFlow-backend process."""

import json
import os
import tempfile

import keras
import tensorflow as tf

from keras_bert_suite.export import op_check, tasks, warmup

METADATA_FILE = os.path.join("assets.extra", "keras_bert_suite.json")


def write_saved_model(model, directory, task, preprocessor, label_names, options, model_name,
                      write_warmup=True):
    """Builds the signatures of `task`, saves, checks the ops, writes warmup and metadata."""
    if keras.backend.backend() != "tensorflow":
        raise RuntimeError("write_saved_model runs under KERAS_BACKEND=tensorflow; "
                           "use export_saved_model, which re-exports other backends' models.")
    context = tasks.TaskContext(model, preprocessor, label_names, dict(options))
    signatures = tasks.build_signatures(task, context)
    # Each function is traced exactly once, here. (keras.export.ExportArchive traces every
    # endpoint twice, once to find its variables and again inside tf.saved_model.save, whose
    # save context is part of tf.function's cache key: that doubled the cost of an export.)
    functions = {
        "serving_default": _trace(signatures.serving_default,
                                  signatures.serving_input_signature),
        "encoder_inputs": _trace(signatures.encoder_inputs, signatures.encoder_input_signature),
    }
    root = tf.Module()
    # The variables the functions read (the model's weights), nothing else of the Keras
    # objects: a serving host needs no Python object graph, only the signatures.
    root.weights = _unique(v for f in functions.values() for v in f.variables)
    with tempfile.TemporaryDirectory() as staging:
        # Assets hanging off the root are copied into assets/ (and listed as asset files).
        root.asset_files = [tf.saved_model.Asset(path)
                            for path in _asset_files(staging, preprocessor, label_names)]
        tf.saved_model.save(root, directory, signatures=functions)
    op_check.check_servable_ops(directory)  # before the version becomes visible
    if write_warmup:
        warmup.write_warmup_requests(directory, model_name, signatures.warmup_inputs)
    metadata = {"task": task, "options": options, "label_names": label_names,
                "sequence_length": preprocessor.sequence_length,
                "lowercase": preprocessor.tokenizer.lowercase,
                "signatures": {"serving_default": _arg_names(signatures.serving_default),
                               "encoder_inputs": ["token_ids", "segment_ids", "padding_mask"]}}
    os.makedirs(os.path.join(directory, "assets.extra"), exist_ok=True)
    with open(os.path.join(directory, METADATA_FILE), "w") as f:
        json.dump(metadata, f, indent=2)


def _trace(function, input_signature):
    return tf.function(function, input_signature=input_signature,
                       autograph=False).get_concrete_function()


def _unique(variables):
    seen = {}
    for variable in variables:
        seen.setdefault(id(variable), variable)
    return list(seen.values())


def _asset_files(staging, preprocessor, label_names):
    """vocab.txt (and labels.txt) travel in assets/ for clients and people reading the export."""
    paths = [os.path.join(staging, "vocab.txt")]
    with open(paths[0], "w", encoding="utf-8") as f:
        f.writelines(token + "\n" for token in preprocessor.tokenizer.vocabulary)
    if label_names:
        paths.append(os.path.join(staging, "labels.txt"))
        with open(paths[1], "w", encoding="utf-8") as f:
            f.writelines(name + "\n" for name in label_names)
    return paths


def _arg_names(function):
    return list(function.__code__.co_varnames[:function.__code__.co_argcount])
