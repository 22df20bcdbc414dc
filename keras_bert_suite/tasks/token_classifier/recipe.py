"""Token tagging (NER, POS) from CoNLL-style BIO files, or the WNUT-16 tweets.

Evaluation tags the gold words through `BertTokenClassifier.predict` (the text path the
exported model serves), writes predictions.conll (word, gold tag,
predicted tag) and scores entity-level precision/recall/F1 with seqeval.
"""

import os
import random

from keras_bert_suite.tasks.token_classifier.model import BertTokenClassifier
from keras_bert_suite.tasks.recipe_contract import RecipeError
from keras_bert_suite.tasks.recipe_contract import TaskData, data_files, training_batching
from keras_bert_suite import storage
from keras_bert_suite.tasks.token_classifier.preprocessor import (
    TokenClassifierPreprocessor)
from keras_bert_suite.tasks.token_classifier.conll import read_conll
from keras_bert_suite.data import corpora
from keras_bert_suite.tasks.token_classifier.conll import learn_labels, training_dataset
from keras_bert_suite.tasks.token_classifier.metric import classification_report, entity_scores

MODEL = BertTokenClassifier


def model_preprocessor(recipe, tokenizer):
    return TokenClassifierPreprocessor(tokenizer, recipe["data"]["sequence_length"])


def head_arguments(model_config):
    return {"dropout": model_config["dropout"]}


def _read(data):
    if data["dataset"] == "wnut16":
        sentences = read_conll(corpora.fetch_wnut16())
        order = list(range(len(sentences)))
        random.Random(data["seed"]).shuffle(order)
        if not 0 < data["held_out"] < len(sentences):
            raise RecipeError(f"data.held_out={data['held_out']} must be between 1 and "
                              f"{len(sentences) - 1} for WNUT-16 ({len(sentences)} sentences).")
        held_out = set(order[:data["held_out"]])
        return ([s for i, s in enumerate(sentences) if i not in held_out],
                [s for i, s in enumerate(sentences) if i in held_out])
    train_file, eval_file = data_files(data, "ner", ["wnut16"], "CoNLL-style BIO files")
    return read_conll(train_file), read_conll(eval_file)


def prepare(recipe, preprocessor, log):
    data, training = recipe["data"], recipe["training"]
    train, evaluation = _read(data)
    train = train[:data["max_train_examples"]]
    evaluation = evaluation[:data["max_eval_examples"]]
    labels = data["label_names"] or learn_labels(train + evaluation)
    dataset, num_chunks = training_dataset(preprocessor, train, labels,
                                           training["batch_size"], shuffle=True,
                                           seed=data["seed"], **training_batching(recipe))
    log(f"token_classifier: {len(train)} train sentences -> {num_chunks} rows, "
        f"{len(evaluation)} eval sentences, {len(labels)} tags")
    return TaskData(dataset, num_chunks,
                    {"num_classes": len(labels), "label_names": list(labels)}, evaluation)


def predicted_tags(model, sentences, batch_size):
    """One list of tags per sentence, from `model.predict` on the gold words: the text path
    the exported `tag_words` signature serves."""
    predictions = model.predict([list(s.words) for s in sentences], batch_size=batch_size,
                                verbose=0)
    return [list(row[:n]) for row, n in zip(predictions["tags"], predictions["num_words"])]


def evaluate(model, task_data, recipe, output_dir):
    sentences = task_data.evaluation
    predicted = predicted_tags(model, sentences, recipe["evaluation"]["batch_size"])
    gold = [list(s.tags) for s in sentences]
    with storage.open_file(os.path.join(output_dir, "predictions.conll"), "w") as f:
        for sentence, tags in zip(sentences, predicted):
            for word, gold_tag, tag in zip(sentence.words, sentence.tags, tags):
                f.write(f"{word}\t{gold_tag}\t{tag}\n")
            f.write("\n")
    with storage.open_file(os.path.join(output_dir, "report.txt"), "w") as f:
        f.write(classification_report(gold, predicted))
    scores = entity_scores(gold, predicted)
    return {"entity_f1": scores["f1"], "entity_precision": scores["precision"],
            "entity_recall": scores["recall"], "entities": scores["support"],
            "eval_sentences": len(sentences),
            "per_type_f1": {k: v["f1"] for k, v in scores["per_type"].items()}}
