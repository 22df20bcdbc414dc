"""SQuAD v1.1 / v2.0 JSON -> examples -> fixed-length windows (features) -> tf.data.

```
file ──read_squad_examples──▶ SquadExample ──SquadFeaturizer──▶ SquadFeatures ──▶ tf.data
 (data[].paragraphs[].qas[])  (question, context,   [CLS] question [SEP] window [SEP],
                               answer char span)     char offsets of every context piece
```

Windows follow google-research/bert's `run_squad.py` (and Model Garden's `squad_lib`): the
question is cut to `max_query_length` pieces, the context is cut into windows of
`max_seq_length - len(question) - 3` pieces starting every `doc_stride` pieces, and each token
remembers whether this window gives it the most context (`token_is_max_context`), which the
post-processing uses to pick one window per token. Training labels are token indices in the
packed window; a window that does not hold the whole answer, and an unanswerable (v2.0)
question, are labelled 0 = [CLS].

One intended difference from the reference: the answer's character span is mapped to pieces
through the tokenizer's character offsets (the first piece that ends after the answer starts,
the last piece that starts before it ends), instead of whitespace words plus the
`_improve_answer_span` string search. The two agree whenever that search succeeds; where it
fails (an answer that starts or ends inside a word whose pieces differ when the answer is
tokenized alone, e.g. "1,000" in "$1,000.") the reference falls back to whole words and we
keep the exact pieces. Every context piece also keeps its (start, end) character offsets into
the original context, so an answer is cut from the context as written (no detokenization).

Example:
>>> tokenizer = BertTokenizer.from_preset("minilm_l6_h384_uncased")
>>> examples = read_squad_examples("train-v1.1.json")
>>> features = SquadFeaturizer(tokenizer, max_seq_length=384, doc_stride=128).featurize(examples)
>>> dataset = training_dataset(features, batch_size=32)   # x, {"start_positions", "end_positions"}
"""

import dataclasses
import json

import numpy as np
import tensorflow as tf

# Position of [CLS]: the label of windows without the answer and of unanswerable questions.
NO_ANSWER_POSITION = 0
# How many contexts / questions go through the tokenizer per call (one graph call each).
_TOKENIZE_BATCH = 512


@dataclasses.dataclass(frozen=True)
class SquadExample:
    """One question about one context.

    `answers` are the gold answers as in the file (dicts with "text" and "answer_start");
    the first one is the training target. `is_impossible` marks SQuAD 2.0's unanswerable
    questions (then `answers` may be empty).
    """

    qas_id: str
    question: str
    context: str
    answers: tuple = ()
    is_impossible: bool = False

    @property
    def answer_text(self):
        return self.answers[0]["text"] if self.answers else None

    @property
    def answer_start(self):
        return self.answers[0]["answer_start"] if self.answers else None


def read_squad_examples(path):
    """Reads a SQuAD v1.1 or v2.0 JSON file into a list of `SquadExample`.

    Every answer must be found in its context: `context[answer_start:][:len(text)] == text`
    (checked, and a mismatch is an error naming the file and question id).
    """
    path = str(path)
    if not tf.io.gfile.exists(path):
        raise FileNotFoundError(f"SQuAD file {path} does not exist.")
    with tf.io.gfile.GFile(path, "r") as f:
        try:
            data = json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: not valid JSON (line {e.lineno}, column {e.colno}: "
                             f"{e.msg}).") from None
    return examples_from_squad_json(data, source=path)


def examples_from_squad_json(data, source="<memory>"):
    """The parsed SQuAD JSON ({"data": [{"paragraphs": [...]}, ...]}) -> list of SquadExample."""
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise ValueError(f"{source}: a SQuAD file is a JSON object with a 'data' list "
                         "(data[].paragraphs[].qas[]).")
    examples, seen = [], set()
    for a, article in enumerate(data["data"]):
        for p, paragraph in enumerate(_require(article, "paragraphs", f"data[{a}]", source)):
            where = f"data[{a}].paragraphs[{p}]"
            context = _require(paragraph, "context", where, source)
            if not isinstance(context, str):
                raise ValueError(f"{source}: {where}.context must be a string.")
            for q, qa in enumerate(_require(paragraph, "qas", where, source)):
                qid = str(_require(qa, "id", f"{where}.qas[{q}]", source))
                if qid in seen:
                    raise ValueError(f"{source}: question id {qid!r} appears twice.")
                seen.add(qid)
                examples.append(_example(qa, qid, context, f"{where}.qas[{q}]", source))
    if not examples:
        raise ValueError(f"{source}: no questions found (data[].paragraphs[].qas[] is empty).")
    return examples


