"""Hugging Face's `tokenizer.json` (the `tokenizers` library's file, and the only tokenizer
file transformers 5 writes for a fast tokenizer), read into our tokenizers' arguments and
written from them, with tokenizer_config.json beside it. Each tokenizer class of text/ reads
and writes its own through here; it sits in checkpoints/ (plain JSON, no TensorFlow) so that
the Hugging Face writer can give a bare WordPiece token list its files too.

Three kinds, by `model.type`:
* "WordPiece" (BERT, DistilBERT, ELECTRA): the vocabulary, `max_input_chars_per_word`, and the
  BertNormalizer's lower-casing -> BertTokenizer's arguments.
* "BPE" with the ByteLevel pre-tokenizer (RoBERTa): vocabulary, merges, and the special tokens
  of the post-processor and tokenizer_config.json -> BytePairTokenizer's.
* "Unigram" with the Metaspace pre-tokenizer (ALBERT, XLM-R): the pieces and their scores, and
  the Precompiled normalizer's rules -> a SentencePiece model (sentencepiece_proto.py) and the
  family's style: XLM-R's fairseq ids (`<s> <pad> </s> <unk>` first, `<mask>` last) map back
  to the model's own; ALBERT's normalizer sequence (Replace ``, NFKD, StripAccents,
  Lowercase) is what our "albert" style runs; DeBERTa-v3's (transformers 5's
  DebertaV2Tokenizer: Replace white-space runs, NFC, Strip right, no Precompiled rules; its
  `[MASK]` an added token after the model's pieces) is our "deberta" style's.

Anything else (another normalizer or pre-tokenizer, byte fallback, a BPE-typed SentencePiece)
is refused with the setting that differs: a silent approximation would give wrong ids.
"""

import base64
import json
import os

from keras_bert_suite.checkpoints import sentencepiece_proto
from keras_bert_suite.checkpoints.sentencepiece_proto import SentencePieceModel

FILE = "tokenizer.json"
CONFIG_FILE = "tokenizer_config.json"
# transformers' and tf-text's default (google-research/bert's own Python used 200).
DEFAULT_MAX_INPUT_CHARS_PER_WORD = 100
WORDPIECE_PREFIX = "##"
SPACE_MARK = "\u2581"  # "▁", Metaspace's replacement
FAIRSEQ_FIRST_TOKENS = ["<s>", "<pad>", "</s>", "<unk>"]
# transformers' BertTokenizer's special tokens (a bare WordPiece token list gets them).
BERT_SPECIAL_TOKENS = {"unknown": "[UNK]", "cls": "[CLS]", "sep": "[SEP]", "pad": "[PAD]",
                       "mask": "[MASK]"}
ROLES = {"unknown": "unk_token", "cls": "cls_token", "sep": "sep_token", "pad": "pad_token",
         "mask": "mask_token"}
# ALBERT's pre-normalization (google-research/albert's preprocess_text), as tokenizers spells it.
ALBERT_NORMALIZERS = ["Replace", "Replace", "NFKD", "StripAccents", "Lowercase"]
# DeBERTa-v3's, as transformers 5's DebertaV2Tokenizer writes them (do_lower_case false).
DEBERTA_NORMALIZERS = [
    {"type": "Replace", "pattern": {"Regex": "\\s{2,}|[\\n\\r\\t]"}, "content": " "},
    {"type": "NFC"}, {"type": "Strip", "strip_left": False, "strip_right": True}]


def load(directory):
    """(tokenizer.json, tokenizer_config.json) of a Hugging Face directory as dicts, or None
    when it has no tokenizer.json of Hugging Face's (a KerasHub preset's or our old presets'
    tokenizer.json has no "model")."""
    path = os.path.join(directory, FILE)
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    if not isinstance(data, dict) or not isinstance(data.get("model"), dict):
        return None
    config_path = os.path.join(directory, CONFIG_FILE)
    config = {}
    if os.path.isfile(config_path):
        with open(config_path, encoding="utf-8") as f:
            config = json.load(f)
    return data, config


def kind(data):
    """"wordpiece", "byte_pair" or "sentencepiece"."""
    model_type = data["model"].get("type")
    kinds = {"WordPiece": "wordpiece", "BPE": "byte_pair", "Unigram": "sentencepiece"}
    if model_type not in kinds:
        raise ValueError(f"{FILE} holds a {model_type!r} model; the tokenizers here are "
                         f"WordPiece, byte-level BPE and Unigram (SentencePiece).")
    return kinds[model_type]


