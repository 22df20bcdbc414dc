"""`kbs pretrain`: recipes, overrides, bad input, a tiny end-to-end run and resume."""

import json
import os

import keras
import pytest

from keras_bert_suite import BertPretrainer, cli, recipe_runner
from keras_bert_suite.recipe_runner import RecipeError, load_recipe, parse_override
from tests.tiny_pretraining import RUN_EAGERLY

RECIPES = sorted(f[:-5] for f in os.listdir(recipe_runner.RECIPES_DIR)
                 if f.endswith(".json") and load_recipe(f[:-5])["task"] == "pretrainer")

# A tiny model on 4 SOTU addresses (2 train, 2 held out), 4 updates, a backup every 2.
TINY = [
    'model.encoder_overrides={"num_layers": 1, "hidden_dim": 16, "num_heads": 2, '
    '"intermediate_dim": 32, "max_sequence_length": 32, "dropout": 0.0}',
    "data.max_files=4", "data.eval_fraction=0.5", "data.sequence_length=32",
    "data.max_predictions_per_seq=5", "data.dupe_factor=1",
    "training.batch_size=4", "training.num_train_steps=4", "training.checkpoint_every_n_steps=2",
    "training.eval_batches=1", "training.optimizer.num_warmup_steps=0",
    f"training.run_eagerly={json.dumps(RUN_EAGERLY)}",
]


def _args(*sets):
    return [arg for value in sets for arg in ("--set", value)]


# === Recipes and overrides ===

def test_override_values_are_parsed_as_json():
    assert parse_override("training.batch_size=64") == ("training.batch_size", 64)
    assert parse_override("training.optimizer.learning_rate=5e-4") == (
        "training.optimizer.learning_rate", 0.0005)
    assert parse_override("model.load_weights=false") == ("model.load_weights", False)
    assert parse_override("data.max_files=null") == ("data.max_files", None)
    assert parse_override('data.corpus=["a/*.txt", "b.txt"]') == (
        "data.corpus", ["a/*.txt", "b.txt"])
    assert parse_override("data.corpus=sotu") == ("data.corpus", "sotu")  # bare word
    assert parse_override('data.layout="sentence_per_line"') == (
        "data.layout", "sentence_per_line")
    assert parse_override(" a.b = 1 ") == ("a.b", 1)


def test_overrides_reach_the_recipe():
    recipe = load_recipe("pretrain_cpu_smoke", overrides=[
        "training.optimizer.learning_rate=2e-3", "training.optimizer.name=lamb",
        "model.encoder_overrides.dropout=0.2", "data.max_files=null"])
    assert recipe["training"]["optimizer"]["learning_rate"] == 0.002
    assert recipe["training"]["optimizer"]["name"] == "lamb"
    assert recipe["training"]["optimizer"]["num_warmup_steps"] == 40  # from the file
    assert recipe["training"]["optimizer"]["beta_2"] == 0.999  # from DEFAULTS
    assert recipe["model"]["encoder_overrides"] == {"max_sequence_length": 128, "dropout": 0.2}
    assert recipe["data"]["max_files"] is None
    assert recipe["name"] == "pretrain_cpu_smoke"


@pytest.mark.parametrize("override, message", [
    ("training.batch_sise=8", "unknown recipe key 'training.batch_sise'. Did you mean "
                              "'training.batch_size'"),
    ("trainig.batch_size=8", "unknown recipe key 'trainig'"),
    ("training.batch_size.x=8", "unknown recipe key 'training.batch_size'"),
    ("training.batch_size", "expected key=value"),
    ("=3", "expected key=value"),
    ("training..batch_size=3", "expected key=value"),
    ("training.batch_size=[8", "is not valid JSON"),
    ("training.batch_size=8.5", "'training.batch_size' must be a int"),
    ("training.batch_size=true", "'training.batch_size' must be a int"),
    ("training=3", "'training' is a section"),
    ("model.next_sentence_prediction=true", "'model.next_sentence_prediction' was retired; set "
                                            "model.objective instead: \"mlm_nsp\""),
])
def test_bad_overrides_name_the_problem(override, message):
    with pytest.raises(RecipeError, match=message.replace("(", r"\(").replace("[", r"\[")):
        load_recipe("pretrain_cpu_smoke", overrides=[override])


def test_jit_compile_takes_auto_true_or_false(tmp_path):
    from keras_bert_suite.recipe_runner.run import TrainingRun

    for value in ("auto", True, False):
        recipe = load_recipe("pretrain_cpu_smoke", [f"training.jit_compile={json.dumps(value)}"])
        assert recipe["training"]["jit_compile"] == value
    recipe = load_recipe("pretrain_cpu_smoke", ["training.jit_compile=yes"])
    with pytest.raises(RecipeError, match='training.jit_compile must be "auto", true or false, '
                                          "got 'yes'"):
        TrainingRun(recipe, str(tmp_path))


