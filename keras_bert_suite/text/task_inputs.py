"""tf.data plumbing that lets a task model's `fit` / `evaluate` / `predict` take raw text.

The task models (models/) hold a preprocessor but are keras.ops code; turning text into
encoder inputs is TensorFlow, so it lives here and runs in `tf.data` under every backend
(as KerasHub's PipelineModel does).
"""

import numpy as np
import tensorflow as tf


def is_text(x):
    """True when `x` holds strings (str, bytes, lists/tuples/arrays of them, tf.string)."""
    if isinstance(x, (str, bytes)):
        return True
    if isinstance(x, (tf.Tensor, tf.RaggedTensor)):
        return x.dtype == tf.string
    if isinstance(x, np.ndarray):
        return x.dtype.kind in ("U", "S", "O")
    if isinstance(x, (list, tuple)):
        return len(x) > 0 and any(is_text(item) for item in x)
    return False


def is_dataset(x):
    return isinstance(x, tf.data.Dataset)


def text_dataset(preprocess, x, y=None, sample_weight=None, batch_size=None, shuffle=False):
    """Batches `(x, y, sample_weight)` (or maps over a `tf.data.Dataset`) with `preprocess`.

    `preprocess(x, y=None, sample_weight=None)` runs per batch inside `tf.data`. A dataset
    given as `x` must yield `text`, `(text, y)` or `(text, y, sample_weight)`; an unlabelled
    dataset of pairs must yield `((a, b),)`, since `(a, b)` would read as (text, label).
    """
    if is_dataset(x):
        if y is not None or sample_weight is not None or batch_size is not None:
            raise ValueError("When x is a tf.data.Dataset, do not pass y, sample_weight or "
                             "batch_size: the dataset yields batches of (text, label).")
        return x.map(preprocess, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)
    data = _pack(x, y, sample_weight)
    try:
        dataset = tf.data.Dataset.from_tensor_slices(data)
    except (ValueError, TypeError) as error:
        raise ValueError(
            "Could not batch the text inputs: pass a list of strings, a pair (a_list, b_list) "
            f"of equally long lists, and labels with one row per text ({error})") from None
    if shuffle:
        count = int(dataset.cardinality())
        dataset = dataset.shuffle(max(count, 1), reshuffle_each_iteration=True)
    dataset = dataset.batch(batch_size or 32)
    return dataset.map(preprocess, num_parallel_calls=tf.data.AUTOTUNE).prefetch(
        tf.data.AUTOTUNE)


def _pack(x, y, sample_weight):
    """Like keras.utils.pack_x_y_sample_weight, but a list of strings stays one input."""
    if isinstance(x, list):
        x = np.asarray(x, dtype=object)
    if y is None:
        return (x,)
    return (x, y) if sample_weight is None else (x, y, sample_weight)


def pack_choices(preprocessor, x, num_choices):
    """(contexts [B], endings [B, C]) strings -> encoder inputs [B, C, T] (SWAG style).

    Each ending is packed as `[CLS] context [SEP] ending [SEP]`.
    """
    if not isinstance(x, (tuple, list)) or len(x) != 2:
        raise ValueError("Multiple-choice text input is a pair (contexts [B], endings [B, C]): "
                         "one context per example and num_choices endings for it.")
    contexts, endings = (tf.convert_to_tensor(part) for part in x)
    if endings.shape.rank != 2 or endings.shape[1] not in (None, num_choices):
        raise ValueError(f"endings must be [B, {num_choices}] strings, got shape "
                         f"{endings.shape}.")
    packed = preprocessor((tf.repeat(contexts, num_choices), tf.reshape(endings, [-1])))
    return {name: tf.reshape(value, [-1, num_choices, preprocessor.sequence_length])
            for name, value in packed.items()}
