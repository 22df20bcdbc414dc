"""Static masked-LM masking of one instance, as google-research/bert's create_pretraining_data.

Used when instances are written with their masks fixed (the original recipe, which repeats
every document `dupe_factor` times with different masks). For a new mask every epoch use
dynamic_masking.py instead. The algorithm, on token ids:

1. Candidates: every position except [CLS] and [SEP] (instances carry no padding yet). With
   `whole_word_masking`, a piece that continues a word (by the tokenizer's rule: "##" in
   WordPiece) joins the candidate group of the piece right before it, so a word is chosen or left as a whole. (A "##" piece right after [CLS] or
   [SEP] — a segment cut mid-word — starts a group of its own; the original appended it to the
   last word of the previous segment.)
2. `num_to_predict = min(max_predictions_per_seq, max(1, round(len(tokens) * masked_lm_prob)))`
   — counted over the whole instance, [CLS]/[SEP] included, as the original does.
3. Groups are shuffled and taken in order; a group that would overshoot `num_to_predict` is
   skipped and later (shorter) groups are still tried. (Without whole-word masking every group
   is one token, and a uniform sample of `num_to_predict` positions is drawn instead: the same
   distribution, fewer random draws.)
   With `max_ngram` > 1 (ALBERT), the whole words of each segment are first cut, left to right,
   into n-grams of n consecutive words, n drawn with p(n) proportional to 1/n (n <= max_ngram);
   an n-gram is a group. (ALBERT's own script draws n per chosen start instead; the lengths
   follow the same distribution, as in dynamic_masking.py.)
4. Every chosen position becomes [MASK] with probability `mask_token_rate` (0.8), a token drawn
   uniformly from the whole vocabulary with `random_token_rate` (0.1), else stays unchanged.
"""

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class MaskingConfig:
    """Masked-LM rates (BERT's defaults) and the special-token ids they need."""

    mask_token_id: int
    cls_token_id: int
    sep_token_id: int
    vocabulary_size: int
    masked_lm_prob: float = 0.15
    max_predictions_per_seq: int = 20
    mask_token_rate: float = 0.8
    random_token_rate: float = 0.1
    whole_word_masking: bool = False
    max_ngram: int = 1  # > 1: n-grams of whole words (ALBERT: 3)
    # [V] bool: True for pieces that continue a word ("##" in WordPiece; needed by
    # whole-word groups only: whole_words).
    is_continuation: np.ndarray = None

    @property
    def whole_words(self):
        return masks_whole_words(self.whole_word_masking, self.max_ngram)

    def __post_init__(self):
        check_rates(self.masked_lm_prob, self.max_predictions_per_seq, self.mask_token_rate,
                    self.random_token_rate)
        check_max_ngram(self.max_ngram)
        if self.whole_words and self.is_continuation is None:
            raise ValueError("whole_word_masking and max_ngram > 1 need is_continuation "
                             "(~tokenizer.word_start_flags()).")


def masks_whole_words(whole_word_masking, max_ngram):
    """Whether masked groups are whole words: with whole_word_masking, and for n-grams (of
    words). Such masking needs the vocabulary's is_continuation flags."""
    return whole_word_masking or max_ngram > 1


def check_max_ngram(max_ngram):
    if isinstance(max_ngram, bool) or not isinstance(max_ngram, (int, np.integer)) \
            or max_ngram < 1:
        raise ValueError(f"max_ngram must be a positive int (1: single units; ALBERT: 3), "
                         f"got {max_ngram!r}.")


def ngram_lengths(max_ngram):
    """(n = 1 .. max_ngram, their probabilities p(n) proportional to 1/n), ALBERT's."""
    weights = 1.0 / np.arange(1, max_ngram + 1)
    return list(range(1, max_ngram + 1)), list(weights / weights.sum())


def check_rates(masked_lm_prob, max_predictions_per_seq, mask_token_rate, random_token_rate):
    if not 0.0 < masked_lm_prob <= 1.0:
        raise ValueError(f"masked_lm_prob must be in (0, 1], got {masked_lm_prob!r}.")
    if not isinstance(max_predictions_per_seq, (int, np.integer)) or max_predictions_per_seq < 1:
        raise ValueError(f"max_predictions_per_seq must be an int >= 1, got "
                         f"{max_predictions_per_seq!r}.")
    if mask_token_rate < 0 or random_token_rate < 0 or mask_token_rate + random_token_rate > 1:
        raise ValueError(
            "mask_token_rate and random_token_rate must be >= 0 with a sum <= 1 (the rest stays "
            f"unchanged), got {mask_token_rate!r} and {random_token_rate!r}.")


def mask_instance(token_ids, config, rng):
    """Masks one packed instance ([CLS] a [SEP] (b [SEP]), no padding).

    Args:
        token_ids: list of int.
        config: MaskingConfig.
        rng: a `random.Random`.
    Returns (masked token ids, sorted masked positions, original ids at those positions).
    """
    num_to_predict = min(config.max_predictions_per_seq,
                         max(1, int(round(len(token_ids) * config.masked_lm_prob))))
    specials = (config.cls_token_id, config.sep_token_id)
    if config.whole_words:
        groups = []
        for i, token_id in enumerate(token_ids):
            if token_id in specials:
                continue
            if groups and groups[-1][-1] == i - 1 and config.is_continuation[token_id]:
                groups[-1].append(i)
            else:
                groups.append([i])
        if config.max_ngram > 1:
            groups = _ngrams(groups, config.max_ngram, rng)
        rng.shuffle(groups)
    else:
        # One-token groups: the first num_to_predict of a shuffle are a uniform sample, which
        # costs num_to_predict draws instead of one per token (the pipeline's main cost).
        candidates = [i for i, token_id in enumerate(token_ids) if token_id not in specials]
        groups = [[i] for i in rng.sample(candidates, min(num_to_predict, len(candidates)))]
    output = list(token_ids)
    chosen = []
    for group in groups:
        if len(chosen) >= num_to_predict:
            break
        if len(chosen) + len(group) > num_to_predict:
            continue
        for index in group:
            chosen.append(index)
            draw = rng.random()
            if draw < config.mask_token_rate:
                output[index] = config.mask_token_id
            elif draw < config.mask_token_rate + config.random_token_rate:
                output[index] = rng.randint(0, config.vocabulary_size - 1)
    chosen.sort()
    return output, chosen, [token_ids[i] for i in chosen]


def _ngrams(words, max_ngram, rng):
    """Whole words (position lists, in order) cut into consecutive n-grams that never span a
    [CLS] or [SEP] (a gap in the positions)."""
    lengths, weights = ngram_lengths(max_ngram)
    groups, index = [], 0
    while index < len(words):
        group = list(words[index])
        index += 1
        for _ in range(rng.choices(lengths, weights)[0] - 1):
            if index == len(words) or words[index][0] != group[-1] + 1:
                break
            group += words[index]
            index += 1
        groups.append(group)
    return groups
