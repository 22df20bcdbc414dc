"""`kbs create-pretraining-data`: a text corpus -> sharded pretraining TFRecords, on Apache Beam.

    statistics = create_pretraining_data(["corpus/*.txt"], "gs://bucket/pretraining_data",
                                         layout="paragraph_per_line", dupe_factor=5)

The records are google-research/bert's (tfrecords.py: read by its run_pretraining.py, by Model
Garden's BertPretrainDataLoader and by `kbs pretrain --set data.tfrecords=...`). The pipeline:

    file groups ─▶ Reshuffle ─▶ WriteTrainShards ─┬─▶ statistics ─▶ Combine ─▶ statistics.json
                                                  └─▶ held-out documents ─▶ GroupByKey(hash
                                                      bucket) ─▶ WriteEvalShards ─▶ statistics

Training documents never go through a shuffle: each worker streams its group of files, a
bucket of documents at a time (corpus_buckets.py), so memory stays flat however large the
corpus, on the DirectRunner too. Held-out documents (a small `eval_fraction`) are grouped by a
hash of their file and position into eval buckets of about `bucket_bytes` each.

Runners: by default Beam's DirectRunner in this machine's processes (`num_workers` worker
processes, default one per CPU core). Any other runner comes from Beam pipeline options, e.g.

    kbs create-pretraining-data --input 'gs://b/wiki/*.txt' --output_dir gs://b/out -- \\
        --runner=DataflowRunner --project=P --region=us-central1 --temp_location=gs://b/tmp \\
        --extra_package=dist/keras_bert_suite-0.1.0-py3-none-any.whl \\
        --requirements_file=worker_requirements.txt

The output directory gets `train-GGGGG-BBBB.tfrecord` shards (group, bucket), `eval-*`
shards when `eval_fraction` > 0, and `statistics.json`: settings, documents read, used and
skipped (by reason), instances, tokens, random-next and masked rates. Old shards there are
removed first.
"""

import json
import os

from keras_bert_suite.tasks.pretrainer.data import corpus_buckets
from keras_bert_suite.tasks.pretrainer.data import documents as document_io
from keras_bert_suite.tasks.pretrainer.data import instances as instance_lib

from keras_bert_suite.tasks.pretrainer.data.corpus_buckets import STATISTICS_FILE

SHARD_PATTERNS = ("train-*.tfrecord", "eval-*.tfrecord")


def create_pretraining_data(
        inputs, output_dir, vocabulary=None, tokenizer_preset="minilm_l6_h384_uncased",
        lowercase=None, layout="sentence_per_line", text_field="text",
        max_line_bytes=document_io.DEFAULT_MAX_LINE_BYTES, sequence_length=128,
        max_predictions_per_seq=20, masked_lm_prob=0.15, mask_token_rate=0.8,
        random_token_rate=0.1, dupe_factor=10, short_seq_prob=0.1, whole_word_masking=False,
        max_ngram=1, instance_format="nsp", static_masking=True, eval_fraction=0.0,
        bucket_bytes=corpus_buckets.DEFAULT_BUCKET_BYTES, seed=12345, num_workers=None,
        pipeline_args=(), tokenizer=None, max_instances_per_row=None, log=print):
    """Runs the pipeline; returns the statistics (also written to `statistics.json`).

    Args:
        inputs: a path or glob, or a list of them (local or `gs://`, via tf.io.gfile).
        output_dir: where the shards and statistics.json go (local or `gs://`).
        vocabulary: a vocab.txt path (then `tokenizer_preset` is not read); default the
            vocabulary of `tokenizer_preset`.
        lowercase: default: the preset's casing (uncased presets lower-case), or True with a
            `vocabulary` (google-research/bert's do_lower_case default).
        layout, text_field, max_line_bytes: how files are read (documents.py).
        sequence_length ... whole_word_masking: as google-research/bert's
            create_pretraining_data.py (its `max_seq_length` is `sequence_length`).
        max_ngram: > 1 masks n-grams of up to this many whole words (ALBERT: 3).
        instance_format: "nsp" (BERT), "sop" (ALBERT), "doc_sentences" / "full_sentences"
            (RoBERTa) or "contiguous" (instances.py).
        static_masking: False writes unmasked instances (no masked positions) for dynamic
            masking, which `kbs pretrain` applies anyway.
        eval_fraction: share of documents held out into `eval-*` shards.
        bucket_bytes: text per bucket (random-next partners come from the same bucket).
        seed: the same seed and input give the same records, whatever the number of workers.
        num_workers: DirectRunner worker processes (default: CPU cores, at most one per
            group of files); ignored when
            `pipeline_args` name another runner.
        pipeline_args: Beam pipeline options (list of "--flag=value").
        tokenizer: a BertTokenizer to use instead of `vocabulary` / `tokenizer_preset`.
        max_instances_per_row: None writes one instance per record (the original schema);
            K packs up to K instances into each record of `sequence_length` tokens (the
            packed schema, tfrecords.py), first-fit in each shard's shuffled order.
    """
    import tensorflow as tf

    from keras_bert_suite.text import BertTokenizer

    files = _input_files(inputs)
    document_io.check_layout(layout)
    instance_lib.check_instance_settings(sequence_length, dupe_factor, short_seq_prob,
                                         instance_format)
    if max_instances_per_row is not None:
        from keras_bert_suite.tasks.pretrainer.data.packing import check_packing

        check_packing(sequence_length, max_instances_per_row, max_predictions_per_seq)
    if not 0.0 <= eval_fraction < 1.0:
        raise ValueError(f"eval_fraction must be in [0, 1), got {eval_fraction!r}.")
    if not isinstance(bucket_bytes, int) or bucket_bytes < 1:
        raise ValueError(f"bucket_bytes must be a positive int, got {bucket_bytes!r}.")
    if tokenizer is None and vocabulary is not None:
        # A vocab.txt is a tokenizer alone: no preset to resolve (nor its weights package).
        tokenizer = BertTokenizer(vocabulary, lowercase=True if lowercase is None else lowercase)
    elif tokenizer is None:
        kwargs = {} if lowercase is None else {"lowercase": lowercase}
        tokenizer = BertTokenizer.from_preset(tokenizer_preset, **kwargs)
    # A vocabulary without [CLS], [SEP] or [MASK] fails here, before any corpus work.
    instance_lib.masking_config(tokenizer, masked_lm_prob, max_predictions_per_seq,
                                mask_token_rate, random_token_rate, whole_word_masking,
                                max_ngram)
    settings = corpus_buckets.PretrainingDataSettings(
        vocabulary=tuple(tokenizer.get_vocabulary()), lowercase=tokenizer.lowercase,
        layout=layout, text_field=text_field, max_line_bytes=max_line_bytes,
        sequence_length=sequence_length, max_predictions_per_seq=max_predictions_per_seq,
        masked_lm_prob=masked_lm_prob, mask_token_rate=mask_token_rate,
        random_token_rate=random_token_rate, dupe_factor=dupe_factor,
        short_seq_prob=short_seq_prob, whole_word_masking=whole_word_masking,
        max_ngram=max_ngram, instance_format=instance_format, static_masking=static_masking,
        eval_fraction=eval_fraction, bucket_bytes=bucket_bytes, seed=seed,
        max_instances_per_row=max_instances_per_row)

    output_dir = output_dir.rstrip("/")
    tf.io.gfile.makedirs(output_dir)
    for pattern in (*SHARD_PATTERNS, STATISTICS_FILE, "*.partial-*"):
        for old in tf.io.gfile.glob(f"{output_dir}/{pattern}"):
            tf.io.gfile.remove(old)
    sizes = [(path, tf.io.gfile.stat(path).length) for path in files]
    groups = corpus_buckets.plan_groups(sizes, bucket_bytes)
    num_eval_buckets = max(1, round(sum(s for _, s in sizes) * eval_fraction / bucket_bytes))
    log(f"create-pretraining-data: {len(files)} files in {len(groups)} groups -> {output_dir}")

    import logging

    # Beam warns at import that its optional Google Cloud client is missing; gs:// paths go
    # through tf.io.gfile here, so that is noise.
    logging.getLogger("apache_beam.io.filesystems").setLevel(logging.ERROR)
    import apache_beam as beam

    from keras_bert_suite.tasks.pretrainer.data.beam_transforms import build_pipeline

    # More workers than groups of files would only start idle processes.
    num_workers = num_workers or min(os.cpu_count() or 1, len(groups))
    with beam.Pipeline(options=_pipeline_options(pipeline_args, num_workers)) as pipeline:
        build_pipeline(pipeline, groups, settings, output_dir, num_eval_buckets)

    statistics = read_statistics(output_dir)
    _report(statistics, log)
    return statistics


