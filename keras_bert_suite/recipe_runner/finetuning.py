"""`kbs finetune`: a fine-tuning recipe (keys and defaults: `DEFAULTS` below) -> a run.

    recipe = load_recipe("sentiment_rotten_tomatoes_cpu", overrides=["training.epochs=1"])
    summary = run_finetuning(recipe, "runs/sentiment")

The task ("classifier", "span_labeler", "token_classifier", "multiple_choice") picks its
`keras_bert_suite/tasks/<task>/recipe.py`, which reads the data, names the model class
and scores predictions;
everything else is shared: the task model from `model.preset` (encoder weights, fresh head),
BERT's fine-tuning optimizer (AdamW, linear warm-up over `warmup_fraction` of the updates,
then linear decay to 0), `fit`, evaluation. The output directory gets:

    metrics.json     the task's metrics on the evaluation split (and the training time)
    predictions.*    what the task predicts for every evaluation example (see the task module)
    model.keras      the fine-tuned task model with its preprocessor (`kbs export` takes it)
    recipe.json      the resolved recipe; logs/ TensorBoard logs
"""

import math
import time

from keras_bert_suite.recipe_runner.common import common_defaults, merged, recipe_optimizer
from keras_bert_suite.recipe_runner.recipe_files import RecipeError, Schema
from keras_bert_suite.recipe_runner.run import TrainingRun
from keras_bert_suite.recipe_runner.task_data import task_module
from keras_bert_suite.storage import write_json
from keras_bert_suite.models.lora import parameter_count
from keras_bert_suite.text.tokenizer_files import tokenizer_from_preset

# The shared keys (recipe_runner/common.py) with fine-tuning's defaults: the embedded real
# pretrained checkpoint (all-MiniLM-L6-v2), the top of the BERT paper's grid (2e-5 .. 5e-5)
# and its 10% warm-up; then the keys only fine-tuning has.
DEFAULTS = merged(common_defaults(learning_rate=5e-5, warmup_fraction=0.1, num_train_steps=None), {
    "task": "classifier",  # | "span_labeler" | "token_classifier" | "multiple_choice"
    "model": {
        "dropout": 0.1,  # the head's dropout, as BERT fine-tuned
    },
    "data": {
        # A built-in data set ("rotten_tomatoes", "glue", "wnut16", "quoref"; `make data`
        # fetches them) or null for your own files below.
        "dataset": None,
        "train_file": None,
        "eval_file": None,
        # Classification files: .csv/.tsv/.jsonl (format from the extension unless set).
        "format": None,
        "text_column": "text",
        "text_pair_column": None,
        "label_column": "label",
        "label_names": None,  # default: learned from the training file
        "regression": False,  # float labels, num_classes=1, MSE (STS-B style)
        "glue_task": None,  # with dataset "glue": "mrpc", "stsb", ...; GLUE's TSVs in data_dir
        "data_dir": None,
        # Built-in sets without an official split: how many examples are held out.
        "held_out": 2000,
        "max_train_examples": None,  # keep the first N training examples (quick runs)
        "max_eval_examples": None,
        # SQuAD windows (the span labeler's preprocessor)
        "doc_stride": 128,
        "max_question_length": 64,
        "version_2_with_negative": False,
    },
    "training": {
        "epochs": 3,  # training.num_train_steps, when set, wins
        # LoRA: adapters of this rank on the encoder's projections; only they and the head
        # train (null: full fine-tuning). lora_alpha scales them by alpha / rank (null: rank).
        "lora_rank": None,
        "lora_alpha": None,
        # Length buckets: each batch is cut to its longest row rounded up to one of these
        # lengths ("auto": 16, 24, 32, 48, 64, ...; null: every batch padded to
        # data.sequence_length, as on a TPU and under JAX's data_parallel / model_parallel,
        # which always get that), with the rows of
        # group_by_length batches sorted by length before batching (0: plain shuffle).
        "bucket_boundaries": "auto",
        "group_by_length": 50,
        # The token-embedding table: "dense" (every row updated every step, as BERT did),
        # "touched_rows" (only the rows the batch looks up: AdamW's optimizer option
        # touched_rows_names), "frozen" (not trained), or "auto": touched_rows with adamw,
        # dense with lamb (same accuracy, docs/training.md has the trade-off).
        "token_table": "auto",
    },
    "evaluation": {
        "batch_size": 64,
        # SQuAD post-processing
        "n_best_size": 20,
        "max_answer_length": 30,
        "null_score_diff_threshold": 0.0,
    },
})
# training.bucket_boundaries is "auto", a list of lengths or null (checked by
# recipe_contract.training_batching).
SCHEMA = Schema(DEFAULTS, frozenset({"model.encoder_overrides", "training.bucket_boundaries"}))


def training_steps(training, num_examples):
    """(optimizer updates, epochs, steps per epoch) for `num_examples` training examples."""
    if training["num_train_steps"] is not None:
        return training["num_train_steps"], 1, training["num_train_steps"]
    steps_per_epoch = math.ceil(num_examples / training["batch_size"])
    return steps_per_epoch * training["epochs"], training["epochs"], steps_per_epoch


