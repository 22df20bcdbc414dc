"""SegmentPacker: token id segments -> `[CLS] a [SEP] b [SEP]` (or RoBERTa's
`<s> a </s></s> b </s>`) + segment ids + padding mask.

Core TensorFlow ops only (no `TFText>RoundRobinTrim`), so the packed graph is served by any
TF Serving >= 2.12.
"""

import keras
import tensorflow as tf

from keras_bert_suite.text import truncation
from keras_bert_suite.text.preprocessing_layer import PreprocessingLayer
from keras_bert_suite.text.preprocessing_layer import to_numpy_if_eager

LAYOUTS = ("bert", "roberta")


@keras.saving.register_keras_serializable(package="keras_bert_suite")
class SegmentPacker(PreprocessingLayer):
    """Packs one or more segments of ids into fixed-length BERT inputs.

    Args:
        sequence_length: length of every packed row, special tokens included.
        cls_token_id, sep_token_id, pad_token_id: ids of [CLS], [SEP], [PAD].
        truncate: "round_robin" (tf-text's RoundRobinTrimmer) or "longest_first" (Hugging
            Face); see truncation.py. Every non-empty segment keeps at least one token.
        layout: "bert" (`[CLS] a [SEP] b [SEP]`, segment ids 0, 1, ...) or "roberta"
            (`<s> a </s></s> b </s>`: each later segment opens with one more separator, and
            every segment id is 0, as RoBERTa and XLM-R have one segment row).

    Call: a segment or a tuple/list of segments, each [B, None] (ragged or dense) or [T] ids
    of one example. Returns {"token_ids", "segment_ids", "padding_mask"}: int32,
    [B, sequence_length] (or [sequence_length] for one example); numpy arrays when run
    eagerly, tensors inside tf.data / tf.function.
    """

    def __init__(self, sequence_length, cls_token_id, sep_token_id, pad_token_id=0,
                 truncate="round_robin", layout="bert", **kwargs):
        super().__init__(**kwargs)
        if truncate not in truncation.STRATEGIES:
            raise ValueError(f"truncate must be one of {truncation.STRATEGIES}, got {truncate!r}.")
        if layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}.")
        _check_length(sequence_length, num_segments=1)
        self.sequence_length = int(sequence_length)
        self.cls_token_id = int(cls_token_id)
        self.sep_token_id = int(sep_token_id)
        self.pad_token_id = int(pad_token_id)
        self.truncate = truncate
        self.layout = layout

    @tf.autograph.experimental.do_not_convert  # plain TF code
    def call(self, segments):
        segments = list(segments) if isinstance(segments, (tuple, list)) else [segments]
        _check_length(self.sequence_length, len(segments), self.layout)
        segments, unbatched = _as_ragged_batch(segments)
        lengths = tf.stack([tf.cast(s.row_lengths(), tf.int32) for s in segments], axis=1)  # [B, S]
        opening = [0] + [1 if self.layout == "roberta" else 0] * (len(segments) - 1)
        budget = self.sequence_length - special_token_count(len(segments), self.layout)
        kept = tf.cast(truncation.allocate(lengths, budget, self.truncate), tf.int64)  # [B, S]

        # Every output position is filled by dense ops on [B, sequence_length]: where each
        # segment starts, which of its ids lands where, its [SEP] right after. Ragged slicing
        # and concatenation computed the same with ~950 ops per segment to trace and
        # instantiate (their shape checks); this graph has ~20 per segment.
        position = tf.range(self.sequence_length, dtype=tf.int64)[None, :]  # [1, L]
        starts = 1 + tf.cumsum(kept + 1 + tf.constant(opening, tf.int64), axis=1,
                               exclusive=True) + tf.constant(opening, tf.int64)  # [B, S]
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
            separator = (offset == count) | ((offset == -1) & (opening[i] == 1))
            token_ids = tf.where(inside, tf.gather(values, index), token_ids)
            token_ids = tf.where(separator, tf.constant(self.sep_token_id, tf.int32), token_ids)
            segment_id = i if self.layout == "bert" else 0
            segment_ids = tf.where(inside | separator, tf.constant(segment_id, tf.int32),
                                   segment_ids)
        # Positions past the last [SEP] were never written: padding, segment 0.
        total = 1 + tf.reduce_sum(kept + 1, axis=1, keepdims=True) + sum(opening)  # [B, 1]
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
            "layout": self.layout,
        })
        return config


def special_token_count(num_segments, layout):
    """[CLS], one [SEP] per segment, and RoBERTa's opening separators."""
    return num_segments + 1 + (num_segments - 1 if layout == "roberta" else 0)


def _check_length(sequence_length, num_segments, layout="bert"):
    needed = special_token_count(num_segments, layout) + num_segments  # + a token of each
    if not isinstance(sequence_length, int) or isinstance(sequence_length, bool) \
            or sequence_length < needed:
        raise ValueError(
            f"sequence_length={sequence_length!r} is too small for {num_segments} segment(s) "
            f"in the {layout!r} layout: the special tokens and at least one token of each "
            f"segment need {needed}. Use sequence_length >= {needed}.")


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
