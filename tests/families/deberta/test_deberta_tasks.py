"""transformers' DeBERTa-v3 task classes (ContextPooler + classifier, token classification,
question answering, multiple choice; random heads) read into our task models compute their
logits on real sentences, and go back out as those classes with every weight bit for bit."""

import numpy as np
import pytest

from tests.conftest import to_numpy
from tests.families.deberta.conftest import CONFIG, padded_inputs
from tests.families.deberta.test_deberta_encoder import ATOL, RTOL, SENTENCES
from tests.numerics import assert_close

SUFFIXES = ["ForSequenceClassification", "ForTokenClassification", "ForQuestionAnswering",
            "ForMultipleChoice"]


@pytest.mark.real
def test_every_task_class_computes_transformers_logits_and_goes_back(deberta_dir, tmp_path):
    import torch
    import transformers

    from keras_bert_suite import save_huggingface
    from keras_bert_suite.tasks import import_task_models

    tokenizer = transformers.AutoTokenizer.from_pretrained(deberta_dir)
    inputs = padded_inputs(tokenizer, SENTENCES[:3], 24)
    real = inputs["padding_mask"].astype(bool)
    tasks = import_task_models().values()
    for suffix in SUFFIXES:
        task_class = next(task for task in tasks
                          if getattr(task.checkpoint_form.transformers, "suffix", None) == suffix)
        config = transformers.DebertaV2Config(
            **CONFIG, num_labels=2 if suffix == "ForQuestionAnswering" else 3)
        torch.manual_seed(1)
        theirs = getattr(transformers, "DebertaV2" + suffix)(config).eval()
        theirs.save_pretrained(tmp_path / suffix)
        ours = task_class.from_preset(str(tmp_path / suffix), preprocessor=None,
                                      **({"num_choices": 3} if suffix == "ForMultipleChoice"
                                         else {}))
        batch = inputs
        arguments = {"input_ids": torch.from_numpy(inputs["token_ids"]).long(),
                     "attention_mask": torch.from_numpy(inputs["padding_mask"]).long()}
        if suffix == "ForMultipleChoice":  # the three sentences as one example's choices
            batch = {key: value[None] for key, value in inputs.items()}
            arguments = {key: value[None] for key, value in arguments.items()}
        with torch.no_grad():
            expected = theirs(**arguments)
        got = ours(batch)
        if suffix == "ForQuestionAnswering":  # ours gives padding a large negative logit
            for key in ("start_logits", "end_logits"):
                assert_close(to_numpy(got[key])[real], getattr(expected, key).numpy()[real],
                             RTOL, ATOL, err_msg=f"{suffix} {key}")
        elif suffix == "ForTokenClassification":  # transformers' padded rows see no key
            assert_close(to_numpy(got)[real], expected.logits.numpy()[real], RTOL, ATOL,
                         err_msg=suffix)
        else:
            assert_close(to_numpy(got), expected.logits.numpy(), RTOL, ATOL, err_msg=suffix)

        path = save_huggingface(ours, tmp_path / f"ours{suffix}")
        back, info = getattr(transformers, "DebertaV2" + suffix).from_pretrained(
            path, output_loading_info=True)
        assert not info["missing_keys"] and not info["unexpected_keys"], (suffix, info)
        mine = {key: value.numpy() for key, value in back.state_dict().items()}
        for key, value in theirs.state_dict().items():
            np.testing.assert_array_equal(mine[key], value.numpy(), err_msg=key)


@pytest.mark.real
def test_masked_lm_head_in_and_out(deberta_dir, tmp_path, caplog):
    """DebertaV2ForMaskedLM's head (transformers' legacy one, `cls.predictions.*`) loads into
    BertPretrainer with its logits and goes back; a released-style checkpoint, whose head is
    the original repository's `lm_predictions.*` (which transformers ignores too), loads
    with the head random and a warning that says so."""
    import torch
    import transformers

    from keras_bert_suite import BertPretrainer, save_huggingface

    torch.manual_seed(2)
    theirs = transformers.DebertaV2ForMaskedLM(transformers.DebertaV2Config(**CONFIG)).eval()
    with torch.no_grad():
        for name, parameter in theirs.named_parameters():
            if "norm" in name.lower() or name.endswith("bias"):
                parameter.add_(torch.randn_like(parameter) * 0.2)
    theirs.save_pretrained(tmp_path / "theirs")
    ours = BertPretrainer.from_preset(str(tmp_path / "theirs"))
    inputs = padded_inputs(transformers.AutoTokenizer.from_pretrained(deberta_dir),
                           SENTENCES[:2], 24)
    positions = np.array([[1, 4, 2], [3, 1, 0]], "int32")
    with torch.no_grad():
        expected = theirs(input_ids=torch.from_numpy(inputs["token_ids"]).long(),
                          attention_mask=torch.from_numpy(inputs["padding_mask"]).long()).logits
    expected = np.take_along_axis(expected.numpy(), positions[:, :, None], axis=1)
    got = ours({**inputs, "mask_positions": positions})["mlm_logits"]
    assert_close(to_numpy(got), expected, RTOL, ATOL)
    back, info = transformers.DebertaV2ForMaskedLM.from_pretrained(
        save_huggingface(ours, tmp_path / "ours"), output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info

    released = tmp_path / "released"
    transformers.DebertaV2Model(transformers.DebertaV2Config(**CONFIG)).save_pretrained(released)
    _add_tensors(released / "model.safetensors", {"lm_predictions.lm_head.bias": np.zeros(
        CONFIG["vocab_size"], "float32")})
    BertPretrainer.from_preset(str(released))
    assert "no masked-LM head that transformers loads" in caplog.text


def _add_tensors(path, tensors):
    from safetensors.numpy import load_file, save_file

    save_file({**load_file(str(path)), **tensors}, str(path), metadata={"format": "pt"})
