"""CoNLL-style BIO files -> word-labelled sentences -> fixed-length WordPiece windows, and back.

The path of a token-classification example:

```
file ──read_conll──▶ TaggedSentence(words, tags) ──WordPieceAligner.encode──▶ TokenWindows
     (one word per line,                          (first piece of a word carries    │ to_dataset
      blank line between sentences)                its label; the rest get -100)     ▼
                                      tags per word ◀──WordPieceAligner.decode── model predictions
```

Alignment follows Hugging Face's `word_ids()` for pre-split words (`is_split_into_words=True`):
each word is tokenized on its own (so "don't" is one word of three pieces), and
`TokenWindows.word_ids` holds, for every position, the index of the word its piece came from
(-1 for [CLS], [SEP] and padding). Two documented differences, both so that no word is lost:

* a word that tokenizes to nothing (only control or format characters, a lone combining mark
  in an uncased vocabulary) becomes one [UNK] piece, so it still gets a label and a prediction;
  Hugging Face gives it no position at all;
* a sentence longer than `sequence_length - 2` pieces is split at word boundaries into several
  windows (each word in exactly one window; no overlap, so every word is labelled once); a
  single word with more pieces than a window keeps its first `sequence_length - 2` pieces (the
  dropped pieces carry no label).

Reading and alignment run in Python/numpy once per file (CoNLL sets are small); the model
inputs then go through `tf.data` like every other task's.
"""

import dataclasses
import re

import numpy as np
import tensorflow as tf

# The label value the loss ignores: the same value BertTokenClassifier masks out (as in
# Hugging Face and PyTorch's cross-entropy default).
IGNORE_LABEL = -100

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
    >>> sentences = read_conll("train.txt")          # WNUT-16: word TAB tag
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


@dataclasses.dataclass
class TokenWindows:
    """Fixed-length model inputs for word-tagged sentences, and the map back to words.

    Arrays are int32 [N, T] (N windows, T = sequence_length): `token_ids`, `segment_ids`,
    `padding_mask`, `label_ids` (label index at each word's first piece, IGNORE_LABEL
    elsewhere) and `word_ids` (index of the word in its sentence for every piece, -1 for
    special tokens and padding). `sentence_index` [N] says which sentence a window belongs
    to; `sentence_lengths` gives each sentence's word count.
    """

    token_ids: np.ndarray
    segment_ids: np.ndarray
    padding_mask: np.ndarray
    label_ids: np.ndarray
    word_ids: np.ndarray
    sentence_index: np.ndarray
    sentence_lengths: np.ndarray

    def inputs(self):
        """The encoder's input dict."""
        return {"token_ids": self.token_ids, "segment_ids": self.segment_ids,
                "padding_mask": self.padding_mask}

    def first_piece_mask(self):
        """[N, T] bool: True at the one position of each word that carries its label."""
        is_word = self.word_ids >= 0
        previous = np.pad(self.word_ids[:, :-1], ((0, 0), (1, 0)), constant_values=-1)
        return is_word & (self.word_ids != previous)


