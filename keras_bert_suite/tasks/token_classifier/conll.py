"""CoNLL-style BIO files -> word-labelled sentences -> the task's chunks -> tf.data.

```
file ──read_conll──▶ TaggedSentence(words, tags) ──TokenClassifierPreprocessor──▶ chunks
     (one word per line,                          (a word's label on its first    │
      blank line between sentences)                piece, IGNORE_LABEL elsewhere)  ▼ tf.data
```

The chunks are made by the same `TokenClassifierPreprocessor` (preprocessor.py) that
`predict` and the exported model use; `training_dataset` materialises them once so an epoch
has a known number of steps. Predictions map back to words in the graph (postprocessor.py).
"""

import dataclasses
import re

import numpy as np
import tensorflow as tf

from keras_bert_suite.text.length_buckets import bucketed_batches, rows_dataset
from keras_bert_suite.text.task_inputs import rows_in_chunks

OUTSIDE_TAG = "O"
DOCUMENT_SEPARATOR = "-DOCSTART-"
# O, or a chunk prefix and an entity type: IOB1, IOB2 (BIO), IOE and IOBES/BILOU schemes.
_TAG_PATTERN = re.compile(r"^(O|[BIESLU]-\S+)$")


@dataclasses.dataclass(frozen=True)
class TaggedSentence:
    """One sentence of a CoNLL file: its words, one tag per word, and where it came from."""

    words: tuple
    tags: tuple
    source: str = "<memory>"
    line: int = 1  # 1-based line number of the first word; word i is on line `line + i`

    def __post_init__(self):
        if len(self.words) != len(self.tags):
            raise ValueError(f"{self.source}:{self.line}: {len(self.words)} words but "
                             f"{len(self.tags)} tags; give one tag per word.")


def read_conll(path, tag_column=-1):
    """Reads a CoNLL-style file into a list of `TaggedSentence`.

    Format: one word per line, columns separated by a tab (or, in lines without a tab, by
    spaces), the word in column 0 and its tag in `tag_column` (default: the last column);
    sentences end at a blank (or white-space-only) line; `-DOCSTART-` lines are skipped.
    Every word line must have as many columns as the first one. Tags are read as they are
    (IOB1 and IOB2 files both work); each must be "O" or PREFIX-TYPE (e.g. "B-person").

    Example:
    >>> from keras_bert_suite.data import corpora
    >>> sentences = read_conll(corpora.fetch_wnut16())  # WNUT-16 tweets: word TAB tag
    >>> len(sentences)
    2394
    >>> sentences[0].words[:3], sentences[0].tags[:3]
    (('@paulwalk', 'It', "'s"), ('O', 'O', 'O'))
    """
    path = str(path)
    if not tf.io.gfile.exists(path):
        raise FileNotFoundError(f"CoNLL file {path} does not exist.")
    with tf.io.gfile.GFile(path, "rb") as f:
        raw_lines = f.read().split(b"\n")
    sentences, words, tags = [], [], []
    first_line = num_columns = None

    def end_sentence():
        nonlocal words, tags, first_line
        if words:
            sentences.append(TaggedSentence(tuple(words), tuple(tags), path, first_line))
        words, tags, first_line = [], [], None

    for number, raw in enumerate(raw_lines, start=1):
        try:
            line = raw.decode("utf-8").rstrip("\r")
        except UnicodeDecodeError as error:
            raise ValueError(f"{path}:{number}: not valid UTF-8 ({error.reason} at byte "
                             f"{error.start}); re-encode the file as UTF-8.") from None
        if not line.strip():
            end_sentence()
            continue
        columns = line.split("\t") if "\t" in line else line.split()
        if columns[0] == DOCUMENT_SEPARATOR:
            end_sentence()
            continue
        if num_columns is None:
            num_columns = len(columns)
            if num_columns < 2:
                raise ValueError(f"{path}:{number}: expected a word and a tag separated by a "
                                 f"tab or spaces, got {line!r}.")
            if not -num_columns <= tag_column < num_columns or tag_column % num_columns == 0:
                raise ValueError(f"{path}:{number}: tag_column={tag_column} does not name a tag "
                                 f"column of this file's {num_columns} columns (column 0 is "
                                 "the word).")
        if len(columns) != num_columns:
            raise ValueError(f"{path}:{number}: {len(columns)} columns, but the file's first "
                             f"word line has {num_columns}: {line!r}.")
        tag = columns[tag_column].strip()
        if not _TAG_PATTERN.match(tag):
            raise ValueError(f"{path}:{number}: tag {tag!r} is neither 'O' nor PREFIX-TYPE "
                             "(e.g. 'B-person'); check tag_column and the file's format.")
        if first_line is None:
            first_line = number
        words.append(columns[0])
        tags.append(tag)
    end_sentence()
    if not sentences:
        raise ValueError(f"{path} has no tagged words (expected 'word<TAB>tag' lines).")
    return sentences


def learn_labels(sentences):
    """The tag list of `sentences` in a stable order: "O" first, then by entity type, each
    type's prefixes in B, I, E, S, L, U order; independent of the order of the sentences.

    >>> learn_labels([TaggedSentence(("Paris", "Hilton"), ("B-person", "I-person"))])
    ['O', 'B-person', 'I-person']
    """
    prefix_order = "BIESLU"
    seen = {tag for sentence in sentences for tag in sentence.tags} - {OUTSIDE_TAG}
    ordered = sorted(seen, key=lambda tag: (tag[2:], prefix_order.index(tag[0])))
    return [OUTSIDE_TAG] + ordered


def check_labels(sentences, labels):
    """Raises ValueError naming file and line for the first tag that is not in `labels`."""
    known = set(labels)
    for sentence in sentences:
        for i, tag in enumerate(sentence.tags):
            if tag not in known:
                raise ValueError(f"{sentence.source}:{sentence.line + i}: unknown tag {tag!r}; "
                                 f"the known tags are {list(labels)}.")


def training_dataset(preprocessor, sentences, labels, batch_size=32, shuffle=True, seed=None,
                     boundaries=None, group_batches=0):
    """(tf.data of (chunk inputs [B, T], label ids [B, T]), number of chunks) for
    `BertTokenClassifier.fit`; `labels` is the tag list (label id = position in it). Batched
    in length buckets with `boundaries` (text/length_buckets.py)."""
    check_labels(sentences, labels)
    index = {tag: i for i, tag in enumerate(labels)}

    def chunks_of(batch):
        chunks = preprocessor.chunks([list(s.words) for s in batch],
                                     labels=[[index[t] for t in s.tags] for s in batch])
        return {k: np.asarray(v) for k, v in chunks.inputs.items()}, np.asarray(chunks.labels)

    inputs, label_ids = rows_in_chunks(chunks_of, sentences)
    dataset = bucketed_batches(rows_dataset((inputs, label_ids)), batch_size, boundaries,
                               shuffle=shuffle, seed=seed, group_batches=group_batches,
                               per_token_labels=True)
    return dataset, len(label_ids)
