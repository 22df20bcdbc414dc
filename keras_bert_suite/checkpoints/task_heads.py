"""How other libraries' checkpoints hold one of our models: what each task model declares
(`checkpoint_form`, beside its serving signatures) and what the checkpoint readers and
writers follow. Format facts only, so that checkpoints/ never imports tasks/; no reader or
writer names a task class.

>>> head = TransformersHead("ForSequenceClassification", "classifier",
...                         families={"roberta": ("classifier.out_proj", "classifier.dense")})
>>> head.in_family("roberta"), head.in_family("albert")
(('classifier.out_proj', 'classifier.dense'), ('classifier', 'encoder'))
"""

from typing import NamedTuple

# Where a transformers task class keeps our pooler when it is the base model's own.
ENCODER_POOLER = "encoder"

# A model's transformers form when it has no task head there:
BASE_MODEL = "base_model"  # the family's base model (BertModel, RobertaModel, ...)
PRETRAINING = "pretraining"  # {Family}ForPreTraining / ForMaskedLM: the encoder + MLM (+ NSP)
REPLACED_TOKEN = "replaced_token"  # ElectraForPreTraining: ELECTRA's discriminator head


class TransformersHead(NamedTuple):
    """A task's head in transformers' `{Family}{suffix}` classes.

    suffix: the class name after the family's ("ForSequenceClassification").
    module: the head's Linear there ("classifier"); our task's `head_layer`.
    pooler: where that class keeps our pooler: ENCODER_POOLER (the base model's own), None
        (the head reads the sequence output), or a module of the task class (ModernBERT's
        `head`, which its token-level classes run on every token: the block kind's
        `tokens_through_pooler`).
    units: the head's fixed output count (start/end: 2; a choice's score: 1), or None: the
        config's labels say.
    families: {family name: (module, pooler)} where a family's class differs from BERT's
        (RoBERTa's classification head is dense -> tanh -> out_proj: our pooler + head)."""

    suffix: str
    module: str
    pooler: str = ENCODER_POOLER
    units: int = None
    families: dict = {}

    def in_family(self, family_name):
        """(the head's Linear module, where the pooler is) in `family_name`'s class."""
        return self.families.get(family_name, (self.module, self.pooler))


class CheckpointForm(NamedTuple):
    """What a model is in other libraries' formats (a model without one is refused).

    transformers: BASE_MODEL, PRETRAINING, REPLACED_TOKEN, or a `TransformersHead`.
    keras_hub: the backbone's KerasHub task that holds the model ("classifier": its
        TextClassifier; "masked_lm": BertMaskedLM), or None: the backbone alone.
    google_bert: google-research/bert's format holds it (an encoder, the pretraining heads).
    """

    transformers: object = BASE_MODEL
    keras_hub: str = None
    google_bert: bool = False


# A BertEncoder's form (and that of a model whose head is no weight, the feature extractor's).
ENCODER_FORM = CheckpointForm(google_bert=True)
