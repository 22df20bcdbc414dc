"""Real SQuAD-format data for the span labeler tests: Quoref questions (BIG-bench; fine-tuning
and evaluation only, never pre-training), our `SpanLabelerPreprocessor` windows and Model
Garden's squad_lib features for the same questions."""

import collections
import copy
import functools
import os
import tempfile

import numpy as np
import pytest

from keras_bert_suite.data import corpora
from keras_bert_suite.tasks.span_labeler import quoref
from keras_bert_suite.tasks.span_labeler import squad
from keras_bert_suite.tasks.span_labeler.preprocessor import SpanLabelerPreprocessor

NUM_QUESTIONS = 80  # Model Garden's Python tokenizer makes more slow
MAX_QUERY_LENGTH = 64  # Model Garden's (and run_squad's) default, used for both sides


def quoref_task_path():
    try:
        return corpora.fetch_quoref()
    except OSError as error:  # no cached copy and no network
        pytest.skip(f"Quoref data is not fetched (run `make data`): {error}")


def quoref_squad(limit=NUM_QUESTIONS):
    squad_json, _ = quoref.quoref_to_squad(quoref_task_path(), limit=limit)
    return squad_json


def with_unanswerable(squad_json):
    """SQuAD 2.0 version: every third passage lends its first question, unanswerable, to the
    next passage (real questions about another real text)."""
    result = copy.deepcopy(squad_json)
    articles = result["data"]
    for article in articles:
        for qa in article["paragraphs"][0]["qas"]:
            qa["is_impossible"] = False
    for i in range(0, len(articles) - 1, 3):
        question = articles[i]["paragraphs"][0]["qas"][0]
        articles[i + 1]["paragraphs"][0]["qas"].append({
            "id": question["id"] + "-unanswerable", "question": question["question"],
            "answers": [], "is_impossible": True})
    result["version"] = "v2.0"
    return result


def vocab_path(minilm_dir):
    return os.path.join(minilm_dir, "vocab.txt")


def model_garden_features(path, vocab, max_seq_length, doc_stride, max_query_length=64,
                          is_training=True, version_2=False):
    """(examples, features) made by official.nlp.data.squad_lib with its FullTokenizer."""
    from official.nlp.data import squad_lib
    from official.nlp.tools import tokenization

    examples = squad_lib.read_squad_examples(path, is_training, version_2)
    tokenizer = tokenization.FullTokenizer(vocab, do_lower_case=True)
    features = []
    squad_lib.convert_examples_to_features(
        examples, tokenizer, max_seq_length, doc_stride, max_query_length, is_training,
        lambda feature, is_padding=False: features.append(feature), batch_size=1)
    return examples, features


def model_garden_max_context(features, max_seq_length):
    mask = np.zeros((len(features), max_seq_length), bool)
    for i, feature in enumerate(features):
        for position, value in feature.token_is_max_context.items():
            mask[i, position] = value
    return mask


def noisy_logits(windows, seed=0, noise=1.0, boost=5.0):
    """[N, T] start/end logits: Gaussian noise plus `boost` at the gold positions, so the
    best span is often, not always, the gold one (padding gets BertSpanLabeler's -1e9)."""
    rng = np.random.default_rng(seed)
    token_ids = np.asarray(windows.inputs["token_ids"])
    start = rng.normal(scale=noise, size=token_ids.shape).astype(np.float32)
    end = rng.normal(scale=noise, size=token_ids.shape).astype(np.float32)
    rows = np.arange(len(token_ids))
    start[rows, np.asarray(windows.labels["start_positions"])] += boost
    end[rows, np.asarray(windows.labels["end_positions"])] += boost
    padding = np.asarray(windows.inputs["padding_mask"]) == 0
    start[padding] = end[padding] = -1e9
    return start, end


RawResult = collections.namedtuple("RawResult", ["unique_id", "start_logits", "end_logits"])


def model_garden_results(features, start, end):
    return [RawResult(f.unique_id, start[i].tolist(), end[i].tolist())
            for i, f in enumerate(features)]


@functools.lru_cache(maxsize=None)
def tokenizer():
    from keras_bert_suite.text import BertTokenizer

    return BertTokenizer.from_preset("minilm_l6_h384_uncased")


@functools.lru_cache(maxsize=None)
def quoref_dataset(version_2=False):
    """The first NUM_QUESTIONS Quoref questions as SQuAD v1.1 (or v2.0) JSON."""
    return with_unanswerable(quoref_squad()) if version_2 else quoref_squad()


@functools.lru_cache(maxsize=None)
def features_pair(version_2, max_seq_length, doc_stride):
    """((our examples, our `SpanWindows`), (Model Garden examples, features)) for
    quoref_dataset, computed once per process (shared by the window, post-processing and
    metric tests)."""
    from keras_bert_suite.presets import packaged_checkpoint_dir
    from keras_bert_suite.tasks.span_labeler.quoref import write_squad_json

    data = quoref_dataset(version_2)
    ours = featurize(tokenizer(), data, max_seq_length, doc_stride)
    with tempfile.TemporaryDirectory() as tmp:
        path = write_squad_json(data, os.path.join(tmp, "quoref.json"))
        reference = model_garden_features(
            path, vocab_path(packaged_checkpoint_dir("all-MiniLM-L6-v2")), max_seq_length,
            doc_stride, MAX_QUERY_LENGTH, version_2=version_2)
    return ours, reference


def featurize(tokenizer, squad_json, max_seq_length=384, doc_stride=128, with_answers=True):
    """(examples, `SpanWindows`): all examples windowed at once by the task's preprocessor
    (first answer as the label, -1 for unanswerable questions)."""
    examples = squad.examples_from_squad_json(squad_json)
    preprocessor = SpanLabelerPreprocessor(tokenizer, max_seq_length, doc_stride,
                                           max_question_length=MAX_QUERY_LENGTH)
    answer_start = answer_text = None
    if with_answers:
        answer_start = [-1 if e.is_impossible else e.answer_start for e in examples]
        answer_text = ["" if e.is_impossible else e.answer_text for e in examples]
    windows = preprocessor.windows([e.question for e in examples],
                                   [e.context for e in examples], answer_start, answer_text)
    return examples, windows