class WordPieceAligner:
    """Aligns word-level tags with a BertTokenizer's WordPieces, windowing long sentences.

    Args:
        tokenizer: a `BertTokenizer` (needs [CLS], [SEP], [PAD] and [UNK]).
        labels: the tag list; label id = position in it (e.g. from `learn_labels`).
        sequence_length: length of every window, [CLS] and [SEP] included.

    Example:
    >>> tokenizer = BertTokenizer.from_preset("minilm_l6_h384_uncased")
    >>> train = read_conll("train.txt")
    >>> aligner = WordPieceAligner(tokenizer, learn_labels(train), sequence_length=64)
    >>> windows = aligner.encode(train)
    >>> ds = to_dataset(windows, batch_size=32, shuffle=True)   # (inputs, label_ids)
    >>> model.fit(ds)
    >>> tags = aligner.decode(windows, model.predict(windows.inputs()))  # list per sentence
    """

    def __init__(self, tokenizer, labels, sequence_length=128):
        labels = list(labels)
        if not labels or len(set(labels)) != len(labels):
            raise ValueError(f"labels must be a non-empty list of distinct tags, got {labels}.")
        if not isinstance(sequence_length, int) or sequence_length < 3:
            raise ValueError(f"sequence_length must be an int >= 3 ([CLS], one piece, [SEP]), "
                             f"got {sequence_length!r}.")
        self.tokenizer = tokenizer
        self.labels = labels
        self.sequence_length = sequence_length
        self._label_index = {label: i for i, label in enumerate(labels)}

    def word_pieces(self, words):
        """list of str -> list of lists of WordPiece ids, one non-empty list per word."""
        unique = sorted(set(words))
        pieces = dict(zip(unique, self.tokenizer.encode_batch(unique))) if unique else {}
        unknown = [self.tokenizer.unknown_token_id]
        return [pieces[word] or unknown for word in words]

    def encode(self, sentences):
        """list of TaggedSentence -> TokenWindows (tags checked against `labels`)."""
        sentences = list(sentences)
        check_labels(sentences, self.labels)
        all_pieces = self.word_pieces([w for sentence in sentences for w in sentence.words])
        budget = self.sequence_length - 2
        rows = []  # (sentence index, [(word index, pieces, label id)])
        start = 0
        for s, sentence in enumerate(sentences):
            pieces = all_pieces[start:start + len(sentence.words)]
            start += len(sentence.words)
            window, used = [], 0
            for w, (word_pieces, tag) in enumerate(zip(pieces, sentence.tags)):
                word_pieces = word_pieces[:budget]  # only an extremely long word is cut
                if window and used + len(word_pieces) > budget:
                    rows.append((s, window))
                    window, used = [], 0
                window.append((w, word_pieces, self._label_index[tag]))
                used += len(word_pieces)
            rows.append((s, window))
        return self._to_arrays(rows, [len(sentence.words) for sentence in sentences])

    def _to_arrays(self, rows, sentence_lengths):
        shape = (len(rows), self.sequence_length)
        token_ids = np.full(shape, self.tokenizer.pad_token_id, np.int32)
        padding_mask = np.zeros(shape, np.int32)
        label_ids = np.full(shape, IGNORE_LABEL, np.int32)
        word_ids = np.full(shape, -1, np.int32)
        for n, (_, window) in enumerate(rows):
            position = 1
            token_ids[n, 0] = self.tokenizer.cls_token_id
            for w, pieces, label in window:
                end = position + len(pieces)
                token_ids[n, position:end] = pieces
                word_ids[n, position:end] = w
                label_ids[n, position] = label
                position = end
            token_ids[n, position] = self.tokenizer.sep_token_id
            padding_mask[n, :position + 1] = 1
        return TokenWindows(
            token_ids=token_ids, segment_ids=np.zeros(shape, np.int32),
            padding_mask=padding_mask, label_ids=label_ids, word_ids=word_ids,
            sentence_index=np.array([s for s, _ in rows], np.int32),
            sentence_lengths=np.array(sentence_lengths, np.int32))

    def decode(self, windows, predictions):
        """Per-window predictions -> one list of tags per sentence, one tag per word.

        `predictions` is [N, T] label ids or [N, T, num_labels] scores (logits or
        probabilities; argmax is taken), for the windows of `encode`, in the same order.
        A word's tag is the prediction at its first piece.
        """
        predictions = np.asarray(predictions)
        if predictions.ndim == 3:
            predictions = predictions.argmax(-1)
        if predictions.shape != windows.word_ids.shape:
            raise ValueError(f"predictions have shape {predictions.shape}; expected "
                             f"{windows.word_ids.shape} (or with a trailing num_labels axis), "
                             "one row per window of `encode`.")
        if predictions.size and not (0 <= predictions.min() and predictions.max() < len(self.labels)):
            raise ValueError(f"predicted label ids must be in [0, {len(self.labels)}); got "
                             f"values from {predictions.min()} to {predictions.max()}.")
        tags = [[None] * int(n) for n in windows.sentence_lengths]
        first = windows.first_piece_mask()
        for n, s in enumerate(windows.sentence_index):
            for position in np.flatnonzero(first[n]):
                tags[s][windows.word_ids[n, position]] = self.labels[predictions[n, position]]
        return tags

    def gold_tags(self, windows):
        """The tags that `label_ids` encode, mapped back to words (equals the input tags)."""
        labels = np.where(windows.label_ids == IGNORE_LABEL, 0, windows.label_ids)
        return self.decode(windows, labels)


def to_dataset(windows, batch_size=32, shuffle=False, seed=None):
    """TokenWindows -> tf.data.Dataset of ({token_ids, segment_ids, padding_mask}, label_ids),
    int32 [B, T] each (label_ids: IGNORE_LABEL where no word starts)."""
    ds = tf.data.Dataset.from_tensor_slices((windows.inputs(), windows.label_ids))
    if shuffle:
        ds = ds.shuffle(len(windows.token_ids), seed=seed, reshuffle_each_iteration=True)
    return ds.batch(batch_size).prefetch(tf.data.AUTOTUNE)
