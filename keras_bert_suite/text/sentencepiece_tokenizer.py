"""SentencePieceTokenizer: raw text -> SentencePiece ids (ALBERT, XLM-RoBERTa, DeBERTa-v3), in
tensorflow-text's SentencePiece ops, which TF Serving links (since 2.4, through tf-text's
ops_lib), so a served model takes raw text.

The model proto runs as trained (its own normalization, `▁` for spaces); a `style` adds what
the family's tokenizer does around it, as transformers' tokenizers of that family do:

* "albert": ALBERT's pre-normalization (albert_normalizer.py); ids are the model's ids.
* "xlm_roberta": no pre-normalization; ids are fairseq's, the model's shifted by one, with
  `<s> <pad> </s> <unk>` first (the model's unknown piece becomes `<unk>` = 3) and `<mask>`
  appended last.
* "deberta": DeBERTa-v3's normalization (deberta_normalizer.py) instead of the model's own;
  ids are the model's, with `[MASK]` appended when the model lacks it (transformers' id for
  it: 128000 in the released 128k model).

Special-token strings in the text ("[MASK]", "<s>") are ordinary text.
"""

import base64
import dataclasses
import os

import keras
import tensorflow as tf
import tensorflow_text as tf_text

from keras_bert_suite.checkpoints import sentencepiece_proto
from keras_bert_suite.checkpoints import tokenizer_json
from keras_bert_suite.text import albert_normalizer
from keras_bert_suite.text import byte_level
from keras_bert_suite.text import deberta_normalizer
from keras_bert_suite.text import offset_alignment
from keras_bert_suite.text import ragged_rows
from keras_bert_suite.text import row_routing
from keras_bert_suite.text.tokenizer_base import Tokenizer
from keras_bert_suite.text.utf8 import sanitize_utf8

STYLES = {
    "albert": {"unknown": "<unk>", "cls": "[CLS]", "sep": "[SEP]", "pad": "<pad>",
               "mask": "[MASK]"},
    "xlm_roberta": {"unknown": "<unk>", "cls": "<s>", "sep": "</s>", "pad": "<pad>",
                    "mask": "<mask>"},
    "deberta": {"unknown": "[UNK]", "cls": "[CLS]", "sep": "[SEP]", "pad": "[PAD]",
                "mask": "[MASK]"},
}
FAIRSEQ_FIRST_TOKENS = ["<s>", "<pad>", "</s>", "<unk>"]
# Each style's model file (transformers' names; ALBERT's first when a directory has both).
FILES = {"albert": "spiece.model", "xlm_roberta": "sentencepiece.bpe.model",
         "deberta": "spm.model"}
# transformers' tokenizer class for each style.
HUGGINGFACE_CLASSES = {"albert": "AlbertTokenizer", "xlm_roberta": "XLMRobertaTokenizer",
                       "deberta": "DebertaV2Tokenizer"}
# How SentencePiece marks a piece that begins with a space, i.e. a new word.
SPACE_MARK = "\u2581"  # "▁"


