"""Calibration data for the importance scores, turned once into arrays: encoder inputs
(numpy), labels and sample weights, whatever form the caller had them in.

Accepted: `(inputs, labels)` or `(inputs, labels, sample_weight)`, where `inputs` is a dict
of encoder inputs or raw text (a list of strings, or a pair `(a_list, b_list)` for sentence
pairs: give unlabelled pairs as `((a_list, b_list),)`) that the task's preprocessor turns
into encoder inputs; `inputs` alone (a dict or raw text, no labels); or a `tf.data.Dataset`
yielding batches of any of these. A few hundred examples are plenty: every head is scored
by one pass over them.
"""

import keras
import numpy as np

from keras_bert_suite.names import ENCODER_INPUTS


def calibration_arrays(model, data, what):
    """(x, y, sample_weight): x {encoder input: numpy}, y and sample_weight numpy structures
    or None. `what` names the caller in errors."""
    if data is None:
        raise ValueError(f"{what} needs calibration data: (inputs, labels) with inputs a dict "
                         f"of encoder inputs or raw text.")
    if _is_dataset(data):
        parts = [_one_batch(model, element, what) for element in data]
        if not parts:
            raise ValueError(f"{what}: the calibration dataset is empty.")
        return _concatenate(parts, what)
    return _one_batch(model, data, what)


def encoder_batches(x, batch_size):
    """Encoder input dicts of at most `batch_size` rows, [B, T] (a [B, C, T] multiple-choice
    batch is flattened to [B C, T], as the task folds it for the encoder)."""
    x = {name: np.asarray(x[name]) for name in ENCODER_INPUTS}
    length = x["token_ids"].shape[-1]
    x = {name: value.reshape(-1, length) for name, value in x.items()}
    rows = x["token_ids"].shape[0]
    for begin in range(0, rows, batch_size):
        yield {name: value[begin:begin + batch_size] for name, value in x.items()}


def _one_batch(model, element, what):
    if isinstance(element, tuple):
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(element)
    else:
        x, y, sample_weight = element, None, None
    if not isinstance(x, dict):
        if not _is_text(x):
            raise ValueError(
                f"{what}: calibration inputs must be a dict of encoder inputs "
                f"{list(ENCODER_INPUTS)} or raw text, got {type(x).__name__}.")
        if getattr(model, "preprocessor", None) is None:
            raise ValueError(f"{what} got raw text but {type(model).__name__} has no "
                             f"preprocessor: pass encoder inputs (a dict) or a task model "
                             f"with a preprocessor.")
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(
            model.preprocess_samples(x, y, sample_weight))
    missing = [name for name in ENCODER_INPUTS if name not in x]
    if missing:
        raise ValueError(f"{what}: the calibration inputs lack {missing}; they need "
                         f"{list(ENCODER_INPUTS)}.")
    return (_numpy(x), _numpy(y), _numpy(sample_weight))


def _concatenate(parts, what):
    def join(*values):
        if values[0] is None:
            return None
        shapes = {np.shape(value)[1:] for value in values}
        if len(shapes) > 1:
            raise ValueError(f"{what}: the calibration batches have different shapes "
                             f"{sorted(shapes)}; use a fixed sequence length (a "
                             f"preprocessor's sequence_length) for every batch.")
        return np.concatenate(values)

    return tuple(None if parts[0][i] is None else keras.tree.map_structure(
        join, *[part[i] for part in parts]) for i in range(3))


def _numpy(structure):
    """Dicts of arrays (or an array) as NumPy; lists of labels become one array."""
    if structure is None:
        return None
    if isinstance(structure, dict):
        return {key: _numpy(value) for key, value in structure.items()}
    return np.asarray(structure)


def _is_dataset(value):
    return type(value).__module__.startswith("tensorflow") and hasattr(value, "element_spec")


def _is_text(x):
    from keras_bert_suite.text import task_inputs

    return task_inputs.is_text(x)
