"""Classification and regression examples from CSV, TSV and JSON Lines files.

Example:
>>> with open("train.csv", "w") as f:
...     _ = f.write("review,stars\\nA gripping drama.,5\\nA dull mess.,1\\nFine.,3\\n")
>>> with open("dev.csv", "w") as f:
...     _ = f.write("review,stars\\nWhat a film!,5\\n")
>>> train = read_classification_file("train.csv", text_column="review", label_column="stars")
>>> train.label_names, train.labels
(['1', '3', '5'], array([2, 0, 1], dtype=int32))
>>> dev = read_classification_file("dev.csv", text_column="review", label_column="stars",
...                                label_names=train.label_names)  # same ids as training
>>> dev.labels
array([2], dtype=int32)
>>> from keras_bert_suite import BertPreprocessor
>>> ds = make_classification_dataset(train, batch_size=32, shuffle=True, seed=0)
>>> ds = ds.map(BertPreprocessor.from_preset("minilm_l6_h384_uncased", sequence_length=16))
>>> inputs, labels = next(iter(ds))
>>> inputs["token_ids"].shape
TensorShape([3, 16])
"""

import csv
import dataclasses

import numpy as np
import tensorflow as tf

from keras_bert_suite.data.table_rows import file_error
from keras_bert_suite.data.table_rows import read_rows
from keras_bert_suite.text.length_buckets import bucketed_batches, preprocessed_rows


@dataclasses.dataclass
class ClassificationExamples:
    """Columns of one file.

    texts: list of str; text_pairs: list of str or None (single-sentence tasks);
    labels: int32 [N] class ids, float32 [N] (regression) or None (unlabelled, e.g. a test
    split); label_names: the label values in id order (None for regression);
    line_numbers: int [N], the line each example starts on in `path`.
    """

    texts: list
    text_pairs: list
    labels: np.ndarray
    label_names: list
    line_numbers: np.ndarray
    path: str

    def __len__(self):
        return len(self.texts)


def read_classification_file(path, text_column="text", text_pair_column=None,
                             label_column="label", label_names=None, regression=False,
                             format=None, header=True, delimiter=None,
                             quoting=csv.QUOTE_MINIMAL, allow_empty_text=False):
    """Reads (text[, text pair], label) examples.

    Args:
        path: .csv, .tsv or .jsonl file (optionally .bz2/.gz compressed).
        text_column, text_pair_column, label_column: column names (keys for JSON Lines), or
            0-based indices for a CSV/TSV read with `header=False`. `text_pair_column=None`:
            single texts; `label_column=None`: no labels (a test split).
        label_names: the label values in id order. Default: learned from this file (sorted,
            numerically when all values are integers), so read the training file first and
            pass its `label_names` to the others. Values are compared as strings
            (a JSON label 1 matches "1").
        regression: labels are float numbers (e.g. STS-B), no label vocabulary.
        format, header, delimiter, quoting: how to read the file; see `table_rows.read_rows`.
        allow_empty_text: keep examples whose text is empty or white space (default: error).

    Errors name the file and line: unknown label values, empty texts, non-numeric regression
    labels, missing columns, rows with the wrong number of fields, an empty file.
    """
    if regression and label_names is not None:
        raise ValueError("regression=True takes no label_names: regression labels are numbers.")
    columns = [("text", text_column), ("text pair", text_pair_column), ("label", label_column)]
    columns = [(role, column) for role, column in columns if column is not None]
    if not header:
        for role, column in columns:
            if not isinstance(column, int) or column < 0:
                raise ValueError(f"With header=False columns are 0-based indices; the {role} "
                                 f"column is {column!r}.")

    texts, pairs, raw_labels, lines = [], [], [], []
    for line, row in read_rows(path, format=format, header=header, delimiter=delimiter,
                               quoting=quoting):
        values = {role: _field(path, line, row, column) for role, column in columns}
        for role in ("text", "text pair"):
            if role in values:
                values[role] = _checked_text(path, line, role, values[role], allow_empty_text)
        texts.append(values["text"])
        if text_pair_column is not None:
            pairs.append(values["text pair"])
        if label_column is not None:
            raw_labels.append(values["label"])
        lines.append(line)

    lines = np.asarray(lines, dtype=np.int64)
    labels = None
    if label_column is not None and regression:
        labels = _float_labels(path, lines, raw_labels)
    elif label_column is not None:
        label_names = learn_label_names(raw_labels) if label_names is None else [
            _label_key(name) for name in label_names]
        labels = encode_labels(raw_labels, label_names, path, lines)
    return ClassificationExamples(
        texts=texts, text_pairs=pairs if text_pair_column is not None else None, labels=labels,
        label_names=None if regression else label_names, line_numbers=lines, path=str(path))


def learn_label_names(values):
    """The distinct label values as strings in a stable order: numeric if all are integers,
    else alphabetical. `learn_label_names(["pos", "neg", "pos"])` -> ["neg", "pos"]."""
    names = sorted({_label_key(v) for v in values} - {""})  # empty labels: an error later
    if names and all(_is_int(n) for n in names):
        names.sort(key=int)
    return names


