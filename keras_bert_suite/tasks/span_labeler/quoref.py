"""The Quoref questions of BIG-bench's natural-instructions task, as SQuAD v1.1 JSON.

Source: `benchmark_tasks/natural_instructions/subtask002_quoref_answer_generation/task.json`
from the PyPI sdist `bigbench==1.0.0` (`keras_bert_suite.data.corpora.fetch_quoref()` caches
it). 6,500 questions; each example is
`{"input": "Passage: <passage> \\nQuestion: <question>", "target": ["<answer>.", ...]}`.
The task appends a "." to every answer; we drop it and look the answer up in the passage.
Quoref has no character offsets here, so `answer_start` is the first occurrence of the
answer that starts and ends on word boundaries (or the first occurrence at all).

Questions whose target lists several answers are Quoref's multi-span questions (e.g. "the
first names of the two people who ..."): one extractive span cannot answer them, so they are
skipped by default (`multi_span="skip"`); `multi_span="alternatives"` keeps them with each
span as an alternative gold answer (as Hugging Face's `quoref` dataset lists them), which
makes the metric easier than the task.

Licence note from BIG-bench: this data must never be used as pre-training data (its canary
GUID marks it); use it for fine-tuning and evaluation demos only.

Example:
>>> from keras_bert_suite.data import corpora
>>> squad, report = quoref_to_squad(corpora.fetch_quoref(), limit=300)
>>> report
{'questions': 300, 'converted': 270, 'skipped_multi_span': 30, 'skipped_not_in_passage': 0}
>>> train, dev = split_by_passage(squad, dev_fraction=0.2, seed=0)
>>> len(train["data"]), len(dev["data"])  # passages
(194, 48)
"""

import json
import random
import re

import tensorflow as tf

_PASSAGE_PREFIX = "Passage: "
_QUESTION_MARKER = "\nQuestion: "
MULTI_SPAN_CHOICES = ("skip", "alternatives")


def read_quoref_task(path):
    """The task.json's examples as a list of (passage, question, [answers]) with the task's
    trailing "." removed from each answer."""
    path = str(path)
    if not tf.io.gfile.exists(path):
        raise FileNotFoundError(
            f"Quoref task file {path} does not exist. Run `make data` (it fetches the "
            "bigbench sdist and caches this file).")
    with tf.io.gfile.GFile(path, "rb") as f:
        try:
            task = json.loads(f.read())
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: not valid JSON (line {e.lineno}: {e.msg}).") from None
    if not isinstance(task, dict) or not isinstance(task.get("examples"), list):
        raise ValueError(f"{path}: a BIG-bench task.json with an 'examples' list was expected.")
    return [_parse_example(example, i, path) for i, example in enumerate(task["examples"])]


def _parse_example(example, index, path):
    text, targets = example.get("input"), example.get("target")
    if isinstance(targets, str):
        targets = [targets]
    if (not isinstance(text, str) or not text.startswith(_PASSAGE_PREFIX)
            or _QUESTION_MARKER not in text or not isinstance(targets, list) or not targets):
        raise ValueError(f"{path}: examples[{index}] is not 'Passage: ... \\nQuestion: ...' "
                         "with a non-empty 'target' list.")
    passage, question = text[len(_PASSAGE_PREFIX):].rsplit(_QUESTION_MARKER, 1)
    answers = [t[:-1] if t.endswith(".") else t for t in targets]
    return passage.rstrip(), question.strip(), answers


def quoref_to_squad(path, multi_span="skip", strict=False, limit=None):
    """Converts the task file to SQuAD v1.1 JSON; returns (squad dict, report of counts).

    Questions about the same passage share one paragraph (ids "quoref-<example index>").
    An answer that is not in its passage is skipped and counted, or, with `strict=True`,
    raises a ValueError naming the example index. `limit` keeps the first `limit` questions.
    """
    if multi_span not in MULTI_SPAN_CHOICES:
        raise ValueError(f"multi_span must be one of {MULTI_SPAN_CHOICES}, got {multi_span!r}.")
    examples = read_quoref_task(path)[:limit]
    report = {"questions": len(examples), "converted": 0, "skipped_multi_span": 0,
              "skipped_not_in_passage": 0}
    paragraphs = {}  # passage -> its SQuAD paragraph, in first-seen order
    for index, (passage, question, answers) in enumerate(examples):
        if len(answers) > 1 and multi_span == "skip":
            report["skipped_multi_span"] += 1
            continue
        starts = [find_answer(passage, answer) for answer in answers]
        if None in starts:
            missing = answers[starts.index(None)]
            if strict:
                raise ValueError(f"{path}: examples[{index}]: the answer {missing!r} is not in "
                                 "its passage.")
            report["skipped_not_in_passage"] += 1
            continue
        paragraph = paragraphs.setdefault(passage, {"context": passage, "qas": []})
        paragraph["qas"].append({
            "id": f"quoref-{index}", "question": question,
            "answers": [{"text": a, "answer_start": s} for a, s in zip(answers, starts)]})
        report["converted"] += 1
    data = [{"title": f"quoref-passage-{i}", "paragraphs": [paragraph]}
            for i, paragraph in enumerate(paragraphs.values())]
    return {"version": "1.1", "data": data}, report


def find_answer(passage, answer):
    """Character index of `answer` in `passage`: the first whole-word occurrence, else the
    first occurrence, else None."""
    if not answer:
        return None
    whole_word = re.search(r"(?<!\w)" + re.escape(answer) + r"(?!\w)", passage)
    if whole_word:
        return whole_word.start()
    start = passage.find(answer)
    return None if start < 0 else start


def split_by_passage(squad, dev_fraction=0.2, seed=0):
    """(train, dev) SQuAD dicts with whole passages on one side, so no dev question is about a
    passage seen in training (Quoref asks several questions per passage)."""
    if not 0 < dev_fraction < 1:
        raise ValueError(f"dev_fraction must be in (0, 1), got {dev_fraction!r}.")
    articles = list(squad["data"])
    random.Random(seed).shuffle(articles)
    num_dev = max(1, round(len(articles) * dev_fraction))
    if num_dev >= len(articles):
        raise ValueError(f"{len(articles)} passages are too few to split off a dev set.")
    return ({"version": squad.get("version", "1.1"), "data": articles[num_dev:]},
            {"version": squad.get("version", "1.1"), "data": articles[:num_dev]})


def write_squad_json(squad, path):
    """Writes a SQuAD dict as a JSON file (UTF-8, readable by `read_squad_examples`)."""
    with tf.io.gfile.GFile(str(path), "w") as f:
        json.dump(squad, f, ensure_ascii=False)
    return str(path)
