"""What every tokenizer (WordPiece, byte-level BPE, SentencePiece) shares: raw text in, int32
ids out in TensorFlow ops; the special tokens by role; which pieces start a word; the Python
batch API.

A subclass sets `vocabulary` (list of str, id = index) and `special_tokens` ({role: token}
for the roles "unknown", "cls", "sep", "pad", "mask"), and implements
`_tokenize_with_offsets([B] strings) -> (ids, byte starts, byte ends)`, each [B, None]
(and `_tokenize` when ids alone take a faster route), and sets `word_start_mark` or
overrides `_starts_word`. `packer_layout` says how a pair is packed ("bert":
`[CLS] a [SEP] b [SEP]` with segment ids 0/1; "roberta": `<s> a </s></s> b </s>`, segment
ids all 0).

Each class reads and writes its own files: `from_directory(directory)` and `save_files(directory)`
(transformers' names, what our presets hold), `from_tokenizer_json` and
`save_huggingface_files` (Hugging Face's tokenizer.json + tokenizer_config.json beside them),
`keras_hub_tokenizer` (KerasHub's class for it). text/tokenizer_files.py is the one table
from the files a directory holds to the class that reads them.
"""

import numpy as np
import tensorflow as tf

from keras_bert_suite.text.preprocessing_layer import PreprocessingLayer
from keras_bert_suite.text.preprocessing_layer import to_string_tensor

_NEEDED_FOR = {"unknown": "tokenizing text", "cls": "packing segments",
               "sep": "packing segments", "pad": "padding", "mask": "masked-LM pretraining"}