@keras.saving.register_keras_serializable(package="keras_bert_suite")
class SentencePieceTokenizer(Tokenizer):
    """SentencePiece tokenizer (ALBERT, XLM-RoBERTa).

    Args:
        proto: the SentencePiece model: a path (spiece.model, sentencepiece.bpe.model) or
            its bytes. Stored in the layer config (base64).
        style: "albert", "xlm_roberta" or "deberta" (see the module docstring).

    Call: strings [B] (or a scalar) -> int32 ids, a [B, None] `tf.RaggedTensor`.

    Example (an ALBERT checkpoint's model; `from_directory` and `tokenizer_from_preset`
    find it)::

        tokenizer = SentencePieceTokenizer("albert-base-v2/spiece.model", style="albert")
        tokenizer.encode_batch(["Hello world"])  # [[10975, 126]]: "▁hello", "▁world"
    """

    kind = "sentencepiece"
    word_start_mark = SPACE_MARK
    # KerasHub's tokenizer classes ({class name: our extra arguments}) and the file their
    # `save_assets` writes under assets/tokenizer/ (the proto, unchanged).
    keras_hub_classes = {"AlbertTokenizer": {"style": "albert"},
                         "XLMRobertaTokenizer": {"style": "xlm_roberta"},
                         "DebertaV3Tokenizer": {"style": "deberta"}}
    keras_hub_files = ("vocabulary.spm",)

    def __init__(self, proto, style="albert", **kwargs):
        super().__init__(**kwargs)
        if style not in STYLES:
            raise ValueError(f"style must be one of {sorted(STYLES)}, got {style!r}.")
        self.proto = _load_proto(proto)
        self.style = style
        # What the op runs: DeBERTa's model without its own normalization rules.
        self._op_proto = _without_normalizer(self.proto) if style == "deberta" else self.proto
        self.packer_layout = "roberta" if style == "xlm_roberta" else "bert"
        self.special_tokens = dict(STYLES[style])
        try:
            pieces = tf.function(self._pieces)().numpy()
        except tf.errors.InternalError as error:
            raise ValueError(f"proto is not a SentencePiece model ({error.message.strip()}). "
                             "Pass the .model file the model was trained with.") from None
        pieces = [piece.decode("utf-8") for piece in pieces]
        if style == "xlm_roberta":
            pieces = FAIRSEQ_FIRST_TOKENS + pieces[3:] + ["<mask>"]
        elif style == "deberta" and self.special_tokens["mask"] not in pieces:
            pieces = pieces + [self.special_tokens["mask"]]
        self._index_vocabulary(pieces)

    def _model(self):
        # Made inside each traced graph, never eagerly: an eager SentencePiece resource is
        # kernel-owned under a generated name, and deleting one tokenizer (a config round
        # trip's copy) deleted it under the graphs of the others.
        return tf_text.SentencepieceTokenizer(self._op_proto, out_type=tf.int32)

    def _pieces(self):
        model = self._model()
        return model.id_to_string(tf.range(model.vocab_size()))

    def _tokenize(self, strings):
        # SentencePiece's op without offsets runs faster than the one with them.
        return self._run(sanitize_utf8(strings), with_offsets=False)[0]

    def _tokenize_with_offsets(self, strings):
        text = sanitize_utf8(strings)
        ids, starts, ends = self._run(text, with_offsets=True)
        return ids, _after_leading_space(text, starts, ends), ends

    def _run(self, text, with_offsets):
        """(ids,) or (ids, starts, ends), in our ids."""
        model = self._model()
        tokenize = model.tokenize_with_offsets if with_offsets else lambda t: (model.tokenize(t),)
        if self.style == "xlm_roberta":
            ids, *offsets = tokenize(text)
            # fairseq's ids: the model's unknown piece (0) -> <unk> (3), every other piece + 1.
            return (ids.with_values(tf.where(ids.values == 0, 3, ids.values + 1)), *offsets)
        if self.style == "deberta":
            # Most rows only need \n \r \t as spaces (offsets stay the text's); the others
            # the whole normalization.
            return row_routing.replace_rows(
                tokenize(deberta_normalizer.simple(text)), deberta_normalizer.needs_exact(text),
                lambda rows: tokenize(deberta_normalizer.exact(tf.gather(text, rows))))
        # ALBERT: plain ASCII rows without `` or '' only lower-case, byte for byte, so
        # offsets into them are offsets into the text; the others are normalized per character.
        return row_routing.replace_rows(
            tokenize(tf.strings.lower(text)), ~albert_normalizer.lower_casing_is_enough(text),
            lambda rows: self._albert_exact(tokenize, tf.gather(text, rows), with_offsets))

    def _albert_exact(self, tokenize, text, with_offsets):
        normalized = albert_normalizer.normalize_chars(text)
        ids, *offsets = tokenize(tf.strings.reduce_join(normalized.chars, axis=-1))
        if not with_offsets:
            return (ids,)
        return (ids, *offset_alignment.to_original_offsets(*offsets, normalized))

    def get_config(self):
        return {**super().get_config(), "proto": base64.b64encode(self.proto).decode("ascii"),
                "style": self.style}

    # === its files ===

    @classmethod
    def from_directory(cls, directory, **kwargs):
        """A directory holding spiece.model (ALBERT) or sentencepiece.bpe.model (XLM-R)."""
        for style, name in FILES.items():
            path = os.path.join(directory, name)
            if os.path.isfile(path):
                return cls(path, style=style, **kwargs)
        raise ValueError(f"{directory} holds none of {', '.join(FILES.values())}.")

    @classmethod
    def from_tokenizer_json(cls, data, config, **kwargs):
        return cls(**tokenizer_json.sentencepiece_arguments(data, config), **kwargs)

    def save_files(self, directory):
        with open(os.path.join(directory, FILES[self.style]), "wb") as f:
            f.write(self.proto)

    def save_huggingface_files(self, directory, model_max_length, lowercase=None):
        self.save_files(directory)
        # ALBERT's own casing is part of its style; XLM-R's and DeBERTa's models keep case.
        settings = {"albert": {"do_lower_case": True, "keep_accents": False},
                    "deberta": {"do_lower_case": False, "split_by_punct": False,
                                "add_prefix_space": True,
                                "unk_id": self.token_to_id(self.special_tokens["unknown"])},
                    }.get(self.style, {})
        tokenizer_json.save(
            directory, tokenizer_json.sentencepiece_json(
                self.proto, self.style, self.get_vocabulary(), self.special_tokens),
            HUGGINGFACE_CLASSES[self.style], self.special_tokens, model_max_length, **settings)

    def keras_hub_tokenizer(self):
        """KerasHub's AlbertTokenizer, XLMRobertaTokenizer or DebertaV3Tokenizer with the same
        proto. XLM-R: the same ids (KerasHub shifts them as fairseq does, as our style does).
        ALBERT: KerasHub runs the proto alone, without ALBERT's lower-casing and accent
        stripping, so on text with capitals or accents its ids are not ALBERT's. DeBERTa:
        KerasHub runs the proto with its own rules (transformers 5 and our style run
        NFC and fold white space instead), `[MASK]` after the pieces as ours."""
        class_name = next(name for name, arguments in self.keras_hub_classes.items()
                          if arguments["style"] == self.style)
        return class_name, {"proto": self.proto}


