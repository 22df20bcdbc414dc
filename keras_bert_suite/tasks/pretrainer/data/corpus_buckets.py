"""A corpus cut into buckets of documents, and a bucket -> one shard of pretraining records.

The work of `create_pretraining_data` (pipeline.py) without Beam, so it can be read and
tested on its own. The corpus is never in memory: instances are made per BUCKET, a run of
consecutive documents holding about `bucket_bytes` of text, and random-next segments (NSP) are
drawn from the other documents of the same bucket. With the default 4 MB a bucket holds
hundreds of Wikipedia articles; the original script drew from the whole corpus, which it held in
memory.

* Files are listed, sorted and packed into GROUPS of about `bucket_bytes` (a larger file is a
  group of its own): a group is one unit of parallel work.
* Within a group, documents stream in file order; a bucket is closed once it holds
  `bucket_bytes` of text. A last bucket of less than half that joins the one before it, so a
  bucket has enough partners.
* Held-out documents (`eval_fraction`, drawn per document by a hash of seed, file and position)
  are routed to hash-keyed eval buckets instead (pipeline.py groups them).
* Each bucket gets its own `random.Random` seeded by (seed, split, group, bucket), and writes one
  shard `{split}-{group:05d}-{bucket:04d}.tfrecord` with its instances shuffled. So the records
  depend only on the input and the settings, never on the number of workers or their timing.
"""

import collections
import dataclasses
import hashlib
import random
import uuid

from keras_bert_suite.tasks.pretrainer.data import documents as document_io
from keras_bert_suite.tasks.pretrainer.data import instances as instance_lib

DEFAULT_BUCKET_BYTES = 4 << 20
STATISTICS_FILE = "statistics.json"


@dataclasses.dataclass(frozen=True)
class PretrainingDataSettings:
    """Everything that decides the records (the statistics file repeats it)."""

    vocabulary: tuple  # the tokens, so remote workers need no vocab file
    lowercase: bool = True
    layout: str = "sentence_per_line"
    text_field: str = "text"
    max_line_bytes: int = document_io.DEFAULT_MAX_LINE_BYTES
    sequence_length: int = 128
    max_predictions_per_seq: int = 20
    masked_lm_prob: float = 0.15
    mask_token_rate: float = 0.8
    random_token_rate: float = 0.1
    dupe_factor: int = 10
    short_seq_prob: float = 0.1
    whole_word_masking: bool = False
    max_ngram: int = 1
    instance_format: str = "nsp"  # instances.py's INSTANCE_FORMATS
    static_masking: bool = True
    eval_fraction: float = 0.0
    bucket_bytes: int = DEFAULT_BUCKET_BYTES
    seed: int = 12345
    # None: one instance per record (the original schema); K: packed rows of up to K
    # instances (the packed schema, tfrecords.py).
    max_instances_per_row: int = None

    def describe(self):
        """JSON-ready settings (the vocabulary as its size)."""
        out = dataclasses.asdict(self)
        out["vocabulary"] = f"{len(self.vocabulary)} tokens"
        return out


def plan_groups(files_with_sizes, bucket_bytes):
    """[(path, size)] sorted by path -> [(group index, [paths])], about bucket_bytes each."""
    groups, current, size = [], [], 0
    for path, file_size in files_with_sizes:
        if current and size + file_size > bucket_bytes:
            groups.append(current)
            current, size = [], 0
        current.append(path)
        size += file_size
    if current:
        groups.append(current)
    return list(enumerate(groups))


def unit_hash(*parts):
    """A float in [0, 1) from the parts' text: the same in every process and on every run."""
    digest = hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2.0**64


