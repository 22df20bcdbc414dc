"""Pretraining TFRecords in the ORIGINAL google-research/bert feature schema.

Files written here are read by google-research/bert's run_pretraining.py and Model Garden's
pretraining data loader, and files written by their create_pretraining_data.py are read here
unchanged. One `tf.train.Example` per instance (L = sequence_length, P = max_predictions_per_seq):

    input_ids             int64 [L]  token ids, masked, 0-padded
    input_mask            int64 [L]  1 = real token, 0 = padding
    segment_ids           int64 [L]  0 = [CLS] a [SEP], 1 = b [SEP], 0 on padding
    masked_lm_positions   int64 [P]  positions predicted, 0-padded
    masked_lm_ids         int64 [P]  original ids at those positions, 0-padded
    masked_lm_weights     float [P]  1.0 for a real prediction, 0.0 for padding (the original
                                     writes this one as a float_list, not int64)
    next_sentence_labels  int64 [1]  1 = B is a random segment, 0 = B follows A

The reader renames them to this library's names (flat dict, int32 except the weights):

    token_ids [L], padding_mask [L], segment_ids [L], mask_positions [P], mlm_labels [P],
    mlm_weights [P] float32, nsp_labels []

PACKED rows (`kbs create-pretraining-data --max_instances_per_row K`, packing.py): several
instances in one record, K = max_instances_per_row. The same features, except:

    instance_ids           int64 [L]  the instance number 1, 2, ... K of every token, 0 on
                                      padding (in place of input_mask, so that a reader of
                                      the original schema fails on it instead of misreading it)
    masked_lm_positions    int64 [P]  positions in the row (each instance's after the other's)
    next_sentence_labels   int64 [K]  per instance, 0 for an empty slot
    next_sentence_weights  float [K]  1.0 for an instance, 0.0 for an empty slot

read with `read_pretraining_tfrecords(..., max_instances_per_row=K)` as padding_mask [L]
(instance numbers), nsp_labels [K] and nsp_weights [K].

`pretraining_model_inputs` turns that into `(x, y)` for BertPretrainer.fit (see
dynamic_masking.py for the same layout with fresh masks each epoch). Reading streams: files are
listed (sharded input, glob patterns allowed), interleaved, shuffled through a bounded buffer
and parsed lazily — the corpus is never in memory.
"""

import tensorflow as tf

FEATURE_NAMES = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions",
                 "masked_lm_ids", "masked_lm_weights", "next_sentence_labels")
# Original schema name -> our name.
RENAMES = {"input_ids": "token_ids", "input_mask": "padding_mask", "segment_ids": "segment_ids",
           "masked_lm_positions": "mask_positions", "masked_lm_ids": "mlm_labels",
           "masked_lm_weights": "mlm_weights", "next_sentence_labels": "nsp_labels"}
# The packed schema's (see the module doc).
PACKED_RENAMES = {**{name: ours for name, ours in RENAMES.items() if name != "input_mask"},
                  "instance_ids": "padding_mask", "next_sentence_weights": "nsp_weights"}


def instance_to_example(instance, sequence_length=128, max_predictions_per_seq=20):
    """A PretrainingInstance -> tf.train.Example in the original schema (padded)."""
    length = len(instance.token_ids)
    if length > sequence_length:
        raise ValueError(f"The instance has {length} tokens, more than sequence_length="
                         f"{sequence_length}; create instances with the same sequence_length.")
    predictions = len(instance.masked_lm_positions)
    if predictions > max_predictions_per_seq:
        raise ValueError(f"The instance has {predictions} masked positions, more than "
                         f"max_predictions_per_seq={max_predictions_per_seq}.")
    pad = sequence_length - length
    pad_p = max_predictions_per_seq - predictions

    def ints(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))

    features = {
        "input_ids": ints(list(instance.token_ids) + [0] * pad),
        "input_mask": ints([1] * length + [0] * pad),
        "segment_ids": ints(list(instance.segment_ids) + [0] * pad),
        "masked_lm_positions": ints(list(instance.masked_lm_positions) + [0] * pad_p),
        "masked_lm_ids": ints(list(instance.masked_lm_ids) + [0] * pad_p),
        "masked_lm_weights": tf.train.Feature(float_list=tf.train.FloatList(
            value=[1.0] * predictions + [0.0] * pad_p)),
        "next_sentence_labels": ints([1 if instance.is_random_next else 0]),
    }
    return tf.train.Example(features=tf.train.Features(feature=features))


