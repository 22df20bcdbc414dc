"""Where a checkpoint directory keeps a WordPiece tokenizer's vocabulary and casing, in each
format BertTokenizer reads: ours, transformers', Google's and Model Garden's, KerasHub's."""

import json
import os

# vocab.txt (ours, transformers', Google's, Model Garden's), else KerasHub's.
VOCABULARY_FILES = ("vocab.txt", os.path.join("assets", "tokenizer", "vocabulary.txt"))
TOKENIZER_FILE = "tokenizer.json"  # ours: {"lowercase": ...}; KerasHub's: {"config": {...}}
HUGGINGFACE_CONFIG_FILE = "tokenizer_config.json"
# Google's and Model Garden's releases have these instead of a config.json.
GOOGLE_CONFIG_FILES = ("bert_config.json", "albert_config.json")


def vocabulary_file(directory):
    """The directory's WordPiece vocabulary file, or None."""
    return next((os.path.join(directory, name) for name in VOCABULARY_FILES
                 if os.path.isfile(os.path.join(directory, name))), None)


def lowercase(directory):
    """Whether the directory's vocabulary expects lower-cased, accent-stripped text: what
    tokenizer_config.json (transformers), tokenizer.json (ours, KerasHub's, or transformers'
    normalizer) or a Google release's name or vocabulary says; uncased when nothing does."""
    if not os.path.isfile(os.path.join(directory, "config.json")) and any(
            os.path.isfile(os.path.join(directory, name)) for name in GOOGLE_CONFIG_FILES):
        return _google_lowercase(directory)
    config = _read_json(os.path.join(directory, HUGGINGFACE_CONFIG_FILE))
    if config.get("do_lower_case") is not None:
        return bool(config["do_lower_case"])
    saved = _read_json(os.path.join(directory, TOKENIZER_FILE))
    if "lowercase" in saved:  # ours
        return bool(saved["lowercase"])
    if "class_name" in saved:  # KerasHub's
        return bool(saved.get("config", {}).get("lowercase", True))
    normalizer = saved.get("normalizer") or {}  # transformers'
    return bool(normalizer.get("lowercase", True))


def _google_lowercase(directory):
    """Google's release names say it ("uncased_L-12_H-768_A-12"); else look at the vocab."""
    name = os.path.basename(os.path.normpath(os.path.abspath(directory))).lower()
    if "uncased" in name:
        return True
    if "cased" in name:
        return False
    path = vocabulary_file(directory)
    if path is None:
        return True
    with open(path, encoding="utf-8") as f:
        # A cased vocabulary has capitalised words; special tokens like [CLS] do not count.
        return not any(token[:1] != "[" and token != token.lower() for token in f.read().split())


def _read_json(path):
    if not os.path.isfile(path):
        return {}
    with open(path, encoding="utf-8") as f:
        value = json.load(f)
    return value if isinstance(value, dict) else {}