def wordpiece_arguments(data, config):
    """BertTokenizer's arguments: vocabulary, lowercase, max_input_chars_per_word."""
    model = data["model"]
    _expect(model.get("continuing_subword_prefix", WORDPIECE_PREFIX) == WORDPIECE_PREFIX,
            "continuing_subword_prefix", model.get("continuing_subword_prefix"), "'##'")
    _expect(model.get("unk_token") == "[UNK]", "unk_token", model.get("unk_token"), "'[UNK]'")
    _expect(_type(data.get("pre_tokenizer")) == "BertPreTokenizer", "pre_tokenizer",
            _type(data.get("pre_tokenizer")), "BertPreTokenizer")
    normalizer = data.get("normalizer") or {}
    _expect(normalizer.get("type") == "BertNormalizer", "normalizer", normalizer.get("type"),
            "BertNormalizer")
    lowercase = bool(normalizer.get("lowercase", True))
    strip_accents = normalizer.get("strip_accents")
    _expect(strip_accents is None or bool(strip_accents) == lowercase,
            "normalizer.strip_accents", strip_accents, f"null or {lowercase} (as lowercase)")
    max_chars = model.get("max_input_chars_per_word",
                          config.get("max_input_chars_per_word", DEFAULT_MAX_INPUT_CHARS_PER_WORD))
    return {"vocabulary": _by_id(model["vocab"]), "lowercase": lowercase,
            "max_input_chars_per_word": int(max_chars)}


def byte_pair_arguments(data, config):
    """BytePairTokenizer's arguments: vocabulary, merges, special_tokens, packer_layout
    ("bert" for a template that packs [CLS] A [SEP] B [SEP], as ModernBERT's does)."""
    model = data["model"]
    pre_tokenizer = data.get("pre_tokenizer") or {}
    _expect(pre_tokenizer.get("type") == "ByteLevel", "pre_tokenizer", pre_tokenizer.get("type"),
            "ByteLevel (byte-level BPE)")
    _expect(not pre_tokenizer.get("add_prefix_space", False), "pre_tokenizer.add_prefix_space",
            True, "false")
    _expect(data.get("normalizer") is None, "normalizer", _type(data.get("normalizer")), "null")
    for setting in ("continuing_subword_prefix", "end_of_word_suffix"):
        _expect(not model.get(setting), f"model.{setting}", model.get(setting), "empty")
    _expect(not model.get("dropout"), "model.dropout", model.get("dropout"), "null")
    merges = [" ".join(merge) if isinstance(merge, list) else merge for merge in model["merges"]]
    vocabulary = _by_id(model["vocab"])
    special_tokens = _special_tokens(data, config, vocabulary)
    return {"vocabulary": vocabulary, "merges": merges, "special_tokens": special_tokens,
            "packer_layout": _packer_layout(data.get("post_processor"), special_tokens)}


def _packer_layout(post_processor, special_tokens):
    """"bert" when the post-processor is the template CLS A SEP (B SEP) with B's segment 1,
    else RoBERTa's ("roberta": its RobertaProcessing, or none)."""
    if _type(post_processor) != "TemplateProcessing":
        return "roberta"
    ids = {special_tokens[role]: 0 for role in ("cls", "sep")}  # only the shape is compared
    bert = _template(special_tokens, ids, pair_separator_twice=False)

    def shape(template):  # the pieces without ids: which token or sequence, which segment
        return [sorted((kind, tuple(sorted(value.items()))) for kind, value in piece.items())
                for piece in template]

    if shape(post_processor.get("single", [])) == shape(bert["single"]) and shape(
            post_processor.get("pair", [])) == shape(bert["pair"]):
        return "bert"
    raise ValueError(f"{FILE}'s TemplateProcessing post-processor packs neither "
                     f"[CLS] A [SEP] B [SEP] (segments 0, 1) nor RoBERTa's pairs.")


