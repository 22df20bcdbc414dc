"""The plumbing that lets a task model's `fit` / `evaluate` / `predict` take raw text.

The task models (models/) hold a preprocessor but are keras.ops code; turning text into
encoder inputs is TensorFlow, so it lives here and runs under every backend: text in memory
(lists, arrays) is preprocessed eagerly into numpy rows that Keras batches and shuffles; a
`tf.data.Dataset` of text is mapped inside `tf.data` (as KerasHub's PipelineModel does).
"""

import keras
import numpy as np
import tensorflow as tf

from keras_bert_suite.text.preprocessing_layer import to_numpy_if_eager


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


def text_dataset(preprocess, dataset):
    """`dataset` (yielding batches of `text`, `(text, y)` or `(text, y, sample_weight)`)
    mapped with `preprocess(x, y=None, sample_weight=None)` inside `tf.data`.

    An unlabelled dataset of pairs must yield `((a, b),)`, since `(a, b)` would read as
    (text, label).
    """
    return dataset.map(preprocess, num_parallel_calls=tf.data.AUTOTUNE).prefetch(
        tf.data.AUTOTUNE)


def preprocessed_arrays(preprocess, x, y=None, sample_weight=None, chunk_size=256,
                        verbose=0):
    """In-memory raw text (and labels) -> `(inputs, y, sample_weight)` as numpy arrays, one
    row per model row (a window, a sentence chunk), through `preprocess(x, y=None,
    sample_weight=None)` called eagerly on chunks of `chunk_size` examples.

    Why not a `tf.data` map: every new pipeline instantiates the preprocessor's graph again
    when its iterator is made (1-4 s per `fit` / `evaluate` / `predict` call, whatever the
    size of the data), while the eager preprocessor reuses one traced graph. Keras then
    batches and shuffles the rows itself (every epoch, on every backend), and `batch_size`
    counts model rows, as in Hugging Face's and Model Garden's SQuAD and NER training.
    `verbose=1` shows a progress bar over the examples ("auto": beyond one chunk).
    """
    data = _pack(x, y, sample_weight)
    try:
        examples = tf.data.Dataset.from_tensor_slices(data)
    except (ValueError, TypeError) as error:
        raise ValueError(
            "Could not batch the text inputs: pass a list of strings, a pair (a_list, b_list) "
            f"of equally long lists, and labels with one row per text ({error})") from None
    count = int(examples.cardinality())
    if count == 0:
        raise ValueError("No examples: the text inputs are empty.")
    ragged = any(isinstance(t, tf.RaggedTensor) for t in tf.nest.flatten(data))
    # rows of different lengths (words per sentence) batch as ragged tensors
    chunks = examples.ragged_batch(chunk_size) if ragged else examples.batch(chunk_size)
    show = verbose == 1 or (verbose == "auto" and count > chunk_size)
    progress = keras.utils.Progbar(count, verbose=1) if show else None
    parts = []
    for chunk in chunks:
        parts.append(keras.utils.unpack_x_y_sample_weight(to_numpy_if_eager(preprocess(*chunk))))
        if progress is not None:
            progress.add(int(tf.nest.flatten(chunk)[0].shape[0]))
    inputs, labels, weights = (
        None if parts[0][i] is None else
        tf.nest.map_structure(lambda *arrays: np.concatenate(arrays), *[p[i] for p in parts])
        for i in range(3))
    return inputs, labels, weights


def _pack(x, y, sample_weight):
    """Like keras.utils.pack_x_y_sample_weight, but a list of strings stays one input and
    lists of lists (words per sentence, labels per word) become ragged tensors."""
    x, y = _ragged_if_nested(x), _ragged_if_nested(y)
    if isinstance(x, list):
        x = np.asarray(x, dtype=object)
    if y is None:
        return (x,)
    return (x, y) if sample_weight is None else (x, y, sample_weight)


def as_string_array(column):
    """A column of raw text (list, numpy array or tf.string tensor) -> numpy object array."""
    if isinstance(column, (tf.Tensor, tf.RaggedTensor)):
        column = column.numpy() if isinstance(column, tf.Tensor) else column.to_list()
    if isinstance(column, (str, bytes)):
        raise ValueError("Pass a list of texts (one per example), not a single string.")
    return np.asarray(column, dtype=object)


def decode_strings(array):
    """bytes elements (what TF string ops return) -> str, other arrays unchanged."""
    if array.dtype != object or not array.size:
        return array
    flat = [value.decode("utf-8") if isinstance(value, bytes) else value
            for value in array.reshape(-1)]
    return np.asarray(flat, dtype=object).reshape(array.shape)


def _ragged_if_nested(value):
    if isinstance(value, list) and value and all(isinstance(row, (list, tuple))
                                                 for row in value):
        return tf.ragged.constant([list(row) for row in value], ragged_rank=1)
    return value


def rows_in_chunks(make_rows, examples, chunk_size=256):
    """Calls `make_rows(chunk of examples)` -> a structure of numpy arrays (one row per model
    row: a window, a chunk) and concatenates the results: how a task materialises its
    preprocessor's rows once, so an epoch has a known number of steps."""
    examples = list(examples)
    if not examples:
        raise ValueError("No examples to preprocess.")
    parts = [make_rows(examples[i:i + chunk_size]) for i in range(0, len(examples), chunk_size)]
    return tf.nest.map_structure(lambda *arrays: np.concatenate(arrays), *parts)
