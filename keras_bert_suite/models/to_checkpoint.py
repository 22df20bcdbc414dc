"""Our models as other libraries' checkpoints.

`save_google_bert(model, directory)`: an original Google BERT checkpoint (bert_config.json,
bert_model.ckpt, vocab.txt) of a BertEncoder or a BertPretrainer (its `cls/` heads included).

`save_huggingface(model, directory)`: a Hugging Face directory. Each model goes to the
`transformers` class that computes the same thing, so that `from_pretrained` finds every weight
it expects and no other (BERT's names below; another family's encoder gives its own, e.g.
RobertaForMaskedLM, AlbertForPreTraining with the sentence-order head):

    BertEncoder, BertFeatureExtractor   BertModel (the extractor's pooling is not a weight)
    BertPretrainer                      BertForPreTraining (MLM-only: BertForMaskedLM)
    ReplacedTokenDetector               ElectraForPreTraining (ELECTRA's discriminator)
    ElectraPretrainer.generator()       ElectraForMaskedLM (a BertPretrainer, MLM only)
    BertClassifier                      BertForSequenceClassification (label names: id2label)
    BertTokenClassifier                 BertForTokenClassification (label names: id2label)
    BertSpanLabeler                     BertForQuestionAnswering
    BertMultipleChoice                  BertForMultipleChoice

`save_keras_hub(model, directory)`: a KerasHub preset directory (BertBackbone or the family's
backbone, and for a classifier or a BERT pretrainer the KerasHub task that computes the same
thing).

Which class or task each model becomes is what the model declares (a task's
`checkpoint_form`, checkpoints/task_heads.py; a BertEncoder is `ENCODER_FORM`): the writers
follow that, never a class name.
"""

import logging

import keras
import numpy as np

from keras_bert_suite.checkpoints.google_bert_writer import write_google_bert
from keras_bert_suite.checkpoints.huggingface_writer import write_huggingface
from keras_bert_suite.checkpoints.keras_hub_backbones import backbone_for
from keras_bert_suite.checkpoints.keras_hub_names import (
    CLASSIFIER_HEAD_NAMES, MASKED_LM_HEAD_NAMES)
from keras_bert_suite.checkpoints.keras_hub_writer import write_keras_hub, writes_tokenizer
from keras_bert_suite.checkpoints.task_heads import (
    BASE_MODEL, ENCODER_FORM, ENCODER_POOLER, PRETRAINING, REPLACED_TOKEN,
    CheckpointForm, TransformersHead)
from keras_bert_suite.families import family_holding, family_of_model_type, holds
from keras_bert_suite.families.bert_config import BERT_FAMILY_DEFAULTS, ENCODER_CONFIG_KEYS
from keras_bert_suite.models.encoder import BertEncoder

logger = logging.getLogger(__name__)


def save_huggingface(model, directory, vocabulary=None, lowercase=None):
    """Writes `model` as a Hugging Face directory (config.json, model.safetensors and, when
    the model has a preprocessor or `vocabulary` is given, the tokenizer files).

    >>> import transformers
    >>> from keras_bert_suite import BertClassifier
    >>> classifier = BertClassifier.from_preset(
    ...     "minilm_l6_h384_uncased", num_classes=2, label_names=["negative", "positive"])
    >>> path = save_huggingface(classifier, "sentiment_hf")
    >>> theirs = transformers.BertForSequenceClassification.from_pretrained(path)
    >>> theirs.config.id2label
    {0: 'negative', 1: 'positive'}

    `vocabulary` is a WordPiece token list or a tokenizer (default: the preprocessor's:
    WordPiece, byte-level BPE or SentencePiece, written as the family's own files and as
    tokenizer.json); `lowercase` defaults to the tokenizer's.
    """
    form = _form(model, "save_huggingface")
    config, weights = _config_and_weights(model, "save_huggingface")
    family = (_replaced_token_family(config) if form.transformers == REPLACED_TOKEN
              else _family(config))
    head_tensors, extra, pooler = {}, {}, ENCODER_POOLER
    sentence_head = getattr(model, "next_sentence_head", None) is not None
    if isinstance(form.transformers, TransformersHead):
        module, pooler = form.transformers.in_family(family.name)
        architecture = family.class_name(form.transformers.suffix)
        dense = model.head_layer
        head_tensors = {f"{module}.weight": _numpy(dense.kernel).T,
                        f"{module}.bias": _numpy(dense.bias)}
        extra = _label_config(model, form.transformers)
    elif form.transformers == REPLACED_TOKEN:
        architecture = family.class_name("ForPreTraining")
    elif form.transformers == PRETRAINING:
        if sentence_head:
            _check_pretraining_class(family)
        architecture = family.pretraining_class(sentence_head)
    else:
        architecture = family.base_model
    if _encoder(model).causal:
        architecture = _causal_class(model, form, family, architecture, sentence_head)
        extra["is_decoder"] = True

    tokens, tokenizer_lowercase = _vocabulary(model, vocabulary, config)
    tokenizer = _tokenizer(model, vocabulary)
    return write_huggingface(directory, config, weights, architecture, head_tensors,
                             vocabulary=tokenizer if hasattr(tokenizer, "special_tokens") else tokens,
                             lowercase=tokenizer_lowercase if lowercase is None else lowercase,
                             family=family, pooler=pooler, **extra)


