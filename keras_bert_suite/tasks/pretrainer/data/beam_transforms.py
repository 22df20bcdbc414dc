"""The Beam transforms of `create_pretraining_data` (pipeline.py has the picture).

Training shards are written by the worker that reads their group of files (no shuffle of the
text); held-out documents are grouped by hash bucket; one statistics dict per unit of work is
summed into statistics.json.
"""

import json

import apache_beam as beam

from keras_bert_suite.tasks.pretrainer.data import corpus_buckets
from keras_bert_suite.tasks.pretrainer.data.corpus_buckets import STATISTICS_FILE


def build_pipeline(pipeline, groups, settings, output_dir, num_eval_buckets=1):
    """Adds the transforms to `pipeline`; returns the PCollection of the one merged statistics
    dict (also written to output_dir/statistics.json). Beam's testing utilities assert on it."""
    outputs = (pipeline
               | "FileGroups" >> beam.Create(groups)
               | "SpreadGroups" >> beam.Reshuffle()
               | "WriteTrainShards" >> beam.ParDo(
                   _WriteTrainShards(settings, output_dir, num_eval_buckets)).with_outputs(
                       _EVAL, main="statistics"))
    eval_statistics = (outputs[_EVAL]
                       | "GroupEvalBuckets" >> beam.GroupByKey()
                       | "WriteEvalShards" >> beam.ParDo(_WriteEvalShards(settings, output_dir)))
    return ((outputs.statistics, eval_statistics)
            | "AllStatistics" >> beam.Flatten()
            | "SumStatistics" >> beam.CombineGlobally(_sum_statistics)
            | "WriteStatistics" >> beam.Map(_write_statistics, settings, output_dir))


_EVAL = "eval_documents"


class _WriteTrainShards(beam.DoFn):
    """A group of files -> its training shards; held-out documents go out keyed by their
    eval bucket. Yields one statistics dict per group."""

    def __init__(self, settings, output_dir, num_eval_buckets):
        self.settings, self.output_dir = settings, output_dir
        self.num_eval_buckets = num_eval_buckets

    def setup(self):
        self.writer = corpus_buckets.BucketWriter(self.settings, self.output_dir)

    def process(self, group):
        group_index, paths = group
        statistics = corpus_buckets.new_statistics()
        for split, key, documents in self.writer.group_documents(group_index, paths,
                                                                 statistics):
            if split == "eval":
                bucket = int(corpus_buckets.unit_hash(self.settings.seed, "eval-bucket", key)
                             * self.num_eval_buckets)
                yield beam.pvalue.TaggedOutput(_EVAL, (bucket, (key, documents)))
                continue
            self.writer.write_bucket("train", f"{group_index:05d}-{key:04d}",
                                     ("train", group_index, key), documents, statistics)
        yield dict(statistics)


class _WriteEvalShards(beam.DoFn):
    """An eval bucket (documents in key order, so the order of arrival does not matter)
    -> one shard."""

    def __init__(self, settings, output_dir):
        self.settings, self.output_dir = settings, output_dir

    def setup(self):
        self.writer = corpus_buckets.BucketWriter(self.settings, self.output_dir)

    def process(self, bucket_and_documents):
        bucket, keyed = bucket_and_documents
        documents = [document for _, document in sorted(keyed, key=lambda kd: kd[0])]
        statistics = corpus_buckets.new_statistics()
        self.writer.write_bucket("eval", f"{bucket:05d}-0000", ("eval", bucket), documents,
                                 statistics)
        yield dict(statistics)


def _sum_statistics(dicts):
    total = corpus_buckets.new_statistics()
    for statistics in dicts:
        total.update(statistics)
    return dict(total)


def _write_statistics(counts, settings, output_dir):
    import tensorflow as tf

    statistics = summarize(counts)
    statistics["settings"] = settings.describe()
    with tf.io.gfile.GFile(f"{output_dir}/{STATISTICS_FILE}", "w") as f:
        json.dump(statistics, f, indent=2, sort_keys=True)
    return statistics


def summarize(counts):
    """Counters -> the statistics file's numbers, rates included."""
    out = {name: int(value) for name, value in counts.items()}
    instances = out.get("train_instances", 0) + out.get("eval_instances", 0)
    out["instances"] = instances
    out["documents_skipped"] = sum(v for k, v in out.items()
                                   if k.startswith("skipped_") and k != "skipped_binary_files")
    out["random_next_rate"] = out.get("random_next", 0) / instances if instances else 0.0
    tokens = out.get("instance_tokens", 0)
    out["masked_rate"] = out.get("masked_positions", 0) / tokens if tokens else 0.0
    return out
