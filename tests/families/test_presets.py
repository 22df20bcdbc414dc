"""The families' built-in presets are the published architectures: their parameter counts
(from the weight table, so no model is built) are the released models'."""

import math

import pytest

from keras_bert_suite import list_presets
from keras_bert_suite.checkpoints import weight_table
from keras_bert_suite.presets import PRESETS

# Published counts: transformers' base models (RobertaModel, XLMRobertaModel and AlbertModel
# with their pooler, DistilBertModel without one) and KerasHub's ELECTRA preset metadata
# (its backbone has a pooler); ModernBertModel without one.
PUBLISHED = {
    "roberta_base": (124_645_632, True),
    "xlm_roberta_base": (278_043_648, True),
    "distilbert_base_uncased": (66_362_880, False),
    "albert_base_v2": (11_683_584, True),
    "electra_small_discriminator": (13_548_800, True),
    "electra_small_generator": (13_548_800, True),
    "electra_base_discriminator": (109_482_240, True),
    "electra_base_generator": (33_576_960, True),
    # transformers' ModernBertModel (no pooler: its prediction head is the task classes')
    "modernbert_base": (149_014_272, False),
    "modernbert_large": (394_781_696, False),
}


@pytest.mark.parametrize("name", list(PUBLISHED))
def test_preset_has_the_published_parameter_count(name):
    count, with_pooler = PUBLISHED[name]
    shapes = weight_table.encoder_weight_shapes(PRESETS[name].config)
    ours = sum(math.prod(shape) for weight, shape in shapes.items()
               if with_pooler or not weight.startswith("pooler/"))
    assert ours == count


def test_every_family_is_listed():
    names = list_presets()
    for family_preset in ("roberta_large", "xlm_roberta_large", "distilbert_base_cased",
                          "electra_large_discriminator", "albert_xxlarge_v2"):
        assert family_preset in names and "architecture only" in names[family_preset]


@pytest.mark.parametrize("name", ["roberta_base", "xlm_roberta_base", "albert_base_v2"])
def test_architecture_presets_do_not_borrow_bert_vocabulary(name):
    """A family architecture has no tokenizer of its own: asking for one says where to get
    it instead of silently using bert-base-uncased's vocabulary."""
    from keras_bert_suite.text.tokenizer_files import tokenizer_from_preset

    with pytest.raises(ValueError, match="Load its checkpoint directory"):
        tokenizer_from_preset(name)