def test_unknown_key_in_a_recipe_file(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"data": {"sequence_len": 64}}))
    with pytest.raises(RecipeError, match=r"bad.json: unknown recipe key 'data.sequence_len'. "
                                          r"Did you mean 'data.sequence_length'"):
        load_recipe(str(path))
    with pytest.raises(RecipeError, match="No recipe 'nope'"):
        load_recipe("nope")


@pytest.mark.parametrize("name", RECIPES)
def test_every_recipe_loads_and_is_described(name):
    recipe = load_recipe(name)
    assert len(recipe["description"]) > 100
    training = recipe["training"]
    assert training["num_train_steps"] % training["checkpoint_every_n_steps"] == 0


def test_the_bert_base_recipes_follow_the_paper():
    phase1, phase2 = (load_recipe(f"pretrain_bert_base_phase{i}_tpu") for i in (1, 2))
    assert (phase1["data"]["sequence_length"], phase1["data"]["max_predictions_per_seq"]) == (128, 20)
    assert (phase2["data"]["sequence_length"], phase2["data"]["max_predictions_per_seq"]) == (512, 80)
    for name in ("tpu", "gpu8"):
        for phase in (1, 2):
            recipe = load_recipe(f"pretrain_bert_base_phase{phase}_{name}")
            assert recipe["training"]["optimizer"]["name"] == "lamb"
            assert recipe["training"]["precision"] == "mixed_bfloat16"
            if name == "gpu8":
                assert recipe["training"]["optimizer"]["gradient_accumulation_steps"] > 1


# === Bad input surfaces from `kbs pretrain` as one line, exit 2 ===

def _kbs_error(capsys, *argv):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["pretrain", *argv])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


def test_tpu_recipe_on_a_machine_without_a_tpu_says_what_to_do(capsys, tmp_path):
    err = _kbs_error(capsys, "pretrain_bert_base_phase1_tpu", "--output", str(tmp_path))
    if keras.backend.backend() != "tensorflow":  # the TPU strategy is tf.distribute's
        assert ("distribution.strategy='tpu' needs the tensorflow backend (KERAS_BACKEND="
                f"tensorflow); this process runs Keras on {keras.backend.backend()}") in err
        return
    assert "distribution.tpu='local' but this machine has no TPU chips" in err
    err = _kbs_error(capsys, "pretrain_bert_base_phase1_tpu", "--output", str(tmp_path),
                     "--set", "distribution.tpu=null")
    assert "distribution.strategy='tpu' needs distribution.tpu: 'local' on a TPU VM" in err


def test_bad_input_errors(capsys, tmp_path):
    err = _kbs_error(capsys, "pretrain_cpu_smoke", "--set", "training.batch_sise=3")
    assert "unknown recipe key 'training.batch_sise'" in err

    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n   \n")
    err = _kbs_error(capsys, "pretrain_cpu_smoke", "--output", str(tmp_path / "run"),
                     *_args(f"data.corpus={json.dumps([str(empty)])}", "data.eval_fraction=0"))
    assert "The corpus is empty" in err

    one = tmp_path / "one.txt"
    one.write_text("Only one document here. It has two sentences.\n")
    err = _kbs_error(capsys, "pretrain_cpu_smoke", "--output", str(tmp_path / "run"),
                     *_args(f"data.corpus={json.dumps([str(one)])}", "data.eval_fraction=0"))
    assert "Next-sentence prediction needs at least 2 documents" in err

    err = _kbs_error(capsys, "pretrain_cpu_smoke", "--output", str(tmp_path / "run"),
                     *_args('data.corpus=["/no/such/*.txt"]'))
    assert "no file matches" in err

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "the", "a"]) + "\n")
    err = _kbs_error(capsys, "pretrain_cpu_smoke", "--output", str(tmp_path / "run"),
                     *_args(f"model.vocabulary={json.dumps(str(vocab))}"))
    assert "The vocabulary has no [MASK] token" in err


# === End to end ===