def save_google_bert(model, directory, vocabulary=None):
    """Writes a BertEncoder or BertPretrainer as google-research/bert released its
    checkpoints (a task model: pass `model.encoder`; the format has no task heads).

    >>> from keras_bert_suite import BertEncoder
    >>> encoder = BertEncoder.from_preset("minilm_l6_h384_uncased")
    >>> path = save_google_bert(encoder, "minilm_google_bert")
    >>> import numpy as np
    >>> back = BertEncoder.from_preset(path)
    >>> all(np.array_equal(a, b) for a, b in zip(back.get_weights(), encoder.get_weights()))
    True
    """
    form = _declared_form(model)
    if form is None or not form.google_bert:
        raise ValueError(
            f"save_google_bert takes a BertEncoder or a BertPretrainer, got "
            f"{type(model).__name__}; the "
            f"original BERT checkpoint format has no task heads (pass model.encoder to write "
            f"a task model's encoder, or use save_huggingface).")
    _refuse_causal(model, "save_google_bert", "google-research/bert's checkpoints")
    config, weights = _config_and_weights(model, "save_google_bert")
    _refuse_other_families(config, "save_google_bert")
    tokens, _ = _vocabulary(model, vocabulary, config)
    return write_google_bert(directory, config, weights, vocabulary=tokens)


