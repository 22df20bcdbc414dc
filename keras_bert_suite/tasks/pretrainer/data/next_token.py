"""Next-token targets for a left-to-right LM (GPT-1's objective, the BERT paper's "LTR & No
NSP" ablation), in the layout dynamic masking produces, so BertPretrainer's LM head and loss
serve a causal encoder unchanged:

    dataset = dataset.map(NextTokenTargets(max_predictions_per_seq=20))

Input: a dict (one example [L] or a batch [B, L]) of unmasked `token_ids`, `segment_ids`,
`padding_mask` (packed rows: instance numbers 1..K). Output `(x, y)`:
    x["token_ids"], x["segment_ids"], x["padding_mask"]   unchanged (nothing is masked)
    x["mask_positions"] int32 [B, P]  positions p whose next token is predicted, ascending
    y["mlm_labels"]     int32 [B, P]  token_ids[p + 1]
    y["mlm_weights"]    float32 [B, P] 1.0 = a prediction, 0.0 = a padded slot (position 0)
A position p qualifies when p and p + 1 are real tokens of the same instance (the [SEP] that
ends an instance is predicted; nothing after it is). With P >= L - 1 every qualifying position
is used, in order; with fewer, P of them drawn at random (without replacement) per row. The
causal encoder (`BertEncoder(causal=True)`) keeps the prediction at p from seeing p + 1.
"""

import tensorflow as tf


class NextTokenTargets:
    """Callable `(features, seed=None) -> (x, y)`; see the module doc."""

    def __init__(self, max_predictions_per_seq):
        if max_predictions_per_seq < 1:
            raise ValueError(f"max_predictions_per_seq must be positive, got "
                             f"{max_predictions_per_seq}.")
        self.max_predictions_per_seq = max_predictions_per_seq

    def __call__(self, features, seed=None):
        token_ids = tf.cast(features["token_ids"], tf.int32)
        unbatched = token_ids.shape.rank == 1
        expand = (lambda t: t[None]) if unbatched else (lambda t: t)
        token_ids = expand(token_ids)
        padding_mask = expand(tf.cast(features["padding_mask"], tf.int32))
        positions, labels, weights = self._targets(token_ids, padding_mask, seed)
        x = {"token_ids": token_ids,
             "segment_ids": expand(tf.cast(features["segment_ids"], tf.int32)),
             "padding_mask": padding_mask, "mask_positions": positions}
        y = {"mlm_labels": labels, "mlm_weights": weights}
        if unbatched:
            x = {k: v[0] for k, v in x.items()}
            y = {k: v[0] for k, v in y.items()}
        return x, y

    def _targets(self, token_ids, padding_mask, seed):
        if seed is None:
            seed = tf.random.uniform([2], maxval=tf.int64.max, dtype=tf.int64)
        length = tf.shape(token_ids)[1]
        predictions = self.max_predictions_per_seq
        following = tf.pad(padding_mask[:, 1:], [[0, 0], [0, 1]])  # the next token's instance
        qualifies = (padding_mask > 0) & tf.equal(following, padding_mask)  # [B, L]
        # In order when every position fits, else a random draw.
        in_order = tf.cast(tf.range(length)[None, :], tf.float32) / tf.cast(length, tf.float32)
        random = tf.random.stateless_uniform(tf.shape(token_ids), tf.cast(seed, tf.int64))
        score = tf.where(predictions >= length - 1, in_order, random)
        # Qualifying positions first (by score), the first P kept (padded with index L, a
        # position that never qualifies), then ascending.
        order = tf.argsort(tf.where(qualifies, score, 2.0 + score), axis=1)
        picked = tf.pad(order, [[0, 0], [0, tf.maximum(0, predictions - length)]],
                        constant_values=length)[:, :predictions]
        valid = tf.gather(tf.pad(qualifies, [[0, 0], [0, 1]]), picked, batch_dims=1)
        key = tf.sort(tf.where(valid, picked, 2 * length + picked), axis=1)
        valid = key < length
        positions = tf.where(valid, key, 0)
        next_ids = tf.pad(token_ids, [[0, 0], [0, 1]])
        labels = tf.where(valid, tf.gather(next_ids, positions + 1, batch_dims=1), 0)
        return positions, labels, tf.cast(valid, tf.float32)


def apply_next_token_targets(dataset, targets, seed=None):
    """dataset of feature dicts -> dataset of (x, y), positions drawn afresh every pass."""
    seeds = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True).batch(2)
    return tf.data.Dataset.zip((dataset, seeds)).map(
        lambda features, s: targets(features, s), num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True)