def run_finetuning(recipe, output_dir, callbacks=(), verbose="auto", log=print):
    """Fine-tunes and evaluates as the recipe says; returns {"metrics", "model_path", ...}."""
    run = TrainingRun(recipe, output_dir, log)
    task = task_module(recipe["task"])
    model_config = recipe["model"]
    # The task modules batch with training.batch_size: make it the global batch.
    recipe = {**recipe, "training": {**recipe["training"], "batch_size": run.batch_size}}
    training = recipe["training"]

    # The task's preprocessor serves training, evaluation, predict and export alike.
    tokenizer = tokenizer_from_preset(model_config["preset"])
    preprocessor = task.model_preprocessor(recipe, tokenizer)
    task_data = task.prepare(recipe, preprocessor, log)
    total_steps, epochs, steps_per_epoch = training_steps(training, task_data.num_train_examples)
    log(f"{task_data.num_train_examples} training examples -> {total_steps} updates "
        f"({epochs} epochs of {steps_per_epoch})")
    with run.building():
        model = task_model(task, recipe, preprocessor, task_data)
        run.compile(model, recipe_optimizer(training["optimizer"], total_steps,
                                            **token_table_options(model, training)))

    log(f"{parameter_count(model.trainable_weights):,} of {parameter_count(model.weights):,} "
        "parameters train"
        + (f" (LoRA rank {training['lora_rank']})" if training["lora_rank"] else ""))
    return train_and_evaluate(run, model, task, task_data, recipe, epochs, steps_per_epoch,
                              callbacks, verbose, log)


def train_and_evaluate(run, model, task, task_data, recipe, epochs, steps_per_epoch,
                       callbacks=(), verbose="auto", log=print, trained=None,
                       extra_metrics=None):
    """Fits `trained` (default `model`; a distiller trains its student `model`) on the
    task's training data, saves `model` as model.keras and, on the chief, evaluates it with
    the task's metric into metrics.json (with `extra_metrics`). Returns {"metrics",
    "model_path", "model"}."""
    import keras

    train = run.distribution.whole_batches(
        run.distribution.shard_input(task_data.train).repeat(), run.batch_size)
    started = time.perf_counter()
    run.fit(trained or model, train, epochs=epochs, steps_per_epoch=steps_per_epoch,
            verbose=verbose, callbacks=callbacks)
    train_seconds = time.perf_counter() - started
    model_path = run.save(model, "model.keras")
    if not run.chief:  # the chief saves and evaluates
        return {"metrics": None, "model_path": model_path, "model": model}
    if run.distribution.num_workers > 1:
        # Each worker's predict() would see only its share of the evaluation data: the chief
        # evaluates a plain (undistributed) copy of the trained model instead.
        model = keras.saving.load_model(model_path)
    metrics = task.evaluate(model, task_data, recipe, run.output_dir)
    metrics["train_seconds"] = round(train_seconds, 1)
    metrics["trainable_parameters"] = parameter_count(model.trainable_weights)
    metrics["train_examples"] = task_data.num_train_examples
    metrics.update(extra_metrics or {})
    write_json(run.path("metrics.json"), metrics)
    log("Metrics: " + ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                                for k, v in metrics.items() if not isinstance(v, dict)))
    return {"metrics": metrics, "model_path": model_path, "model": model}


def token_table_options(model, training):
    """`training.token_table` -> the optimizer's extra arguments ("frozen" stops the table
    training here and needs none)."""
    mode = training["token_table"]
    table = getattr(model.encoder, "token_embedding", None)
    if mode == "auto":
        row_wise = table is not None and training["optimizer"]["name"] == "adamw"
        mode = "touched_rows" if row_wise else "dense"
    if mode == "dense":
        return {}
    if mode not in ("touched_rows", "frozen") or table is None:
        raise RecipeError(f"training.token_table={mode!r}: expected 'auto', 'dense', "
                          "'touched_rows' or 'frozen' (the last two for encoders with a "
                          "token_embedding layer).")
    if mode == "frozen":
        table.trainable = False
        return {}
    if training["optimizer"]["name"] != "adamw":
        raise RecipeError("training.token_table='touched_rows' needs optimizer.name 'adamw'.")
    return {"touched_rows_names": ["token_embedding"]}


def task_model(task, recipe, preprocessor, task_data):
    """The task model from the recipe's preset (encoder weights, fresh head)."""
    model_config, data, training = recipe["model"], recipe["data"], recipe["training"]
    model = task.MODEL.from_preset(
        model_config["preset"], load_weights=model_config["load_weights"],
        preprocessor=preprocessor,
        encoder_overrides=model_config["encoder_overrides"],
        lora_rank=training["lora_rank"], lora_alpha=training["lora_alpha"],
        **task_data.model_arguments, **task.head_arguments(model_config))
    if model.encoder.max_sequence_length < data["sequence_length"]:
        raise RecipeError(
            f"data.sequence_length={data['sequence_length']} exceeds the model's "
            f"max_sequence_length={model.encoder.max_sequence_length}.")
    return model
