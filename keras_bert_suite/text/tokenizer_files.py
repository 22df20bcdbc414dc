"""Which tokenizer a checkpoint directory holds, in both directions: WordPiece, byte-level BPE
(RoBERTa) or SentencePiece (ALBERT, XLM-R), found by its files.

* transformers' file names: vocab.txt (WordPiece), vocab.json + merges.txt (BPE),
  spiece.model (ALBERT), sentencepiece.bpe.model (XLM-R). Our presets write the same files,
  so a preset directory and a transformers directory load the same way:
  `tokenizer_from_preset("roberta-base/")` is a BytePairTokenizer.
* Hugging Face's tokenizer.json (tokenizer_json.py): the one file transformers 5 writes for a
  fast tokenizer, read for every kind when the files above are absent; when both are there,
  they must hold the same vocabulary. `save_huggingface` writes both.
* A KerasHub preset: tokenizer.json names KerasHub's tokenizer class and KerasHub keeps its
  files under assets/tokenizer/ (KERAS_HUB_TOKENIZERS). Its RobertaTokenizer is our
  BytePairTokenizer, its AlbertTokenizer and XLMRobertaTokenizer our SentencePieceTokenizer
  with style "albert" / "xlm_roberta"; `keras_hub_tokenizer` gives the arguments of KerasHub's
  class for one of ours (save_keras_hub builds it and KerasHub writes its own files).

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

from keras_bert_suite.text import byte_pair_tokenizer
from keras_bert_suite.text import tokenizer_json
from keras_bert_suite.text.byte_pair_tokenizer import ROBERTA_SPECIAL_TOKENS, BytePairTokenizer
from keras_bert_suite.text.sentencepiece_tokenizer import SentencePieceTokenizer
from keras_bert_suite.text.tokenizer import BertTokenizer

SENTENCEPIECE_FILES = {"albert": "spiece.model", "xlm_roberta": "sentencepiece.bpe.model"}
TOKENIZER_JSON_CLASSES = {"byte_pair": BytePairTokenizer, "sentencepiece": SentencePieceTokenizer}
# A KerasHub preset's tokenizer: tokenizer.json's class_name -> (ours: "byte_pair" or a
# SentencePiece style, the files KerasHub's `save_assets` writes under assets/tokenizer/).
KERAS_HUB_TOKENIZER_CONFIG = "tokenizer.json"
KERAS_HUB_ASSETS = os.path.join("assets", "tokenizer")
KERAS_HUB_TOKENIZERS = {
    "RobertaTokenizer": ("byte_pair", ("vocabulary.json", "merges.txt")),
    "AlbertTokenizer": ("albert", ("vocabulary.spm",)),
    "XLMRobertaTokenizer": ("xlm_roberta", ("vocabulary.spm",)),
}


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
    from_json = TOKENIZER_JSON_CLASSES[tokenizer_json.kind(found[0])](
        **_json_arguments(*found), **kwargs)
    if tokenizer is None:
        return from_json
    if (type(tokenizer) is not type(from_json)
            or tokenizer.get_vocabulary() != from_json.get_vocabulary()
            or getattr(tokenizer, "merges", None) != getattr(from_json, "merges", None)):
        raise ValueError(
            f"{directory} holds two different tokenizers: {type(tokenizer).__name__}'s files "
            f"and a {tokenizer_json.FILE} of another vocabulary or merges. Remove the one the "
            "model was not trained with.")
    return tokenizer


def _json_arguments(data, config):
    kind = tokenizer_json.kind(data)
    if kind == "byte_pair":
        return tokenizer_json.byte_pair_arguments(data, config)
    return tokenizer_json.sentencepiece_arguments(data, config)


def _tokenizer_from_family_files(directory, kwargs):
    """A BPE or SentencePiece tokenizer from transformers' or KerasHub's files, else None."""
    has = lambda name: os.path.isfile(os.path.join(directory, name))
    if all(has(name) for name in byte_pair_tokenizer.FILES):
        return BytePairTokenizer.from_directory(directory, **kwargs)
    for style, name in SENTENCEPIECE_FILES.items():
        if has(name):
            return SentencePieceTokenizer(os.path.join(directory, name), style=style, **kwargs)
    return _keras_hub_tokenizer_from(directory, kwargs)


def _keras_hub_tokenizer_from(directory, kwargs):
    """Ours for a KerasHub preset's BPE or SentencePiece tokenizer, else None."""
    config_path = os.path.join(directory, KERAS_HUB_TOKENIZER_CONFIG)
    if not os.path.isfile(config_path):
        return None
    with open(config_path, encoding="utf-8") as f:
        class_name = json.load(f).get("class_name")
    if class_name not in KERAS_HUB_TOKENIZERS:
        return None  # a WordPiece tokenizer (vocabulary.txt) or one we do not have
    kind, names = KERAS_HUB_TOKENIZERS[class_name]
    paths = [os.path.join(directory, KERAS_HUB_ASSETS, name) for name in names]
    missing = [path for path in paths if not os.path.isfile(path)]
    if missing:
        raise ValueError(f"{config_path} names KerasHub's {class_name}, whose files are "
                         f"missing: {', '.join(missing)}.")
    if kind == "byte_pair":
        return BytePairTokenizer(*paths, **kwargs)
    return SentencePieceTokenizer(paths[0], style=kind, **kwargs)