class BucketWriter:
    """Turns buckets of documents into shards; one per worker process (holds the tokenizer)."""

    def __init__(self, settings, output_dir):
        from keras_bert_suite.text import BertTokenizer

        self.settings = settings
        self.output_dir = output_dir.rstrip("/")
        self.tokenizer = BertTokenizer(list(settings.vocabulary), lowercase=settings.lowercase)
        self.config = instance_lib.masking_config(
            self.tokenizer, settings.masked_lm_prob, settings.max_predictions_per_seq,
            settings.mask_token_rate, settings.random_token_rate, settings.whole_word_masking,
            settings.max_ngram)

    def group_documents(self, group_index, paths, statistics):
        """Yields ("train", bucket index, documents) for a group's buckets and
        ("eval", document key, sentences) for each held-out document."""
        s = self.settings
        pending, current, size, bucket_index = None, [], 0, 0
        for path in paths:
            documents = document_io.read_file_documents(
                path, s.layout, s.text_field, s.max_line_bytes, statistics)
            for ordinal, (sentences, document_bytes) in enumerate(documents):
                if s.eval_fraction and unit_hash(s.seed, "eval", path, ordinal) < s.eval_fraction:
                    yield "eval", f"{path}\x1f{ordinal}", sentences
                    continue
                current.append(sentences)
                size += document_bytes
                if size >= s.bucket_bytes:
                    if pending is not None:
                        yield "train", bucket_index, pending
                        bucket_index += 1
                    pending, current, size = current, [], 0
        if pending is not None and current and size < s.bucket_bytes // 2:
            pending, current = pending + current, []
        for bucket in (pending, current):
            if bucket:
                yield "train", bucket_index, bucket
                bucket_index += 1

    def write_bucket(self, split, name, rng_key, documents, statistics):
        """Tokenizes, makes instances, shuffles and writes one shard; counts into statistics.

        Returns the shard's path (None when the bucket gave no instance).
        """
        s = self.settings
        tokenized = instance_lib.tokenize_documents(documents, self.tokenizer)
        statistics["skipped_empty"] += len(documents) - len(tokenized)
        if s.instance_format == "nsp" and len(tokenized) == 1:
            # No partner for a random next segment (a bucket of one document: a file larger
            # than a bucket that holds a single document, or a lone held-out document).
            statistics["skipped_alone_in_bucket"] += 1
            return None
        statistics[f"{split}_documents"] += len(tokenized)
        statistics["sentences"] += sum(len(d) for d in tokenized)
        statistics["corpus_tokens"] += sum(len(x) for d in tokenized for x in d)
        if not tokenized:
            return None
        rng = random.Random(f"{s.seed}\x1f{rng_key}")
        records = []
        for instance in instance_lib.instances_from_token_documents(
                tokenized, rng, self.config, s.sequence_length, s.dupe_factor, s.short_seq_prob,
                s.instance_format, s.static_masking):
            statistics[f"{split}_instances"] += 1
            statistics["random_next"] += instance.is_random_next
            statistics["instance_tokens"] += len(instance.token_ids)
            statistics["masked_positions"] += len(instance.masked_lm_positions)
            records.append(instance if s.max_instances_per_row else serialize(instance, s))
        rng.shuffle(records)
        if s.max_instances_per_row:
            records = packed_records(records, s)
            statistics[f"{split}_rows"] += len(records)
        path = f"{self.output_dir}/{split}-{name}.tfrecord"
        write_records(path, records)
        statistics["shards"] += 1
        return path


def serialize(instance, settings):
    from keras_bert_suite.tasks.pretrainer.data.tfrecords import instance_to_example

    # deterministic=True: the Example's feature map is otherwise written in an order that
    # varies from process to process.
    example = instance_to_example(instance, settings.sequence_length,
                                  settings.max_predictions_per_seq)
    return example.SerializeToString(deterministic=True)


def packed_records(instances, settings):
    """Instances (in the order given) -> serialized packed rows (packing.py, first-fit)."""
    import tensorflow as tf

    from keras_bert_suite.tasks.pretrainer.data.packing import instance_features, pack_instances
    from keras_bert_suite.tasks.pretrainer.data.tfrecords import packed_row_to_example

    s = settings
    features = instance_features(instances, s.sequence_length, s.max_predictions_per_seq,
                                 masked=s.static_masking)
    rows = pack_instances(tf.data.Dataset.from_tensor_slices(features), s.sequence_length,
                          s.max_instances_per_row, s.max_predictions_per_seq, s.masked_lm_prob)
    return [packed_row_to_example(row, s.max_predictions_per_seq).SerializeToString(
        deterministic=True) for row in rows.as_numpy_iterator()]


def write_records(path, records):
    """Writes a shard under a temporary name, then renames it: a retried or killed worker never
    leaves a half-written shard under the final name."""
    import tensorflow as tf

    partial = f"{path}.partial-{uuid.uuid4().hex}"
    with tf.io.TFRecordWriter(partial) as writer:
        for record in records:
            writer.write(record)
    tf.io.gfile.rename(partial, path, overwrite=True)


def new_statistics():
    return collections.Counter()
