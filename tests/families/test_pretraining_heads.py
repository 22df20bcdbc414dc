"""Every family's pretraining heads in and out of transformers: *ForMaskedLM (RoBERTa's
`lm_head`, DistilBERT's `vocab_*`, ELECTRA's generator H -> E, ALBERT's `predictions` H -> E)
and *ForPreTraining (BERT's next sentence, ALBERT's sentence order) read into BertPretrainer
compute transformers' logits at the masked positions on every backend, and go back bit for
bit; so does ElectraForPreTraining's replaced-token head in ReplacedTokenDetector."""

import numpy as np
import pytest

from keras_bert_suite import BertPretrainer, save_huggingface
from tests.conftest import to_numpy
from tests.families.conftest import FAMILY_CONFIGS, family_inputs
from tests.families.test_transformers_parity import ATOL, RTOL, _torch_inputs
from tests.numerics import assert_close

# (family, transformers class suffix): every family's masked-LM class, and the two with a
# sentence-pair head; ALBERT's shared groups once more (its head reads the last group).
HEADS = [("bert", "ForPreTraining"), ("roberta", "ForMaskedLM"), ("xlm-roberta", "ForMaskedLM"),
         ("distilbert", "ForMaskedLM"), ("electra", "ForMaskedLM"), ("albert", "ForPreTraining"),
         ("albert-shared-groups", "ForMaskedLM")]
MASK_POSITIONS = np.array([[1, 4, 2], [3, 1, 0], [2, 5, 7]], "int32")  # within every row


def _transformers_model(name, suffix, directory):
    """transformers' class with random weights: biases and LayerNorms randomized too (the
    output bias starts at zero), saved with save_pretrained."""
    import torch
    import transformers

    config_class, arguments = FAMILY_CONFIGS[name]
    config = getattr(transformers, config_class)(**arguments)
    torch.manual_seed(2)
    model = getattr(transformers, config_class.replace("Config", suffix))(config).eval()
    with torch.no_grad():
        for parameter_name, parameter in model.named_parameters():
            if "norm" in parameter_name.lower() or parameter_name.endswith("bias"):
                parameter.add_(torch.randn_like(parameter) * 0.2)
    model.save_pretrained(directory)
    return model


@pytest.mark.parametrize("name, suffix", HEADS)
def test_pretraining_heads_compute_what_transformers_computes_and_go_back(
        name, suffix, tmp_path):
    import torch
    import transformers

    theirs = _transformers_model(name, suffix, tmp_path / "theirs")
    ours = BertPretrainer.from_preset(str(tmp_path / "theirs"))
    sentence_pair = suffix == "ForPreTraining"
    assert ours.next_sentence_prediction == sentence_pair  # decided by the checkpoint

    inputs = family_inputs(name)
    with torch.no_grad():
        expected = theirs(**_torch_inputs(theirs.config, inputs))
    got = ours({**inputs, "mask_positions": MASK_POSITIONS})
    logits = expected.logits if hasattr(expected, "logits") else expected.prediction_logits
    at_masks = np.take_along_axis(logits.numpy(), MASK_POSITIONS[..., None], axis=1)
    assert_close(to_numpy(got["mlm_logits"]), at_masks, RTOL, ATOL, err_msg="mlm_logits")
    if sentence_pair:
        pair_logits = getattr(expected, "seq_relationship_logits", None)
        if pair_logits is None:
            pair_logits = expected.sop_logits
        assert_close(to_numpy(got["nsp_logits"]), pair_logits.numpy(), RTOL, ATOL,
                     err_msg="sentence-pair logits")

    path = save_huggingface(ours, tmp_path / "ours")
    back, info = getattr(transformers, type(theirs).__name__).from_pretrained(
        path, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    mine = {key: value.numpy() for key, value in back.state_dict().items()}
    for key, value in theirs.state_dict().items():
        np.testing.assert_array_equal(mine[key], value.numpy(), err_msg=key)


def test_a_sentence_pair_head_without_a_transformers_class_is_refused(tmp_path):
    _transformers_model("roberta", "ForMaskedLM", tmp_path / "roberta")
    ours = BertPretrainer.from_preset(str(tmp_path / "roberta"), next_sentence_prediction=True)
    with pytest.raises(ValueError, match="no roberta class that holds one"):
        save_huggingface(ours, tmp_path / "ours")


def test_electra_discriminator_computes_what_transformers_computes_and_goes_back(tmp_path):
    """ElectraForPreTraining (the discriminator's replaced-token head) read into
    ReplacedTokenDetector: its per-token logits on real sentences, and back bit for bit."""
    import torch
    import transformers

    from keras_bert_suite import ReplacedTokenDetector

    theirs = _transformers_model("electra", "ForPreTraining", tmp_path / "theirs")
    ours = ReplacedTokenDetector.from_preset(str(tmp_path / "theirs"))
    inputs = family_inputs("electra")
    with torch.no_grad():
        expected = theirs(**_torch_inputs(theirs.config, inputs)).logits.numpy()
    assert_close(to_numpy(ours(inputs)), expected, RTOL, ATOL, err_msg="replaced-token logits")

    path = save_huggingface(ours, tmp_path / "ours")
    back, info = transformers.ElectraForPreTraining.from_pretrained(
        path, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    mine = {key: value.numpy() for key, value in back.state_dict().items()}
    for key, value in theirs.state_dict().items():
        np.testing.assert_array_equal(mine[key], value.numpy(), err_msg=key)
    # ALBERT's shared layers: no ELECTRA config holds them (BERT's shape goes out: the
    # class has no pooler, tests/tasks/pretrainer/test_electra_pretrainer.py).
    from keras_bert_suite import BertEncoder

    shared = BertEncoder(vocabulary_size=60, num_layers=2, num_heads=2, hidden_dim=8,
                         intermediate_dim=16, num_layer_groups=1)
    with pytest.raises(ValueError, match="arguments that ELECTRA's config cannot hold"):
        save_huggingface(ReplacedTokenDetector(shared), tmp_path / "shared")
