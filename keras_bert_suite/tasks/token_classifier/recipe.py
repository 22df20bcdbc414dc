"""Token tagging (NER, POS) from CoNLL-style BIO files, or the WNUT-16 tweets.

Evaluation maps the predictions back to words, writes predictions.conll (word, gold tag,
predicted tag) and scores entity-level precision/recall/F1 with seqeval.
"""

import os
import random

from keras_bert_suite.tasks.token_classifier.model import BertTokenClassifier
from keras_bert_suite.recipe_runner.recipe import RecipeError
from keras_bert_suite.recipe_runner.task_data import TaskData, data_files

MODEL = BertTokenClassifier


def model_preprocessor(preprocessor):
    return preprocessor  # kept for export: raw text is split into words in the graph


def head_arguments(model_config):
    return {"dropout": model_config["dropout"]}


def _read(data):
    from keras_bert_suite.tasks.token_classifier.conll import read_conll

    if data["dataset"] == "wnut16":
        from keras_bert_suite.data import corpora

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
    from keras_bert_suite.tasks.token_classifier.conll import WordPieceAligner, learn_labels, to_dataset

    data, training = recipe["data"], recipe["training"]
    train, evaluation = _read(data)
    train = train[:data["max_train_examples"]]
    evaluation = evaluation[:data["max_eval_examples"]]
    labels = data["label_names"] or learn_labels(train + evaluation)
    aligner = WordPieceAligner(preprocessor.tokenizer, labels, data["max_seq_length"])
    windows = aligner.encode(train)
    log(f"ner: {len(train)} train sentences -> {len(windows.token_ids)} windows, "
        f"{len(evaluation)} eval sentences, {len(labels)} tags")
    dataset = to_dataset(windows, training["batch_size"], shuffle=True, seed=data["seed"])
    return TaskData(dataset, len(windows.token_ids),
                    {"num_classes": len(labels), "label_names": list(labels)},
                    (evaluation, aligner, aligner.encode(evaluation)))


def evaluate(model, task_data, recipe, output_dir):
    from keras_bert_suite.tasks.token_classifier.metric import classification_report, entity_scores

    sentences, aligner, windows = task_data.evaluation
    logits = model.predict(windows.inputs(), batch_size=recipe["evaluation"]["batch_size"],
                           verbose=0)
    predicted = aligner.decode(windows, logits)
    gold = [list(s.tags) for s in sentences]
    with open(os.path.join(output_dir, "predictions.conll"), "w", encoding="utf-8") as f:
        for sentence, tags in zip(sentences, predicted):
            for word, gold_tag, tag in zip(sentence.words, sentence.tags, tags):
                f.write(f"{word}\t{gold_tag}\t{tag}\n")
            f.write("\n")
    with open(os.path.join(output_dir, "report.txt"), "w") as f:
        f.write(classification_report(gold, predicted))
    scores = entity_scores(gold, predicted)
    return {"entity_f1": scores["f1"], "entity_precision": scores["precision"],
            "entity_recall": scores["recall"], "entities": scores["support"],
            "eval_sentences": len(sentences),
            "per_type_f1": {k: v["f1"] for k, v in scores["per_type"].items()}}
