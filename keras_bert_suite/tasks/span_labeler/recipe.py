"""Extractive QA in SQuAD format: SQuAD v1.1/v2.0 files, or the Quoref questions.

Evaluation writes predictions.json ({question id: answer}, the official format) and
nbest_predictions.json, and scores exact match / F1 as the official SQuAD script does.
"""

import os

import numpy as np

from keras_bert_suite.tasks.span_labeler.model import BertSpanLabeler
from keras_bert_suite.recipe_runner.recipe import RecipeError
from keras_bert_suite.recipe_runner.task_data import TaskData, data_files

MODEL = BertSpanLabeler
QUOREF_DEV_FRACTION = 0.2  # of the passages (whole passages: no dev passage seen in training)


def model_preprocessor(preprocessor):
    return None  # question + context windows are built by SquadFeaturizer, not a packer


def head_arguments(model_config):
    return {}


def _read(data, log):
    from keras_bert_suite.tasks.span_labeler.squad import examples_from_squad_json, read_squad_examples

    if data["dataset"] == "quoref":
        from keras_bert_suite.data import corpora
        from keras_bert_suite.tasks.span_labeler.quoref import quoref_to_squad, split_by_passage

        squad, report = quoref_to_squad(corpora.fetch_quoref())
        log(f"quoref: {report}")
        train, dev = split_by_passage(squad, QUOREF_DEV_FRACTION, seed=data["seed"])
        return examples_from_squad_json(train, "quoref"), examples_from_squad_json(dev, "quoref")
    train_file, eval_file = data_files(data, "squad", ["quoref"], "SQuAD v1.1/v2.0 JSON")
    return read_squad_examples(train_file), read_squad_examples(eval_file)


def prepare(recipe, preprocessor, log):
    from keras_bert_suite.tasks.span_labeler.squad import SquadFeaturizer, training_dataset

    data, training = recipe["data"], recipe["training"]
    train, evaluation = _read(data, log)
    train = train[:data["max_train_examples"]]
    evaluation = evaluation[:data["max_eval_examples"]]
    if not data["version_2_with_negative"] and any(e.is_impossible for e in train):
        raise RecipeError("The training file has unanswerable (SQuAD 2.0) questions; set "
                          "data.version_2_with_negative=true.")
    featurizer = SquadFeaturizer(preprocessor.tokenizer, max_seq_length=data["max_seq_length"],
                                 doc_stride=data["doc_stride"],
                                 max_query_length=data["max_query_length"])
    train_features = featurizer.featurize(train, is_training=True)
    eval_features = featurizer.featurize(evaluation, is_training=False)
    log(f"squad: {len(train)} questions -> {len(train_features)} training windows; "
        f"{len(evaluation)} eval questions -> {len(eval_features)} windows")
    dataset = training_dataset(train_features, training["batch_size"], shuffle=True,
                               seed=data["seed"])
    return TaskData(dataset, len(train_features), {}, (evaluation, eval_features))


def gold_dataset(examples):
    """SQuAD JSON holding exactly `examples` (what the metric scores against)."""
    return {"data": [{"paragraphs": [{"context": e.context, "qas": [{
        "id": e.qas_id, "question": e.question, "answers": list(e.answers),
        "is_impossible": e.is_impossible}]}]} for e in examples]}


def evaluate(model, task_data, recipe, output_dir):
    from keras_bert_suite.tasks.span_labeler.squad import inference_dataset
    from keras_bert_suite.tasks.span_labeler.squad_postprocess import (
        postprocess_predictions,
        write_nbest_json,
        write_predictions_json,
    )
    from keras_bert_suite.tasks.span_labeler.metric import squad_v1_metrics, squad_v2_metrics

    examples, features = task_data.evaluation
    settings, version_2 = recipe["evaluation"], recipe["data"]["version_2_with_negative"]
    logits = model.predict(inference_dataset(features, settings["batch_size"]), verbose=0)
    predictions = postprocess_predictions(
        examples, features, np.asarray(logits["start_logits"]), np.asarray(logits["end_logits"]),
        n_best_size=settings["n_best_size"], max_answer_length=settings["max_answer_length"],
        version_2_with_negative=version_2,
        null_score_diff_threshold=settings["null_score_diff_threshold"])
    write_predictions_json(predictions.answers, os.path.join(output_dir, "predictions.json"))
    write_nbest_json(predictions.nbest, os.path.join(output_dir, "nbest_predictions.json"))
    gold = gold_dataset(examples)
    metrics = (squad_v2_metrics(gold, predictions.answers) if version_2
               else squad_v1_metrics(gold, predictions.answers))
    return {k: float(v) if isinstance(v, (float, np.floating)) else v
            for k, v in metrics.items()}