def _example(qa, qid, context, where, source):
    question = _require(qa, "question", where, source)
    is_impossible = qa.get("is_impossible", False)
    if not isinstance(is_impossible, bool):
        raise ValueError(f"{source}: question {qid!r}: is_impossible must be true or false.")
    answers = _require(qa, "answers", where, source)
    for answer in answers:
        text, start = answer.get("text"), answer.get("answer_start")
        if not isinstance(text, str) or not isinstance(start, int) or isinstance(start, bool):
            raise ValueError(f"{source}: question {qid!r}: every answer needs a string 'text' "
                             f"and an int 'answer_start', got {answer!r}.")
        if not text.strip() or context[start:start + len(text)] != text:
            raise ValueError(
                f"{source}: question {qid!r}: the answer {text!r} is not in the context at "
                f"answer_start={start} (found {context[start:start + len(text)]!r}). Fix "
                "answer_start (a character index into the context) or the answer text.")
    if is_impossible and answers:
        raise ValueError(f"{source}: question {qid!r} is marked is_impossible but has answers "
                         "(put them under 'plausible_answers', as SQuAD 2.0 does).")
    return SquadExample(qid, question, context, tuple(dict(a) for a in answers), is_impossible)


def _require(mapping, key, where, source):
    if not isinstance(mapping, dict) or key not in mapping:
        raise ValueError(f"{source}: {where} has no '{key}' key.")
    return mapping[key]


@dataclasses.dataclass
class SquadFeatures:
    """N windows as numpy arrays (T = max_seq_length).

    token_ids, segment_ids, padding_mask: [N, T] int32 model inputs.
    start_positions, end_positions: [N] int32 training labels (0 = [CLS] = no answer here).
    example_index: [N] index into the example list; window_index: [N] 0, 1, ... per example.
    token_offsets: [N, T, 2] int32 (start, end) character offsets of context pieces in
        their example's context; -1 for [CLS], the question, [SEP] and padding.
    token_is_max_context: [N, T] bool, this window is the one with most context for the token.
    """

    token_ids: np.ndarray
    segment_ids: np.ndarray
    padding_mask: np.ndarray
    start_positions: np.ndarray
    end_positions: np.ndarray
    example_index: np.ndarray
    window_index: np.ndarray
    token_offsets: np.ndarray
    token_is_max_context: np.ndarray

    def __len__(self):
        return len(self.token_ids)

    @property
    def inputs(self):
        return {"token_ids": self.token_ids, "segment_ids": self.segment_ids,
                "padding_mask": self.padding_mask}

    @property
    def labels(self):
        return {"start_positions": self.start_positions, "end_positions": self.end_positions}


