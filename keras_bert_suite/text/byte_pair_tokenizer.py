"""BytePairTokenizer: raw text -> byte-level BPE ids (RoBERTa, GPT-2 vocabularies), in
TensorFlow ops that run in tf.data, under every Keras backend and in TF Serving.

Semantics are `tokenizers`' ByteLevel pre-tokenizer (no prefix space) + BPE, what
transformers' RobertaTokenizer runs: the text is split into words (byte_level.py), each
word's UTF-8 bytes are written as GPT-2's printable characters, and merges are applied
lowest rank first (bpe_merges.py). Special-token strings in the text ("<s>", "<mask>") are
ordinary text, unlike transformers, which matches them and so lets untrusted text inject
them; build special-token ids with the `*_token_id` properties.
"""

import functools
import json
import os

import keras
import numpy as np
import tensorflow as tf

from keras_bert_suite.checkpoints import tokenizer_json
from keras_bert_suite.text import byte_level
from keras_bert_suite.text import ragged_rows
from keras_bert_suite.text.bpe_merges import PairRanks
from keras_bert_suite.text.tokenizer_base import Tokenizer
from keras_bert_suite.text.utf8 import sanitize_utf8

ROBERTA_SPECIAL_TOKENS = {"unknown": "<unk>", "cls": "<s>", "sep": "</s>", "pad": "<pad>",
                          "mask": "<mask>"}
# transformers' names for the vocabulary and the merges
FILES = ("vocab.json", "merges.txt")
# Ours, beside them when the special tokens or the packing are not RoBERTa's (ModernBERT's
# [CLS] a [SEP]): {"special_tokens": {role: token}, "packer_layout": ...}.
SETTINGS_FILE = "byte_pair_settings.json"
# How byte-level vocabularies mark a piece that begins with a space, i.e. a new word.
SPACE_MARK = byte_level.byte_to_unicode()[ord(" ")]  # "Ġ"


