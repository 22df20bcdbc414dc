"""Reading and checking a WordPiece vocabulary (vocab.txt: one token per line, id = line number)."""

import os

PAD_TOKEN = "[PAD]"
UNKNOWN_TOKEN = "[UNK]"
CLS_TOKEN = "[CLS]"
SEP_TOKEN = "[SEP]"
MASK_TOKEN = "[MASK]"
# The order learn_vocabulary writes them in, so [PAD] gets id 0.
RESERVED_TOKENS = (PAD_TOKEN, UNKNOWN_TOKEN, CLS_TOKEN, SEP_TOKEN, MASK_TOKEN)


def load_vocabulary(vocabulary):
    """A vocab.txt path or a sequence of tokens -> a checked list of str."""
    if isinstance(vocabulary, (str, os.PathLike)):
        path = os.fspath(vocabulary)
        if not os.path.isfile(path):
            raise ValueError(
                f"vocabulary={path!r} is not a file. Pass the path of a vocab.txt (one token per "
                "line) or a list of tokens.")
        with open(path, encoding="utf-8") as f:
            # Like `tokenizers` and google-research/bert: trailing white space is not part of a token.
            tokens = [line.rstrip() for line in f.read().split("\n")]
        if tokens and tokens[-1] == "":
            tokens.pop()  # the final newline
        source = path
    elif isinstance(vocabulary, (list, tuple)) or _is_array(vocabulary):
        tokens = [_as_str(token) for token in list(vocabulary)]
        source = "the vocabulary list"
    else:
        raise ValueError(
            f"vocabulary must be a vocab.txt path or a list of str tokens, got "
            f"{type(vocabulary).__name__}.")
    _check(tokens, source)
    return tokens


def _is_array(value):
    return hasattr(value, "tolist") and hasattr(value, "dtype")


def _as_str(token):
    if isinstance(token, bytes):
        return token.decode("utf-8")
    if not isinstance(token, str):
        raise ValueError(f"Every vocabulary token must be a str, got {token!r} "
                         f"({type(token).__name__}).")
    return token


def _check(tokens, source):
    if not tokens:
        raise ValueError(f"{source} is empty; a WordPiece vocabulary needs at least {UNKNOWN_TOKEN}.")
    seen = {}
    for index, token in enumerate(tokens):
        if token == "":
            raise ValueError(f"{source}: token {index} (line {index + 1}) is empty. "
                             "Remove the blank line; ids are line numbers.")
        if token in seen:
            raise ValueError(f"{source}: token {token!r} appears twice (lines {seen[token] + 1} and "
                             f"{index + 1}). Each token needs exactly one id.")
        seen[token] = index
    if UNKNOWN_TOKEN not in seen:
        raise ValueError(f"{source} has no {UNKNOWN_TOKEN} token, which WordPiece emits for words it "
                         f"cannot spell. Add {UNKNOWN_TOKEN} (learn_vocabulary reserves it).")

