"""`kbs finetune`: recipes, overrides, bad input, and a tiny end-to-end run of every task on
real data (a small random BERT, one update: the plumbing, not the accuracy — README's
numbers come from the full CPU recipes).

Every end-to-end run checks its metrics against values computed here, independently of the
runner: gold labels / tags / answers read straight from the raw data files, accuracy
recomputed from predictions.jsonl, entity F1 by seqeval from predictions.conll, SQuAD EM/F1 by
Model Garden's `squad_evaluate_v1_1` on predictions.json, and the saved model.keras, reloaded,
answering the evaluation inputs as the written predictions say."""

import bz2
import csv
import json
import os

import keras
import numpy as np
import pytest

from keras_bert_suite import cli, recipe_runner
from keras_bert_suite.recipe_runner import RecipeError, load_recipe
from tests.numerics import assert_close

# Every test here runs on every backend (recipe parsing and CLI errors are pure Python; each
# tiny end-to-end run, one per task, fits, saves, reloads and predicts on the backend), except
# the CSV-file run, which adds only the file reader (TensorFlow code) to the rotten-tomatoes run.

FINETUNE_RECIPES = sorted(
    name for name in (f[:-5] for f in os.listdir(recipe_runner.RECIPES_DIR) if f.endswith(".json"))
    if load_recipe(name)["task"] != "pretrainer" and "distillation" not in load_recipe(name))
# One update (each batch's length bucket is another compiled training step) and each run's
# evaluation set in one batch, which the reloaded model's predict repeats (EVAL_BATCH): one
# compiled predict step per run, and on JAX the reloaded model's is a compilation-cache hit.
EVAL_BATCH = 64
TINY = ["model.preset=bert_uncased_L-2_H-128_A-2", "model.load_weights=false",
        "training.num_train_steps=1", "training.batch_size=8",
        f"evaluation.batch_size={EVAL_BATCH}"]


def test_every_finetune_recipe_loads():
    assert {"sentiment_rotten_tomatoes_cpu", "ner_wnut16_cpu", "squad_quoref_cpu",
            "glue_mrpc_gpu", "glue_mrpc_tpu", "squad_v1_gpu", "squad_v1_tpu",
            "ner_conll2003_gpu", "ner_conll2003_tpu", "swag_gpu", "swag_tpu"} <= set(FINETUNE_RECIPES)
    for name in FINETUNE_RECIPES:
        recipe = load_recipe(name)
        assert recipe["description"]
        assert recipe["task"] in recipe_runner.TASK_NAMES


def test_one_schema_for_every_recipe():
    """Pretraining and fine-tuning recipes spell their shared keys the same way."""
    from keras_bert_suite.recipe_runner import finetuning
    from keras_bert_suite.recipe_runner import pretraining

    def keys(tree, prefix=""):
        return {prefix + k if not isinstance(v, dict) else k2
                for k, v in tree.items()
                for k2 in (keys(v, prefix + k + ".") if isinstance(v, dict) else [None])} - {None}

    shared = keys(finetuning.DEFAULTS) & keys(pretraining.DEFAULTS)
    assert {"training.optimizer.learning_rate", "training.optimizer.warmup_fraction",
            "training.optimizer.num_warmup_steps", "training.batch_size", "data.sequence_length",
            "model.preset", "distribution.strategy"} <= shared
    fine = load_recipe("sentiment_rotten_tomatoes_cpu", ["training.optimizer.name=lamb"])
    assert fine["training"]["optimizer"]["name"] == "lamb"
    assert fine["training"]["optimizer"]["learning_rate"] == 5e-5  # from the recipe file


