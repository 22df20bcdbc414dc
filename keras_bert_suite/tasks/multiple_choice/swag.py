"""SWAG-format multiple choice: read the CSV files into examples for the task's preprocessor.

The official SWAG files (rowanz/swagaf data/{train,val,test}.csv) have the columns
`video-id, fold-ind, startphrase, sent1, sent2, gold-source, ending0..ending3, label` (plus a
leading unnamed index column; the test file has no label). As in BERT's SWAG experiments and
Hugging Face's `run_swag`, the first segment is `sent1` and each choice is `sent2 + " " +
ending_i`; the model scores the 4 packed pairs and a softmax picks one.

Example (a one-row file in the official layout):
>>> header = ",video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,ending3,label"
>>> row = "0,lsmdc0001,7,She opens the door. She,She opens the door.,She,gold,walks in.,eats it.,is a door.,flies.,0"
>>> with open("val.csv", "w") as f:
...     _ = f.write(header + "\\n" + row + "\\n")
>>> swag = read_swag("val.csv")
>>> swag.contexts[0], swag.choices[0], int(swag.labels[0])
('She opens the door.', ['She walks in.', 'She eats it.', 'She is a door.', 'She flies.'], 0)
>>> from keras_bert_suite.tasks.multiple_choice.preprocessor import MultipleChoicePreprocessor
>>> preprocessor = MultipleChoicePreprocessor.from_preset("minilm_l6_h384_uncased",
...                                                       sequence_length=64)
>>> dataset = make_multiple_choice_dataset(swag, preprocessor, batch_size=32)
>>> next(iter(dataset))[0]["token_ids"].shape  # [batch, choices, sequence_length]
TensorShape([1, 4, 64])
"""

import dataclasses

import numpy as np
import tensorflow as tf

from keras_bert_suite.data.table_rows import file_error
from keras_bert_suite.data.table_rows import read_rows
from keras_bert_suite.text.length_buckets import bucketed_batches, preprocessed_rows

SWAG_NUM_CHOICES = 4
_ENDINGS = tuple(f"ending{i}" for i in range(SWAG_NUM_CHOICES))
_REQUIRED = ("sent1", "sent2", *_ENDINGS)


@dataclasses.dataclass
class MultipleChoiceExamples:
    """contexts: list of str [N]; choices: list of N lists of num_choices str; labels: int32
    [N] index of the right choice, or None (test split); ids: the rows' example ids
    (SWAG: "video-id" + "-" + "fold-ind"); line_numbers: where each example starts in `path`."""

    contexts: list
    choices: list
    labels: np.ndarray
    ids: list
    line_numbers: np.ndarray
    path: str

    def __len__(self):
        return len(self.contexts)


def read_swag(path, require_labels=None):
    """Reads a SWAG CSV file (train.csv, val.csv or test.csv of the official release).

    require_labels: True -> a missing "label" column is an error; False -> labels are ignored;
    None (default) -> labels are read when the file has the column.
    Errors name the file and line: missing columns, empty context or ending, a label that is
    not 0..3.
    """
    contexts, choices, labels, ids, lines = [], [], [], [], []
    read_labels = None
    for line, row in read_rows(path, format="csv", header=True):
        if read_labels is None:
            missing = [c for c in _REQUIRED if c not in row]
            if require_labels and "label" not in row:
                missing.append("label")
            if missing:
                raise file_error(path, 1, f"missing SWAG column(s) {missing}; the header has "
                                 f"{list(row)}. SWAG files have video-id, fold-ind, startphrase, "
                                 "sent1, sent2, gold-source, ending0..ending3[, label].")
            read_labels = "label" in row and require_labels is not False
        if not row["sent1"].strip():
            raise file_error(path, line, "the context (sent1) is empty.")
        endings = [row[name] for name in _ENDINGS]
        empty = [name for name, ending in zip(_ENDINGS, endings) if not ending.strip()]
        if empty:
            raise file_error(path, line, f"empty ending(s) {empty}; every choice needs text.")
        prefix = row["sent2"].strip()
        contexts.append(row["sent1"])
        choices.append([f"{prefix} {ending.strip()}" if prefix else ending.strip()
                        for ending in endings])
        ids.append(f"{row.get('video-id', '')}-{row.get('fold-ind', line)}")
        lines.append(line)
        if read_labels:
            labels.append(_choice_index(path, line, row["label"]))
    return MultipleChoiceExamples(
        contexts=contexts, choices=choices,
        labels=np.asarray(labels, dtype=np.int32) if read_labels else None, ids=ids,
        line_numbers=np.asarray(lines, dtype=np.int64), path=str(path))


def make_multiple_choice_dataset(examples, preprocessor, batch_size, shuffle=False, seed=None,
                                 boundaries=None, group_batches=0):
    """A tf.data.Dataset of (inputs [B, num_choices, T], label [B]) batches (inputs only when
    unlabelled), packed in the input pipeline by `preprocessor` (a
    `MultipleChoicePreprocessor`, the one the model serves with); with `boundaries`, each
    batch is cut to its longest choice's length bucket (text/length_buckets.py)."""
    x = (tf.constant(examples.contexts), tf.constant(examples.choices))
    labelled = examples.labels is not None
    ds = tf.data.Dataset.from_tensor_slices((x, examples.labels) if labelled else (x,))
    if boundaries is not None:
        return bucketed_batches(preprocessed_rows(ds, preprocessor, labelled), batch_size,
                                boundaries, shuffle=shuffle, seed=seed,
                                group_batches=group_batches)
    if shuffle:
        ds = ds.shuffle(max(len(examples), 1), seed=seed, reshuffle_each_iteration=True)
    ds = ds.batch(batch_size)
    return ds.map(preprocessor, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


def _choice_index(path, line, value):
    value = value.strip()
    if value not in {str(i) for i in range(SWAG_NUM_CHOICES)}:
        raise file_error(path, line, f"label {value!r} is not a choice index; SWAG labels are "
                         f"0..{SWAG_NUM_CHOICES - 1}.")
    return int(value)
