"""Which tokenizer a checkpoint directory holds: WordPiece, byte-level BPE (RoBERTa) or
SentencePiece (ALBERT, XLM-R), found by its files. Each class reads and writes its own files
(`from_directory`, `save_files`, `from_tokenizer_json`, `save_huggingface_files`,
`keras_hub_tokenizer`); the tables here only say which class a directory's files are.

* transformers' file names: vocab.txt (WordPiece), vocab.json + merges.txt (BPE),
  spiece.model (ALBERT), sentencepiece.bpe.model (XLM-R). Our presets write the same files,
  so a preset directory and a transformers directory load the same way:
  `tokenizer_from_preset("roberta-base/")` is a BytePairTokenizer.
* Hugging Face's tokenizer.json (checkpoints/tokenizer_json.py): the one file transformers 5
  writes for a fast tokenizer, read for every kind when the files above are absent; when both
  are there, they must hold the same vocabulary. `save_huggingface` writes both.
* A KerasHub preset: tokenizer.json names KerasHub's tokenizer class and KerasHub keeps its
  files under assets/tokenizer/ (KERAS_HUB_CLASSES). Its RobertaTokenizer is our
  BytePairTokenizer, its AlbertTokenizer and XLMRobertaTokenizer our SentencePieceTokenizer
  with style "albert" / "xlm_roberta"; a tokenizer's `keras_hub_tokenizer` gives the arguments
  of KerasHub's class for it (save_keras_hub builds it and KerasHub writes its own files).

The same files, not always the same ids:
* XLM-R: KerasHub shifts the SentencePiece ids as fairseq does (<s> <pad> </s> <unk> first,
  the model's unknown piece -> <unk> = 3, <mask> last), as our style "xlm_roberta" does: the
  same ids, and KerasHub stores the proto unchanged.
* ALBERT: KerasHub's AlbertTokenizer runs the proto alone, without ALBERT's lower-casing and
  accent stripping (google-research/albert's `preprocess_text`, transformers'
  AlbertTokenizer, our style "albert"): on text with capitals or accents its ids are not
  ALBERT's. We read its presets as ALBERT (ours lower-cases).
* RoBERTa: KerasHub's RobertaTokenizer matches "<s>", "</s>", "<pad>", "<mask>" written in
  the text as special tokens; ours reads them as ordinary text. Other text: the same ids.
WordPiece presets of KerasHub (assets/tokenizer/vocabulary.txt) go to BertTokenizer.from_preset.
"""

import json
import os

from keras_bert_suite.checkpoints import tokenizer_json
from keras_bert_suite.text import byte_pair_tokenizer
from keras_bert_suite.text import sentencepiece_tokenizer
from keras_bert_suite.text.byte_pair_tokenizer import BytePairTokenizer
from keras_bert_suite.text.sentencepiece_tokenizer import SentencePieceTokenizer
from keras_bert_suite.text.tokenizer import BertTokenizer

# A family's own files (transformers' names) -> the class that reads them, in the order they
# are looked for; a directory with none of them is WordPiece's (vocab.txt), BertTokenizer's.
FAMILY_FILES = {byte_pair_tokenizer.FILES: BytePairTokenizer,
                **{(name,): SentencePieceTokenizer
                   for name in sentencepiece_tokenizer.FILES.values()}}
# tokenizer.json's model kind -> the class it describes.
TOKENIZER_JSON_CLASSES = {"wordpiece": BertTokenizer, "byte_pair": BytePairTokenizer,
                          "sentencepiece": SentencePieceTokenizer}
# A KerasHub preset's tokenizer: tokenizer.json's class_name -> ours, its files under
# assets/tokenizer/ (the class's `keras_hub_files`).
KERAS_HUB_TOKENIZER_CONFIG = "tokenizer.json"
KERAS_HUB_ASSETS = os.path.join("assets", "tokenizer")
KERAS_HUB_CLASSES = {name: cls for cls in (BytePairTokenizer, SentencePieceTokenizer)
                     for name in cls.keras_hub_classes}


def tokenizer_from_preset(preset, **kwargs):
    """The tokenizer of a built-in preset or a checkpoint directory: a family's BPE or
    SentencePiece files when the directory has them (transformers' names or a KerasHub
    preset's), Hugging Face's tokenizer.json when it has no others (what transformers 5
    writes), else `BertTokenizer.from_preset` (vocab.txt or a WordPiece tokenizer.json;
    `kwargs` are its arguments). Where both a family's files and tokenizer.json are there,
    they must agree."""
    directory = os.fspath(preset) if isinstance(preset, (str, os.PathLike)) else None
    if directory is None or not os.path.isdir(directory):
        return BertTokenizer.from_preset(preset, **kwargs)
    tokenizer = _tokenizer_from_family_files(directory, kwargs)
    found = tokenizer_json.load(directory)
    if found is None or tokenizer_json.kind(found[0]) == "wordpiece":
        return tokenizer or BertTokenizer.from_preset(preset, **kwargs)
    from_json = TOKENIZER_JSON_CLASSES[tokenizer_json.kind(found[0])].from_tokenizer_json(
        *found, **kwargs)
    if tokenizer is None:
        return from_json
    if (type(tokenizer) is not type(from_json)
            or tokenizer.get_vocabulary() != from_json.get_vocabulary()
            or getattr(tokenizer, "merges", None) != getattr(from_json, "merges", None)):
        raise ValueError(
            f"{directory} holds two different tokenizers: {type(tokenizer).__name__}'s files "
            f"and a {tokenizer_json.FILE} of another vocabulary or merges. Remove the one the "
            "model was not trained with.")
    if isinstance(tokenizer, BytePairTokenizer) and (
            (from_json.packer_layout, from_json.special_tokens)
            != (tokenizer.packer_layout, tokenizer.special_tokens)):
        # vocab.json + merges.txt hold neither the special tokens nor the packing
        # (ModernBERT's [CLS] a [SEP]): tokenizer.json's win
        return from_json
    return tokenizer


def _tokenizer_from_family_files(directory, kwargs):
    """A BPE or SentencePiece tokenizer from transformers' or KerasHub's files, else None."""
    has = lambda name: os.path.isfile(os.path.join(directory, name))
    for names, cls in FAMILY_FILES.items():
        if all(has(name) for name in names):
            return cls.from_directory(directory, **kwargs)
    return _keras_hub_tokenizer_from(directory, kwargs)


def _keras_hub_tokenizer_from(directory, kwargs):
    """Ours for a KerasHub preset's BPE or SentencePiece tokenizer, else None."""
    config_path = os.path.join(directory, KERAS_HUB_TOKENIZER_CONFIG)
    if not os.path.isfile(config_path):
        return None
    with open(config_path, encoding="utf-8") as f:
        class_name = json.load(f).get("class_name")
    if class_name not in KERAS_HUB_CLASSES:
        return None  # a WordPiece tokenizer (vocabulary.txt) or one we do not have
    cls = KERAS_HUB_CLASSES[class_name]
    paths = [os.path.join(directory, KERAS_HUB_ASSETS, name) for name in cls.keras_hub_files]
    missing = [path for path in paths if not os.path.isfile(path)]
    if missing:
        raise ValueError(f"{config_path} names KerasHub's {class_name}, whose files are "
                         f"missing: {', '.join(missing)}.")
    return cls(*paths, **cls.keras_hub_classes[class_name], **kwargs)
