"""Dynamic masked-LM masking in tf.data: a new mask every epoch (RoBERTa style).

    masker = DynamicMasker.from_tokenizer(tokenizer, max_predictions_per_seq=20)
    ds = read_pretraining_tfrecords("shards-*.tfrecord").batch(32)
    ds = apply_dynamic_masking(ds, masker, seed=7)   # (x, y) batches for BertPretrainer.fit

Input: a dict (one example [L] or a batch [B, L]) with
    token_ids     int  unmasked ids, e.g. from the packer or from TFRecords written with
                       `static_masking=False` (for masked files, see restore_unmasked_ids)
    segment_ids   int
    padding_mask  int/bool  1 = real token (packed rows: the instance numbers 1, 2, ...,
                  packing.py)
    nsp_labels    int [] / [B]  (optional; passed through when present; packed: [K] / [B, K]
                  with nsp_weights, passed through too)

Output: `(x, y)`, P = max_predictions_per_seq:
    x["token_ids"]      int32 [B, L]  masked ids
    x["segment_ids"]    int32 [B, L]
    x["padding_mask"]   int32 [B, L]
    x["mask_positions"] int32 [B, P]  ascending positions predicted, padded with 0
    y["mlm_labels"]     int32 [B, P]  original ids at mask_positions, 0 on padding
    y["mlm_weights"]    float32 [B, P] 1.0 = real prediction, 0.0 = padding
    y["nsp_labels"]     int32 [B]     only when the input had nsp_labels (0 = true next)

Selection follows masking.py (the original's rules) with core TF ops:
* eligible: real tokens (padding_mask) that are not [CLS], [SEP] or [PAD];
* per instance (a row, or each instance of a packed row),
  `num_to_predict = min(P, max(1, round(num_real_tokens * mask_selection_rate)))`;
* units (tokens, or whole words with `whole_word_masking`: a piece that continues a word by
  the tokenizer's rule, "##" in WordPiece, joins the word before it) are taken in a random order while the running count stays <= num_to_predict. Unlike the
  original, which skips a word that does not fit and tries later ones, the first word that
  does not fit ends the selection (words longer than num_to_predict are never candidates), so
  whole-word masking can select a token or two fewer than num_to_predict;
* n-gram units with `max_ngram` > 1 (ALBERT): each row's whole words are cut into consecutive
  n-grams, n drawn with p(n) proportional to 1/n (n <= 3: 6/11, 3/11, 2/11), an n-gram being
  cut short where it would run past [CLS] / [SEP] or into another instance; the n-grams are
  then the units above;
* each selected token: [MASK] with `mask_token_rate`, a uniformly random vocabulary id with
  `random_token_rate`, else unchanged.

Randomness is stateless: `apply_dynamic_masking` zips the data with
`tf.data.Dataset.random(seed, rerandomize_each_iteration=True)`, so a seed reproduces the run
while every epoch (every new iterator) gets new masks.
"""

import numpy as np
import tensorflow as tf

from keras_bert_suite.tasks.pretrainer.data import static_masking as masking