def test_recipe_errors_name_the_problem(tmp_path):
    with pytest.raises(RecipeError, match="unknown recipe key 'training.epoch'.*training.epochs"):
        load_recipe("sentiment_rotten_tomatoes_cpu", ["training.epoch=2"])
    with pytest.raises(RecipeError, match="'data.sequence_length' must be a int"):
        load_recipe("sentiment_rotten_tomatoes_cpu", ["data.sequence_length=\"long\""])
    # keys and task names of older recipes say what they are called now
    with pytest.raises(RecipeError, match="'data.max_seq_length' is now 'data.sequence_length'"):
        load_recipe("sentiment_rotten_tomatoes_cpu", ["data.max_seq_length=64"])
    with pytest.raises(RecipeError, match="'training.learning_rate' is now "
                                          "'training.optimizer.learning_rate'"):
        load_recipe("sentiment_rotten_tomatoes_cpu", ["training.learning_rate=1e-5"])
    old_task = tmp_path / "old.json"
    old_task.write_text(json.dumps({"task": "squad"}))
    with pytest.raises(RecipeError, match="task 'squad' is now called 'span_labeler'"):
        load_recipe(str(old_task))
    bad_task = tmp_path / "bad.json"
    bad_task.write_text(json.dumps({"task": "translation"}))
    with pytest.raises(RecipeError, match="unknown task 'translation'"):
        load_recipe(str(bad_task))
    tpu_error = ("distribution.strategy='tpu' needs distribution.tpu"
                 if keras.backend.backend() == "tensorflow" else
                 "distribution.strategy='tpu' needs the tensorflow backend")
    with pytest.raises(ValueError, match=tpu_error):
        recipe_runner.run_recipe(load_recipe("glue_mrpc_tpu", ["distribution.tpu=null"]),
                                 str(tmp_path / "x"))
    with pytest.raises(RecipeError, match="needs data.dataset=glue|data.glue_task"):
        recipe_runner.run_recipe(load_recipe("glue_mrpc_gpu", TINY), str(tmp_path / "y"),
                                 verbose=0, log=lambda *_: None)
    with pytest.raises(RecipeError, match="kbs pretrain"):
        recipe_runner.run_recipe(load_recipe("pretrain_cpu_smoke"), str(tmp_path / "z"),
                                 command="finetune")


def test_recipes_batch_in_length_buckets_except_on_a_tpu():
    from keras_bert_suite.tasks.recipe_contract import training_batching
    from keras_bert_suite.text.length_buckets import bucket_boundaries, length_step

    # a step compiled per shape (XLA: jit_compile=true, JAX) gets few shapes; TensorFlow's and
    # torch's CPU steps every multiple of 8 / every length
    compiled = ["training.jit_compile=true"]
    assert training_batching(load_recipe("sentiment_rotten_tomatoes_cpu", compiled)) == {
        "boundaries": (16, 24, 32, 48, 64), "group_batches": 50}
    automatic = training_batching(load_recipe("sentiment_rotten_tomatoes_cpu"))["boundaries"]
    assert automatic == bucket_boundaries(64, step=length_step("auto"))
    assert training_batching(load_recipe("squad_v1_gpu", [*compiled,
                                                          "training.group_by_length=0"])) == {
        "boundaries": (16, 24, 32, 48, 64, 96, 128, 192, 256, 384), "group_batches": 0}
    fixed = {"boundaries": None, "group_batches": 0}
    assert training_batching(load_recipe("squad_v1_tpu")) == fixed  # static shapes on TPUs
    assert training_batching(load_recipe(  # keras.distribution (JAX) buckets too
        "sentiment_rotten_tomatoes_cpu", [*compiled, "distribution.strategy=data_parallel"])) == {
        "boundaries": (16, 24, 32, 48, 64), "group_batches": 50}
    assert training_batching(load_recipe("sentiment_rotten_tomatoes_cpu",
                                         ["training.bucket_boundaries=null"])) == fixed
    assert training_batching(load_recipe("sentiment_rotten_tomatoes_cpu",
                                         ["training.bucket_boundaries=[20, 40]"])) == {
        "boundaries": (20, 40, 64), "group_batches": 50}
    for value, message in (("[32, 128]", "go past sequence_length=64"),
                           ("8", 'must be "auto", a list')):
        with pytest.raises(RecipeError, match=f"training.bucket_boundaries: .*{message}"):
            training_batching(load_recipe("sentiment_rotten_tomatoes_cpu",
                                          [f"training.bucket_boundaries={value}"]))


def test_cli_reports_recipe_errors_without_traceback(capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["finetune", "ner_wnut16_cpu", "--set", "data.held_out=0",
                  "--output", str(tmp_path / "run")]
                 + [arg for value in TINY for arg in ("--set", value)])
    assert exit_info.value.code == 2
    assert "data.held_out=0 must be between 1 and" in capsys.readouterr().err


def _run(name, tmp_path, *overrides):
    recipe = load_recipe(name, TINY + list(overrides))
    output = str(tmp_path / name)
    summary = recipe_runner.run_recipe(recipe, output, command="finetune", verbose=0,
                                       log=lambda *_: None)
    with open(os.path.join(output, "metrics.json")) as f:
        assert json.load(f) == json.loads(json.dumps(summary["metrics"]))
    return summary["metrics"], output