def save_keras_hub(model, directory, vocabulary=None, lowercase=None):
    """Writes `model` as a KerasHub preset directory, with KerasHub's own `save_to_preset`:

        BertEncoder, BertFeatureExtractor   BertBackbone, or the family's backbone:
                                            RobertaBackbone (XLMRobertaBackbone with XLM-R's
                                            SentencePiece tokenizer), DistilBertBackbone,
                                            AlbertBackbone, ElectraBackbone
        BertClassifier                      BertTextClassifier (pooled -> dropout -> "logits"),
                                            Roberta-, XLMRoberta-, DistilBert-,
                                            AlbertTextClassifier (their `pooled_dense`: our
                                            pooler); ELECTRA: the backbone only (no task)
        BertPretrainer                      BertMaskedLM (the NSP head has no place: dropped);
                                            another family's: refused
        BertTokenClassifier, BertSpanLabeler, BertMultipleChoice
                                            the backbone only (KerasHub has no such task; the
                                            head is not exported, with a warning)

    `keras_hub.models.<X>Backbone.from_preset(directory)` (or the task's class) loads it and
    `BertEncoder.from_preset(directory)` reads the encoder back bit for bit (RoBERTa: see
    checkpoints/keras_hub_backbones.py for its position table and segment row; RoBERTa's and
    DistilBERT's backbones have no pooler, so only their classifier presets keep ours).
    KerasHub has no label names (a classifier's are not written) and hard-wires each
    backbone's layer-norm epsilon and GELU: an encoder it cannot hold is refused, saying
    what. BertBackbone and ElectraBackbone compute the tanh-approximate GELU where ours is
    exact: with the same weights their outputs differ from ours by ~1e-3 relative (MiniLM;
    BertMaskedLM's head layer norm also uses epsilon 1e-5 where ours uses 1e-12).

    >>> import keras_hub
    >>> from keras_bert_suite import BertClassifier
    >>> classifier = BertClassifier.from_preset(  # any fine-tuned classifier; a small one here
    ...     "bert_uncased_L-2_H-128_A-2", load_weights=False, num_classes=2)
    >>> path = save_keras_hub(classifier, "sentiment_keras_hub")
    >>> theirs = keras_hub.models.BertTextClassifier.from_preset(path)
    >>> theirs.predict(["a gripping drama"], verbose=0).shape
    (1, 2)

    `vocabulary` is a token list or one of our tokenizers (default: the preprocessor's).
    The preset gets KerasHub's tokenizer for it (and a classifier KerasHub's preprocessor):
    WordPiece for BERT, DistilBERT, ELECTRA (`lowercase` defaulting to the tokenizer's),
    RobertaTokenizer for our BytePairTokenizer, AlbertTokenizer / XLMRobertaTokenizer for our
    SentencePieceTokenizer (the same vocabulary and merges, the same proto);
    `BertClassifier.from_preset(directory)` reads it back as ours. KerasHub's ids are ours
    except: its AlbertTokenizer does not lower-case or strip accents (a warning says so), its
    RobertaTokenizer matches "<s>"-like strings in the text as special tokens. A tokenizer
    the backbone's family has not (e.g. WordPiece with RoBERTa's) is not written (a warning
    says so).
    """
    form = _form(model, "save_keras_hub")
    _refuse_causal(model, "save_keras_hub", "KerasHub's presets")
    config, weights = _config_and_weights(model, "save_keras_hub")
    tokenizer = vocabulary if vocabulary is not None else getattr(
        getattr(model, "preprocessor", None), "tokenizer", None)
    backbone = _keras_hub_backbone(config, tokenizer)
    task, task_arguments, task_weights = None, None, None
    if form.keras_hub == "classifier" and backbone.classifier is not None:
        task = backbone.classifier
        task_arguments = {"num_classes": model.num_classes, "dropout": model.dropout}
        dense = model.head_layer
        task_weights = {CLASSIFIER_HEAD_NAMES[variable]: _numpy(getattr(dense, variable))
                        for variable in ("kernel", "bias")}
    elif form.keras_hub == "masked_lm":
        if backbone.masked_lm is None:
            raise ValueError(
                f"save_keras_hub writes a BertPretrainer as BERT's BertMaskedLM only, and this "
                f"encoder is written as KerasHub's {backbone.class_name}. Pass model.encoder "
                f"(the backbone alone), or use save_huggingface, which writes this family's "
                f"pretraining heads.")
        task = backbone.masked_lm
        task_weights = {theirs: weights[ours] for ours, theirs in MASKED_LM_HEAD_NAMES.items()}
        if model.next_sentence_head is not None:
            logger.warning("KerasHub's %s has no next sentence head: the NSP head is not "
                           "exported.", task)
    elif isinstance(form.transformers, TransformersHead):
        logger.warning("KerasHub has no task for %s: only its encoder is exported (a "
                       "%s preset), not its head.", type(model).__name__,
                       backbone.class_name)
    _warn_what_keras_hub_computes_otherwise(backbone, config, task)

    tokens, tokenizer_lowercase = _vocabulary(model, vocabulary, config)
    subword = None  # our BPE or SentencePiece tokenizer, written as KerasHub's class
    if tokens is not None and not _writes_wordpiece(backbone, tokenizer):
        tokens = None
        if writes_tokenizer(tokenizer, backbone):
            subword = tokenizer
            _warn_albert_casing(subword)
        else:
            logger.warning("KerasHub's %s has no tokenizer that splits text as this %s does: "
                           "the preset gets no tokenizer.", backbone.class_name,
                           "token list" if isinstance(tokenizer, (list, tuple))
                           else type(tokenizer).__name__)
    return write_keras_hub(
        directory, config, weights, task=task, task_arguments=task_arguments,
        task_weights=task_weights, vocabulary=tokens,
        lowercase=tokenizer_lowercase if lowercase is None else lowercase,
        sequence_length=getattr(getattr(model, "preprocessor", None), "sequence_length", None),
        backbone_class=backbone.class_name, tokenizer=subword)


def _keras_hub_backbone(config, tokenizer):
    """KerasHub's backbone for the encoder (a row of keras_hub_backbones.BACKBONES); a
    ValueError that says what no backbone can hold."""
    xlm_roberta = getattr(tokenizer, "style", None) == "xlm_roberta"  # its SentencePiece
    try:
        return backbone_for(config, sentencepiece=xlm_roberta)
    except ValueError as error:
        raise ValueError(f"save_keras_hub: {error} save_huggingface writes every family "
                         f"transformers has. " + _OUR_FORMATS.format(what="every family")
                         ) from None


def _writes_wordpiece(backbone, tokenizer):
    """Whether KerasHub's tokenizer for the backbone and ours are both WordPiece."""
    ours = tokenizer is None or isinstance(tokenizer, (list, tuple)) or (
        tokenizer.kind == "wordpiece")
    return ours and backbone.tokenizer == "wordpiece"


def _warn_albert_casing(tokenizer):
    if getattr(tokenizer, "style", None) == "albert":
        logger.warning("KerasHub's AlbertTokenizer runs the SentencePiece model without "
                       "ALBERT's lower-casing and accent stripping (ours, transformers' and "
                       "google-research/albert's do them): on text with capitals or accents "
                       "the preset's ids are not ours. Give it text lower-cased, without accents.")


