"""`kbs pretrain`: a "pretrainer" recipe (keys and defaults: `DEFAULTS` below) -> a run.

    recipe = load_recipe("pretrain_cpu_smoke", overrides=["training.num_train_steps=20"])
    summary = run_pretraining(recipe, "runs/smoke")

The job: corpus files or TFRecords -> tf.data with dynamic masking (the task's data,
tasks/pretrainer/data/recipe_data.py) -> BertPretrainer ->
`create_optimizer` -> `fit` in "epochs" of one checkpoint interval (training/callbacks.py), with a backup every `checkpoint_every_n_steps`, TensorBoard
logs and Keras' progress bar. Re-running into the same output directory resumes from the last
backup with the same step counter, optimizer state and data position. The `distribution`
section picks the devices (keras_bert_suite/distribution/; `training.batch_size` is the global
batch); with several workers only the chief writes. The output directory gets:

    history.json       metrics after every checkpoint interval (and at step 0 with eval),
                       each row tagged with its optimizer step
    pretrainer.keras   the whole pretrainer (with optimizer state)
    preset/            encoder + head weights + vocab.txt (`BertPretrainer.from_preset(dir)`)
    backup/, logs/     the resumable backup (deleted once fit completes) and TensorBoard logs
    recipe.json        the resolved recipe the run used
    pretraining_data/  train/ (and eval/) instances made from a text corpus, statistics.json
"""

import json

from keras_bert_suite import storage
from keras_bert_suite.recipe_runner.common import common_defaults, merged, recipe_optimizer
from keras_bert_suite.recipe_runner.recipe_files import RecipeError, Schema
from keras_bert_suite.recipe_runner.run import TrainingRun
from keras_bert_suite.storage import write_json
from keras_bert_suite.tasks.pretrainer.objectives import objective, resolved_data
from keras_bert_suite.tasks.pretrainer.data.recipe_data import build_datasets, recipe_tokenizer
from keras_bert_suite.training import checkpointed_fit_arguments

# The shared keys (recipe_runner/common.py) with pretraining's defaults (BERT's 1e-4, a tiny
# random BERT unless a preset says otherwise), then the keys only pretraining has. A
# comment says why when a value is not obvious.
DEFAULTS = merged(common_defaults(learning_rate=1e-4, warmup_fraction=0.0, num_train_steps=1000,
                                  preset="bert_uncased_L-2_H-128_A-2", load_weights=False,
                                  data_seed=12345), {
    "task": "pretrainer",
    "model": {
        # The uncased 30,522-token vocab that bert-base-uncased (and MiniLM) use.
        "tokenizer_preset": "minilm_l6_h384_uncased",
        "vocabulary": None,  # a vocab.txt path; overrides tokenizer_preset's vocabulary
        # What the model learns (tasks/pretrainer/objectives.py): "mlm_nsp" (BERT), "mlm"
        # (RoBERTa), "mlm_sop" (ALBERT), "electra", "deberta_v3" (ELECTRA's with
        # gradient-disentangled embedding sharing), "ltr" (left-to-right, GPT-1).
        "objective": "mlm_nsp",
        # ELECTRA, DeBERTa-v3: the generator's hidden size, heads and intermediate size as a fraction of
        # the discriminator's (the paper's 1/4 for small models).
        "generator_size": 0.25,
        # The generator's layers (null: the discriminator's; DeBERTa-v3's paper: half).
        "generator_layers": None,
    },
    "data": {
        # "sotu" (the State of the Union corpus, `make data`), or a list of paths / globs.
        "corpus": None,
        "layout": "paragraph_per_line",  # or "sentence_per_line" (google-research/bert's)
        "max_files": None,  # use only the first N corpus files (after sorting)
        # Existing TFRecords (original schema) instead of a corpus: a path/glob or a list.
        "tfrecords": None,
        "max_predictions_per_seq": 20,
        "masked_lm_prob": 0.15,
        "whole_word_masking": False,
        "dupe_factor": 5,  # with dynamic masking the masks differ anyway; dupes vary the pairs
        "short_seq_prob": 0.1,
        # Fraction of corpus files held out for evaluation (whole documents, so no text of
        # an eval pair was seen in training); 0 = no eval.
        "eval_fraction": 0.0,
        "eval_tfrecords": None,
        "shuffle_buffer_size": 10000,
        # null = the objective's (objectives.py): "nsp", "sop", "full_sentences" or
        # "doc_sentences" instances; n-grams of up to max_ngram whole words masked (ALBERT: 3);
        # "masked" (MLM) or "next_token" (left-to-right LM) targets.
        "instance_format": None,
        "max_ngram": None,
        "targets": None,
        # Packed rows: up to this many instances share a row of sequence_length tokens
        # (block-diagonal attention; each instance's losses are those it has alone), so
        # short instances do not pay for padding. None: one instance per row.
        "max_instances_per_row": None,
        # Worker processes of the Beam pipeline that turns a text corpus into instances
        # (default: one per CPU core).
        "num_workers": None,
    },
    "training": {
        "checkpoint_every_n_steps": 100,  # also how often history.json gets a row (and eval)
        "log_every_n_steps": 10,  # TensorBoard
        "eval_batches": 20,
        # Weight of the NSP loss in the total (MLM's is 1): above 1 gives the shared encoder
        # more of NSP's gradient, which MLM's otherwise dominates early on.
        "nsp_loss_weight": 1.0,
        # ELECTRA's weight of the discriminator's replaced-token loss (the generator's MLM
        # loss has weight 1): the paper's 50.
        "rtd_loss_weight": 50.0,
    },
})
SCHEMA = Schema(DEFAULTS, frozenset({"model.encoder_overrides"}))