class DynamicMasker:
    """Callable `(features, seed=None) -> (x, y)` (see module doc); use it in `Dataset.map`."""

    def __init__(self, vocabulary_size, mask_token_id, cls_token_id, sep_token_id,
                 pad_token_id=0, max_predictions_per_seq=20, mask_selection_rate=0.15,
                 mask_token_rate=0.8, random_token_rate=0.1, whole_word_masking=False,
                 is_continuation=None, max_ngram=1):
        masking.check_rates(mask_selection_rate, max_predictions_per_seq, mask_token_rate,
                            random_token_rate)
        masking.check_max_ngram(max_ngram)
        whole_word_masking = masking.masks_whole_words(whole_word_masking, max_ngram)
        if whole_word_masking and is_continuation is None:
            raise ValueError("whole_word_masking (and max_ngram > 1, which masks whole words) "
                             "needs is_continuation; use from_tokenizer.")
        self.max_ngram = max_ngram
        self.ngram_log_probs = np.log(masking.ngram_lengths(max_ngram)[1]).astype(np.float32)
        self.vocabulary_size = int(vocabulary_size)
        self.mask_token_id = int(mask_token_id)
        self.special_token_ids = [int(cls_token_id), int(sep_token_id), int(pad_token_id)]
        self.max_predictions_per_seq = int(max_predictions_per_seq)
        self.mask_selection_rate = float(mask_selection_rate)
        self.mask_token_rate = float(mask_token_rate)
        self.random_token_rate = float(random_token_rate)
        self.whole_word_masking = bool(whole_word_masking)
        self.is_continuation = None if is_continuation is None else np.asarray(
            is_continuation, bool)

    @classmethod
    def from_tokenizer(cls, tokenizer, **kwargs):
        """Special-token ids and word starts from a tokenizer (ValueError if the mask, cls or sep
        token lacks)."""
        vocabulary = tokenizer.get_vocabulary()
        if kwargs.get("whole_word_masking") or kwargs.get("max_ngram", 1) > 1:
            kwargs.setdefault("is_continuation", ~tokenizer.word_start_flags())
        return cls(len(vocabulary), tokenizer.mask_token_id, tokenizer.cls_token_id,
                   tokenizer.sep_token_id, tokenizer.pad_token_id, **kwargs)

    def __call__(self, features, seed=None):
        if seed is None:
            seed = tf.random.uniform([2], maxval=tf.int64.max, dtype=tf.int64)
        token_ids = tf.cast(features["token_ids"], tf.int32)
        unbatched = token_ids.shape.rank == 1
        expand = (lambda t: t[None]) if unbatched else (lambda t: t)
        token_ids = expand(token_ids)
        segment_ids = expand(tf.cast(features["segment_ids"], tf.int32))
        padding_mask = expand(tf.cast(features["padding_mask"], tf.int32))
        masked, positions, labels, weights = self._mask(token_ids, padding_mask, seed)
        x = {"token_ids": masked, "segment_ids": segment_ids, "padding_mask": padding_mask,
             "mask_positions": positions}
        y = {"mlm_labels": labels, "mlm_weights": weights}
        if "nsp_labels" in features:
            y["nsp_labels"] = expand(tf.cast(features["nsp_labels"], tf.int32))
        if "nsp_weights" in features:
            y["nsp_weights"] = expand(tf.cast(features["nsp_weights"], tf.float32))
        if unbatched:
            x = {k: v[0] for k, v in x.items()}
            y = {k: v[0] for k, v in y.items()}
        return x, y

    def _mask(self, token_ids, padding_mask, seed):
        select_seed, replace_seed, random_seed, ngram_seed = tf.unstack(
            tf.random.experimental.stateless_split(tf.cast(seed, tf.int64), 4))
        shape = tf.shape(token_ids)
        batch, length = shape[0], shape[1]
        num_predictions = self.max_predictions_per_seq
        special = tf.reduce_any(
            token_ids[..., None] == tf.constant(self.special_token_ids, tf.int32), axis=-1)
        eligible = (padding_mask > 0) & ~special  # [B, L]
        # Per instance k of each row (k = the padding mask's value; 0 = padding).
        instance_segments = padding_mask + tf.range(batch)[:, None] * (length + 1)  # [B, L]

        def per_instance(values, segments=instance_segments):  # -> [B, L + 1] sums
            return tf.reshape(tf.math.unsorted_segment_sum(values, segments, batch * (length + 1)),
                              [batch, length + 1])

        num_to_predict = predictions_per_instance(  # [B, L + 1]
            per_instance(tf.cast(padding_mask > 0, tf.int32)), self.mask_selection_rate,
            num_predictions)

        # Units: a unit starts at every eligible token that does not continue a word.
        starts = eligible
        if self.whole_word_masking:
            continuation = tf.gather(tf.constant(self.is_continuation), token_ids)
            previous_eligible = tf.pad(eligible[:, :-1], [[0, 0], [1, 0]])
            starts = eligible & ~(continuation & previous_eligible)
        if self.max_ngram > 1:
            starts = self._ngram_starts(starts, eligible, padding_mask, ngram_seed)
        unit = tf.cumsum(tf.cast(starts, tf.int32), axis=1) - 1  # [B, L] unit index per token
        unit = tf.maximum(unit, 0)
        flat_unit = tf.where(eligible, unit + tf.range(batch)[:, None] * length, batch * length)
        unit_length = tf.reshape(tf.math.unsorted_segment_sum(
            tf.ones([batch * length], tf.int32), tf.reshape(flat_unit, [-1]),
            batch * length + 1)[:-1],
            [batch, length])  # [B, L] tokens per unit slot
        unit_instance = tf.maximum(0, tf.reshape(tf.math.unsorted_segment_max(
            tf.reshape(padding_mask, [-1]), tf.reshape(flat_unit, [-1]),
            batch * length + 1)[:-1], [batch, length]))  # [B, L] each unit slot's instance
        quota = tf.gather(num_to_predict, unit_instance, batch_dims=1)  # [B, L]
        candidate = (unit_length > 0) & (unit_length <= quota)
        score = tf.random.stateless_uniform([batch, length], select_seed)
        order = tf.argsort(tf.where(candidate, score, 2.0), axis=1)  # [B, L] random unit order
        # ... grouped by instance (a stable sort keeps each one's random order).
        order = tf.gather(order, tf.argsort(tf.gather(unit_instance, order, batch_dims=1),
                                            axis=1, stable=True), batch_dims=1)
        candidate_length = unit_length * tf.cast(candidate, tf.int32)
        # Tokens taken by the instance's units so far: the running count less the units of
        # the instances before it.
        before = tf.cumsum(per_instance(tf.reshape(candidate_length, [-1]), tf.reshape(
            unit_instance + tf.range(batch)[:, None] * (length + 1), [-1])), axis=1,
            exclusive=True)  # [B, L + 1]
        instance_sorted = tf.gather(unit_instance, order, batch_dims=1)
        taken = tf.cumsum(tf.gather(candidate_length, order, batch_dims=1), axis=1) - tf.gather(
            before, instance_sorted, batch_dims=1)
        chosen_sorted = (taken <= tf.gather(quota, order, batch_dims=1)) & tf.gather(
            candidate, order, batch_dims=1)
        chosen_unit = tf.gather(chosen_sorted, tf.argsort(order, axis=1), batch_dims=1)
        selected = tf.gather(chosen_unit, unit, batch_dims=1) & eligible  # [B, L]

        # Positions: selected ones first, in ascending order, padded to P with 0.
        position = tf.range(length)[None, :]
        key = tf.sort(tf.where(selected, position, length + position), axis=1)
        key = tf.pad(key, [[0, 0], [0, tf.maximum(0, num_predictions - length)]],
                     constant_values=2 * length)[:, :num_predictions]
        valid = key < length  # [B, P]
        positions = tf.where(valid, key, 0)
        labels = tf.where(valid, tf.gather(token_ids, positions, batch_dims=1), 0)
        weights = tf.cast(valid, tf.float32)

        draw = tf.random.stateless_uniform([batch, length], replace_seed)
        random_ids = tf.random.stateless_uniform(
            [batch, length], random_seed, maxval=self.vocabulary_size, dtype=tf.int32)
        to_mask = selected & (draw < self.mask_token_rate)
        to_random = selected & ~to_mask & (draw < self.mask_token_rate + self.random_token_rate)
        masked = tf.where(to_mask, self.mask_token_id, tf.where(to_random, random_ids, token_ids))
        return masked, positions, labels, weights


    def _ngram_starts(self, word_starts, eligible, padding_mask, seed):
        """[B, L] the first token of each n-gram unit: each row's words are cut into
        consecutive n-grams whose lengths n are drawn with p(n) proportional to 1/n; an n-gram
        never runs past a token that cannot be masked ([CLS], [SEP]) nor into another
        instance."""
        shape = tf.shape(word_starts)
        batch, length = shape[0], shape[1]
        word = tf.cumsum(tf.cast(word_starts, tf.int32), axis=1) - 1  # [B, L] word index
        # Lengths for up to L n-grams per row, and the word each n-gram starts at.
        lengths = tf.random.stateless_categorical(
            tf.tile(tf.constant(self.ngram_log_probs)[None], [batch * length, 1]), 1,
            seed)[:, 0]
        lengths = tf.reshape(tf.cast(lengths, tf.int32) + 1, [batch, length])
        first_word = tf.cumsum(lengths, axis=1, exclusive=True)  # [B, L]
        starts_ngram = tf.reduce_any(  # [B, L, L] is word w the first of some n-gram?
            tf.equal(word[:, :, None], first_word[:, None, :]), axis=-1)
        previous = tf.pad(eligible[:, :-1], [[0, 0], [1, 0]])
        previous_instance = tf.pad(padding_mask[:, :-1], [[0, 0], [1, 0]])
        boundary = ~previous | tf.not_equal(previous_instance, padding_mask)
        return word_starts & (starts_ngram | boundary)


def predictions_per_instance(num_real_tokens, mask_selection_rate, max_predictions):
    """How many tokens an instance of `num_real_tokens` has masked (at most):
    min(P, max(1, round(n * rate))), elementwise on an int tensor or array."""
    rounded = tf.cast(tf.round(tf.cast(num_real_tokens, tf.float32) * mask_selection_rate),
                      tf.int32)
    return tf.minimum(max_predictions, tf.maximum(1, rounded))


def apply_dynamic_masking(dataset, masker, seed=None):
    """dataset of feature dicts -> dataset of (x, y), masked afresh on every iteration."""
    seeds = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True).batch(2)
    return tf.data.Dataset.zip((dataset, seeds)).map(
        lambda features, s: masker(features, s), num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True)