def encode_labels(values, label_names, path="<labels>", line_numbers=None):
    """Label values -> int32 ids (positions in `label_names`); unknown values raise."""
    index = {name: i for i, name in enumerate(label_names)}
    if len(index) != len(label_names):
        raise ValueError(f"label_names has duplicates: {list(label_names)}.")
    ids = np.empty(len(values), dtype=np.int32)
    for i, value in enumerate(values):
        key = _label_key(value)
        line = None if line_numbers is None else int(line_numbers[i])
        if key == "":
            raise file_error(path, line, f"the label is empty; every labelled example needs "
                             f"one of {list(label_names)}.")
        if key not in index:
            raise file_error(path, line, f"unknown label {key!r}; known labels are "
                             f"{list(label_names)}. Fix the file or pass label_names= that "
                             "include it.")
        ids[i] = index[key]
    return ids


def make_classification_dataset(examples, batch_size=None, shuffle=False, seed=None,
                                preprocessor=None, drop_remainder=False, boundaries=None,
                                group_batches=0):
    """A tf.data.Dataset of (text, label) or ((text_a, text_b), label) for `examples`.

    Unlabelled examples give text (or (text_a, text_b)) elements. Batched when `batch_size`
    is given; `shuffle` reshuffles every epoch (seeded by `seed`). With `preprocessor`
    (e.g. a `BertPreprocessor`) batches are mapped through it, ready for `model.fit`; with
    `boundaries` too (`length_buckets.bucket_boundaries`), the text is preprocessed once and
    each batch is cut to its length bucket, rows of similar length grouped in
    `group_batches` batches when shuffling (text/length_buckets.py).

    Example:
    >>> from keras_bert_suite import BertPreprocessor
    >>> train = ClassificationExamples(
    ...     texts=["A gripping drama.", "A dull mess."], text_pairs=None, labels=np.array([1, 0]),
    ...     label_names=["rotten", "fresh"], line_numbers=np.array([2, 3]), path="train.csv")
    >>> preprocessor = BertPreprocessor.from_preset("minilm_l6_h384_uncased", sequence_length=8)
    >>> ds = make_classification_dataset(train, 32, shuffle=True, seed=0,
    ...                                  preprocessor=preprocessor)
    >>> inputs, labels = next(iter(ds))
    >>> sorted(inputs), inputs["token_ids"].shape
    (['padding_mask', 'segment_ids', 'token_ids'], TensorShape([2, 8]))
    >>> ds = make_classification_dataset(train, 32, preprocessor=preprocessor,
    ...                                  boundaries=(4, 8))  # "[CLS] a dull mess . [SEP]": 6
    >>> next(iter(ds))[0]["token_ids"].shape
    TensorShape([2, 8])
    """
    x = tf.constant(examples.texts, dtype=tf.string)
    if examples.text_pairs is not None:
        x = (x, tf.constant(examples.text_pairs, dtype=tf.string))
    labelled = examples.labels is not None
    # A 1-tuple element keeps a pair together: map functions receive x as one argument.
    ds = tf.data.Dataset.from_tensor_slices((x, examples.labels) if labelled else (x,))
    if preprocessor is not None and boundaries is not None and batch_size is not None:
        return bucketed_batches(preprocessed_rows(ds, preprocessor, labelled), batch_size,
                                boundaries, shuffle=shuffle, seed=seed,
                                group_batches=group_batches, drop_remainder=drop_remainder)
    if shuffle:
        ds = ds.shuffle(max(len(examples), 1), seed=seed, reshuffle_each_iteration=True)
    if batch_size is not None:
        ds = ds.batch(batch_size, drop_remainder=drop_remainder)
    if preprocessor is not None:
        ds = ds.map(preprocessor if labelled else (lambda x: preprocessor(x)),
                    num_parallel_calls=tf.data.AUTOTUNE)
    elif not labelled:
        ds = ds.map(lambda x: x)  # unwrap the 1-tuple
    return ds.prefetch(tf.data.AUTOTUNE)


def _field(path, line, row, column):
    if isinstance(row, dict):
        if column not in row:
            raise file_error(path, line, f"no column {column!r}; the available columns are "
                             f"{list(row)}. Pass the right *_column= name.")
        return row[column]
    if column >= len(row):
        raise file_error(path, line, f"no column {column} (the row has {len(row)} fields).")
    return row[column]


def _checked_text(path, line, role, value, allow_empty):
    """The text (JSON null counts as empty); empty texts are an error unless allowed."""
    value = "" if value is None else value
    if not isinstance(value, str):
        raise file_error(path, line, f"the {role} must be a string, got {value!r}.")
    if not allow_empty and not value.strip():
        raise file_error(path, line, f"the {role} is empty. Remove the row, or pass "
                         "allow_empty_text=True to keep empty texts.")
    return value


def _float_labels(path, lines, values):
    labels = np.empty(len(values), dtype=np.float32)
    for i, value in enumerate(values):
        try:
            if isinstance(value, bool):
                raise ValueError
            labels[i] = float(value)
        except (TypeError, ValueError):
            labels[i] = np.nan
        if not np.isfinite(labels[i]):
            raise file_error(path, int(lines[i]), f"regression label {value!r} is not a finite "
                             "number.")
    return labels


def _label_key(value):
    if isinstance(value, bool):  # JSON true/false
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip() if value is not None else ""


def _is_int(text):
    try:
        int(text)
        return True
    except ValueError:
        return False