def sentencepiece_arguments(data, config):
    """SentencePieceTokenizer's arguments: proto (a SentencePiece model's bytes) and style."""
    model = data["model"]
    _expect(not model.get("byte_fallback"), "model.byte_fallback", True, "false")
    metaspace = _metaspace(data.get("pre_tokenizer"))
    _expect(metaspace is not None and metaspace.get("replacement", SPACE_MARK) == SPACE_MARK,
            "pre_tokenizer", _type(data.get("pre_tokenizer")), "Metaspace with '\u2581'")
    normalizers = _normalizers(data.get("normalizer"))
    names = [n["type"] for n in normalizers if n["type"] != "Precompiled"]
    charsmap = next((n["precompiled_charsmap"] for n in normalizers
                     if n["type"] == "Precompiled"), None)
    pieces = [(piece, float(score)) for piece, score in model["vocab"]]
    special = {token["content"] for token in data.get("added_tokens", []) if token.get("special")}
    kind_of = lambda piece: (sentencepiece_proto.CONTROL if piece in special
                             else sentencepiece_proto.NORMAL)
    if normalizers == DEBERTA_NORMALIZERS:
        style = "deberta"
        _expect(metaspace.get("prepend_scheme", "always") == "always",
                "pre_tokenizer.prepend_scheme", metaspace.get("prepend_scheme"), "'always'")
        _expect(len(_pre_tokenizers(data.get("pre_tokenizer"))) == 1, "pre_tokenizer",
                [p["type"] for p in _pre_tokenizers(data.get("pre_tokenizer"))],
                "Metaspace alone (split_by_punct false)")
        _check_added_after(data, len(pieces), ["[MASK]"])
        typed = [(piece, score, sentencepiece_proto.UNKNOWN if index == model.get("unk_id")
                  else kind_of(piece)) for index, (piece, score) in enumerate(pieces)]
    elif [piece for piece, _ in pieces[:4]] == FAIRSEQ_FIRST_TOKENS and pieces[-1][0] == "<mask>":
        style = "xlm_roberta"
        _expect(names == [], "normalizer", names, "Precompiled only (XLM-R)")
        # fairseq's ids back to the model's: <unk> <s> </s> first; <pad> and <mask> are
        # fairseq's own.
        typed = [("<unk>", 0.0, sentencepiece_proto.UNKNOWN),
                 ("<s>", 0.0, sentencepiece_proto.CONTROL),
                 ("</s>", 0.0, sentencepiece_proto.CONTROL)]
        typed += [(piece, score, kind_of(piece)) for piece, score in pieces[4:-1]]
    elif names == ALBERT_NORMALIZERS:
        style = "albert"
        typed = [(piece, score, sentencepiece_proto.UNKNOWN if index == model.get("unk_id")
                  else kind_of(piece)) for index, (piece, score) in enumerate(pieces)]
    else:
        raise ValueError(
            f"{FILE} holds a Unigram tokenizer that is neither ALBERT's (normalizers "
            f"{ALBERT_NORMALIZERS} + Precompiled), XLM-R's (fairseq ids: "
            f"{FAIRSEQ_FIRST_TOKENS} first, <mask> last) nor DeBERTa-v3's (transformers 5's "
            f"{[n['type'] for n in DEBERTA_NORMALIZERS]}, lower-casing off); its normalizers "
            f"are {names}.")
    proto = sentencepiece_proto.write_model(SentencePieceModel(
        pieces=typed, normalizer_name="nmt_nfkc" if charsmap else "identity",
        charsmap=base64.b64decode(charsmap) if charsmap else b"",
        add_dummy_prefix=metaspace.get("prepend_scheme", "always") != "never",
        remove_extra_whitespaces=_splits_on_white_space(data.get("pre_tokenizer"))))
    return {"proto": proto, "style": style}


def _check_added_after(data, size, allowed):
    """The added tokens beyond the model's `size` pieces are `allowed` ones, numbered from
    `size` in that order (what the tokenizer appends)."""
    beyond = sorted((token["id"], token["content"]) for token in data.get("added_tokens", [])
                    if token["id"] >= size)
    expected = list(enumerate(allowed, start=size))[:len(beyond)]
    _expect(beyond == expected, "added_tokens beyond the model's pieces", beyond,
            f"{expected or 'none'}")


def _special_tokens(data, config, vocabulary):
    """{role: token} from tokenizer_config.json, or RoBERTa's post-processor and defaults."""
    post = data.get("post_processor") or {}
    defaults = {"unknown": "<unk>", "pad": "<pad>", "mask": "<mask>",
                "cls": (post.get("cls") or ["<s>"])[0], "sep": (post.get("sep") or ["</s>"])[0]}
    tokens = {}
    for role, key in ROLES.items():
        token = config.get(key, defaults[role])
        token = token.get("content") if isinstance(token, dict) else token
        if token not in vocabulary:
            raise ValueError(f"{CONFIG_FILE}'s {key} {token!r} is not in {FILE}'s vocabulary.")
        tokens[role] = token
    return tokens


def _by_id(vocabulary):
    """{token: id} -> [token] (id = index), checked."""
    by_id = sorted(vocabulary.items(), key=lambda item: item[1])
    if [index for _, index in by_id] != list(range(len(by_id))):
        raise ValueError(f"{FILE}'s vocabulary ids must be 0..V-1, each used once.")
    return [token for token, _ in by_id]


def _type(component):
    return None if component is None else component.get("type")