@keras.saving.register_keras_serializable(package="keras_bert_suite")
class BytePairTokenizer(Tokenizer):
    """Byte-level BPE tokenizer (RoBERTa).

    Args:
        vocabulary: path of a vocab.json ({token: id}), such a dict, or a list of tokens
            (id = index). Ids must be 0..V-1 and every one of the 256 byte characters must
            be a token.
        merges: path of a merges.txt ("a b" per line, best first; a "#version" line is
            skipped) or a list of such strings.
        special_tokens: {role: token} for "unknown", "cls", "sep", "pad", "mask"; RoBERTa's
            `<unk> <s> </s> <pad> <mask>` by default.
        packer_layout: how a pair is packed: "roberta" (`<s> a </s></s> b </s>`, the
            default) or "bert" (`[CLS] a [SEP] b [SEP]`, ModernBERT's tokenizer.json).

    Call: strings [B] (or a scalar) -> int32 ids, a [B, None] `tf.RaggedTensor`.

    Example (a RoBERTa checkpoint's files; `from_directory` and `tokenizer_from_preset`
    find them)::

        tokenizer = BytePairTokenizer("roberta-base/vocab.json", "roberta-base/merges.txt")
        tokenizer.encode_batch(["Hello world"])  # [[31414, 232]]: "Hello", "Ġworld"
    """

    packer_layout = "roberta"
    kind = "byte_pair"
    word_start_mark = SPACE_MARK
    # KerasHub's tokenizer class for ours ({class name: our extra arguments}) and the files
    # its `save_assets` writes under assets/tokenizer/ (our constructor's arguments).
    keras_hub_classes = {"RobertaTokenizer": {}}
    keras_hub_files = ("vocabulary.json", "merges.txt")

    def __init__(self, vocabulary, merges, special_tokens=None, packer_layout="roberta",
                 **kwargs):
        super().__init__(**kwargs)
        if packer_layout not in ("roberta", "bert"):
            raise ValueError(f"packer_layout must be 'roberta' or 'bert', got "
                             f"{packer_layout!r}.")
        self.packer_layout = packer_layout
        self._index_vocabulary(_load_vocabulary(vocabulary))
        self.merges = _load_merges(merges)
        self.special_tokens = dict(special_tokens or ROBERTA_SPECIAL_TOKENS)
        byte_chars = [byte_level.byte_to_unicode()[b] for b in range(256)]
        missing = [char for char in byte_chars if char not in self._token_index]
        if missing:
            raise ValueError(
                f"The vocabulary lacks {len(missing)} of the 256 byte characters (e.g. "
                f"{missing[0]!r}), so it is not a byte-level BPE vocabulary: every byte must "
                "be a token. Train it with tokenizers.ByteLevelBPETokenizer.")
        self._byte_chars = tf.constant(byte_chars)
        self._ranks, self._piece_ids = _tables(
            tuple(self.vocabulary), tuple(self.merges),
            self._token_index.get(self.special_tokens["unknown"], -1))

    def trackables(self):
        return [self._ranks.table, self._piece_ids]

    def _tokenize_with_offsets(self, strings):
        text = sanitize_utf8(strings)
        words, word_starts, _ = byte_level.split_words(text)  # [B, W]
        unique_words, word_index = tf.unique(words.values)
        symbols = tf.strings.bytes_split(unique_words)  # [U, bytes]
        symbols = symbols.with_values(tf.gather(self._byte_chars, _byte_values(symbols.values)))
        pieces = tf.gather(self._ranks.merge(symbols), word_index)  # [W_total, P]
        ids = words.with_values(pieces.with_values(self._piece_ids.lookup(pieces.values)))
        # A piece's characters stand for one byte each.
        sizes = tf.cast(tf.strings.length(pieces.values, unit="UTF8_CHAR"), tf.int64)
        # Bytes before each piece in its word, on the flat values: a ragged cumsum along the
        # pieces would pad every word to the longest (gigabytes for a batch with a long word).
        before = tf.cumsum(sizes, exclusive=True)
        word_first = tf.gather(tf.concat([before, [0]], axis=0), pieces.row_starts())
        piece_start = (tf.gather(word_starts.values - word_first, ragged_rows.value_rowids(pieces))
                       + before)
        ids = ids.merge_dims(1, 2)
        return ids, ids.with_values(piece_start), ids.with_values(piece_start + sizes)

    def get_config(self):
        return {**super().get_config(), "vocabulary": list(self.vocabulary),
                "merges": list(self.merges), "special_tokens": dict(self.special_tokens),
                "packer_layout": self.packer_layout}

    # === its files ===

    @classmethod
    def from_directory(cls, directory, **kwargs):
        """A directory holding vocab.json and merges.txt (a RoBERTa checkpoint), and our
        settings file when a preset saved other special tokens or packing."""
        settings = os.path.join(directory, SETTINGS_FILE)
        if os.path.isfile(settings):
            with open(settings, encoding="utf-8") as f:
                kwargs = {**json.load(f), **kwargs}
        return cls(*(os.path.join(directory, name) for name in FILES), **kwargs)

    @classmethod
    def from_tokenizer_json(cls, data, config, **kwargs):
        return cls(**tokenizer_json.byte_pair_arguments(data, config), **kwargs)

    def save_files(self, directory):
        vocabulary, merges = (os.path.join(directory, name) for name in FILES)
        with open(vocabulary, "w", encoding="utf-8") as f:
            json.dump({token: i for i, token in enumerate(self.vocabulary)}, f,
                      ensure_ascii=False)
        with open(merges, "w", encoding="utf-8") as f:
            f.write("#version: 0.2\n")
            f.writelines(f"{merge}\n" for merge in self.merges)
        if (self.special_tokens, self.packer_layout) != (ROBERTA_SPECIAL_TOKENS, "roberta"):
            with open(os.path.join(directory, SETTINGS_FILE), "w", encoding="utf-8") as f:
                json.dump({"special_tokens": self.special_tokens,
                           "packer_layout": self.packer_layout}, f, ensure_ascii=False)

    def save_huggingface_files(self, directory, model_max_length, lowercase=None):
        self.save_files(directory)
        tokenizer_json.save(
            directory, tokenizer_json.byte_pair_json(
                self.get_vocabulary(), self.merges, self.special_tokens, self.packer_layout),
            "RobertaTokenizer", self.special_tokens, model_max_length)

    def keras_hub_tokenizer(self):
        """KerasHub's RobertaTokenizer, which also matches "<s>"-like strings written in the
        text as special tokens (ours reads them as text); other text: the same ids."""
        if self.special_tokens != ROBERTA_SPECIAL_TOKENS:
            raise ValueError(
                f"KerasHub's RobertaTokenizer packs with RoBERTa's special tokens "
                f"{ROBERTA_SPECIAL_TOKENS}, and this tokenizer's are "
                f"{self.special_tokens}: its preset would not pack as ours does.")
        return next(iter(self.keras_hub_classes)), {
            "vocabulary": {token: i for i, token in enumerate(self.vocabulary)},
            "merges": list(self.merges)}