class Interrupt(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        if int(keras.ops.convert_to_numpy(self.model.optimizer.iterations)) == 3:
            raise RuntimeError("interrupted")


@pytest.mark.real
@pytest.mark.slow
def test_kbs_pretrain_runs_resumes_and_saves_a_loadable_model(tmp_path, capsys, sotu_files):
    # nsp_loss_weight=3 rides along: the logged loss weighs the NSP term 3 times (checked at
    # the end), without a run of its own.
    tiny = TINY + ["training.nsp_loss_weight=3.0"]
    output = str(tmp_path / "run")
    recipe = load_recipe("pretrain_cpu_smoke", overrides=tiny)
    with pytest.raises(RuntimeError, match="interrupted"):
        recipe_runner.run_pretraining(recipe, output, callbacks=[Interrupt()], verbose=0)
    with open(os.path.join(output, "history.json")) as f:
        assert [row["step"] for row in json.load(f)["history"]] == [0, 2]

    # The corpus went through the Beam pipeline into the run directory, once: streamed from
    # there, and reused by the resumed run.
    with open(os.path.join(output, "pretraining_data", "train", "statistics.json")) as f:
        made = json.load(f)
    assert made["settings"]["static_masking"] is False and made["train_instances"] > 0
    shards = os.path.join(output, "pretraining_data", "train", "train-00000-0000.tfrecord")
    modified = os.path.getmtime(shards)
    cli.main(["pretrain", "pretrain_cpu_smoke", "--output", output, *_args(*tiny)])
    out = capsys.readouterr().out
    assert "Resuming from the backup" in out
    assert f"{made['instances']} instances from" in out and "(cached in" in out
    assert os.path.getmtime(shards) == modified
    with open(os.path.join(output, "history.json")) as f:
        history = json.load(f)["history"]
    assert [row["step"] for row in history] == [0, 2, 4]  # continued, not restarted
    assert {"mlm_logits_accuracy", "nsp_logits_accuracy", "val_mlm_logits_accuracy",
            "val_nsp_logits_accuracy", "loss"} <= set(history[-1])
    final = history[-1]  # nsp_loss_weight scales the NSP term of the loss
    assert final["val_loss"] == pytest.approx(
        final["val_mlm_logits_loss"] + 3.0 * final["val_nsp_logits_loss"], rel=1e-5)
    assert not os.path.exists(os.path.join(output, "backup"))  # fit completed
    assert os.listdir(os.path.join(output, "logs"))  # TensorBoard

    loaded = keras.saving.load_model(os.path.join(output, "pretrainer.keras"))
    assert isinstance(loaded, BertPretrainer)
    assert int(keras.ops.convert_to_numpy(loaded.optimizer.iterations)) == 4
    assert loaded.encoder.hidden_dim == 16
    from_preset = BertPretrainer.from_preset(os.path.join(output, "preset"))
    for a, b in zip(loaded.encoder.get_weights(), from_preset.encoder.get_weights()):
        assert (a == b).all()


@pytest.mark.real
@pytest.mark.parametrize("recipe_name, objective, instance_format, targets, logged", [
    ("pretrain_cpu_roberta", "mlm", "doc_sentences", "masked", "mlm_logits_accuracy"),
    ("pretrain_cpu_albert", "mlm_sop", "sop", "masked", "nsp_logits_accuracy"),
    ("pretrain_cpu_electra", "electra", "doc_sentences", "masked", "discriminator_accuracy"),
    ("pretrain_cpu_ltr", "ltr", "doc_sentences", "next_token", "mlm_logits_accuracy"),
])
def test_every_objective_trains_from_its_recipe(tmp_path, sotu_files, recipe_name, objective,
                                                instance_format, targets, logged):
    from keras_bert_suite import ElectraPretrainer, ReplacedTokenDetector

    shared = ["model.encoder_overrides.num_layer_groups=1"] if objective == "mlm_sop" else []
    recipe = load_recipe(recipe_name, overrides=TINY + shared + [
        "training.num_train_steps=2", "training.checkpoint_every_n_steps=2"])
    output = str(tmp_path / "run")
    summary = recipe_runner.run_pretraining(recipe, output, verbose=0, log=lambda *_: None)
    with open(os.path.join(output, "recipe.json")) as f:
        data = json.load(f)["data"]  # the objective's data settings, resolved
    assert (data["instance_format"], data["targets"]) == (instance_format, targets)
    assert data["max_ngram"] == (3 if objective == "mlm_sop" else 1)
    assert {logged, f"val_{logged}", "loss"} <= set(summary["history"][-1])
    model, preset = summary["model"], os.path.join(output, "preset")
    if objective == "electra":
        assert isinstance(model, ElectraPretrainer)
        assert isinstance(ReplacedTokenDetector.from_preset(preset), ReplacedTokenDetector)
    else:
        back = BertPretrainer.from_preset(preset)
        assert back.encoder.causal == (objective == "ltr")
        assert back.next_sentence_prediction == (objective == "mlm_sop")
        if objective == "mlm_sop":
            assert model.encoder.num_layer_groups == 1  # ALBERT's shared layers