def _flatten(component, members):
    """A normalizer or pre-tokenizer as the list of its steps: a "Sequence" holds them under
    `members` ("normalizers" or "pretokenizers"), possibly nested."""
    if component is None:
        return []
    if component["type"] == "Sequence":
        return [step for inner in component[members] for step in _flatten(inner, members)]
    return [component]


def _normalizers(normalizer):
    return _flatten(normalizer, "normalizers")


def _pre_tokenizers(pre_tokenizer):
    return _flatten(pre_tokenizer, "pretokenizers")


def _metaspace(pre_tokenizer):
    return next((p for p in _pre_tokenizers(pre_tokenizer) if p["type"] == "Metaspace"), None)


def _splits_on_white_space(pre_tokenizer):
    return any(p["type"] in ("WhitespaceSplit", "Whitespace")
               for p in _pre_tokenizers(pre_tokenizer))


def _expect(condition, setting, found, expected):
    if not condition:
        raise ValueError(f"{FILE}'s {setting} is {found!r}; the tokenizers here read "
                         f"{expected}. This tokenizer would give other ids than its own.")


# === writing: what `tokenizers` itself writes for each kind, so transformers 5 loads it ===

def wordpiece_json(vocabulary, lowercase, max_input_chars_per_word, special_tokens):
    ids = {token: index for index, token in enumerate(vocabulary)}
    return _document(
        vocabulary, special_tokens,
        normalizer={"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                    "strip_accents": None, "lowercase": bool(lowercase)},
        pre_tokenizer={"type": "BertPreTokenizer"},
        post_processor=_template(special_tokens, ids, pair_separator_twice=False),
        decoder={"type": "WordPiece", "prefix": WORDPIECE_PREFIX, "cleanup": True},
        model={"type": "WordPiece", "unk_token": special_tokens["unknown"],
               "continuing_subword_prefix": WORDPIECE_PREFIX,
               "max_input_chars_per_word": int(max_input_chars_per_word), "vocab": ids})


def byte_pair_json(vocabulary, merges, special_tokens, packer_layout="roberta"):
    ids = {token: index for index, token in enumerate(vocabulary)}
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                  "use_regex": True}
    post_processor = {"type": "RobertaProcessing",
                      "sep": [special_tokens["sep"], ids[special_tokens["sep"]]],
                      "cls": [special_tokens["cls"], ids[special_tokens["cls"]]],
                      "trim_offsets": True, "add_prefix_space": False}
    if packer_layout == "bert":  # [CLS] A [SEP] B [SEP] (ModernBERT's)
        post_processor = _template(special_tokens, ids, pair_separator_twice=False)
    return _document(
        vocabulary, special_tokens, normalizer=None, pre_tokenizer=byte_level,
        post_processor=post_processor,
        decoder=byte_level,
        model={"type": "BPE", "dropout": None, "unk_token": None,
               "continuing_subword_prefix": "", "end_of_word_suffix": "", "fuse_unk": False,
               "byte_fallback": False, "ignore_merges": False, "vocab": ids,
               "merges": [merge.split(" ") for merge in merges]})


def sentencepiece_json(proto, style, vocabulary, special_tokens):
    """For a Unigram model (`vocabulary`: the tokenizer's, in its ids); None for a
    BPE-typed SentencePiece model, which `tokenizers` holds another way."""
    model = sentencepiece_proto.read_model(proto)
    if model.model_type != sentencepiece_proto.UNIGRAM or model.byte_fallback:
        return None
    scores = {piece: score for piece, score, _ in model.pieces}
    if style == "deberta":
        return _deberta_json(model, vocabulary, special_tokens)
    normalizers = []
    if style == "albert":
        normalizers = [{"type": "Replace", "pattern": {"String": "``"}, "content": '"'},
                       {"type": "Replace", "pattern": {"String": "''"}, "content": '"'},
                       {"type": "NFKD"}, {"type": "StripAccents"}, {"type": "Lowercase"}]
    if model.charsmap:
        normalizers.append({"type": "Precompiled", "precompiled_charsmap":
                            base64.b64encode(model.charsmap).decode("ascii")})
    metaspace = {"type": "Metaspace", "replacement": SPACE_MARK,
                 "prepend_scheme": "always" if model.add_dummy_prefix else "never", "split": True}
    pre_tokenizers = ([{"type": "WhitespaceSplit"}] if model.remove_extra_whitespaces else [])
    ids = {token: index for index, token in enumerate(vocabulary)}
    return _document(
        vocabulary, special_tokens,
        normalizer=({"type": "Sequence", "normalizers": normalizers} if len(normalizers) > 1
                    else (normalizers or [None])[0]),
        pre_tokenizer={"type": "Sequence", "pretokenizers": pre_tokenizers + [metaspace]},
        post_processor=_template(special_tokens, ids,
                                 pair_separator_twice=style == "xlm_roberta"),
        decoder=metaspace,
        model={"type": "Unigram", "unk_id": ids[special_tokens["unknown"]],
               "vocab": [[token, scores.get(token, 0.0)] for token in vocabulary],
               "byte_fallback": False})


