"""Sentence / sentence-pair classification and regression: Rotten Tomatoes, GLUE, your files.

Evaluation writes predictions.jsonl (one row per evaluation example: text, gold label,
predicted label, probabilities or score) and scores accuracy (+ macro F1), or GLUE's metric
for a GLUE task, or Pearson/Spearman for regression.
"""

import json
import os

import numpy as np

from keras_bert_suite.tasks.classifier.model import BertClassifier
from keras_bert_suite.tasks.recipe_contract import RecipeError, TaskData, training_batching
from keras_bert_suite import storage
from keras_bert_suite.text import BertPreprocessor
from keras_bert_suite.tasks.classifier.data import read_classification_file
from keras_bert_suite.tasks.classifier.glue import read_glue
from keras_bert_suite.tasks.classifier.data import ClassificationExamples
from keras_bert_suite.tasks.classifier.rotten_tomatoes import (
    LABEL_NAMES,
    load_rotten_tomatoes,
    split_held_out,
)
from keras_bert_suite.tasks.classifier.data import make_classification_dataset
from keras_bert_suite.tasks.classifier import metric

MODEL = BertClassifier


def model_preprocessor(recipe, tokenizer):
    return BertPreprocessor(tokenizer, sequence_length=recipe["data"]["sequence_length"])


def head_arguments(model_config):
    return {"dropout": model_config["dropout"]}


def _read_files(data):
    if data["train_file"] is None or data["eval_file"] is None:
        raise RecipeError("A classification recipe needs data.dataset (rotten_tomatoes, glue) "
                          "or both data.train_file and data.eval_file.")
    columns = {"text_column": data["text_column"], "text_pair_column": data["text_pair_column"],
               "label_column": data["label_column"], "regression": data["regression"],
               "format": data["format"]}
    train = read_classification_file(data["train_file"], label_names=data["label_names"],
                                     **columns)
    evaluation = read_classification_file(data["eval_file"], label_names=train.label_names,
                                          **columns)
    return train, evaluation


def _read_glue(data):
    if data["glue_task"] is None or data["data_dir"] is None:
        raise RecipeError("data.dataset=glue needs data.glue_task (e.g. mrpc) and data.data_dir "
                          "(the folder of the task's GLUE TSV files).")
    split = "validation_matched" if data["glue_task"] == "mnli" else "validation"
    return read_glue(data["glue_task"], data["data_dir"], "train"), \
        read_glue(data["glue_task"], data["data_dir"], split)


def _read_rotten_tomatoes(data):
    texts, labels = load_rotten_tomatoes()
    (train_texts, train_labels), (test_texts, test_labels) = split_held_out(
        texts, labels, held_out=data["held_out"], seed=data["seed"])

    def examples(texts, labels):
        return ClassificationExamples(texts, None, labels, list(LABEL_NAMES),
                                      np.arange(len(texts)), "rotten_tomatoes")

    return examples(train_texts, train_labels), examples(test_texts, test_labels)


READERS = {None: _read_files, "glue": _read_glue, "rotten_tomatoes": _read_rotten_tomatoes}


def _head(examples, limit):
    if limit is None or limit >= len(examples):
        return examples
    pairs = examples.text_pairs[:limit] if examples.text_pairs is not None else None
    return type(examples)(examples.texts[:limit], pairs, examples.labels[:limit],
                          examples.label_names, examples.line_numbers[:limit], examples.path)


def read_examples(data):
    """(train, evaluation) ClassificationExamples of a recipe's `data` section, limits applied
    (the demo's TF-IDF baseline reads the same split through this)."""
    if data["dataset"] not in READERS:
        raise RecipeError(f"data.dataset={data['dataset']!r} is not a classification data set; "
                          f"use one of {[k for k in READERS if k]} or null with files.")
    train, evaluation = READERS[data["dataset"]](data)
    return (_head(train, data["max_train_examples"]),
            _head(evaluation, data["max_eval_examples"]))


def prepare(recipe, preprocessor, log):
    data, training = recipe["data"], recipe["training"]
    train, evaluation = read_examples(data)
    log(f"classification: {len(train)} train / {len(evaluation)} eval examples")
    regression = train.label_names is None
    dataset = make_classification_dataset(
        train, training["batch_size"], shuffle=True, seed=data["seed"], preprocessor=preprocessor,
        drop_remainder=False, **training_batching(recipe))
    arguments = {"num_classes": 1} if regression else {
        "num_classes": len(train.label_names), "label_names": list(train.label_names)}
    return TaskData(dataset, len(train), arguments, evaluation)


def scores(examples, outputs, glue_task=None):
    """The task's metrics for model outputs (logits [N, C] or scores [N, 1])."""
    if glue_task is not None:
        return metric.glue_metrics(glue_task, outputs, examples.labels)
    if examples.label_names is None:
        return {"pearson": metric.pearson(outputs[:, 0], examples.labels),
                "spearman": metric.spearman(outputs[:, 0], examples.labels)}
    predicted = outputs.argmax(-1)
    return {"accuracy": metric.accuracy(predicted, examples.labels),
            "macro_f1": metric.f1_score(predicted, examples.labels, average="macro")}


def evaluate(model, task_data, recipe, output_dir):
    examples = task_data.evaluation
    # Raw text: predict() sorts the rows by length and cuts each batch to its bucket.
    texts = list(examples.texts) if examples.text_pairs is None else (
        list(examples.texts), list(examples.text_pairs))
    outputs = np.asarray(model.predict(texts, batch_size=recipe["evaluation"]["batch_size"],
                                       verbose=0), np.float64)
    glue_task = recipe["data"]["glue_task"] if recipe["data"]["dataset"] == "glue" else None
    metrics = {k: float(v) for k, v in scores(examples, outputs, glue_task).items()}
    metrics["eval_examples"] = len(examples)
    _write_predictions(os.path.join(output_dir, "predictions.jsonl"), examples, outputs)
    return metrics


def _write_predictions(path, examples, outputs):
    names = examples.label_names
    with storage.open_file(path, "w") as f:  # any path tf.io.gfile reaches
        for i, text in enumerate(examples.texts):
            row = {"text": text}
            if examples.text_pairs is not None:
                row["text_pair"] = examples.text_pairs[i]
            if names is None:
                row.update(label=float(examples.labels[i]), score=float(outputs[i, 0]))
            else:
                probabilities = np.exp(outputs[i] - outputs[i].max())
                probabilities /= probabilities.sum()
                row.update(label=names[examples.labels[i]], predicted=names[outputs[i].argmax()],
                           probabilities=dict(zip(names, map(float, probabilities.round(6)))))
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