# Tokenizers with the same files share their lookup tables, as the graphs they compile are
# shared (PreprocessingLayer.compiled): a graph must read the tables its exporter tracks.
@functools.lru_cache(maxsize=8)
def _tables(vocabulary, merges, unknown_id):
    piece_ids = tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(
            tf.constant(vocabulary), tf.range(len(vocabulary), dtype=tf.int32)),
        default_value=unknown_id)
    return PairRanks(merges), piece_ids


def _byte_values(single_bytes):
    """[N] one-byte strings -> [N] int32 byte values."""
    return tf.cast(tf.reshape(tf.io.decode_raw(single_bytes, tf.uint8), [-1]), tf.int32)


def _load_vocabulary(vocabulary):
    """vocab.json path, {token: id} or [token] -> [token] (id = index), checked."""
    if isinstance(vocabulary, (str, os.PathLike)):
        vocabulary = json.loads(_read(vocabulary, "vocabulary", "a vocab.json path, a "
                                      "{token: id} dict or a list of tokens"))
    if isinstance(vocabulary, dict):
        ids = sorted(vocabulary.values())
        if ids != list(range(len(ids))):
            raise ValueError("The vocabulary's ids must be 0..V-1, each used once; found "
                             f"{len(ids)} tokens with ids from {ids[0]} to {ids[-1]}.")
        by_id = sorted(vocabulary.items(), key=lambda item: item[1])
        return [token for token, _ in by_id]
    if isinstance(vocabulary, (list, tuple)) or hasattr(vocabulary, "tolist"):
        tokens = [t.decode("utf-8") if isinstance(t, bytes) else t for t in list(vocabulary)]
        if len(set(tokens)) != len(tokens) or not all(isinstance(t, str) and t for t in tokens):
            raise ValueError("The vocabulary list must hold distinct, non-empty str tokens.")
        return tokens
    raise ValueError(f"vocabulary must be a vocab.json path, a dict or a list of tokens, got "
                     f"{type(vocabulary).__name__}.")


def _load_merges(merges):
    """merges.txt path or ["a b"] -> ["a b"], checked."""
    if isinstance(merges, (str, os.PathLike)):
        lines = _read(merges, "merges", "a merges.txt path or a list of 'a b' strings")
        merges = [m for m in lines.split("\n") if m and not m.startswith("#version")]
    merges = [m.decode("utf-8") if isinstance(m, bytes) else m for m in list(merges)]
    bad = next((m for m in merges if not isinstance(m, str) or len(m.split(" ")) != 2), None)
    if bad is not None:
        raise ValueError(f"Every merge must be two tokens separated by one space ('a b'); "
                         f"found {bad!r}.")
    return merges


def _read(path, argument, what):
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise ValueError(f"{argument}={path!r} is not a file. Pass {what}.")
    with open(path, encoding="utf-8") as f:
        return f.read()