def _history_callback(path, start_rows, accumulation, chief=True):
    import keras

    rows = list(start_rows)

    class HistoryWriter(keras.callbacks.Callback):
        """Appends a row per checkpoint interval to history.json (so a killed run keeps its
        rows; a resumed one drops rows past its backup)."""

        def on_epoch_end(self, epoch, logs=None):
            step = int(keras.ops.convert_to_numpy(self.model.optimizer.iterations))
            rows.append({"step": step // accumulation,
                         **{k: float(v) for k, v in (logs or {}).items()}})
            if chief:
                write_json(path, {"history": rows})

    return HistoryWriter(), rows


def _objective_model(recipe, vocabulary_size):
    """(the model `model.objective` trains, its loss weights for compile or None)."""
    from keras_bert_suite.tasks.pretrainer.model import BertPretrainer

    model_config, training = recipe["model"], recipe["training"]
    row = objective(model_config["objective"])
    overrides = {"vocabulary_size": vocabulary_size, **model_config["encoder_overrides"]}
    if row.causal:
        overrides["causal"] = True
    if row.electra:
        from keras_bert_suite.tasks.pretrainer.electra_pretrainer import ElectraPretrainer

        model = ElectraPretrainer.from_preset(
            model_config["preset"], load_weights=model_config["load_weights"],
            encoder_overrides=overrides, generator_size=model_config["generator_size"],
            rtd_weight=training["rtd_loss_weight"], preprocessor=None,
            seed=training["seed"], embedding_sharing=row.embedding_sharing,
            generator_layers=model_config["generator_layers"])
        return model, None
    model = BertPretrainer.from_preset(
        model_config["preset"], load_weights=model_config["load_weights"],
        next_sentence_prediction=row.sentence_pair_head,
        max_instances_per_row=recipe["data"]["max_instances_per_row"],
        encoder_overrides=overrides)
    if not row.sentence_pair_head:
        return model, None
    return model, {"mlm_logits": 1.0, "nsp_logits": training["nsp_loss_weight"]}