def keras_hub_tokenizer(tokenizer):
    """(KerasHub's tokenizer class name, its constructor's arguments) that tokenize as our
    BPE or SentencePiece `tokenizer` (see the module docstring for where they differ); None
    for another tokenizer (WordPiece: its vocabulary is KerasHub's vocabulary argument)."""
    if isinstance(tokenizer, BytePairTokenizer):
        if tokenizer.special_tokens != ROBERTA_SPECIAL_TOKENS:
            raise ValueError(
                f"KerasHub's RobertaTokenizer packs with RoBERTa's special tokens "
                f"{ROBERTA_SPECIAL_TOKENS}, and this tokenizer's are "
                f"{tokenizer.special_tokens}: its preset would not pack as ours does.")
        return "RobertaTokenizer", {
            "vocabulary": {token: i for i, token in enumerate(tokenizer.vocabulary)},
            "merges": list(tokenizer.merges)}
    if isinstance(tokenizer, SentencePieceTokenizer):
        class_name = next(name for name, (kind, _) in KERAS_HUB_TOKENIZERS.items()
                          if kind == tokenizer.style)
        return class_name, {"proto": tokenizer.proto}
    return None


def write_tokenizer_files(directory, tokenizer):
    """The files `tokenizer_from_preset` reads back, for a BPE or SentencePiece tokenizer
    (transformers' names). Returns False for another tokenizer (WordPiece writes vocab.txt
    itself)."""
    if isinstance(tokenizer, BytePairTokenizer):
        vocabulary, merges = (os.path.join(directory, n) for n in byte_pair_tokenizer.FILES)
        with open(vocabulary, "w", encoding="utf-8") as f:
            json.dump({token: i for i, token in enumerate(tokenizer.vocabulary)}, f,
                      ensure_ascii=False)
        with open(merges, "w", encoding="utf-8") as f:
            f.write("#version: 0.2\n")
            f.writelines(f"{merge}\n" for merge in tokenizer.merges)
        return True
    if isinstance(tokenizer, SentencePieceTokenizer):
        with open(os.path.join(directory, SENTENCEPIECE_FILES[tokenizer.style]), "wb") as f:
            f.write(tokenizer.proto)
        return True
    return False


# transformers' tokenizer class for each of ours (its `tokenizer_class`).
HUGGINGFACE_CLASSES = {"albert": "AlbertTokenizer", "xlm_roberta": "XLMRobertaTokenizer",
                       "byte_pair": "RobertaTokenizer", "wordpiece": "BertTokenizer"}


def write_huggingface_tokenizer(directory, tokenizer, lowercase, model_max_length):
    """A transformers directory's tokenizer: the family's own files (vocab.txt, vocab.json +
    merges.txt, the SentencePiece model), tokenizer.json (what transformers 5 reads first)
    and tokenizer_config.json. `tokenizer`: one of ours, or a WordPiece token list."""
    if isinstance(tokenizer, (BytePairTokenizer, SentencePieceTokenizer)):
        write_tokenizer_files(directory, tokenizer)
        special, vocabulary = tokenizer.special_tokens, tokenizer.get_vocabulary()
        if isinstance(tokenizer, BytePairTokenizer):
            kind, settings = "byte_pair", {}
            document = tokenizer_json.byte_pair_json(vocabulary, tokenizer.merges, special)
        else:
            kind, settings = tokenizer.style, {}
            if kind == "albert":
                settings = {"do_lower_case": True, "keep_accents": False}
            document = tokenizer_json.sentencepiece_json(
                tokenizer.proto, tokenizer.style, vocabulary, special)
    else:
        vocabulary = (tokenizer.get_vocabulary() if isinstance(tokenizer, BertTokenizer)
                      else list(tokenizer))
        max_chars = getattr(tokenizer, "max_input_chars_per_word",
                            tokenizer_json.DEFAULT_MAX_INPUT_CHARS_PER_WORD)
        with open(os.path.join(directory, "vocab.txt"), "w", encoding="utf-8") as f:
            f.writelines(f"{token}\n" for token in vocabulary)
        kind, special = "wordpiece", BertTokenizer.special_tokens
        settings = {"do_lower_case": bool(lowercase), "strip_accents": None,
                    "tokenize_chinese_chars": True, "max_input_chars_per_word": max_chars}
        document = tokenizer_json.wordpiece_json(vocabulary, lowercase, max_chars, special)
    if document is not None:
        _write_json(os.path.join(directory, tokenizer_json.FILE), document)
    _write_json(os.path.join(directory, tokenizer_json.CONFIG_FILE), tokenizer_json.config_json(
        HUGGINGFACE_CLASSES[kind], special, model_max_length, **settings))


def _write_json(path, value):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f, ensure_ascii=False, indent=2)