def _warn_what_keras_hub_computes_otherwise(backbone, config, task):
    if backbone.class_name == "ElectraBackbone" and config["pooler_activation"] != "tanh":
        logger.warning("KerasHub's ElectraBackbone applies tanh to its pooled_dense where this "
                       "encoder's pooler applies %s: its pooled_output is not ours (its "
                       "sequence_output is, up to its tanh GELU).", config["pooler_activation"])
    if not backbone.has_pooler() and task is None:
        logger.warning("KerasHub's %s has no pooler: this encoder's is not exported (a %s "
                       "preset of a BertClassifier holds it).", backbone.class_name,
                       backbone.classifier)


def _declared_form(model):
    """The model's `CheckpointForm`: a BertEncoder's, or the one its task declares; None for
    anything else (a task that declares none, such as ElectraPretrainer: write its parts)."""
    if isinstance(model, BertEncoder):
        return ENCODER_FORM
    form = getattr(model, "checkpoint_form", None)
    if isinstance(form, CheckpointForm) and isinstance(getattr(model, "encoder", None),
                                                       BertEncoder):
        return form
    return None


def _form(model, function):
    """The form of a model the Hugging Face and KerasHub writers take, else an error."""
    form = _declared_form(model)
    if form is None:
        raise ValueError(
            f"{function} takes a BertEncoder or one of our task models that another library "
            f"has (a task class's `checkpoint_form` says which), got {type(model).__name__}.")
    return form


def _encoder(model):
    """The encoder of a model whose class the writer has checked (an encoder or a task)."""
    return model if isinstance(model, BertEncoder) else model.encoder


def _config_and_weights(model, function):
    """(BertEncoder arguments, {canonical name: float32 array}: the encoder's, and the
    pretraining heads' for a BertPretrainer)."""
    encoder = _encoder(model)
    _refuse_per_layer_sizes(encoder, function)
    config = {key: encoder.get_config()[key] for key in ENCODER_CONFIG_KEYS}
    if encoder.block != "bert":  # another block kind: only its family's format holds it
        config.update(block=encoder.block, block_options=encoder.block_options)
    # a task's preset weights: the encoder's, and the pretraining heads that travel with it
    variables = encoder.weight_map() if model is encoder else model.preset_weights()
    return config, {key: _numpy(variable) for key, variable in variables.items()}


# What a refused writer suggests instead: our own formats hold any encoder.
_OUR_FORMATS = ("Save it in one of our formats, which hold {what}: save_to_preset / save_preset "
                "(a preset directory), model.save('model.keras'), or export_saved_model for "
                "serving.")


def _refuse_per_layer_sizes(encoder, function):
    """Hugging Face's, Google's and KerasHub's configs have one head count and one
    feed-forward width for all layers: a pruned encoder cannot be written there."""
    sizes = {key: value for key, value in (("layer_num_heads", encoder.layer_num_heads),
                                           ("layer_intermediate_dims",
                                            encoder.layer_intermediate_dims))
             if value is not None}
    _refuse_values(sizes, f"{function}: this encoder is pruned ({{described}}), and that "
                   f"format has one head count and one feed-forward width for every layer.",
                   "per-layer sizes")


def _family(config):
    """The family whose transformers format holds the encoder exactly (its encoder, task and
    pretraining classes)."""
    family = family_holding(config)
    if family is None:
        _refuse_other_families(config, "save_huggingface", "no transformers family")
    return family


def _replaced_token_family(config):
    """ELECTRA, whose ElectraForPreTraining is the one transformers class with a replaced-token
    head. That class has no pooler, so the encoder's pooler activation does not count: a
    discriminator pretrained on BERT's shape (tanh pooler) goes out as well."""
    electra = family_of_model_type("electra")
    if not holds(electra, {**config, "pooler_activation": "gelu"}):
        raise ValueError(
            "save_huggingface: this ReplacedTokenDetector's encoder has arguments that "
            "ELECTRA's config cannot hold (only ElectraForPreTraining has the replaced-token "
            "head). Pass model.encoder, or save the whole model with save_to_preset or "
            "model.save('model.keras').")
    return electra


def _refuse_causal(model, function, holder):
    """A format with no causal flag would load a left-to-right encoder as a bidirectional one."""
    if _encoder(model).causal:
        raise ValueError(
            f"{function}: this encoder is causal (left-to-right), and {holder} have no way to "
            f"say so: it would load as a bidirectional encoder. Use save_huggingface "
            f"(BertLMHeadModel, is_decoder=True), save_to_preset or model.save('model.keras').")