class Tokenizer(PreprocessingLayer):
    packer_layout = "bert"
    # Which algorithm splits words: "wordpiece", "byte_pair" or "sentencepiece" (the words a
    # checkpoint format's table uses, e.g. checkpoints/keras_hub_backbones.py).
    kind = None

    def _index_vocabulary(self, vocabulary):
        # Plain containers: Keras' attribute tracking would walk all 30k tokens of the list
        # and the dict (about 1 s per tokenizer, paid by every preset and `.keras` load).
        object.__setattr__(self, "vocabulary", list(vocabulary))
        object.__setattr__(self, "_token_index",
                           {token: i for i, token in enumerate(self.vocabulary)})

    # === vocabulary ===

    def vocabulary_size(self):
        return len(self.vocabulary)

    def get_vocabulary(self):
        return list(self.vocabulary)

    def id_to_token(self, id):
        if not isinstance(id, (int, np.integer)) or not 0 <= id < len(self.vocabulary):
            raise ValueError(f"id must be an int in [0, {len(self.vocabulary)}), got {id!r}.")
        return self.vocabulary[id]

    def token_to_id(self, token):
        if token not in self._token_index:
            raise ValueError(f"{token!r} is not in the vocabulary (it would tokenize to "
                             f"{self.special_tokens['unknown']} or to several pieces).")
        return self._token_index[token]

    def special_token_id(self, role):
        """The id of the special token playing `role` ("cls", "sep", "pad", "mask",
        "unknown"), or a ValueError saying who needs it."""
        token = self.special_tokens[role]
        if token not in self._token_index:
            raise ValueError(f"The vocabulary has no {token} token, which {_NEEDED_FOR[role]} "
                             f"needs. {self._how_to_add(token)}")
        return self._token_index[token]

    def _how_to_add(self, token):
        return f"Add {token} to the vocabulary."

    unknown_token_id = property(lambda self: self.special_token_id("unknown"))
    cls_token_id = property(lambda self: self.special_token_id("cls"))
    sep_token_id = property(lambda self: self.special_token_id("sep"))
    pad_token_id = property(lambda self: self.special_token_id("pad"))
    mask_token_id = property(lambda self: self.special_token_id("mask"))

    # === its files ===

    @classmethod
    def from_directory(cls, directory, **kwargs):
        """The tokenizer whose files (`save_files`'s) `directory` holds."""
        raise NotImplementedError

    @classmethod
    def from_tokenizer_json(cls, data, config, **kwargs):
        """The tokenizer a Hugging Face tokenizer.json (`data`) and its tokenizer_config.json
        (`config`) describe."""
        raise NotImplementedError

    def save_files(self, directory):
        """Writes the files `from_directory` reads back (transformers' names)."""
        raise NotImplementedError

    def save_huggingface_files(self, directory, model_max_length, lowercase=None):
        """Writes what transformers' AutoTokenizer reads: `save_files`' files, tokenizer.json
        and tokenizer_config.json. `lowercase` overrides a WordPiece tokenizer's casing."""
        raise NotImplementedError

    def keras_hub_tokenizer(self):
        """(KerasHub's tokenizer class name, its constructor's arguments) that tokenize as
        this one, or None when KerasHub builds its own from the vocabulary (WordPiece)."""
        return None

    def trackables(self):
        """The TensorFlow resources (lookup tables) the tokenizer's graphs read. A SavedModel
        that runs the tokenizer must track them (the export attaches them to its root)."""
        return []

    def word_start_flags(self):
        """[V] bool numpy array: True for pieces that begin a word (whole-word masking and
        word-level tagging join the others to the word before)."""
        return np.array([self._starts_word(token) for token in self.vocabulary], dtype=bool)

    # BPE and SentencePiece pieces that begin a word carry the mark of the space before it.
    word_start_mark = None

    def _starts_word(self, token):
        return token.startswith(self.word_start_mark) or token in self.special_tokens.values()

    def _tokenize(self, strings):
        return self._tokenize_with_offsets(strings)[0]

    # === in-graph tokenization ===

    @tf.autograph.experimental.do_not_convert  # plain TF code; converting it only costs time
    def call(self, inputs):
        strings, restore = _flatten(type(self).__name__, to_string_tensor(inputs))
        return restore(self.compiled("ids", self._tokenize)(strings))

    @tf.autograph.experimental.do_not_convert
    def tokenize_with_offsets(self, inputs):
        """Returns (ids, starts, ends), each shaped like `call`'s output: int64 BYTE offsets
        into the UTF-8 input, `inputs[i][start:end]` (bytes) being the text a piece came from.
        For input that is not valid UTF-8 they refer to the string after each ill-formed
        sequence became U+FFFD."""
        strings, restore = _flatten(type(self).__name__, to_string_tensor(inputs))
        ids, starts, ends = self.compiled("offsets", self._tokenize_with_offsets)(strings)
        return restore(ids), restore(starts), restore(ends)

    # === Python batch API ===

    def encode_batch(self, texts):
        """list of str -> list of lists of int ids (no special tokens)."""
        ids = self.compiled("ids", self._tokenize)(self._python_batch(texts))
        return _python_rows(ids, ids.values.numpy().tolist())

    def encode_batch_with_offsets(self, texts):
        """list of str -> (ids, offsets): offsets[i][j] = (start, end) CHARACTER offsets into
        texts[i] (Python str indices, as `tokenizers` reports them)."""
        texts = self._check_texts(texts)
        ids, starts, ends = self.compiled("offsets", self._tokenize_with_offsets)(
            self._python_batch(texts))
        # On the flat values: only rows with non-ASCII text need their byte offsets mapped.
        splits = ids.row_splits.numpy()
        starts, ends = starts.values.numpy(), ends.values.numpy()
        for row, text in enumerate(texts):
            if not text.isascii():
                first, after = _byte_to_char_index(text)
                piece = slice(splits[row], splits[row + 1])
                starts[piece], ends[piece] = first[starts[piece]], after[ends[piece]]
        offsets = _python_rows(ids, list(zip(starts.tolist(), ends.tolist())))
        return _python_rows(ids, ids.values.numpy().tolist()), offsets

    def _check_texts(self, texts):
        if isinstance(texts, str) or not isinstance(texts, (list, tuple)):
            raise ValueError(f"texts must be a list of str, got {type(texts).__name__} "
                             "(wrap a single text in a list).")
        for text in texts:
            if not isinstance(text, str):
                raise ValueError(f"texts must be a list of str; found {type(text).__name__}.")
        return texts

    def _python_batch(self, texts):
        texts = self._check_texts(texts)
        return tf.constant([t.encode("utf-8", "surrogatepass") for t in texts], tf.string,
                           shape=[len(texts)])


def _flatten(name, strings):
    """Accepts a scalar or a vector of strings; returns [B] and a function restoring the rank."""
    rank = strings.shape.rank
    if isinstance(strings, tf.RaggedTensor) or rank is None or rank > 1:
        raise ValueError(
            f"{name} takes a scalar string or a 1-D batch of strings, got shape "
            f"{strings.shape}. Flatten the batch (or map the tokenizer before batching).")
    if rank == 1:
        return strings, lambda result: result
    return tf.reshape(strings, [1]), lambda result: result.values


def _python_rows(ragged, values):
    """A [B, None] ragged tensor's rows as Python lists of `values` (its flat values as a
    list): one conversion of the flat values, not one per row as `RaggedTensor.to_list`."""
    splits = ragged.row_splits.numpy().tolist()
    return [values[start:end] for start, end in zip(splits[:-1], splits[1:])]


def _byte_to_char_index(text):
    """Two arrays mapping every UTF-8 byte offset of `text` (0..len inclusive) to a str index:
    for starts (a byte inside a character -> that character) and for ends (-> the one after),
    so a piece holding part of a character's bytes spans that character, as in `tokenizers`."""
    sizes = np.array([len(c.encode("utf-8", "surrogatepass")) for c in text], np.int64)
    first = np.append(np.repeat(np.arange(len(text)), sizes), len(text))
    inside = np.append(np.concatenate([np.arange(n) for n in sizes]) > 0, False)
    return first, first + inside
