"""The metric a user is served is the metric the library reports: for extractive QA (SQuAD EM /
F1 on real Quoref questions), NER (seqeval entity F1 on real WNUT-16 tweets) and multiple
choice (accuracy on real State of the Union sentences), the answers of the exported
SavedModel, asked from a TensorFlow-only process, are the library evaluation's answers, and
the metrics computed from them are equal, exactly.

That is a property of the code (evaluation and export share the text path), not of the
weights: each task runs on the small random BERT (no fine-tuning: random weights already give
answers that differ from item to item, which the tests check, and a non-zero SQuAD F1). One
serving-host process answers all three tasks.
"""

import json
import os

import numpy as np
import pytest

from keras_bert_suite import BertMultipleChoice, BertSpanLabeler, BertTokenClassifier
from keras_bert_suite.data import corpora
from keras_bert_suite.export import export_saved_model
from keras_bert_suite.recipe_runner import load_recipe
from keras_bert_suite.tasks.recipe_contract import TaskData
from keras_bert_suite.tasks.classifier.metric import accuracy
from keras_bert_suite.tasks.span_labeler import recipe as span_recipe
from keras_bert_suite.tasks.span_labeler.metric import score_answers
from keras_bert_suite.tasks.span_labeler.quoref import quoref_to_squad, split_by_passage
from keras_bert_suite.tasks.span_labeler.squad import examples_from_squad_json
from keras_bert_suite.tasks.token_classifier import conll
from keras_bert_suite.tasks.token_classifier import recipe as ner_recipe
from keras_bert_suite.tasks.token_classifier.metric import entity_scores
from tests.export.conftest import PRESET, run_on_serving_host

pytestmark = [
    pytest.mark.needs_savedmodel(reason="SavedModel export runs under TensorFlow"),
    pytest.mark.real, pytest.mark.slow]


def _squad(work):
    squad, _ = quoref_to_squad(corpora.fetch_quoref(), limit=400)
    _, dev = split_by_passage(squad, 0.2, seed=0)
    dev = examples_from_squad_json(dev)[:24]
    recipe = load_recipe("squad_quoref_cpu", overrides=["data.sequence_length=128"])
    model = BertSpanLabeler.from_preset(PRESET, load_weights=False, sequence_length=128)
    metrics = span_recipe.evaluate(model, TaskData(None, 0, {}, dev), recipe, work)
    path = export_saved_model(model, os.path.join(work, "saved_models"), name="qa",
                              **span_recipe.answer_options(recipe))
    inputs = {"question": np.array([e.question.encode() for e in dev], object),
              "context": np.array([e.context.encode() for e in dev], object)}
    return {"path": path, "signature": "serving_default", "inputs": inputs, "dev": dev,
            "metrics": metrics}


def _ner(work):
    sentences = conll.read_conll(corpora.fetch_wnut16())
    evaluation = sentences[-80:]
    labels = conll.learn_labels(sentences)
    recipe = load_recipe("ner_wnut16_cpu")
    model = BertTokenClassifier.from_preset(PRESET, load_weights=False, num_classes=len(labels),
                                            label_names=labels, sequence_length=64)
    metrics = ner_recipe.evaluate(model, TaskData(None, 0, {}, evaluation), recipe, work)
    path = export_saved_model(model, os.path.join(work, "saved_models"), name="ner")
    width = max(len(s.words) for s in evaluation)
    words = np.array([[w.encode() for w in s.words] + [b""] * (width - len(s.words))
                      for s in evaluation], object)
    return {"path": path, "signature": "tag_words", "inputs": {"words": words},
            "evaluation": evaluation, "metrics": metrics, "model": model}


def _multiple_choice(work, sotu_files):
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
    model = BertMultipleChoice.from_preset(PRESET, load_weights=False, num_choices=4,
                                           sequence_length=64)
    held_out = MultipleChoiceExamples(contexts[40:], choices[40:], examples.labels[40:],
                                      examples.ids[40:], examples.line_numbers[40:], "sotu")
    metrics = choice_recipe.evaluate(model, TaskData(None, 0, {}, held_out), recipe, work)
    path = export_saved_model(model, os.path.join(work, "saved_models"), name="choice")
    inputs = {"question": np.array([c.encode() for c in held_out.contexts], object),
              "choices": np.array([[o.encode() for o in row] for row in held_out.choices],
                                  object)}
    return {"path": path, "signature": "serving_default", "inputs": inputs,
            "held_out": held_out, "metrics": metrics}


@pytest.fixture(scope="module")
def served(tmp_path_factory, sotu_files):
    """{task: its evaluation (work dir, metrics) and the serving host's answer}: each task
    evaluated and exported, then one TF-only process answers all three."""
    cases = {"squad": _squad, "ner": _ner,
             "multiple_choice": lambda work: _multiple_choice(work, sotu_files)}
    cases = {name: dict(build(str(work)), work=str(work)) for name, build in cases.items()
             for work in [tmp_path_factory.mktemp(name)]}
    results, leaked = run_on_serving_host(
        [{"export": case["path"], "signature": case["signature"], "inputs": case["inputs"]}
         for case in cases.values()], str(tmp_path_factory.mktemp("host")))
    assert leaked == []
    for case, result in zip(cases.values(), results):
        case["served"] = result
    return cases


def _answer(served, name):
    case = served[name]
    assert "error" not in case["served"], case["served"].get("error")
    return case, case["served"]


def test_squad_metric_through_the_saved_model_equals_evaluation(served):
    case, got = _answer(served, "squad")
    dev, metrics = case["dev"], case["metrics"]
    answers = {e.qas_id: a.decode() for e, a in zip(dev, got["answer"])}
    with open(os.path.join(case["work"], "predictions.json"), encoding="utf-8") as f:
        assert json.load(f) == answers  # the evaluation's own predictions file
    assert len(set(answers.values())) > len(dev) // 2  # not one answer for every question
    served_metrics = score_answers(span_recipe.gold_dataset(dev), answers)
    assert served_metrics == metrics
    assert metrics["total"] == 24 and metrics["f1"] > 0


def test_ner_metric_through_the_saved_model_equals_evaluation(served):
    case, got = _answer(served, "ner")
    evaluation, metrics = case["evaluation"], case["metrics"]
    assert got["num_words"].tolist() == [len(s.words) for s in evaluation]
    served_tags = [[t.decode() for t in row[:n]]
                   for row, n in zip(got["tags"], got["num_words"])]
    assert served_tags == ner_recipe.predicted_tags(case["model"], evaluation, batch_size=64)
    scores = entity_scores([list(s.tags) for s in evaluation], served_tags)
    assert scores["f1"] == metrics["entity_f1"]
    assert (scores["precision"], scores["recall"]) == (metrics["entity_precision"],
                                                       metrics["entity_recall"])
    assert metrics["entities"] > 20
    # Predicted entities to score, not all "O": the precision is not a trivial 0 / 0.
    assert len({tag for tags in served_tags for tag in tags}) > 2


def test_multiple_choice_accuracy_through_the_saved_model_equals_evaluation(served):
    case, got = _answer(served, "multiple_choice")
    held_out, metrics = case["held_out"], case["metrics"]
    with open(os.path.join(case["work"], "predictions.jsonl"), encoding="utf-8") as f:
        evaluated = [json.loads(line)["predicted"] for line in f]
    assert got["predicted_choice"].tolist() == evaluated
    assert len(set(evaluated)) > 1  # not one choice for every item
    assert accuracy(got["predicted_choice"], held_out.labels) == metrics["accuracy"]
