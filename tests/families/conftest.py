"""Each BERT family as transformers builds it: small random models from configs (LayerNorm
weights randomized too, as no released model keeps them at 1 and 0), saved with
`save_pretrained` once per session, and real sentences to run them on."""

import numpy as np
import pytest

# (transformers config class, its arguments): 3 layers of width 32 over MiniLM's uncased
# vocabulary, so that real sentences tokenize into ids every model has. ALBERT twice: the
# released layout (1 group of 1 block) and 2 groups of 2 blocks (4 blocks, layers 0-1 run
# blocks 0, 1 and layers 2-3 run blocks 2, 3).
_COMMON = dict(vocab_size=30522, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
               intermediate_size=37, max_position_embeddings=40)
FAMILY_CONFIGS = {
    "bert": ("BertConfig", _COMMON),
    # RoBERTa's and XLM-R's released configs: LayerNorm epsilon 1e-5 (transformers' default
    # is 1e-12), pad id 1, one segment row, max_position_embeddings = 512 + 2.
    "roberta": ("RobertaConfig", {**_COMMON, "type_vocab_size": 1, "pad_token_id": 1,
                                  "max_position_embeddings": 42, "layer_norm_eps": 1e-5}),
    "xlm-roberta": ("XLMRobertaConfig", {**_COMMON, "type_vocab_size": 1, "pad_token_id": 1,
                                         "max_position_embeddings": 42,
                                         "layer_norm_eps": 1e-5}),
    "distilbert": ("DistilBertConfig", dict(vocab_size=30522, dim=32, n_layers=3, n_heads=4,
                                            hidden_dim=37, max_position_embeddings=40)),
    "electra": ("ElectraConfig", {**_COMMON, "embedding_size": 16}),
    "albert": ("AlbertConfig", {**_COMMON, "embedding_size": 16}),
    "albert-shared-groups": ("AlbertConfig", {**_COMMON, "num_hidden_layers": 4,
                                              "embedding_size": 16, "num_hidden_groups": 2,
                                              "inner_group_num": 2}),
}
SENTENCE_PAIRS = [
    ("The senate passed the bill after a long debate.", "It now goes to the president."),
    ("Hello world", "Hi"),
    ("We will not tire, we will not falter, and we will not fail.", "Applause."),
]


@pytest.fixture(scope="session")
def family_checkpoints(tmp_path_factory):
    """{family: the directory of its random transformers model (AutoModel: the base model)}."""
    import torch
    import transformers

    directories = {}
    for name, (config_class, arguments) in FAMILY_CONFIGS.items():
        torch.manual_seed(0)
        config = getattr(transformers, config_class)(**arguments)
        model = transformers.AutoModel.from_config(config).eval()
        with torch.no_grad():
            for parameter_name, parameter in model.named_parameters():
                if "norm" in parameter_name.lower():
                    parameter.add_(torch.randn_like(parameter) * 0.2)
        directory = tmp_path_factory.mktemp(name)
        model.save_pretrained(directory)
        directories[name] = str(directory)
    return directories


def family_inputs(name):
    """Encoder inputs of the real sentence pairs, packed BERT's way by MiniLM's vocabulary;
    pairs only where the family has segment embeddings, and padding written with the
    family's pad id (RoBERTa counts positions over ids that are not padding)."""
    from keras_bert_suite import BertPreprocessor

    preprocessor = BertPreprocessor.from_preset("minilm_l6_h384_uncased", sequence_length=24)
    first, second = zip(*SENTENCE_PAIRS)
    has_segments = name not in ("roberta", "xlm-roberta", "distilbert")
    inputs = {key: np.asarray(value) for key, value in preprocessor(
        (list(first), list(second)) if has_segments else list(first)).items()}
    pad_id = FAMILY_CONFIGS[name][1].get("pad_token_id", 0)
    inputs["token_ids"] = np.where(inputs["padding_mask"] == 1, inputs["token_ids"], pad_id)
    assert inputs["padding_mask"].min() == 0, "the batch should contain padding"
    return {key: value.astype("int32") for key, value in inputs.items()}


def assert_distils(teacher, student, texts):
    """A few distillation steps (soft targets and hidden states, no labels) on `texts` halve
    the student's KL from its teacher's class distributions."""
    from keras_bert_suite.distillation import BertDistiller
    from tests.conftest import to_numpy

    x = {name: to_numpy(value) for name, value in teacher.preprocessor(texts).items()}

    def agreement():
        return _mean_kl(to_numpy(teacher(x, training=False)),
                        to_numpy(student(x, training=False)))

    before = agreement()
    distiller = BertDistiller(teacher, student, temperature=1.0, soft_weight=1.0,
                              hard_weight=0.0, hidden_weight=1.0, attention_weight=0.0)
    distiller.compile(optimizer="adam")  # 1e-3: a few steps move a tiny model
    distiller.fit(x, np.zeros(len(texts), "int32"), batch_size=16, epochs=4, verbose=0,
                  shuffle=False)
    after = agreement()
    assert after < 0.5 * before, (before, after)


def _mean_kl(teacher_logits, student_logits):
    """Mean KL(teacher || student) of the class distributions, in float64."""
    def log_softmax(x):
        x = x.astype("float64")
        x = x - x.max(-1, keepdims=True)
        return x - np.log(np.exp(x).sum(-1, keepdims=True))
    t, s = log_softmax(teacher_logits), log_softmax(student_logits)
    return float(np.mean((np.exp(t) * (t - s)).sum(-1)))
