"""Extractive QA in SQuAD format: SQuAD v1.1/v2.0 files, or the Quoref questions.

Evaluation answers every question through `BertSpanLabeler.predict` on the raw text (the
path the exported model serves), writes predictions.json ({question id: answer}, the
official format) and scores exact match / F1 as the official SQuAD script does.
"""

import os

from keras_bert_suite.tasks.span_labeler.model import BertSpanLabeler
from keras_bert_suite.tasks.recipe_contract import RecipeError
from keras_bert_suite.tasks.recipe_contract import TaskData, data_files, training_batching
from keras_bert_suite.tasks.span_labeler.preprocessor import SpanLabelerPreprocessor
from keras_bert_suite.tasks.span_labeler.squad import examples_from_squad_json, read_squad_examples
from keras_bert_suite.data import corpora
from keras_bert_suite.tasks.span_labeler.quoref import quoref_to_squad, split_by_passage
from keras_bert_suite.tasks.span_labeler.squad import training_dataset
from keras_bert_suite.tasks.span_labeler.metric import score_answers, write_predictions_json

MODEL = BertSpanLabeler
QUOREF_DEV_FRACTION = 0.2  # of the passages (whole passages: no dev passage seen in training)


def model_preprocessor(recipe, tokenizer):
    """The windows every path uses: training, evaluation, predict and export."""
    data = recipe["data"]
    return SpanLabelerPreprocessor(tokenizer, data["sequence_length"], data["doc_stride"],
                                   data["max_question_length"])


def head_arguments(model_config):
    return {}


def _read(data, log):
    if data["dataset"] == "quoref":
        squad, report = quoref_to_squad(corpora.fetch_quoref())
        log(f"quoref: {report}")
        train, dev = split_by_passage(squad, QUOREF_DEV_FRACTION, seed=data["seed"])
        return examples_from_squad_json(train, "quoref"), examples_from_squad_json(dev, "quoref")
    train_file, eval_file = data_files(data, "squad", ["quoref"], "SQuAD v1.1/v2.0 JSON")
    return read_squad_examples(train_file), read_squad_examples(eval_file)


def prepare(recipe, preprocessor, log):
    data, training = recipe["data"], recipe["training"]
    train, evaluation = _read(data, log)
    train = train[:data["max_train_examples"]]
    evaluation = evaluation[:data["max_eval_examples"]]
    if not data["version_2_with_negative"] and any(e.is_impossible for e in train):
        raise RecipeError("The training file has unanswerable (SQuAD 2.0) questions; set "
                          "data.version_2_with_negative=true.")
    dataset, num_windows = training_dataset(preprocessor, train, training["batch_size"],
                                            shuffle=True, seed=data["seed"],
                                            **training_batching(recipe))
    log(f"span_labeler: {len(train)} questions -> {num_windows} training windows; "
        f"{len(evaluation)} eval questions")
    return TaskData(dataset, num_windows, {}, evaluation)


def gold_dataset(examples):
    """SQuAD JSON holding exactly `examples` (what the metric scores against)."""
    return {"data": [{"paragraphs": [{"context": e.context, "qas": [{
        "id": e.qas_id, "question": e.question, "answers": list(e.answers),
        "is_impossible": e.is_impossible}]}]} for e in examples]}


def answer_options(recipe):
    """The postprocessor's options, the same for evaluation and export."""
    settings = recipe["evaluation"]
    return {"max_answer_length": settings["max_answer_length"],
            "n_best_size": settings["n_best_size"],
            "version_2_with_negative": recipe["data"]["version_2_with_negative"],
            "null_score_diff_threshold": settings["null_score_diff_threshold"]}


def evaluate(model, task_data, recipe, output_dir):
    """EM / F1 of the answers `model.predict` gives on raw (question, context) pairs: the
    text path the exported `serving_default` runs."""
    examples = task_data.evaluation
    predictions = model.predict(([e.question for e in examples], [e.context for e in examples]),
                                batch_size=recipe["evaluation"]["batch_size"], verbose=0,
                                **answer_options(recipe))
    ids = [e.qas_id for e in examples]
    answers = dict(zip(ids, predictions["answer"]))
    write_predictions_json(answers, os.path.join(output_dir, "predictions.json"))
    version_2 = recipe["data"]["version_2_with_negative"]
    null_score_diff = dict(zip(ids, predictions["null_score_diff"].tolist())) if version_2 else None
    return score_answers(gold_dataset(examples), answers, version_2, null_score_diff)