def packed_row_to_example(row, max_predictions_per_seq=20):
    """A packed row (packing.py's dict of arrays, our names) -> tf.train.Example in the
    packed schema; an unmasked row (no `mask_positions`) gets 0-padded predictions."""
    zeros = [0] * max_predictions_per_seq
    row = {"mask_positions": zeros, "mlm_labels": zeros,
           "mlm_weights": [0.0] * max_predictions_per_seq, **row}

    def feature(values):
        values = [value.item() if hasattr(value, "item") else value for value in values]
        if values and isinstance(values[0], float):
            return tf.train.Feature(float_list=tf.train.FloatList(value=values))
        return tf.train.Feature(int64_list=tf.train.Int64List(value=values))

    return tf.train.Example(features=tf.train.Features(feature={
        name: feature(list(row[ours])) for name, ours in PACKED_RENAMES.items()}))


def write_pretraining_tfrecords(instances, output_files, sequence_length=128,
                                max_predictions_per_seq=20):
    """Writes instances round-robin over the output files (shards), as the original does.

    `instances` may be any iterable (a generator streams). Returns the number written.
    """
    if isinstance(output_files, str):
        output_files = [output_files]
    if not output_files:
        raise ValueError("output_files is empty; give at least one path.")
    writers = [tf.io.TFRecordWriter(path) for path in output_files]
    count = 0
    try:
        for count, instance in enumerate(instances, start=1):
            example = instance_to_example(instance, sequence_length, max_predictions_per_seq)
            writers[(count - 1) % len(writers)].write(example.SerializeToString())
    finally:
        for writer in writers:
            writer.close()
    return count


def feature_spec(sequence_length=128, max_predictions_per_seq=20):
    """The `tf.io.parse_single_example` spec of the original schema."""
    L, P = sequence_length, max_predictions_per_seq
    return {
        "input_ids": tf.io.FixedLenFeature([L], tf.int64),
        "input_mask": tf.io.FixedLenFeature([L], tf.int64),
        "segment_ids": tf.io.FixedLenFeature([L], tf.int64),
        "masked_lm_positions": tf.io.FixedLenFeature([P], tf.int64),
        "masked_lm_ids": tf.io.FixedLenFeature([P], tf.int64),
        "masked_lm_weights": tf.io.FixedLenFeature([P], tf.float32),
        "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
    }


def packed_feature_spec(sequence_length=128, max_predictions_per_seq=20,
                        max_instances_per_row=3):
    """The `tf.io.parse_single_example` spec of the packed schema."""
    spec = feature_spec(sequence_length, max_predictions_per_seq)
    spec["instance_ids"] = spec.pop("input_mask")
    spec["next_sentence_labels"] = tf.io.FixedLenFeature([max_instances_per_row], tf.int64)
    spec["next_sentence_weights"] = tf.io.FixedLenFeature([max_instances_per_row], tf.float32)
    return spec


def parse_pretraining_example(serialized, sequence_length=128, max_predictions_per_seq=20,
                              max_instances_per_row=None):
    """A serialized Example -> flat dict with our names (see module doc): the original schema,
    or the packed one with `max_instances_per_row`."""
    if max_instances_per_row is None:
        spec, renames = feature_spec(sequence_length, max_predictions_per_seq), RENAMES
    else:
        spec = packed_feature_spec(sequence_length, max_predictions_per_seq,
                                   max_instances_per_row)
        renames = PACKED_RENAMES
    parsed = tf.io.parse_single_example(serialized, spec)
    out = {}
    for name, value in parsed.items():
        if value.dtype == tf.int64:
            value = tf.cast(value, tf.int32)
        out[renames[name]] = value
    if max_instances_per_row is None:
        out["nsp_labels"] = out["nsp_labels"][0]
    return out