def _load_proto(proto):
    if isinstance(proto, (str, os.PathLike)) and os.path.isfile(os.fspath(proto)):
        with open(os.fspath(proto), "rb") as f:
            return f.read()
    if isinstance(proto, str):  # base64, as get_config writes it
        try:
            return base64.b64decode(proto.encode("ascii"), validate=True)
        except ValueError:
            raise ValueError(f"proto={proto[:80]!r} is neither a file nor a base64 model. "
                             "Pass the path of the SentencePiece .model file or its bytes.")
    if isinstance(proto, bytes):
        return proto
    raise ValueError(f"proto must be a path or bytes, got {type(proto).__name__}.")


def _without_normalizer(proto):
    """The model with the identity normalizer (transformers 5's DeBERTa tokenizer runs its
    own normalization, deberta_normalizer.py, instead of the model's rules), still folding
    runs of spaces and adding the leading "▁"."""
    model = sentencepiece_proto.read_model(proto)
    return sentencepiece_proto.write_model(dataclasses.replace(
        model, normalizer_name="identity", charsmap=b"", add_dummy_prefix=True,
        remove_extra_whitespaces=True))


def _after_leading_space(text, starts, ends):
    """A piece's span leaves out the white space its "▁" stands for (SentencePiece folds a
    run into one), as transformers' offsets do; a span of white space only is kept."""
    spans = tf.strings.substr(tf.gather(text, ragged_rows.value_rowids(starts)), starts.values,
                              ends.values - starts.values)
    rest = tf.strings.regex_replace(spans, f"^[{byte_level.SPACE_CHARS}]+", "")
    skipped = tf.strings.length(spans) - tf.strings.length(rest)
    skipped = tf.where(tf.strings.length(rest) > 0, skipped, 0)
    return starts.with_values(starts.values + tf.cast(skipped, starts.dtype))