class SquadFeaturizer:
    """Turns `SquadExample`s into `SquadFeatures` windows.

    Args:
        tokenizer: a `BertTokenizer` (its vocabulary must have [CLS], [SEP], [PAD]).
        max_seq_length: length of every window ([CLS] question [SEP] context [SEP] padding).
        doc_stride: the next window starts this many context pieces after the previous one.
        max_query_length: longer questions keep their first `max_query_length` pieces.

    Example:
    >>> squad_json, _ = quoref.quoref_to_squad(corpora.fetch_quoref(), limit=80)
    >>> featurizer = SquadFeaturizer(tokenizer, max_seq_length=384, doc_stride=128)
    >>> features = featurizer.featurize(examples_from_squad_json(squad_json))
    >>> features.token_ids.shape          # 77 single-span questions, long passages: 2+ windows
    (170, 384)
    """

    def __init__(self, tokenizer, max_seq_length=384, doc_stride=128, max_query_length=64):
        for name, value in (("max_seq_length", max_seq_length), ("doc_stride", doc_stride),
                            ("max_query_length", max_query_length)):
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}.")
        if max_query_length + 3 >= max_seq_length:
            raise ValueError(
                f"max_query_length ({max_query_length}) + 3 special tokens leaves no room for "
                f"the context in max_seq_length ({max_seq_length}); use a max_query_length "
                f"below {max_seq_length - 3} (the reference uses 64 with 384).")
        self.tokenizer = tokenizer
        self.max_seq_length = int(max_seq_length)
        self.doc_stride = int(doc_stride)
        self.max_query_length = int(max_query_length)

    def featurize(self, examples, is_training=True):
        """examples -> SquadFeatures. With `is_training`, every answerable example needs an
        answer (its first one is the label); without it, labels are all 0."""
        examples = list(examples)
        if not examples:
            raise ValueError("featurize() got no examples.")
        question_ids = self._encode([e.question for e in examples])
        contexts = sorted({e.context for e in examples})
        context_pieces = dict(zip(contexts, zip(*self._encode_with_offsets(contexts))))
        rows = []
        for index, (example, query) in enumerate(zip(examples, question_ids)):
            ids, offsets = context_pieces[example.context]
            answer = self._answer_pieces(example, offsets) if is_training else None
            rows.extend(self._windows(index, query[:self.max_query_length], ids, offsets, answer))
        return SquadFeatures(*(np.stack(column) for column in zip(*rows)))

    def _answer_pieces(self, example, offsets):
        """(first, last) context piece of the training answer, or None if unanswerable."""
        if example.is_impossible:
            return None
        if not example.answers:
            raise ValueError(f"Question {example.qas_id!r} has no answer; training needs one "
                             "(or is_impossible: true for SQuAD 2.0).")
        begin = example.answer_start
        end = begin + len(example.answer_text)
        starts, ends = offsets[:, 0], offsets[:, 1]
        overlapping = np.flatnonzero((ends > begin) & (starts < end))
        if not len(overlapping):
            raise ValueError(f"Question {example.qas_id!r}: the answer "
                             f"{example.answer_text!r} has no tokens (only characters the "
                             "tokenizer drops).")
        return overlapping[0], overlapping[-1]

    def _windows(self, example_index, query, ids, offsets, answer):
        tokenizer = self.tokenizer
        window_length = self.max_seq_length - len(query) - 3
        spans = _doc_spans(len(ids), window_length, self.doc_stride)
        max_context = _max_context_window(spans, len(ids))
        prefix = [tokenizer.cls_token_id, *query, tokenizer.sep_token_id]
        for window, (start, length) in enumerate(spans):
            token_ids = np.full(self.max_seq_length, tokenizer.pad_token_id, np.int32)
            segment_ids = np.zeros(self.max_seq_length, np.int32)
            padding_mask = np.zeros(self.max_seq_length, np.int32)
            token_offsets = np.full((self.max_seq_length, 2), -1, np.int32)
            is_max_context = np.zeros(self.max_seq_length, bool)
            doc = slice(len(prefix), len(prefix) + length)  # context positions in the window
            packed = prefix + list(ids[start:start + length]) + [tokenizer.sep_token_id]
            token_ids[:len(packed)] = packed
            segment_ids[doc.start:len(packed)] = 1
            padding_mask[:len(packed)] = 1
            token_offsets[doc] = offsets[start:start + length]
            is_max_context[doc] = max_context[start:start + length] == window
            start_position = end_position = NO_ANSWER_POSITION
            if answer is not None and start <= answer[0] and answer[1] < start + length:
                start_position = answer[0] - start + doc.start
                end_position = answer[1] - start + doc.start
            yield (token_ids, segment_ids, padding_mask, np.int32(start_position),
                   np.int32(end_position), np.int32(example_index), np.int32(window),
                   token_offsets, is_max_context)

    def _encode(self, texts):
        ids = []
        for i in range(0, len(texts), _TOKENIZE_BATCH):
            ids.extend(self.tokenizer.encode_batch(texts[i:i + _TOKENIZE_BATCH]))
        return ids

    def _encode_with_offsets(self, texts):
        ids, offsets = [], []
        for i in range(0, len(texts), _TOKENIZE_BATCH):
            batch_ids, batch_offsets = self.tokenizer.encode_batch_with_offsets(
                texts[i:i + _TOKENIZE_BATCH])
            ids.extend(np.asarray(row, np.int32) for row in batch_ids)
            offsets.extend(np.asarray(row, np.int32).reshape(-1, 2) for row in batch_offsets)
        return ids, offsets


def _doc_spans(num_pieces, window_length, doc_stride):
    """(start, length) of each window over the context pieces, as run_squad.py makes them."""
    spans, start = [], 0
    while True:
        length = min(num_pieces - start, window_length)
        spans.append((start, length))
        if start + length >= num_pieces:
            return spans
        start += min(length, doc_stride)


def _max_context_window(spans, num_pieces):
    """[num_pieces] index of the window where each piece has the most context: the max of
    min(left, right context) + 0.01 * window length (first window on ties, as the reference)."""
    positions = np.arange(num_pieces)
    scores = np.full((len(spans), num_pieces), -np.inf)  # [windows, pieces]
    for w, (start, length) in enumerate(spans):
        inside = (positions >= start) & (positions < start + length)
        left, right = positions - start, start + length - 1 - positions
        scores[w, inside] = np.minimum(left, right)[inside] + 0.01 * length
    return np.argmax(scores, axis=0) if num_pieces else np.zeros(0, np.int64)


def training_dataset(features, batch_size=32, shuffle=True, seed=None, drop_remainder=False):
    """tf.data of (x, y): x = {token_ids, segment_ids, padding_mask} [B, T] int32,
    y = {start_positions, end_positions} [B] int32, for `BertSpanLabeler.fit`."""
    dataset = tf.data.Dataset.from_tensor_slices((features.inputs, features.labels))
    if shuffle:
        dataset = dataset.shuffle(len(features), seed=seed, reshuffle_each_iteration=True)
    return dataset.batch(batch_size, drop_remainder=drop_remainder).prefetch(tf.data.AUTOTUNE)


def inference_dataset(features, batch_size=32):
    """tf.data of x only, in feature order (so predictions line up with `features`)."""
    dataset = tf.data.Dataset.from_tensor_slices(features.inputs)
    return dataset.batch(batch_size).prefetch(tf.data.AUTOTUNE)