def run_pretraining(recipe, output_dir, callbacks=(), verbose="auto", log=print):
    """Runs the recipe into `output_dir` (resuming a backup there); returns a summary dict.

    `output_dir` may be any path tf.io.gfile reaches (gs://bucket/run). Under a multi-worker
    or multi-host distribution every worker runs this with the same `output_dir` (shared
    storage, e.g. a bucket: every worker resumes from its backup); only the chief writes to it.
    """
    import keras

    if recipe.get("task", "pretrainer") != "pretrainer":
        raise RecipeError(f"`kbs pretrain` runs task 'pretrainer' recipes, this one is "
                          f"{recipe['task']!r}.")
    try:
        recipe = {**recipe, "data": resolved_data(recipe["model"]["objective"], recipe["data"])}
    except ValueError as error:
        raise RecipeError(f"model.objective: {error}") from None
    run = TrainingRun(recipe, output_dir, log)
    model_config, data, training = recipe["model"], recipe["data"], recipe["training"]
    accumulation = training["optimizer"]["gradient_accumulation_steps"]
    fit_arguments = checkpointed_fit_arguments(
        training["num_train_steps"], training["checkpoint_every_n_steps"], accumulation)

    tokenizer = recipe_tokenizer(model_config)
    # Fail on a vocabulary without [CLS]/[SEP]/[MASK] before any corpus work.
    for token_id in ("cls_token_id", "sep_token_id", "mask_token_id", "pad_token_id"):
        getattr(tokenizer, token_id)
    # The instances of a text corpus are made once into the run directory (a resumed run
    # reads them back); a worker other than the chief makes its own copy locally.
    cache_dir = run.path("pretraining_data") if run.chief else None
    train, evaluation = build_datasets(recipe, tokenizer, log=log, batch_size=run.batch_size,
                                       distribution=run.distribution, cache_dir=cache_dir)

    with run.building():
        pretrainer, loss_weights = _objective_model(recipe, tokenizer.vocabulary_size())
        if pretrainer.encoder.max_sequence_length < data["sequence_length"]:
            raise RecipeError(
                f"data.sequence_length={data['sequence_length']} exceeds the model's "
                f"max_sequence_length={pretrainer.encoder.max_sequence_length}.")
        run.compile(pretrainer, recipe_optimizer(training["optimizer"],
                                                 training["num_train_steps"]),
                    loss_weights=loss_weights)
        initial_epoch = run.resume(pretrainer)

    skip = initial_epoch * fit_arguments["steps_per_epoch"]
    history_path = run.path("history.json")
    start_step = skip // (accumulation or 1)
    rows = []
    if storage.exists(history_path):
        with storage.open_file(history_path) as f:
            rows = [r for r in json.load(f)["history"] if r["step"] <= start_step]
    if skip:
        log(f"Resuming from the backup in {output_dir} at step {start_step}.")
    elif evaluation is not None:
        scores = run.evaluate(pretrainer, evaluation, verbose=0, return_dict=True)
        rows = [{"step": 0, **{f"val_{k}": float(v) for k, v in scores.items()}}]
        if run.chief:
            write_json(history_path, {"history": rows})
    writer, rows = _history_callback(history_path, rows, accumulation or 1, run.chief)
    # The history row goes first: a run killed between it and the backup resumes from the
    # previous backup and rewrites the row.
    run.fit(pretrainer, train.skip(skip), backup=True,
            log_every_n_steps=training["log_every_n_steps"], callbacks=[writer, *callbacks],
            validation_data=evaluation, verbose=verbose, initial_epoch=initial_epoch,
            **fit_arguments)

    model_path = run.save(pretrainer, "pretrainer.keras")
    preset_dir = run.path("preset")
    if run.chief:
        pretrainer.save_to_preset(preset_dir, vocabulary=tokenizer,
                                  lowercase=tokenizer.lowercase)
    step = int(keras.ops.convert_to_numpy(pretrainer.optimizer.iterations)) // (accumulation or 1)
    if run.chief:
        log(f"Done at step {step}: {output_dir}/history.json, {model_path}, {preset_dir}/")
    else:
        log(f"Done at step {step} (worker {run.distribution.worker_index}; the chief writes "
            f"{output_dir}).")
    return {"step": step, "history": rows, "model_path": model_path, "preset_dir": preset_dir,
            "model": pretrainer, "distribution": run.distribution}
