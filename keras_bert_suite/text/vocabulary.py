"""learn_vocabulary: a WordPiece vocab.txt learned from text with tf-text's BERT vocabulary learner.

Words are produced by our own normalizer and word splitter (exactly what `BertTokenizer` will
see), counted with a progress report, and handed to tensorflow-text's
`wordpiece_tokenizer_learner_lib.learn` (the algorithm behind `bert_vocab_from_dataset`).
"""

import collections
import logging
import os
import sys
import time

import tensorflow as tf

from keras_bert_suite.text import vocab_io
from keras_bert_suite.text.normalizer import BertNormalizer
from keras_bert_suite.text.word_splitter import WordSplitter

logger = logging.getLogger(__name__)


def learn_vocabulary(texts, vocabulary_size, output_path=None, lowercase=True,
                     reserved_tokens=vocab_io.RESERVED_TOKENS, batch_size=1024,
                     progress=True, **learn_params):
    """Learns a WordPiece vocabulary of at most `vocabulary_size` tokens.

    Args:
        texts: an iterable of str (lines, sentences, documents) or a `tf.data.Dataset` of
            strings, scalars or batches; for text files use
            `tf.data.TextLineDataset(paths)`.
        vocabulary_size: the target size (tf-text's learner may return slightly fewer).
        output_path: where to write vocab.txt (one token per line); optional.
        lowercase: learn an uncased vocabulary (same normalization as BertTokenizer).
        reserved_tokens: tokens placed first; by default [PAD] [UNK] [CLS] [SEP] [MASK]
            (so [PAD] is id 0).
        progress: print progress (texts, MB, distinct words) to stderr while counting.
        **learn_params: passed to tf-text's `learn` (e.g. `max_token_length`,
            `max_unique_chars`, `num_iterations`).

    Returns: the vocabulary as a list of str.
    """
    if not isinstance(vocabulary_size, int) or vocabulary_size <= len(reserved_tokens):
        raise ValueError(f"vocabulary_size must be an int larger than the {len(reserved_tokens)} "
                         f"reserved tokens, got {vocabulary_size!r}.")
    from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as learner

    counts = count_words(_batches(texts, batch_size), lowercase, progress)
    if not counts:
        raise ValueError("The texts contain no words; nothing to learn a vocabulary from.")
    _report(progress, f"learning {vocabulary_size} tokens from {len(counts)} distinct words "
                      "(tf-text's binary search over count thresholds) ...")
    start = time.time()
    vocabulary = learner.learn(counts, vocabulary_size, list(reserved_tokens), **learn_params)
    _report(progress, f"learned {len(vocabulary)} tokens in {time.time() - start:.1f} s")
    if output_path is not None:
        os.makedirs(os.path.dirname(os.path.abspath(output_path)), exist_ok=True)
        with open(output_path, "w", encoding="utf-8") as f:
            f.write("".join(token + "\n" for token in vocabulary))
        _report(progress, f"wrote {output_path}")
    return vocabulary


def count_words(batches, lowercase=True, progress=False):
    """{word: count} over batches ([B] string tensors) of text, as BertTokenizer splits them."""
    normalizer = BertNormalizer(lowercase)
    splitter = WordSplitter()

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
    def split(strings):
        words, _, _ = splitter.split_with_offsets(normalizer.normalize_exactly(strings))
        return words.values

    counts = collections.Counter()
    texts = num_bytes = 0
    last_report = time.time()
    for batch in batches:
        counts.update(split(batch).numpy())
        texts += int(batch.shape[0])
        num_bytes += int(tf.reduce_sum(tf.strings.length(batch)))
        if progress and time.time() - last_report > 5:
            _report(progress, f"counted {texts} texts, {num_bytes / 1e6:.1f} MB, "
                              f"{len(counts)} distinct words")
            last_report = time.time()
    _report(progress, f"counted {texts} texts, {num_bytes / 1e6:.1f} MB, {len(counts)} distinct words")
    return collections.Counter({word.decode("utf-8"): n for word, n in counts.items()})


def _batches(texts, batch_size):
    """Yields [B] tf.string batches from the accepted kinds of `texts`."""
    if isinstance(texts, tf.data.Dataset):
        dataset = texts if texts.element_spec.shape.rank == 1 else texts.batch(batch_size)
        if dataset.element_spec.dtype != tf.string or dataset.element_spec.shape.rank != 1:
            raise ValueError("A dataset passed to learn_vocabulary must hold strings, got "
                             f"{texts.element_spec}.")
        yield from dataset
        return
    if isinstance(texts, (str, bytes)):
        raise ValueError("texts must be an iterable of texts, not one string "
                         "(for files, pass tf.data.TextLineDataset(paths)).")
    batch = []
    for text in texts:
        if not isinstance(text, (str, bytes)):
            raise ValueError(f"texts must contain str, got {type(text).__name__}.")
        batch.append(text)
        if len(batch) == batch_size:
            yield tf.constant(batch, tf.string)
            batch = []
    if batch:
        yield tf.constant(batch, tf.string)


def _report(progress, message):
    if progress:
        print(f"[learn_vocabulary] {message}", file=sys.stderr, flush=True)
    logger.info(message)