def read_statistics(output_dir):
    import tensorflow as tf

    with tf.io.gfile.GFile(f"{output_dir.rstrip('/')}/{STATISTICS_FILE}") as f:
        return json.load(f)


def _report(statistics, log):
    log(f"{statistics['instances']} instances ({statistics.get('train_instances', 0)} train, "
        f"{statistics.get('eval_instances', 0)} eval) from "
        f"{statistics.get('documents_read', 0)} documents "
        f"({statistics['documents_skipped']} skipped); random-next rate "
        f"{statistics['random_next_rate']:.3f}, masked rate {statistics['masked_rate']:.3f}")
    skipped = {k: v for k, v in statistics.items() if k.startswith("skipped_") and v}
    if skipped:
        log(f"skipped: {skipped}")
    if statistics["instances"]:
        return
    used = statistics.get("train_documents", 0) + statistics.get("eval_documents", 0)
    if not used and not statistics.get("skipped_alone_in_bucket"):
        raise ValueError(
            f"The corpus is empty: no document has a sentence with a token "
            f"({statistics.get('documents_read', 0)} documents read, skipped: "
            f"{skipped or 'none'}). Check the input files and the layout (sentence_per_line, "
            "paragraph_per_line or jsonl).")
    raise ValueError(
        "Next-sentence prediction needs at least 2 documents (random-next segments come from "
        "another document of the same bucket); every bucket had 1. Separate documents with "
        "blank lines, give more files, or use another instance_format (e.g. 'doc_sentences').")


def _input_files(inputs):
    import tensorflow as tf

    patterns = [inputs] if isinstance(inputs, str) else list(inputs)
    if not patterns:
        raise ValueError("inputs is empty: give text files or glob patterns.")
    files = set()
    for pattern in patterns:
        matched = tf.io.gfile.glob(pattern)
        if not matched:
            raise ValueError(f"No input file matches {pattern!r}.")
        files.update(path for path in matched if not tf.io.gfile.isdir(path))
    return sorted(files)


def _pipeline_options(pipeline_args, num_workers):
    from apache_beam.options.pipeline_options import PipelineOptions

    args = list(pipeline_args)
    if not any(arg.startswith("--runner") for arg in args):
        args += ["--runner=DirectRunner", f"--direct_num_workers={num_workers}",
                 "--direct_running_mode=" + ("multi_processing" if num_workers > 1
                                             else "in_memory")]
    return PipelineOptions(args)

