"""BertTokenizer: raw text -> WordPiece ids, in TensorFlow ops (tf.data, SavedModel, any backend).

Semantics are those of Hugging Face `tokenizers`' BertWordPieceTokenizer (= transformers'
BertTokenizer) with the same vocabulary and `max_input_chars_per_word`, which follow the
original google-research/bert BasicTokenizer + WordpieceTokenizer:

* clean: drop NUL, U+FFFD and control/format/private-use characters (not \\t \\n \\r);
* CJK ideographs become one-character words;
* uncased (`lowercase=True`): strip accents (NFD, drop non-spacing marks), then lower-case;
  cased: neither;
* split on white space and punctuation (Unicode P* and the ASCII symbols);
* greedy longest-match-first WordPiece with "##" continuations; a word longer than
  `max_input_chars_per_word` characters, or one the vocabulary cannot spell, is [UNK].

Edge cases (all defined, none raise inside the graph): "" and white space only -> no ids;
invalid UTF-8 -> each ill-formed sequence is replaced by U+FFFD and then dropped; control
characters are dropped; emoji and other symbols are words of their own only when separated from
letters (they are not punctuation), and [UNK] when the vocabulary lacks them; zero-width joiners
(format characters) are dropped; a 100k-character text is tokenized like any other.

One deliberate difference from Hugging Face: special-token strings in raw text ("[MASK]",
"[SEP]", ...) are ordinary text, as in google-research/bert ("[", "mask", "]"); Hugging Face
matches them as added tokens, which lets untrusted text inject [SEP] or [MASK]. Build
special-token ids with the `*_token_id` properties instead.

Two routes give the same ids: `call` runs FastBertNormalize and FastWordpiece's one-op
tokenizer on whole strings; rows that route cannot do exactly (see
`normalizer.py`, or a long non-ASCII word) are recomputed one character at a time.
`tokenize_with_offsets` uses the one-op route for plain ASCII rows, whose normalization keeps
every byte in place, and the per-character route, which maps pieces back, for the rest.
"""

import os

import keras
import numpy as np
import tensorflow as tf

from keras_bert_suite.checkpoints import tokenizer_json
from keras_bert_suite.presets import PRESETS, packaged_checkpoint_dir, resolve_checkpoint
from keras_bert_suite.text import offset_alignment
from keras_bert_suite.text import row_routing
from keras_bert_suite.text import vocab_io
from keras_bert_suite.text import wordpiece_files
from keras_bert_suite.text.normalizer import BertNormalizer
from keras_bert_suite.text.tokenizer_base import Tokenizer
from keras_bert_suite.text.word_splitter import WordSplitter
from keras_bert_suite.text.wordpiece import WordPiece

# The vocabulary an uncased built-in preset without one of its own falls back to
# (bert-base-uncased's 30,522 tokens, as shipped with all-MiniLM-L6-v2).
DEFAULT_UNCASED_CHECKPOINT = "all-MiniLM-L6-v2"
DEFAULT_UNCASED_SIZE = 30522


