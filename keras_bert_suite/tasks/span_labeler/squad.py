"""SQuAD v1.1 / v2.0 JSON -> examples -> windows (the task's preprocessor) -> tf.data.

```
file ──read_squad_examples──▶ SquadExample ──SpanLabelerPreprocessor──▶ windows ──▶ tf.data
 (data[].paragraphs[].qas[])  (question, context,   [CLS] question [SEP] window [SEP] + labels
                               answer char span)
```

The windows are made by the same `SpanLabelerPreprocessor` (preprocessor.py) that
`predict` and the exported model use; `training_dataset` only materialises them once so an
epoch has a known number of steps and shuffles windows, not questions.

Example (20 real Quoref questions written as a SQuAD v1.1 file):
>>> from keras_bert_suite.data import corpora
>>> from keras_bert_suite.tasks.span_labeler.quoref import quoref_to_squad
>>> with open("train-v1.1.json", "w") as f:
...     json.dump(quoref_to_squad(corpora.fetch_quoref(), limit=20)[0], f)
>>> from keras_bert_suite.tasks.span_labeler.preprocessor import SpanLabelerPreprocessor
>>> preprocessor = SpanLabelerPreprocessor.from_preset("minilm_l6_h384_uncased")
>>> examples = read_squad_examples("train-v1.1.json")
>>> len(examples), examples[0].question[:40]
(20, 'What is the first name of the person who')
>>> dataset, num_windows = training_dataset(preprocessor, examples, batch_size=32)
>>> num_windows  # 384-token windows, a new one every 128 context pieces
40
"""

import dataclasses
import json

import numpy as np
import tensorflow as tf

from keras_bert_suite.text.length_buckets import bucketed_batches, rows_dataset
from keras_bert_suite.text.task_inputs import rows_in_chunks



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


def training_windows(preprocessor, examples):
    """examples -> ({token_ids, segment_ids, padding_mask}, {start_positions, end_positions})
    numpy arrays over all their windows. Every answerable example needs an answer (its
    first one is the label) whose text covers at least one piece."""
    def windows_of(chunk):
        for example in chunk:
            if not example.is_impossible and not example.answers:
                raise ValueError(f"Question {example.qas_id!r} has no answer; training needs "
                                 "one (or is_impossible: true for SQuAD 2.0).")
        windows = preprocessor.windows(
            [e.question for e in chunk], [e.context for e in chunk],
            [-1 if e.is_impossible else e.answer_start for e in chunk],
            ["" if e.is_impossible else e.answer_text for e in chunk])
        for example, found in zip(chunk, windows.answer_found.numpy()):
            if not found:
                raise ValueError(f"Question {example.qas_id!r}: the answer "
                                 f"{example.answer_text!r} has no tokens (only characters the "
                                 "tokenizer drops).")
        return ({k: np.asarray(v) for k, v in windows.inputs.items()},
                {k: np.asarray(v) for k, v in windows.labels.items()})

    return rows_in_chunks(windows_of, examples)


def training_dataset(preprocessor, examples, batch_size=32, shuffle=True, seed=None,
                     drop_remainder=False, boundaries=None, group_batches=0):
    """(tf.data of (window inputs [B, T], {start_positions, end_positions} [B]), number of
    windows), for `BertSpanLabeler.fit`; batched in length buckets with `boundaries`
    (text/length_buckets.py)."""
    inputs, labels = training_windows(preprocessor, examples)
    dataset = bucketed_batches(rows_dataset((inputs, labels)), batch_size, boundaries,
                               shuffle=shuffle, seed=seed, group_batches=group_batches,
                               drop_remainder=drop_remainder)
    return dataset, len(labels["start_positions"])
