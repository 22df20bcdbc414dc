"""The metric a user is served is the metric the library reports: for extractive QA (SQuAD EM /
F1 on real Quoref questions), NER (seqeval entity F1 on real WNUT-16 tweets) and multiple
choice (accuracy on real State of the Union sentences), the answers of the exported
SavedModel, asked from a TensorFlow-only process, are the library evaluation's answers, and
the metrics computed from them are equal, exactly.

Each model is fine-tuned for a few steps first, so the metric is not a trivial 0.
"""

import json
import os

import numpy as np
import pytest

from keras_bert_suite import BertMultipleChoice, BertSpanLabeler, BertTokenClassifier
from keras_bert_suite.data import corpora
from keras_bert_suite.export import export_saved_model
from keras_bert_suite.recipe_runner import load_recipe
from keras_bert_suite.recipe_runner.task_data import TaskData
from keras_bert_suite.tasks.classifier.metrics import accuracy
from keras_bert_suite.tasks.span_labeler import recipe as span_recipe
from keras_bert_suite.tasks.span_labeler.metric import score_answers
from keras_bert_suite.tasks.span_labeler.quoref import quoref_to_squad, split_by_passage
from keras_bert_suite.tasks.span_labeler.squad import examples_from_squad_json, training_dataset
from keras_bert_suite.tasks.token_classifier import conll
from keras_bert_suite.tasks.token_classifier import recipe as ner_recipe
from keras_bert_suite.tasks.token_classifier.metric import entity_scores
from tests.export.conftest import run_on_serving_host

pytestmark = [
    pytest.mark.needs_savedmodel(reason="SavedModel export runs under TensorFlow"),
    pytest.mark.real, pytest.mark.slow]

PRESET = "minilm_l6_h384_uncased"  # real weights: the answers are not all alike


def _served(path, signature, inputs, tmp_path):
    (result,), leaked = run_on_serving_host(
        [{"export": path, "signature": signature, "inputs": inputs}], str(tmp_path))
    assert leaked == [] and "error" not in result, result.get("error")
    return result


def test_squad_metric_through_the_saved_model_equals_evaluation(tmp_path):
    squad, _ = quoref_to_squad(corpora.fetch_quoref(), limit=400)
    train, dev = split_by_passage(squad, 0.2, seed=0)
    train = examples_from_squad_json(train)[:32]
    dev = examples_from_squad_json(dev)[:24]
    recipe = load_recipe("squad_quoref_cpu", overrides=["data.sequence_length=128"])
    model = BertSpanLabeler.from_preset(PRESET, sequence_length=128)
    dataset, _ = training_dataset(model.preprocessor, train, batch_size=16, seed=0)
    model.fit(dataset, epochs=1, verbose=0)

    metrics = span_recipe.evaluate(model, TaskData(None, 0, {}, dev), recipe, str(tmp_path))
    path = export_saved_model(model, str(tmp_path / "saved_models"), name="qa",
                              **span_recipe.answer_options(recipe))
    served = _served(path, "serving_default", {
        "question": np.array([e.question.encode() for e in dev], object),
        "context": np.array([e.context.encode() for e in dev], object)}, tmp_path)
    answers = {e.qas_id: a.decode() for e, a in zip(dev, served["answer"])}
    with open(os.path.join(tmp_path, "predictions.json"), encoding="utf-8") as f:
        assert json.load(f) == answers  # the evaluation's own predictions file
    served_metrics = score_answers(span_recipe.gold_dataset(dev), answers)
    assert served_metrics == metrics
    assert metrics["total"] == 24 and metrics["f1"] > 0


def test_ner_metric_through_the_saved_model_equals_evaluation(tmp_path):
    sentences = conll.read_conll(corpora.fetch_wnut16())
    train, evaluation = sentences[:160], sentences[-80:]
    labels = conll.learn_labels(sentences)
    recipe = load_recipe("ner_wnut16_cpu")
    model = BertTokenClassifier.from_preset(PRESET, num_classes=len(labels),
                                            label_names=labels, sequence_length=64)
    dataset, _ = conll.training_dataset(model.preprocessor, train, labels, batch_size=32,
                                        seed=0)
    model.fit(dataset, epochs=1, verbose=0)

    metrics = ner_recipe.evaluate(model, TaskData(None, 0, {}, evaluation), recipe,
                                  str(tmp_path))
    path = export_saved_model(model, str(tmp_path / "saved_models"), name="ner")
    width = max(len(s.words) for s in evaluation)
    words = np.array([[w.encode() for w in s.words] + [b""] * (width - len(s.words))
                      for s in evaluation], object)
    served = _served(path, "tag_words", {"words": words}, tmp_path)
    assert served["num_words"].tolist() == [len(s.words) for s in evaluation]
    served_tags = [[t.decode() for t in row[:n]]
                   for row, n in zip(served["tags"], served["num_words"])]
    assert served_tags == ner_recipe.predicted_tags(model, evaluation, batch_size=64)
    scores = entity_scores([list(s.tags) for s in evaluation], served_tags)
    assert scores["f1"] == metrics["entity_f1"]
    assert (scores["precision"], scores["recall"]) == (metrics["entity_precision"],
                                                       metrics["entity_recall"])
    assert metrics["entities"] > 20


def test_multiple_choice_accuracy_through_the_saved_model_equals_evaluation(tmp_path, sotu_files):
    """SWAG-style items from real text: which of four sentences follows this one."""
    from keras_bert_suite.tasks.multiple_choice import recipe as choice_recipe
    from keras_bert_suite.tasks.multiple_choice.swag import MultipleChoiceExamples

    with open(sotu_files[-1], encoding="utf-8") as f:
        sentences = [s.strip() + "." for s in f.read().split(".") if 30 < len(s.strip()) < 160]
    rng = np.random.default_rng(0)
    contexts, choices, labels = [], [], []
    for i in range(60):
        others = [sentences[j] for j in rng.choice(len(sentences), 3, replace=False)]
        right = int(rng.integers(4))
        options = others[:right] + [sentences[i + 1]] + others[right:]
        contexts.append(sentences[i])
        choices.append(options)
        labels.append(right)
    examples = MultipleChoiceExamples(contexts, choices, np.array(labels, np.int32),
                                      [str(i) for i in range(60)], np.arange(60), "sotu")
    recipe = load_recipe("swag_gpu", overrides=["data.sequence_length=64"])
    model = BertMultipleChoice.from_preset(PRESET, num_choices=4, sequence_length=64)
    model.fit((contexts[:40], choices[:40]), labels[:40], batch_size=8, epochs=1, verbose=0)
    held_out = MultipleChoiceExamples(contexts[40:], choices[40:], examples.labels[40:],
                                      examples.ids[40:], examples.line_numbers[40:], "sotu")

    metrics = choice_recipe.evaluate(model, TaskData(None, 0, {}, held_out), recipe,
                                     str(tmp_path))
    path = export_saved_model(model, str(tmp_path / "saved_models"), name="choice")
    served = _served(path, "serving_default", {
        "question": np.array([c.encode() for c in held_out.contexts], object),
        "choices": np.array([[o.encode() for o in row] for row in held_out.choices], object)},
        tmp_path)
    with open(os.path.join(tmp_path, "predictions.jsonl"), encoding="utf-8") as f:
        evaluated = [json.loads(line)["predicted"] for line in f]
    assert served["predicted_choice"].tolist() == evaluated
    assert accuracy(served["predicted_choice"], held_out.labels) == metrics["accuracy"]
