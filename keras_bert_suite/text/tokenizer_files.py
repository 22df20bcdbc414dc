"""Which tokenizer a checkpoint directory holds, by transformers' file names, in both
directions: WordPiece (vocab.txt), byte-level BPE (vocab.json + merges.txt: RoBERTa) or
SentencePiece (spiece.model: ALBERT; sentencepiece.bpe.model: XLM-R). Our presets write the
same files, so a preset directory and a transformers directory load the same way:
`tokenizer_from_preset("roberta-base/")` is a BytePairTokenizer.
"""

import json
import os

from keras_bert_suite.text import byte_pair_tokenizer
from keras_bert_suite.text.byte_pair_tokenizer import BytePairTokenizer
from keras_bert_suite.text.sentencepiece_tokenizer import SentencePieceTokenizer
from keras_bert_suite.text.tokenizer import BertTokenizer

SENTENCEPIECE_FILES = {"albert": "spiece.model", "xlm_roberta": "sentencepiece.bpe.model"}


def tokenizer_from_preset(preset, **kwargs):
    """The tokenizer of a built-in preset or a checkpoint directory: a family's BPE or
    SentencePiece files when the directory has them, else `BertTokenizer.from_preset`
    (vocab.txt; `kwargs` are its arguments)."""
    directory = os.fspath(preset) if isinstance(preset, (str, os.PathLike)) else None
    if directory is not None and os.path.isdir(directory):
        has = lambda name: os.path.isfile(os.path.join(directory, name))
        if all(has(name) for name in byte_pair_tokenizer.FILES):
            return BytePairTokenizer.from_directory(directory, **kwargs)
        for style, name in SENTENCEPIECE_FILES.items():
            if has(name):
                return SentencePieceTokenizer(os.path.join(directory, name), style=style,
                                              **kwargs)
    return BertTokenizer.from_preset(preset, **kwargs)


def write_tokenizer_files(directory, tokenizer):
    """The files `tokenizer_from_preset` reads back, for a BPE or SentencePiece tokenizer.
    Returns False for another tokenizer (WordPiece writes vocab.txt itself)."""
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
