"""`kbs finetune`: recipes, overrides, bad input, and a tiny end-to-end run of every task on
real data (a small random BERT, a few updates: the plumbing, not the accuracy — README's
numbers come from the full CPU recipes)."""

import csv
import json
import os

import pytest

from keras_bert_suite import cli, recipe_runner
from keras_bert_suite.recipe_runner import RecipeError, load_recipe

# Fine-tuning runs are plumbing around the task models, whose numbers are tested on every
# backend in tests/models/; one tiny run goes through every backend, the rest run on one to
# keep CI short.
one_backend = pytest.mark.backend_independent

FINETUNE_RECIPES = sorted(
    name for name in (f[:-5] for f in os.listdir(recipe_runner.RECIPES_DIR) if f.endswith(".json"))
    if load_recipe(name)["task"] != "pretrainer")
TINY = ["model.preset=bert_uncased_L-2_H-128_A-2", "model.load_weights=false",
        "training.num_train_steps=2", "training.batch_size=8", "evaluation.batch_size=16"]


@one_backend
def test_every_finetune_recipe_loads():
    assert {"sentiment_rotten_tomatoes_cpu", "ner_wnut16_cpu", "squad_quoref_cpu",
            "glue_mrpc_gpu", "glue_mrpc_tpu", "squad_v1_gpu", "squad_v1_tpu",
            "ner_conll2003_gpu", "ner_conll2003_tpu", "swag_gpu", "swag_tpu"} <= set(FINETUNE_RECIPES)
    for name in FINETUNE_RECIPES:
        recipe = load_recipe(name)
        assert recipe["description"]
        assert recipe["task"] in recipe_runner.TASK_NAMES


@one_backend
def test_one_schema_for_every_recipe():
    """Pretraining and fine-tuning recipes spell their shared keys the same way."""
    from keras_bert_suite.recipe_runner import finetuning
    from keras_bert_suite.tasks.pretrainer import recipe as pretraining

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
    with pytest.raises(ValueError, match="distribution.strategy='tpu' needs distribution.tpu"):
        recipe_runner.run_recipe(load_recipe("glue_mrpc_tpu", ["distribution.tpu=null"]),
                                 str(tmp_path / "x"))
    with pytest.raises(RecipeError, match="needs data.dataset=glue|data.glue_task"):
        recipe_runner.run_recipe(load_recipe("glue_mrpc_gpu", TINY), str(tmp_path / "y"),
                                 verbose=0, log=lambda *_: None)
    with pytest.raises(RecipeError, match="kbs pretrain"):
        recipe_runner.run_recipe(load_recipe("pretrain_cpu_smoke"), str(tmp_path / "z"),
                                 command="finetune")


@one_backend
def test_cli_reports_recipe_errors_without_traceback(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["finetune", "ner_wnut16_cpu", "--set", "data.held_out=0", "--output", "/tmp/none"]
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
    assert os.path.exists(os.path.join(output, "model.keras"))
    return summary["metrics"], output


def test_classification_run_on_rotten_tomatoes(tmp_path):
    metrics, output = _run("sentiment_rotten_tomatoes_cpu", tmp_path,
                           "data.max_train_examples=64", "data.max_eval_examples=40")
    assert metrics["eval_examples"] == 40 and 0 <= metrics["accuracy"] <= 1
    with open(os.path.join(output, "predictions.jsonl")) as f:
        rows = [json.loads(line) for line in f]
    assert len(rows) == 40
    correct = sum(row["label"] == row["predicted"] for row in rows)
    assert correct / 40 == pytest.approx(metrics["accuracy"])
    assert set(rows[0]["probabilities"]) == {"rotten", "fresh"}


@one_backend
def test_classification_run_on_csv_files(tmp_path):
    from keras_bert_suite.tasks.classifier.rotten_tomatoes import load_rotten_tomatoes

    texts, labels = load_rotten_tomatoes()
    for split, rows in (("train", range(0, 48)), ("dev", range(48, 72))):
        with open(tmp_path / f"{split}.csv", "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["review", "stars"])
            for i in rows:
                writer.writerow([texts[i], ["bad", "good"][labels[i]]])
    metrics, _ = _run("sentiment_rotten_tomatoes_cpu", tmp_path, "data.dataset=null",
                      f"data.train_file=\"{tmp_path / 'train.csv'}\"",
                      f"data.eval_file=\"{tmp_path / 'dev.csv'}\"",
                      "data.text_column=review", "data.label_column=stars")
    assert metrics["eval_examples"] == 24


@one_backend
def test_ner_run_on_wnut16(tmp_path):
    metrics, output = _run("ner_wnut16_cpu", tmp_path, "data.max_train_examples=64",
                           "data.max_eval_examples=30")
    assert metrics["eval_sentences"] == 30 and 0 <= metrics["entity_f1"] <= 1
    with open(os.path.join(output, "predictions.conll")) as f:
        sentences = f.read().strip().split("\n\n")
    assert len(sentences) == 30
    assert all(len(line.split("\t")) == 3 for s in sentences for line in s.splitlines())


@one_backend
def test_squad_run_on_quoref(tmp_path):
    metrics, output = _run("squad_quoref_cpu", tmp_path, "data.max_train_examples=32",
                           "data.max_eval_examples=20", "data.sequence_length=128",
                           "data.doc_stride=64")
    assert metrics["total"] == 20 and 0 <= metrics["f1"] <= 100
    with open(os.path.join(output, "predictions.json")) as f:
        assert len(json.load(f)) == 20


@one_backend
def test_multiple_choice_run_on_swag_format(tmp_path):
    from keras_bert_suite.tasks.classifier.rotten_tomatoes import load_rotten_tomatoes

    # SWAG-format rows built from real review sentences: the context is a review's first
    # half, the right ending its second half, the others halves of other reviews.
    texts, _ = load_rotten_tomatoes()
    texts = [t for t in texts if len(t.split()) >= 8][:120]
    header = ["video-id", "fold-ind", "startphrase", "sent1", "sent2", "gold-source",
              "ending0", "ending1", "ending2", "ending3", "label"]
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
    metrics, output = _run("swag_gpu", tmp_path, "training.precision=\"float32\"",
                           f"data.train_file=\"{tmp_path / 'train.csv'}\"",
                           f"data.eval_file=\"{tmp_path / 'val.csv'}\"", "data.sequence_length=48")
    assert metrics["eval_examples"] == 12 and 0 <= metrics["accuracy"] <= 1