@keras.saving.register_keras_serializable(package="keras_bert_suite")
class BertTokenizer(Tokenizer):
    """WordPiece tokenizer with original-BERT semantics.

    Args:
        vocabulary: path of a vocab.txt (one token per line, id = line number) or a list of
            tokens. Must contain [UNK]; [CLS], [SEP], [PAD], [MASK] are needed by the packer
            and masked-LM pretraining. Stored (as a list) in the layer config.
        lowercase: True for uncased vocabularies (strip accents + lower-case).
        max_input_chars_per_word: longer words become [UNK]. 100 as in transformers and
            tf-text (google-research/bert's own Python used 200); a checkpoint's
            tokenizer.json or tokenizer_config.json sets it in `from_preset`.

    Call: strings [B] (or a scalar) -> int32 ids, a [B, None] `tf.RaggedTensor` (1-D for a
    scalar). Python lists of str are accepted too; `encode_batch` returns Python lists.

    Example:
    >>> tokenizer = BertTokenizer.from_preset("minilm_l6_h384_uncased")
    >>> tokenizer.encode_batch(["Hello, world!"])
    [[7592, 1010, 2088, 999]]
    """

    kind = "wordpiece"

    def __init__(self, vocabulary, lowercase=True,
                 max_input_chars_per_word=tokenizer_json.DEFAULT_MAX_INPUT_CHARS_PER_WORD,
                 **kwargs):
        super().__init__(**kwargs)
        if not isinstance(lowercase, (bool, np.bool_)):
            raise ValueError(f"lowercase must be True or False, got {lowercase!r}.")
        if (not isinstance(max_input_chars_per_word, (int, np.integer))
                or isinstance(max_input_chars_per_word, bool) or max_input_chars_per_word < 1):
            raise ValueError("max_input_chars_per_word must be a positive int, got "
                             f"{max_input_chars_per_word!r}.")
        self._index_vocabulary(vocab_io.load_vocabulary(vocabulary))
        self.lowercase = bool(lowercase)
        self.max_input_chars_per_word = int(max_input_chars_per_word)
        self._normalizer = BertNormalizer(self.lowercase)
        self._splitter = WordSplitter()
        self._wordpiece = WordPiece(
            self.vocabulary, vocab_io.UNKNOWN_TOKEN, self.max_input_chars_per_word)

    special_tokens = {"unknown": vocab_io.UNKNOWN_TOKEN, "cls": vocab_io.CLS_TOKEN,
                      "sep": vocab_io.SEP_TOKEN, "pad": vocab_io.PAD_TOKEN,
                      "mask": vocab_io.MASK_TOKEN}

    def _starts_word(self, token):
        return not token.startswith("##")

    def _how_to_add(self, token):
        return (f"Add a line {token} to vocab.txt (learn_vocabulary reserves "
                f"{', '.join(vocab_io.RESERVED_TOKENS)}).")

    # === in-graph tokenization ===

    @tf.autograph.experimental.do_not_convert
    def detokenize(self, ids):
        """ids [B, T] (ragged or dense) or [T] -> strings: pieces joined by spaces, "##" merged.

        Special tokens are kept; nothing else is cleaned up (no space removal before
        punctuation), so lower-casing, stripped accents and [UNK] are not undone.
        """
        ids = ids if isinstance(ids, tf.RaggedTensor) else tf.convert_to_tensor(ids)
        tokens = tf.gather(tf.constant(self.vocabulary), tf.cast(ids, tf.int32))
        joined = tf.strings.reduce_join(tokens, axis=-1, separator=" ")
        return tf.strings.regex_replace(joined, " ##", "")

    def _tokenize(self, strings):
        """[B] strings -> [B, None] ids: one-op FastWordpiece, exact per-row fallback."""
        normalized, exact = self._normalizer.normalize_rows(strings)
        ids = self._wordpiece.tokenize_text(normalized)
        needs_exact = ~exact | self._byte_limit_may_differ(normalized, ids)
        (ids,) = row_routing.replace_rows(
            (ids,), needs_exact, lambda rows: self._tokenize_exact(tf.gather(strings, rows))[:1])
        return ids

    def _tokenize_with_offsets(self, strings):
        """[B] strings -> ids, starts, ends. Rows of plain ASCII text (no control characters)
        normalize character for character, so FastWordpiece's offsets into the normalized row
        are already offsets into the original; every other row takes the exact path."""
        normalized, _ = self._normalizer.normalize_rows(strings)
        outputs = self._wordpiece.tokenize_text_with_offsets(normalized)
        needs_exact = ~self._normalizer.aligned_one_to_one(strings)
        return row_routing.replace_rows(
            outputs, needs_exact,
            lambda rows: self._tokenize_exact(tf.gather(strings, rows), with_offsets=True))

    def _byte_limit_may_differ(self, normalized, ids):
        """Rows where FastWordpiece's byte limit may have made [UNK] of a word that is within
        the character limit: enough bytes, a non-ASCII character, and an [UNK]."""
        byte_length = tf.strings.length(normalized, unit="BYTE")
        candidates = (byte_length > self.max_input_chars_per_word) & (
            tf.strings.length(normalized, unit="UTF8_CHAR") < byte_length)
        rows = tf.where(candidates)[:, 0]  # few: only they are searched for [UNK]
        has_unknown = tf.reduce_any(tf.equal(tf.gather(ids, rows), self.unknown_token_id), axis=1)
        return tf.tensor_scatter_nd_update(tf.zeros_like(candidates), rows[:, None], has_unknown)

    def _tokenize_exact(self, strings, with_offsets=False):
        """The per-character route: exact for every input, and it knows where pieces came from."""
        normalized = self._normalizer.normalize_chars(strings)
        text = tf.strings.reduce_join(normalized.chars, axis=-1)  # [B]
        words, word_starts, _ = self._splitter.split_with_offsets(text)  # [B, W]
        piece_ids, piece_starts, piece_ends = self._wordpiece.tokenize_words_with_offsets(
            words.values)  # [N_words, P]
        ids = words.with_values(piece_ids).merge_dims(1, 2)  # [B, T]
        if not with_offsets:
            return (ids,)
        word_start = tf.gather(word_starts.values, piece_ids.value_rowids())  # [N_pieces]
        starts = ids.with_values(word_start + piece_starts.values)
        ends = ids.with_values(word_start + piece_ends.values)
        starts, ends = offset_alignment.to_original_offsets(starts, ends, normalized)
        return ids, starts, ends

    # === Keras plumbing ===

    def get_config(self):
        config = super().get_config()
        config.update({
            "vocabulary": list(self.vocabulary),
            "lowercase": self.lowercase,
            "max_input_chars_per_word": self.max_input_chars_per_word,
        })
        return config

    # === its files ===

    @classmethod
    def from_preset(cls, preset, vocabulary=None, **kwargs):
        """A built-in preset name or a checkpoint directory (ours, Hugging Face, Google BERT,
        Model Garden, KerasHub).

        The checkpoint's vocabulary (vocab.txt, KerasHub's vocabulary.txt or a WordPiece
        tokenizer.json) and its casing are used (both must agree when both are there); an
        uncased architecture-only preset gets the standard bert-base-uncased vocabulary.
        `vocabulary=` overrides either.
        """
        if _directory_with_tokenizer_json(preset):  # a tokenizer.json needs no model beside it
            return cls.from_directory(preset, vocabulary, **kwargs)
        checkpoint = resolve_checkpoint(preset, load_weights=False)
        directory = checkpoint.directory
        if directory is None:  # an architecture-only built-in preset
            kwargs.setdefault("lowercase", PRESETS[preset].lowercase)
        elif vocabulary is not None or wordpiece_files.vocabulary_file(directory):
            return cls.from_directory(directory, vocabulary, **kwargs)
        else:
            kwargs.setdefault("lowercase", wordpiece_files.lowercase(directory))
        if vocabulary is None:
            vocabulary = _default_vocabulary(preset, checkpoint.config, kwargs["lowercase"])
        return cls(vocabulary, **kwargs)

    @classmethod
    def from_directory(cls, directory, vocabulary=None, **kwargs):
        """The WordPiece tokenizer of a checkpoint directory: its WordPiece tokenizer.json, else
        its vocab.txt (KerasHub's assets/tokenizer/vocabulary.txt) with the casing its files
        say (text/wordpiece_files.py). `vocabulary=` overrides the file."""
        from_json = _wordpiece_json(directory)
        if from_json is not None:
            kwargs.setdefault("lowercase", from_json["lowercase"])
            kwargs.setdefault("max_input_chars_per_word", from_json["max_input_chars_per_word"])
            text_file = os.path.join(directory, "vocab.txt")
            if vocabulary is None and os.path.isfile(text_file):
                if vocab_io.load_vocabulary(text_file) != from_json["vocabulary"]:
                    raise ValueError(
                        f"{text_file} and the {tokenizer_json.FILE} beside it hold different "
                        "vocabularies. Remove the one the model was not trained with.")
            return cls(from_json["vocabulary"] if vocabulary is None else vocabulary, **kwargs)
        kwargs.setdefault("lowercase", wordpiece_files.lowercase(directory))
        vocabulary = wordpiece_files.vocabulary_file(directory) if vocabulary is None else vocabulary
        if vocabulary is None:
            raise ValueError(f"{directory} holds no WordPiece vocabulary (looked for "
                             f"{', '.join(wordpiece_files.VOCABULARY_FILES)} and "
                             f"{tokenizer_json.FILE}).")
        return cls(vocabulary, **kwargs)

    @classmethod
    def from_tokenizer_json(cls, data, config, **kwargs):
        return cls(**{**tokenizer_json.wordpiece_arguments(data, config), **kwargs})

    def save_files(self, directory):
        with open(os.path.join(directory, "vocab.txt"), "w", encoding="utf-8") as f:
            f.writelines(f"{token}\n" for token in self.vocabulary)

    def save_huggingface_files(self, directory, model_max_length, lowercase=None):
        tokenizer_json.save_wordpiece(
            directory, self.get_vocabulary(), self.lowercase if lowercase is None else lowercase,
            model_max_length, self.max_input_chars_per_word, self.special_tokens)