def _reloaded(output):
    """The run's saved model, loaded as a user would (a second path to its predictions)."""
    model = keras.saving.load_model(os.path.join(output, "model.keras"))
    assert model.preprocessor is not None
    return model


def _read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def _softmax(logits):
    logits = np.asarray(logits, np.float64)
    e = np.exp(logits - logits.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _raw_rotten_tomatoes_labels():
    """text -> set of its categories, read from the raw corpus file with csv alone."""
    from keras_bert_suite.data import corpora

    labels = {}
    with bz2.open(corpora.fetch_rotten_tomatoes(), "rt", encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f):
            if row["category"] in ("fresh", "rotten"):
                labels.setdefault(row["text"], set()).add(row["category"])
    return labels


def test_token_table_options():
    from keras_bert_suite import BertClassifier, BertEncoder
    from keras_bert_suite.recipe_runner.finetuning import token_table_options

    model = BertClassifier(BertEncoder(vocabulary_size=50, num_layers=1, num_heads=2,
                                       hidden_dim=8, intermediate_dim=8,
                                       max_sequence_length=8), num_classes=2)
    training = load_recipe("sentiment_rotten_tomatoes_cpu")["training"]
    row_wise = {"touched_rows_names": ["token_embedding"]}
    assert training["token_table"] == "auto" and token_table_options(model, training) == row_wise
    assert token_table_options(model, {**training, "token_table": "dense"}) == {}
    assert token_table_options(model, {**training, "token_table": "touched_rows"}) == row_wise
    lamb_auto = {**training, "optimizer": {"name": "lamb"}}
    assert token_table_options(model, lamb_auto) == {}  # auto: dense with lamb
    lamb = {**training, "token_table": "touched_rows", "optimizer": {"name": "lamb"}}
    with pytest.raises(RecipeError, match="needs optimizer.name 'adamw'"):
        token_table_options(model, lamb)
    with pytest.raises(RecipeError, match="expected 'auto', 'dense', 'touched_rows' or 'frozen'"):
        token_table_options(model, {**training, "token_table": "sparse"})
    assert token_table_options(model, {**training, "token_table": "frozen"}) == {}
    assert not model.encoder.token_embedding.trainable
    assert all("token_embedding" not in v.path for v in model.trainable_variables)


def test_classification_run_on_rotten_tomatoes(tmp_path):
    # every row of the token table updated here (the other runs: the touched rows, the default)
    metrics, output = _run("sentiment_rotten_tomatoes_cpu", tmp_path,
                           "data.max_train_examples=64", "data.max_eval_examples=40",
                           'training.token_table="dense"')
    assert metrics["eval_examples"] == 40
    rows = _read_jsonl(os.path.join(output, "predictions.jsonl"))
    assert len(rows) == 40
    # gold labels: those of the raw corpus (a swapped label id <-> name fails here)
    raw = _raw_rotten_tomatoes_labels()
    assert all(raw[row["text"]] == {row["label"]} for row in rows)
    gold = np.array([row["label"] for row in rows])
    assert 0 < (gold == "fresh").sum() < 40  # both classes are evaluated
    # the written prediction is the arg max of the written probabilities ...
    names = ["rotten", "fresh"]
    probabilities = np.array([[row["probabilities"][n] for n in names] for row in rows])
    assert_close(probabilities.sum(-1), 1.0, rtol=1e-5)  # 2 values rounded to 1e-6
    assert [row["predicted"] for row in rows] == [names[i] for i in probabilities.argmax(-1)]
    # ... the metrics are those of the written predictions ...
    predicted = np.array([row["predicted"] for row in rows])
    assert metrics["accuracy"] == pytest.approx(np.mean(predicted == gold), abs=1e-12)
    f1s = []
    for name in names:  # macro F1 by hand: per class 2 tp / (2 tp + fp + fn)
        tp = np.sum((predicted == name) & (gold == name))
        fp, fn = np.sum((predicted == name) & (gold != name)), np.sum((predicted != name) & (
            gold == name))
        f1s.append(2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0)
    assert metrics["macro_f1"] == pytest.approx(np.mean(f1s), abs=1e-12)
    # ... and the saved model, reloaded, gives them on the raw evaluation texts.
    logits = np.asarray(_reloaded(output).predict([row["text"] for row in rows],
                                                batch_size=EVAL_BATCH, verbose=0))
    assert_close(_softmax(logits), probabilities, rtol=1e-4, atol=1e-6)  # written .round(6)


@pytest.mark.needs_tf_graph(reason="adds only the CSV reader (tf.io) to the rotten-tomatoes run, "
                                    "whose model path runs on every backend")
def test_classification_run_on_csv_files(tmp_path):
    from keras_bert_suite.tasks.classifier.rotten_tomatoes import load_rotten_tomatoes

    texts, labels = load_rotten_tomatoes()
    stars = {}
    for split, rows in (("train", range(0, 48)), ("dev", range(48, 72))):
        with open(tmp_path / f"{split}.csv", "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["review", "stars"])
            for i in rows:
                stars[texts[i]] = ["bad", "good"][labels[i]]
                writer.writerow([texts[i], stars[texts[i]]])
    metrics, output = _run("sentiment_rotten_tomatoes_cpu", tmp_path, "data.dataset=null",
                           f"data.train_file=\"{tmp_path / 'train.csv'}\"",
                           f"data.eval_file=\"{tmp_path / 'dev.csv'}\"",
                           "data.text_column=review", "data.label_column=stars")
    assert metrics["eval_examples"] == 24
    rows = _read_jsonl(os.path.join(output, "predictions.jsonl"))
    assert [row["text"] for row in rows] == texts[48:72]
    assert [row["label"] for row in rows] == [stars[t] for t in texts[48:72]]
    assert metrics["accuracy"] == pytest.approx(
        np.mean([row["label"] == row["predicted"] for row in rows]), abs=1e-12)


def _raw_conll_sentences(path):
    """{(words, tags)} of a token TAB tag file, blank lines between sentences."""
    sentences, words, tags = set(), [], []
    with open(path, encoding="utf-8") as f:
        for line in list(f) + [""]:
            if line.strip():
                word, tag = line.rstrip("\n").split("\t")
                words.append(word)
                tags.append(tag)
            elif words:
                sentences.add((tuple(words), tuple(tags)))
                words, tags = [], []
    return sentences


def test_ner_run_on_wnut16(tmp_path):
    from seqeval.metrics import f1_score, precision_score, recall_score

    from keras_bert_suite.data import corpora

    metrics, output = _run("ner_wnut16_cpu", tmp_path, "data.max_train_examples=64",
                           "data.max_eval_examples=30")
    assert metrics["eval_sentences"] == 30
    with open(os.path.join(output, "predictions.conll"), encoding="utf-8") as f:
        sentences = [[line.split("\t") for line in s.splitlines()]
                     for s in f.read().strip().split("\n\n")]
    assert len(sentences) == 30
    assert all(len(columns) == 3 for s in sentences for columns in s)
    words = [[w for w, _, _ in s] for s in sentences]
    gold = [[g for _, g, _ in s] for s in sentences]
    predicted = [[p for _, _, p in s] for s in sentences]
    # every evaluated sentence, with its gold tags, is one of the raw file's
    raw = _raw_conll_sentences(corpora.fetch_wnut16())
    assert all((tuple(w), tuple(g)) in raw for w, g in zip(words, gold))
    assert sum(tag != "O" for tags in gold for tag in tags) > 0  # entities to find
    # entity scores: seqeval's, from the written file
    assert metrics["entity_f1"] == pytest.approx(f1_score(gold, predicted), abs=1e-12)
    assert metrics["entity_precision"] == pytest.approx(precision_score(gold, predicted),
                                                        abs=1e-12)
    assert metrics["entity_recall"] == pytest.approx(recall_score(gold, predicted), abs=1e-12)
    # the saved model, reloaded, tags the words as written
    tagged = _reloaded(output).predict(words, batch_size=EVAL_BATCH, verbose=0)
    assert tagged["num_words"].tolist() == [len(w) for w in words]
    assert [list(row[:len(w)]) for row, w in zip(tagged["tags"], words)] == predicted


def _raw_quoref_answers():
    """"quoref-<index>" -> (question, [answers]) from the raw BIG-bench task.json."""
    from keras_bert_suite.data import corpora

    with open(corpora.fetch_quoref(), encoding="utf-8") as f:
        examples = json.load(f)["examples"]
    answers = {}
    for i, example in enumerate(examples):
        targets = example["target"] if isinstance(example["target"], list) else [example["target"]]
        question = example["input"].rsplit("\nQuestion: ", 1)[1].strip()
        answers[f"quoref-{i}"] = (question, [t[:-1] if t.endswith(".") else t for t in targets])
    return answers


def test_squad_run_on_quoref(tmp_path):
    from official.nlp.tools import squad_evaluate_v1_1

    metrics, output = _run("squad_quoref_cpu", tmp_path, "data.max_train_examples=32",
                           "data.max_eval_examples=20", "data.sequence_length=128",
                           "data.doc_stride=64")
    assert metrics["total"] == 20
    with open(os.path.join(output, "predictions.json")) as f:
        predictions = json.load(f)
    assert len(predictions) == 20
    raw = _raw_quoref_answers()
    gold = [{"paragraphs": [{"qas": [{"id": qid, "answers": [{"text": a} for a in raw[qid][1]]}
                                     ]}]} for qid in predictions]
    official = squad_evaluate_v1_1.evaluate(gold, predictions)
    assert metrics["f1"] == pytest.approx(100 * official["final_f1"], abs=1e-9)
    assert metrics["exact_match"] == pytest.approx(100 * official["exact_match"], abs=1e-9)
    # the saved model, reloaded, answers the questions as written; answers come from the text
    from keras_bert_suite.tasks.span_labeler.quoref import read_quoref_task

    passages = read_quoref_task(_quoref_path())
    ids = list(predictions)
    contexts = [passages[int(qid.split("-")[1])][0] for qid in ids]
    answered = _reloaded(output).predict(([raw[qid][0] for qid in ids], contexts),
                                         batch_size=EVAL_BATCH, verbose=0)
    assert answered["answer"].tolist() == [predictions[qid] for qid in ids]
    assert all(a in c for a, c in zip(answered["answer"].tolist(), contexts))


def _quoref_path():
    from keras_bert_suite.data import corpora

    return corpora.fetch_quoref()


def test_multiple_choice_run_on_swag_format(tmp_path):
    from keras_bert_suite.tasks.classifier.rotten_tomatoes import load_rotten_tomatoes

    # SWAG-format rows built from real review sentences: the context is a review's first
    # half, the right ending its second half, the others halves of other reviews.
    texts, _ = load_rotten_tomatoes()
    texts = [t for t in texts if len(t.split()) >= 8][:120]
    header = ["video-id", "fold-ind", "startphrase", "sent1", "sent2", "gold-source",
              "ending0", "ending1", "ending2", "ending3", "label"]
    written = {}
    for split, start, count in (("train", 0, 24), ("val", 24, 12)):
        with open(tmp_path / f"{split}.csv", "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(header)
            for i in range(start, start + count):
                words = texts[i].split()
                half = len(words) // 2
                others = [texts[(i + k * 31) % 120].split() for k in range(4)]
                endings = [" ".join(other[len(other) // 2:]) for other in others]
                label = i % 4
                endings[0], endings[label] = endings[label], " ".join(words[half:])
                writer.writerow([f"rt{i}", i, texts[i], " ".join(words[:half]), "", "gold",
                                 *endings, label])
                written[f"rt{i}-{i}"] = (" ".join(words[:half]), endings, label)
    # 2 updates: after 1 the random model's 4 choices can tie in the written 6 digits
    metrics, output = _run("swag_gpu", tmp_path, "training.precision=\"float32\"",
                           "training.num_train_steps=2",
                           f"data.train_file=\"{tmp_path / 'train.csv'}\"",
                           f"data.eval_file=\"{tmp_path / 'val.csv'}\"", "data.sequence_length=48")
    assert metrics["eval_examples"] == 12
    rows = _read_jsonl(os.path.join(output, "predictions.jsonl"))
    assert [row["id"] for row in rows] == [f"rt{i}-{i}" for i in range(24, 36)]
    assert [row["label"] for row in rows] == [i % 4 for i in range(24, 36)]
    probabilities = np.array([row["probabilities"] for row in rows])
    assert [row["predicted"] for row in rows] == probabilities.argmax(-1).tolist()
    assert metrics["accuracy"] == pytest.approx(
        np.mean([row["label"] == row["predicted"] for row in rows]), abs=1e-12)
    contexts = [written[row["id"]][0] for row in rows]
    choices = [written[row["id"]][1] for row in rows]
    logits = np.asarray(_reloaded(output).predict((contexts, choices), batch_size=EVAL_BATCH,
                                                  verbose=0))
    assert_close(_softmax(logits), probabilities, rtol=1e-4, atol=1e-6)  # written .round(6)
