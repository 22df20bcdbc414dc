"""Multiple choice in the SWAG format: one score per (context, ending), softmax over endings.

Evaluation writes predictions.jsonl (example id, gold and predicted choice, choice
probabilities) and scores accuracy.
"""

import json
import os

import numpy as np

from keras_bert_suite.tasks.multiple_choice.model import BertMultipleChoice
from keras_bert_suite.tasks.recipe_contract import TaskData, data_files, training_batching
from keras_bert_suite import storage
from keras_bert_suite.tasks.multiple_choice.preprocessor import MultipleChoicePreprocessor
from keras_bert_suite.tasks.multiple_choice.swag import make_multiple_choice_dataset, read_swag
from keras_bert_suite.tasks.classifier.metric import accuracy

MODEL = BertMultipleChoice


def model_preprocessor(recipe, tokenizer):
    return MultipleChoicePreprocessor(tokenizer, recipe["data"]["sequence_length"])


def head_arguments(model_config):
    return {"dropout": model_config["dropout"]}


def _head(examples, limit):
    if limit is None or limit >= len(examples):
        return examples
    return type(examples)(examples.contexts[:limit], examples.choices[:limit],
                          examples.labels[:limit], examples.ids[:limit],
                          examples.line_numbers[:limit], examples.path)


def prepare(recipe, preprocessor, log):
    data, training = recipe["data"], recipe["training"]
    train_file, eval_file = data_files(data, "multiple_choice", [], "SWAG-format CSV files")
    train = _head(read_swag(train_file, require_labels=True), data["max_train_examples"])
    evaluation = _head(read_swag(eval_file, require_labels=True), data["max_eval_examples"])
    log(f"multiple choice: {len(train)} train / {len(evaluation)} eval examples")
    dataset = make_multiple_choice_dataset(train, preprocessor, training["batch_size"],
                                           shuffle=True, seed=data["seed"],
                                           **training_batching(recipe))
    num_choices = len(train.choices[0])
    return TaskData(dataset, len(train), {"num_choices": num_choices}, evaluation)


def evaluate(model, task_data, recipe, output_dir):
    examples = task_data.evaluation
    # raw text through the model's preprocessor: what the exported model serves
    logits = np.asarray(model.predict((examples.contexts, examples.choices),
                                      batch_size=recipe["evaluation"]["batch_size"], verbose=0),
                        np.float64)
    probabilities = np.exp(logits - logits.max(-1, keepdims=True))
    probabilities /= probabilities.sum(-1, keepdims=True)
    with storage.open_file(os.path.join(output_dir, "predictions.jsonl"), "w") as f:
        for i, example_id in enumerate(examples.ids):
            f.write(json.dumps({"id": example_id, "label": int(examples.labels[i]),
                                "predicted": int(logits[i].argmax()),
                                "probabilities": probabilities[i].round(6).tolist()}) + "\n")
    return {"accuracy": float(accuracy(logits.argmax(-1), examples.labels)),
            "eval_examples": len(examples)}
