"""SegmentPacker: token id segments -> `[CLS] a [SEP] b [SEP]` + segment ids + padding mask.

Core TensorFlow ops only (no `TFText>RoundRobinTrim`), so the packed graph is served by any
TF Serving >= 2.12.
"""

import keras
import tensorflow as tf

from keras_bert_suite.text import truncation
from keras_bert_suite.text.preprocessing_layer import PreprocessingLayer
from keras_bert_suite.text.preprocessing_layer import to_numpy_if_eager


@keras.saving.register_keras_serializable(package="keras_bert_suite")
class SegmentPacker(PreprocessingLayer):
    """Packs one or more segments of ids into fixed-length BERT inputs.

    Args:
        sequence_length: length of every packed row, special tokens included.
        cls_token_id, sep_token_id, pad_token_id: ids of [CLS], [SEP], [PAD].
        truncate: "round_robin" (tf-text's RoundRobinTrimmer) or "longest_first" (Hugging
            Face); see truncation.py. Every non-empty segment keeps at least one token.

    Call: a segment or a tuple/list of segments, each [B, None] (ragged or dense) or [T] ids
    of one example. Returns {"token_ids", "segment_ids", "padding_mask"}: int32,
    [B, sequence_length] (or [sequence_length] for one example); numpy arrays when run
    eagerly, tensors inside tf.data / tf.function.
    """

    def __init__(self, sequence_length, cls_token_id, sep_token_id, pad_token_id=0,
                 truncate="round_robin", **kwargs):
        super().__init__(**kwargs)
        if truncate not in truncation.STRATEGIES:
            raise ValueError(f"truncate must be one of {truncation.STRATEGIES}, got {truncate!r}.")
        _check_length(sequence_length, num_segments=1)
        self.sequence_length = int(sequence_length)
        self.cls_token_id = int(cls_token_id)
        self.sep_token_id = int(sep_token_id)
        self.pad_token_id = int(pad_token_id)
        self.truncate = truncate

    @tf.autograph.experimental.do_not_convert  # plain TF code
    def call(self, segments):
        segments = list(segments) if isinstance(segments, (tuple, list)) else [segments]
        _check_length(self.sequence_length, len(segments))
        segments, unbatched = _as_ragged_batch(segments)
        lengths = tf.stack([tf.cast(s.row_lengths(), tf.int32) for s in segments], axis=1)  # [B, S]
        budget = self.sequence_length - len(segments) - 1  # room left by [CLS] and the [SEP]s
        kept = tf.cast(truncation.allocate(lengths, budget, self.truncate), tf.int64)  # [B, S]

        # Every output position is filled by dense ops on [B, sequence_length]: where each
        # segment starts, which of its ids lands where, its [SEP] right after. Ragged slicing
        # and concatenation computed the same with ~950 ops per segment to trace and
        # instantiate (their shape checks); this graph has ~20 per segment.
        position = tf.range(self.sequence_length, dtype=tf.int64)[None, :]  # [1, L]
        starts = 1 + tf.cumsum(kept + 1, axis=1, exclusive=True)  # [B, S]: after [CLS] and [SEP]s
        token_ids = tf.where(position == 0, tf.constant(self.cls_token_id, tf.int32),
                             tf.constant(self.pad_token_id, tf.int32))  # [1, L]
        segment_ids = tf.zeros_like(token_ids)
        for i, segment in enumerate(segments):
            offset = position - starts[:, i:i + 1]  # [B, L]: index into the segment's kept ids
            count = kept[:, i:i + 1]
            inside = (offset >= 0) & (offset < count)
            # Positions outside the segment read one appended 0, so no index is out of range.
            values = tf.concat([segment.values, tf.zeros([1], tf.int32)], axis=0)
            index = tf.where(inside, segment.row_starts()[:, None] + offset,
                             tf.shape(segment.values, out_type=tf.int64)[0])
            separator = offset == count
            token_ids = tf.where(inside, tf.gather(values, index), token_ids)
            token_ids = tf.where(separator, tf.constant(self.sep_token_id, tf.int32), token_ids)
            segment_ids = tf.where(inside | separator, tf.constant(i, tf.int32), segment_ids)
        # Positions past the last [SEP] were never written: padding, segment 0.
        total = 1 + tf.reduce_sum(kept + 1, axis=1, keepdims=True)  # [B, 1] ids in the row
        outputs = {"token_ids": token_ids, "segment_ids": segment_ids,
                   "padding_mask": tf.cast(position < total, tf.int32)}
        if unbatched:
            outputs = {name: value[0] for name, value in outputs.items()}
        return to_numpy_if_eager(outputs)

    def get_config(self):
        config = super().get_config()
        config.update({
            "sequence_length": self.sequence_length,
            "cls_token_id": self.cls_token_id,
            "sep_token_id": self.sep_token_id,
            "pad_token_id": self.pad_token_id,
            "truncate": self.truncate,
        })
        return config


def _check_length(sequence_length, num_segments):
    needed = 2 * num_segments + 1  # [CLS], one [SEP] per segment, one token per segment
    if not isinstance(sequence_length, int) or isinstance(sequence_length, bool) \
            or sequence_length < needed:
        raise ValueError(
            f"sequence_length={sequence_length!r} is too small for {num_segments} segment(s): "
            f"[CLS], {num_segments} [SEP] and at least one token of each segment need "
            f"{needed}. Use sequence_length >= {needed}.")


def _as_ragged_batch(segments):
    """Converts every segment to [B, None] int32 ragged; says whether the input was one example."""
    ranks = set()
    out = []
    for segment in segments:
        if not isinstance(segment, tf.RaggedTensor):
            segment = tf.convert_to_tensor(segment)
        if not segment.dtype.is_integer:
            raise ValueError(f"SegmentPacker takes integer token ids, got {segment.dtype.name}. "
                             "Tokenize text first (BertTokenizer) or use BertPreprocessor.")
        rank = segment.shape.rank
        if rank not in (1, 2):
            raise ValueError(f"Each segment must be [T] (one example) or [B, T], got shape "
                             f"{segment.shape}.")
        ranks.add(rank)
        if rank == 1:  # one example (a ragged tensor always has rank >= 2)
            segment = tf.RaggedTensor.from_tensor(segment[None])
        elif not isinstance(segment, tf.RaggedTensor):
            segment = tf.RaggedTensor.from_tensor(segment)
        out.append(tf.cast(segment, tf.int32).with_row_splits_dtype(tf.int64))
    if len(ranks) > 1:
        raise ValueError("Segments must all be batched ([B, T]) or all single examples ([T]).")
    return out, ranks == {1}
