"""BertPretrainer loaded from a transformers.BertForPreTraining checkpoint (Hugging Face and
original Google layouts) gives its MLM and NSP logits (rtol 1e-4), on every backend."""

import numpy as np
import pytest

from keras_bert_suite import BertPretrainer
from tests.checkpoints.checkpoint_writers import (
    bert_config_json,
    google_variables,
    write_google_dir,
)
from tests.minilm_reference import PARITY_ATOL, PARITY_RTOL
from tests.numerics import assert_close

MASK_POSITIONS = np.array([[1, 4, 7], [2, 3, 6]], "int32")  # [B, P], real tokens only


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """A small random BertForPreTraining saved with save_pretrained, and its logits."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=37, max_position_embeddings=64, type_vocab_size=2,
        hidden_act="gelu", layer_norm_eps=1e-12)
    model = transformers.BertForPreTraining(config).eval()
    with torch.no_grad():  # random biases and LayerNorms too, so every weight matters
        for parameter in model.parameters():
            parameter.add_(0.1 * torch.randn_like(parameter))
    directory = tmp_path_factory.mktemp("hf_pretraining")
    model.save_pretrained(directory)

    rng = np.random.default_rng(0)
    padding_mask = np.ones((2, 12), "int32")
    padding_mask[1, 8:] = 0
    inputs = {"token_ids": rng.integers(1, 99, (2, 12)).astype("int32"),
              "segment_ids": (np.arange(12) >= 5).astype("int32")[None].repeat(2, 0),
              "padding_mask": padding_mask, "mask_positions": MASK_POSITIONS}
    with torch.no_grad():
        outputs = model(input_ids=torch.tensor(inputs["token_ids"], dtype=torch.long),
                        token_type_ids=torch.tensor(inputs["segment_ids"], dtype=torch.long),
                        attention_mask=torch.tensor(padding_mask, dtype=torch.long))
    prediction_logits = outputs.prediction_logits.numpy()  # [B, T, V]
    state = {name: tensor.numpy() for name, tensor in model.state_dict().items()}
    return {
        "directory": str(directory),
        "hf_config": config.to_dict(),
        "state": state,
        "inputs": inputs,
        "mlm_logits": np.take_along_axis(prediction_logits, MASK_POSITIONS[..., None], axis=1),
        "nsp_logits": outputs.seq_relationship_logits.numpy(),
    }


def _google_directory(reference, directory):
    """The same weights as google-research/bert's run_pretraining.py names them."""
    state = reference["state"]
    encoder = {name[len("bert."):]: value for name, value in state.items()
               if name.startswith("bert.")}
    variables = google_variables(encoder, reference["hf_config"]["num_hidden_layers"])
    transform = "cls.predictions.transform"
    variables.update({
        "cls/predictions/transform/dense/kernel": state[f"{transform}.dense.weight"].T,
        "cls/predictions/transform/dense/bias": state[f"{transform}.dense.bias"],
        "cls/predictions/transform/LayerNorm/gamma": state[f"{transform}.LayerNorm.weight"],
        "cls/predictions/transform/LayerNorm/beta": state[f"{transform}.LayerNorm.bias"],
        "cls/predictions/output_bias": state["cls.predictions.bias"],
        # [2, H] in both formats: modeling.py multiplies with transpose_b=True.
        "cls/seq_relationship/output_weights": state["cls.seq_relationship.weight"],
        "cls/seq_relationship/output_bias": state["cls.seq_relationship.bias"],
    })
    return write_google_dir(directory, bert_config_json(reference["hf_config"]), variables)


@pytest.mark.parametrize("layout", ["huggingface", "google"])
def test_logits_match_transformers(layout, reference, tmp_path):
    directory = (reference["directory"] if layout == "huggingface"
                 else _google_directory(reference, tmp_path / "google"))
    pretrainer = BertPretrainer.from_preset(directory)
    outputs = pretrainer(reference["inputs"])
    for name in ("mlm_logits", "nsp_logits"):
        assert_close(outputs[name], reference[name], rtol=PARITY_RTOL, atol=PARITY_ATOL,
                     err_msg=f"{layout} {name}")