def _default_vocabulary(preset, config, lowercase):
    """bert-base-uncased's vocabulary for an uncased preset of its size that has none."""
    if not lowercase:
        raise ValueError(
            f"Preset {preset!r} is a cased architecture without a vocabulary of its own, "
            "and there is no packaged cased one. Load its checkpoint directory (a "
            "transformers directory brings its vocab.txt, vocab.json + merges.txt or "
            "SentencePiece model), or pass vocabulary= (a vocab.txt path or a list of "
            "tokens), e.g. one made by keras_bert_suite.text.learn_vocabulary.")
    size = config.get("vocabulary_size")
    if size != DEFAULT_UNCASED_SIZE:
        raise ValueError(
            f"Preset {preset!r} is an architecture with a vocabulary of {size} tokens "
            f"and none of its own; the packaged uncased vocabulary has "
            f"{DEFAULT_UNCASED_SIZE}. Load its checkpoint directory (a transformers "
            "directory brings its vocab.txt, vocab.json + merges.txt or SentencePiece "
            "model), or pass vocabulary=.")
    return os.path.join(packaged_checkpoint_dir(DEFAULT_UNCASED_CHECKPOINT), "vocab.txt")


def _directory_with_tokenizer_json(preset):
    directory = os.fspath(preset) if isinstance(preset, (str, os.PathLike)) else None
    return bool(directory) and os.path.isdir(directory) and (
        tokenizer_json.load(directory) is not None)


def _wordpiece_json(directory):
    """BertTokenizer's arguments from a directory's WordPiece tokenizer.json, or None; a
    tokenizer.json of another kind gets an error that names the way to load it."""
    found = tokenizer_json.load(directory)
    if found is None:
        return None
    kind = tokenizer_json.kind(found[0])
    if kind != "wordpiece":
        raise ValueError(
            f"{directory}'s {tokenizer_json.FILE} is a {kind} tokenizer, not WordPiece. Load it "
            "with BertPreprocessor.from_preset (or text.tokenizer_files.tokenizer_from_preset), "
            "which picks the tokenizer a directory holds.")
    return tokenizer_json.wordpiece_arguments(*found)