def _causal_class(model, form, family, architecture, model_has_sentence_head=False):
    """BertLMHeadModel (is_decoder=True) for a left-to-right pretrainer; a causal encoder
    alone stays BertModel with is_decoder=True. BERT's classes only: they are the ones
    whose causal form this writer's tests read back through transformers."""
    if family.name != "bert" or form.transformers not in (PRETRAINING, BASE_MODEL) or (
            form.transformers == PRETRAINING and model_has_sentence_head):
        raise ValueError(
            f"save_huggingface: a causal (left-to-right) {type(model).__name__} on a "
            f"{family.name} encoder: only BERT's BertModel / BertLMHeadModel (no "
            f"next-sentence head) are written with is_decoder=True. "
            f"Save it with save_to_preset or model.save('model.keras').")
    return "BertLMHeadModel" if form.transformers == PRETRAINING else architecture


def _check_pretraining_class(family):
    """RoBERTa, DistilBERT and ELECTRA have no transformers class with a sentence-pair head."""
    if family.pretraining_class(next_sentence=True) is None:
        raise ValueError(
            f"save_huggingface: this BertPretrainer has a next-sentence head, and transformers "
            f"has no {family.name} class that holds one ({family.class_name('ForMaskedLM')} "
            f"holds the masked-LM head only). Build the pretrainer with "
            f"next_sentence_prediction=False, pass model.encoder, or save the whole model with "
            f"save_to_preset or model.save('model.keras').")


def _refuse_other_families(config, function, holder="BERT's architecture"):
    """Google's BERT format holds BERT's architecture (and transformers none of a mix such
    as RoBERTa's positions with ALBERT's shared layers): such an encoder would be written
    wrong, so it is refused with what differs from BERT. (KerasHub's backbones: see
    `keras_hub_backbones.backbone_for`.)"""
    differs = {key: config[key] for key, bert in BERT_FAMILY_DEFAULTS.items()
               if config[key] != bert}
    if config.get("block", "bert") != "bert":
        differs["block"] = config["block"]
    _refuse_values(differs, f"{function} writes {holder}, and this encoder has family "
                   f"arguments ({{described}}) that the format cannot hold.", "every family")


def _refuse_values(values, explanation, what):
    """The writers' refusal of encoder `values` ({argument: value}) that their format cannot
    hold, if there are any: `explanation` with the values in place of {described}, then
    which of our formats hold `what`."""
    if values:
        described = ", ".join(f"{key}={value!r}" for key, value in values.items())
        raise ValueError(explanation.format(described=described) + " "
                         + _OUR_FORMATS.format(what=what))


def _vocabulary(model, vocabulary, config):
    """(token list or None, lowercase) from `vocabulary` (tokens or a BertTokenizer) or the
    model's preprocessor; checks the size against the encoder: a token list's must be the
    table's, a tokenizer's may be smaller (DeBERTa-v3's table has rows no id reads: 128,100
    for 128,001 tokens)."""
    tokenizer = _tokenizer(model, vocabulary)
    tokens = tokenizer.get_vocabulary() if hasattr(tokenizer, "get_vocabulary") else tokenizer
    spare_rows = hasattr(tokenizer, "get_vocabulary")
    if tokens is not None and (len(tokens) > config["vocabulary_size"] or (
            len(tokens) < config["vocabulary_size"] and not spare_rows)):
        raise ValueError(f"The vocabulary has {len(tokens)} tokens but the encoder's "
                         f"vocabulary_size is {config['vocabulary_size']}.")
    return (list(tokens) if tokens is not None else None), getattr(tokenizer, "lowercase", True)


def _tokenizer(model, vocabulary):
    """`vocabulary` (a tokenizer or tokens), else the model's preprocessor's tokenizer."""
    return vocabulary if vocabulary is not None else getattr(
        getattr(model, "preprocessor", None), "tokenizer", None)


def _label_config(model, head):
    """id2label / label2id for the classifiers (transformers reads num_labels from them);
    a sequence classifier's problem_type too."""
    num_classes = getattr(model, "num_classes", None)
    if num_classes is None:
        return {}
    names = model.label_names or [f"LABEL_{i}" for i in range(num_classes)]
    extra = {"id2label": {str(i): str(n) for i, n in enumerate(names)},
             "label2id": {str(n): i for i, n in enumerate(names)}}
    if head.suffix == "ForSequenceClassification":
        extra["problem_type"] = ("regression" if num_classes == 1
                                 else "single_label_classification")
    return extra


def _numpy(variable):
    return np.asarray(keras.ops.convert_to_numpy(variable), dtype=np.float32)