def is_packed_tfrecord(file_patterns):
    """True when the first record of the files is in the packed schema."""
    if isinstance(file_patterns, str):
        file_patterns = [file_patterns]
    files = sorted({path for pattern in file_patterns for path in tf.io.gfile.glob(pattern)})
    for record in tf.data.TFRecordDataset(files[:1]).take(1):
        example = tf.train.Example.FromString(record.numpy())
        return "instance_ids" in example.features.feature
    return False


def restore_unmasked_ids(features):
    """token_ids with the original ids put back at the recorded masked positions.

    Lets dynamic masking run on statically masked files (google-research/bert's included):
    `ds.map(lambda f: {**f, "token_ids": restore_unmasked_ids(f)}).map(masker)`. Works on one
    example ([L]) or a batch ([B, L]).
    """
    token_ids, positions = features["token_ids"], features["mask_positions"]
    labels, valid = features["mlm_labels"], features["mlm_weights"] > 0
    if token_ids.shape.rank == 1:
        indices = tf.boolean_mask(positions, valid)[:, None]
        return tf.tensor_scatter_nd_update(token_ids, indices, tf.boolean_mask(labels, valid))
    rows = tf.broadcast_to(tf.range(tf.shape(positions)[0])[:, None], tf.shape(positions))
    indices = tf.boolean_mask(tf.stack([rows, positions], axis=-1), valid)
    return tf.tensor_scatter_nd_update(token_ids, indices, tf.boolean_mask(labels, valid))


def pretraining_model_inputs(features):
    """Flat dict -> (x, y) for BertPretrainer: x = token_ids, segment_ids, padding_mask,
    mask_positions; y = mlm_labels, mlm_weights, nsp_labels."""
    x = {name: features[name]
         for name in ("token_ids", "segment_ids", "padding_mask", "mask_positions")}
    y = {name: features[name] for name in ("mlm_labels", "mlm_weights", "nsp_labels",
                                           "nsp_weights")
         if name in features}
    return x, y


def read_pretraining_tfrecords(file_patterns, sequence_length=128, max_predictions_per_seq=20,
                               shuffle=True, shuffle_buffer_size=10_000, cycle_length=4,
                               repeat=False, seed=None, max_instances_per_row=None):
    """Streams pretraining TFRecords (original schema; the packed one with
    `max_instances_per_row`) as flat dicts with our names.

    Args:
        file_patterns: a path/glob or a list of them (sharded input).
        sequence_length, max_predictions_per_seq: what the files were written with.
        shuffle: shuffle the file order and examples (bounded buffer of
            `shuffle_buffer_size` examples; files interleaved `cycle_length` at a time).
        repeat: loop over the files forever (a new file order and shuffle each pass).
        seed: makes the order reproducible (the interleave is then deterministic).
    Unbatched; follow with `.batch(...)` and `.map(pretraining_model_inputs)`, or with a
    DynamicMasker.
    """
    if isinstance(file_patterns, str):
        file_patterns = [file_patterns]
    files = sorted({path for pattern in file_patterns for path in tf.io.gfile.glob(pattern)})
    if not files:
        raise ValueError(f"No file matches {file_patterns!r}.")
    dataset = tf.data.Dataset.from_tensor_slices(files)
    if shuffle:
        dataset = dataset.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
    if repeat:
        dataset = dataset.repeat()
    dataset = dataset.interleave(
        tf.data.TFRecordDataset, cycle_length=min(cycle_length, len(files)),
        num_parallel_calls=tf.data.AUTOTUNE, deterministic=seed is not None or not shuffle)
    if shuffle:
        dataset = dataset.shuffle(shuffle_buffer_size, seed=seed, reshuffle_each_iteration=True)
    return dataset.map(
        lambda record: parse_pretraining_example(record, sequence_length, max_predictions_per_seq,
                                                 max_instances_per_row),
        num_parallel_calls=tf.data.AUTOTUNE, deterministic=seed is not None or not shuffle)