def _deberta_json(model, vocabulary, special_tokens):
    """What transformers 5's DebertaV2Tokenizer writes: its normalizers (the model's own rules
    left out), Metaspace, the model's pieces, `[MASK]` an added token after them."""
    ids = {token: index for index, token in enumerate(vocabulary)}
    metaspace = {"type": "Metaspace", "replacement": SPACE_MARK, "prepend_scheme": "always",
                 "split": True}
    return _document(
        vocabulary, special_tokens,
        normalizer={"type": "Sequence", "normalizers": DEBERTA_NORMALIZERS},
        pre_tokenizer={"type": "Sequence", "pretokenizers": [metaspace]},
        post_processor=_template(special_tokens, ids, pair_separator_twice=False),
        decoder=metaspace,
        model={"type": "Unigram", "unk_id": ids[special_tokens["unknown"]],
               "vocab": [[piece, score] for piece, score, _ in model.pieces],
               "byte_fallback": False})


def config_json(tokenizer_class, special_tokens, model_max_length, **settings):
    """tokenizer_config.json: the class transformers builds and the special tokens' roles."""
    return {"tokenizer_class": tokenizer_class, "model_max_length": int(model_max_length),
            **{key: special_tokens[role] for role, key in ROLES.items()}, **settings}


def save(directory, document, tokenizer_class, special_tokens, model_max_length, **settings):
    """Writes tokenizer.json (`document`; None: none, see `sentencepiece_json`) and
    tokenizer_config.json into `directory`."""
    if document is not None:
        _write_json(os.path.join(directory, FILE), document)
    _write_json(os.path.join(directory, CONFIG_FILE),
                config_json(tokenizer_class, special_tokens, model_max_length, **settings))


def save_wordpiece(directory, vocabulary, lowercase, model_max_length,
                   max_input_chars_per_word=DEFAULT_MAX_INPUT_CHARS_PER_WORD,
                   special_tokens=None):
    """A transformers BertTokenizer's files: vocab.txt, tokenizer.json, tokenizer_config.json."""
    special_tokens = special_tokens or BERT_SPECIAL_TOKENS
    with open(os.path.join(directory, "vocab.txt"), "w", encoding="utf-8") as f:
        f.writelines(f"{token}\n" for token in vocabulary)
    save(directory, wordpiece_json(vocabulary, lowercase, max_input_chars_per_word,
                                   special_tokens),
         "BertTokenizer", special_tokens, model_max_length, do_lower_case=bool(lowercase),
         strip_accents=None, tokenize_chinese_chars=True,
         max_input_chars_per_word=int(max_input_chars_per_word))


def _write_json(path, value):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f, ensure_ascii=False, indent=2)


def _template(special_tokens, ids, pair_separator_twice):
    """TemplateProcessing: CLS A SEP (B SEP); RoBERTa's pairs have SEP SEP between and one
    segment id, BERT's give B segment 1."""
    cls, sep = special_tokens["cls"], special_tokens["sep"]
    token = lambda t, type_id: {"SpecialToken": {"id": t, "type_id": type_id}}
    sequence = lambda name, type_id: {"Sequence": {"id": name, "type_id": type_id}}
    second = 0 if pair_separator_twice else 1
    pair = [token(cls, 0), sequence("A", 0), token(sep, 0)]
    pair += [token(sep, 0)] if pair_separator_twice else []
    pair += [sequence("B", second), token(sep, second)]
    return {"type": "TemplateProcessing",
            "single": [token(cls, 0), sequence("A", 0), token(sep, 0)], "pair": pair,
            "special_tokens": {t: {"id": t, "ids": [ids[t]], "tokens": [t]} for t in (cls, sep)}}


def _document(vocabulary, special_tokens, **parts):
    index = {token: i for i, token in enumerate(vocabulary)}
    added = sorted({index[token] for token in special_tokens.values()})
    return {"version": "1.0", "truncation": None, "padding": None,
            "added_tokens": [{"id": i, "content": vocabulary[i], "single_word": False,
                              "lstrip": False, "rstrip": False, "normalized": False,
                              "special": True} for i in added], **parts}
