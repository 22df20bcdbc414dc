"""`kbs pretrain`: a "pretrainer" recipe (keys and defaults: `DEFAULTS` below) -> a run.

    recipe = load_recipe("pretrain_cpu_smoke", overrides=["training.num_train_steps=20"])
    summary = run_pretraining(recipe, "runs/smoke")

The job: corpus files -> unmasked pretraining instances written to TFRecords by the Beam
pipeline of `kbs create-pretraining-data` (data_pipeline.py; cached in the run directory and
streamed, so memory does not grow with the corpus), or existing TFRecords in the original BERT
schema -> tf.data with dynamic masking (a new mask on every pass) -> BertPretrainer ->
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

import glob
import json
import os
import random

from keras_bert_suite.recipe_runner.common import common_defaults, merged, recipe_optimizer
from keras_bert_suite.recipe_runner.recipe import RecipeError, Schema, write_json

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
        "next_sentence_prediction": True,
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
    },
})
SCHEMA = Schema(DEFAULTS, frozenset({"model.encoder_overrides"}))


def corpus_files(corpus, max_files=None):
    """The sorted, de-duplicated files of `data.corpus` ("sotu" or paths/globs)."""
    if corpus is None:
        raise RecipeError("data.corpus (text files) or data.tfrecords is required, e.g. "
                          "--set data.corpus=sotu or --set 'data.corpus=[\"text/*.txt\"]'.")
    if corpus == "sotu":
        from keras_bert_suite.data import corpora

        try:
            files = corpora.sotu_files()
        except FileNotFoundError as error:
            raise RecipeError(str(error)) from None
    else:
        patterns = [corpus] if isinstance(corpus, str) else list(corpus)
        files = sorted({path for pattern in patterns for path in glob.glob(pattern)})
        if not files:
            raise RecipeError(f"data.corpus: no file matches {patterns!r}.")
    return files[:max_files] if max_files else files


def split_files(files, eval_fraction, seed):
    """(train, eval) lists of files; eval holds whole documents drawn with `seed`."""
    if not eval_fraction:
        return files, []
    shuffled = list(files)
    random.Random(seed).shuffle(shuffled)
    num_eval = max(2, round(len(files) * eval_fraction))  # NSP needs 2 documents
    if num_eval >= len(files):
        raise RecipeError(f"data.eval_fraction={eval_fraction} leaves no training files of "
                          f"{len(files)} (evaluation takes at least 2).")
    return sorted(shuffled[num_eval:]), sorted(shuffled[:num_eval])


def _feature_dataset(files, tfrecords, tokenizer, data, nsp, log, cache_dir):
    """An unbatched tf.data of unmasked feature dicts, and how many examples (None: unknown)."""
    from keras_bert_suite.tasks.pretrainer.tfrecords import (
        read_pretraining_tfrecords,
        restore_unmasked_ids,
    )

    if tfrecords is not None:
        dataset = read_pretraining_tfrecords(
            tfrecords, data["sequence_length"], data["max_predictions_per_seq"], shuffle=False)
        # The files may be statically masked (google-research/bert's are): unmask, then mask
        # afresh each pass.
        return dataset.map(lambda f: {**f, "token_ids": restore_unmasked_ids(f)}), None

    records = _corpus_records(files, tokenizer, data, nsp, cache_dir, log)
    dataset = read_pretraining_tfrecords(
        records["patterns"], data["sequence_length"], data["max_predictions_per_seq"],
        shuffle=False)
    return dataset, records["instances"]


def _corpus_records(files, tokenizer, data, nsp, cache_dir, log):
    """Unmasked instances of text files, made by the Beam pipeline (data_pipeline.py) into
    `cache_dir` and streamed from there: memory does not grow with the corpus. A cache made
    from the same files (paths and sizes) with the same settings is reused (a resumed run
    re-reads it); anything else is remade."""
    import tensorflow as tf

    from keras_bert_suite.tasks.pretrainer.data_pipeline import create_pretraining_data

    settings = {name: data[name] for name in (
        "layout", "sequence_length", "dupe_factor", "short_seq_prob", "max_predictions_per_seq",
        "masked_lm_prob", "whole_word_masking", "seed")}
    settings.update(next_sentence_prediction=nsp, vocabulary=tokenizer.get_vocabulary(),
                    lowercase=tokenizer.lowercase,
                    files=[[path, tf.io.gfile.stat(path).length] for path in files])
    key_path = f"{cache_dir}/inputs.json"
    patterns = [f"{cache_dir}/train-*.tfrecord"]
    if tf.io.gfile.exists(key_path):
        with tf.io.gfile.GFile(key_path) as f:
            if json.load(f) == settings and tf.io.gfile.glob(patterns[0]):
                from keras_bert_suite.tasks.pretrainer.data_pipeline import read_statistics

                statistics = read_statistics(cache_dir)
                log(f"{statistics['instances']} instances from {len(files)} files (cached in "
                    f"{cache_dir})")
                return {"patterns": patterns, "instances": statistics["instances"]}
        tf.io.gfile.remove(key_path)
    statistics = create_pretraining_data(
        files, cache_dir, tokenizer=tokenizer, layout=data["layout"],
        sequence_length=data["sequence_length"],
        max_predictions_per_seq=data["max_predictions_per_seq"],
        masked_lm_prob=data["masked_lm_prob"], dupe_factor=data["dupe_factor"],
        short_seq_prob=data["short_seq_prob"], whole_word_masking=data["whole_word_masking"],
        next_sentence_prediction=nsp, static_masking=False, seed=data["seed"],
        num_workers=data["num_workers"], log=log)
    write_json(key_path, settings)
    return {"patterns": patterns, "instances": statistics["instances"]}


def build_datasets(recipe, tokenizer, log=print, batch_size=None, distribution=None,
                   cache_dir=None):
    """(train, eval or None) tf.data of (x, y) batches of `batch_size` (default
    `training.batch_size`, the global batch); train repeats forever. With a multi-worker
    `distribution`, each worker reads its own share (by file for TFRecords, else by element).

    A text corpus is turned into unmasked instances in `cache_dir` (train/ and eval/; default a
    new temporary directory) by `create_pretraining_data`, then streamed."""
    from keras_bert_suite.tasks.pretrainer.dynamic_masking import DynamicMasker, apply_dynamic_masking

    data, training = recipe["data"], recipe["training"]
    nsp = recipe["model"]["next_sentence_prediction"]
    masker = DynamicMasker.from_tokenizer(
        tokenizer, max_predictions_per_seq=data["max_predictions_per_seq"],
        mask_selection_rate=data["masked_lm_prob"],
        whole_word_masking=data["whole_word_masking"])
    if data["tfrecords"] is not None:
        train_files, eval_files = None, None
    else:
        files = corpus_files(data["corpus"], data["max_files"])
        train_files, eval_files = split_files(files, data["eval_fraction"], data["seed"])

    batch_size = batch_size or training["batch_size"]

    def prepare(dataset, train, num_files):
        if distribution is not None:
            dataset = distribution.shard_input(dataset, num_files)
        if train:
            dataset = dataset.shuffle(data["shuffle_buffer_size"], seed=data["seed"],
                                      reshuffle_each_iteration=True).repeat()
        # keras.distribution splits every batch evenly over devices (and hosts): a short
        # evaluation batch would not split, so evaluation takes whole batches there too.
        whole = train or (distribution is not None and distribution.keras_distribution is not None)
        dataset = dataset.batch(batch_size, drop_remainder=whole)
        if not nsp:
            dataset = dataset.map(lambda f: {k: v for k, v in f.items() if k != "nsp_labels"})
        return apply_dynamic_masking(dataset, masker, seed=data["seed"])

    if cache_dir is None and data["tfrecords"] is None:
        import tempfile

        cache_dir = tempfile.mkdtemp(prefix="kbs_pretraining_data_")
    train, _ = _feature_dataset(train_files, data["tfrecords"], tokenizer, data, nsp, log,
                                cache_dir and f"{cache_dir}/train")
    train = prepare(train, True, _num_tfrecord_files(data["tfrecords"]))
    evaluation = None
    if data["eval_tfrecords"] is not None or eval_files:
        evaluation, _ = _feature_dataset(eval_files, data["eval_tfrecords"], tokenizer, data,
                                         nsp, log, cache_dir and f"{cache_dir}/eval")
        # Masked once and cached: every evaluation scores the same predictions.
        evaluation = prepare(evaluation, False, _num_tfrecord_files(data["eval_tfrecords"]))
        evaluation = evaluation.take(training["eval_batches"]).cache()
    return train, evaluation


def _num_tfrecord_files(patterns):
    """How many files the TFRecord patterns match (0 for text corpora: shard by element)."""
    if patterns is None:
        return 0
    import tensorflow as tf

    patterns = [patterns] if isinstance(patterns, str) else patterns
    return len({path for pattern in patterns for path in tf.io.gfile.glob(pattern)})


def recipe_tokenizer(model):
    from keras_bert_suite.text import BertTokenizer

    if model["vocabulary"] is not None:
        return BertTokenizer.from_preset(model["tokenizer_preset"], vocabulary=model["vocabulary"])
    return BertTokenizer.from_preset(model["tokenizer_preset"])


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


def run_pretraining(recipe, output_dir, callbacks=(), verbose="auto", log=print):
    """Runs the recipe into `output_dir` (resuming a backup there); returns a summary dict.

    `output_dir` may be any path tf.io.gfile reaches (gs://bucket/run). Under a multi-worker
    or multi-host distribution every worker runs this with the same `output_dir` (shared
    storage, e.g. a bucket: every worker resumes from its backup); only the chief writes to it.
    """
    import keras

    from keras_bert_suite.tasks.pretrainer.model import BertPretrainer
    from keras_bert_suite.distribution import start_distribution
    from keras_bert_suite.training import (
        checkpointed_fit_arguments,
        loss_scaled,
        restore_backup,
        set_mixed_precision,
        training_callbacks,
    )
    from keras_bert_suite import storage

    if recipe.get("task", "pretrainer") != "pretrainer":
        raise RecipeError(f"`kbs pretrain` runs task 'pretrainer' recipes, this one is "
                          f"{recipe['task']!r}.")
    distribution, batch_size, precision = start_distribution(recipe, log)
    chief = distribution.is_chief
    model_config, data, training = recipe["model"], recipe["data"], recipe["training"]
    optimizer_config = dict(training["optimizer"])
    accumulation = optimizer_config["gradient_accumulation_steps"]
    fit_arguments = checkpointed_fit_arguments(
        training["num_train_steps"], training["checkpoint_every_n_steps"], accumulation)
    if chief:
        storage.makedirs(output_dir)  # or gs://bucket/dir: any path tf.io.gfile reaches
        write_json(os.path.join(output_dir, "recipe.json"), recipe)

    keras.utils.set_random_seed(training["seed"])
    tokenizer = recipe_tokenizer(model_config)
    # Fail on a vocabulary without [CLS]/[SEP]/[MASK] before any corpus work.
    for token_id in ("cls_token_id", "sep_token_id", "mask_token_id", "pad_token_id"):
        getattr(tokenizer, token_id)
    # The instances of a text corpus are made once into the run directory (a resumed run
    # reads them back); a worker other than the chief makes its own copy locally.
    cache_dir = os.path.join(output_dir, "pretraining_data") if chief else None
    train, evaluation = build_datasets(recipe, tokenizer, log=log, batch_size=batch_size,
                                       distribution=distribution, cache_dir=cache_dir)

    previous_policy = keras.config.dtype_policy()
    set_mixed_precision(precision)
    try:
        with distribution.scope():
            overrides = {"vocabulary_size": tokenizer.vocabulary_size(),
                         **model_config["encoder_overrides"]}
            pretrainer = BertPretrainer.from_preset(
                model_config["preset"], load_weights=model_config["load_weights"],
                next_sentence_prediction=model_config["next_sentence_prediction"],
                encoder_overrides=overrides)
            if pretrainer.encoder.max_sequence_length < data["sequence_length"]:
                raise RecipeError(
                    f"data.sequence_length={data['sequence_length']} exceeds the model's "
                    f"max_sequence_length={pretrainer.encoder.max_sequence_length}.")
            optimizer = recipe_optimizer(optimizer_config, training["num_train_steps"])
            loss_weights = None
            if model_config["next_sentence_prediction"]:
                loss_weights = {"mlm_logits": 1.0, "nsp_logits": training["nsp_loss_weight"]}
            pretrainer.compile(optimizer=loss_scaled(optimizer), loss_weights=loss_weights,
                               run_eagerly=training["run_eagerly"],
                               jit_compile=training["jit_compile"],
                               steps_per_execution=distribution.steps_per_execution)
            initial_epoch = restore_backup(pretrainer, output_dir)
    finally:
        keras.config.set_dtype_policy(previous_policy)

    skip = initial_epoch * fit_arguments["steps_per_epoch"]
    history_path = os.path.join(output_dir, "history.json")
    start_step = skip // (accumulation or 1)
    rows = []
    if storage.exists(history_path):
        with storage.open_file(history_path) as f:
            rows = [r for r in json.load(f)["history"] if r["step"] <= start_step]
    if skip:
        log(f"Resuming from the backup in {output_dir} at step {start_step}.")
    elif evaluation is not None:
        with distribution.run_scope():
            scores = pretrainer.evaluate(evaluation, verbose=0, return_dict=True)
        rows = [{"step": 0, **{f"val_{k}": float(v) for k, v in scores.items()}}]
        if chief:
            write_json(history_path, {"history": rows})
    writer, rows = _history_callback(history_path, rows, accumulation or 1, chief)
    with distribution.run_scope():
        pretrainer.fit(
            train.skip(skip), validation_data=evaluation, verbose=verbose, shuffle=False,
            initial_epoch=initial_epoch,
            # The history row goes first: a run killed between it and the backup resumes
            # from the previous backup and rewrites the row.
            callbacks=[writer, *training_callbacks(output_dir, training["log_every_n_steps"],
                                                   chief=chief), *callbacks],
            **fit_arguments)

    model_path = os.path.join(output_dir, "pretrainer.keras")
    if chief:
        pretrainer.save(model_path)
        pretrainer.save_to_preset(os.path.join(output_dir, "preset"), vocabulary=tokenizer,
                                  lowercase=tokenizer.lowercase)
    step = int(keras.ops.convert_to_numpy(pretrainer.optimizer.iterations)) // (accumulation or 1)
    if chief:
        log(f"Done at step {step}: {output_dir}/history.json, {model_path}, "
            f"{output_dir}/preset/")
    else:
        log(f"Done at step {step} (worker {distribution.worker_index}; the chief writes "
            f"{output_dir}).")
    return {"step": step, "history": rows, "model_path": model_path,
            "preset_dir": os.path.join(output_dir, "preset"), "model": pretrainer,
            "distribution": distribution}
