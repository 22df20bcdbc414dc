"""DeBERTa-v3's pretraining: ElectraPretrainer's replaced-token detection on a DeBERTa generator
and discriminator with gradient-disentangled embedding sharing (GDES). The RTD loss reaches the
discriminator's E_Delta and never the generator's table E_G, which the MLM loss trains (under
ELECTRA's sharing the RTD loss does reach the one table); a few steps on real sentences from the
pretraining data path lower the loss, and the discriminator goes out (our preset, transformers'
DebertaV2Model) with E_G + E_Delta as its word embeddings and transformers' hidden states."""

import keras
import numpy as np
import pytest

from keras_bert_suite import BertEncoder, ElectraPretrainer
from keras_bert_suite.tasks.pretrainer.objectives import objective
from tests.conftest import to_numpy
from tests.numerics import assert_close
from tests.tiny_pretraining import RUN_EAGERLY

RTOL, ATOL = 1e-4, 1e-5
LENGTH = 32
# A tiny DeBERTa-v3 (buckets fewer than the tokens, as the family's fixture) over the
# tokenizer's 1,001 ids.
TINY = dict(vocabulary_size=1008, num_layers=2, num_heads=4, hidden_dim=32,
            intermediate_dim=48, max_sequence_length=64, num_segments=0, dropout=0.0,
            layer_norm_epsilon=1e-7, pooler_activation="gelu", block="deberta",
            block_options={"position_buckets": 8, "max_relative_positions": 16,
                           "pos_att_type": ["p2c", "c2p"]})
ENCODER_INPUTS = ("token_ids", "segment_ids", "padding_mask")


@pytest.fixture(scope="module")
def batches(deberta_dir, all_sotu_sentences):
    """Four (x, y) batches of 8 real DOC-SENTENCES instances, 32 tokens, masked as
    `kbs pretrain` masks them (the DeBERTa tokenizer read from transformers' tokenizer.json)."""
    import random

    import tensorflow as tf

    from keras_bert_suite.tasks.pretrainer.data import instances
    from keras_bert_suite.tasks.pretrainer.data.dynamic_masking import (
        DynamicMasker, apply_dynamic_masking)
    from keras_bert_suite.tasks.pretrainer.data.packing import instance_features
    from keras_bert_suite.text.tokenizer_files import tokenizer_from_preset

    tokenizer = tokenizer_from_preset(deberta_dir)
    sentences = all_sotu_sentences[1000:1400]
    documents = instances.tokenize_documents(
        [sentences[start:start + 20] for start in range(0, len(sentences), 20)], tokenizer)
    made = list(instances.instances_from_token_documents(
        documents, random.Random(0), instances.masking_config(tokenizer), LENGTH,
        dupe_factor=1, instance_format=objective("deberta_v3").instance_format,
        static_masking=False))[:32]
    features = instance_features(made, LENGTH, 5, masked=False)
    del features["nsp_labels"]
    dataset = apply_dynamic_masking(tf.data.Dataset.from_tensor_slices(features).batch(8),
                                    DynamicMasker.from_tokenizer(tokenizer,
                                                                 max_predictions_per_seq=5),
                                    seed=3)
    return [tuple({k: v.numpy() for k, v in part.items()} for part in batch)
            for batch in dataset]


def _gradients(model, x, y, variables):
    """{loss term: [d term / d variable, as numpy]} of the generator's and the discriminator's
    losses in one forward pass (zeros where a term does not reach a variable)."""
    names = ("generator_loss", "discriminator_loss")

    def losses():
        terms = model.loss_terms(x, y, model(x, training=False))
        return keras.ops.stack([terms[name] for name in names])  # [2]

    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        with tf.GradientTape(persistent=True) as tape:
            values = tf.unstack(losses())
        grads = [tape.gradient(value, variables) for value in values]
    elif backend == "torch":
        import torch

        values = losses()
        grads = [torch.autograd.grad(values[i], [v.value for v in variables],
                                     allow_unused=True, retain_graph=True)
                 for i in range(len(names))]
    else:
        import jax

        def of_values(values):
            with keras.StatelessScope(state_mapping=list(zip(variables, values))):
                return losses()

        jacobians = jax.jit(jax.jacrev(of_values))([v.value for v in variables])
        grads = [[jacobian[i] for jacobian in jacobians] for i in range(len(names))]
    return {name: [np.zeros(v.shape) if g is None else to_numpy(keras.ops.convert_to_tensor(g))
                   for g, v in zip(per_variable, variables)]
            for name, per_variable in zip(names, grads)}


def test_gdes_keeps_rtd_off_e_g_trains_on_real_text_and_goes_out(batches, tmp_path):
    import torch
    import transformers

    from keras_bert_suite import save_huggingface

    x, y = batches[0]
    model = ElectraPretrainer(BertEncoder(**TINY), generator_size=0.5, seed=1,
                              embedding_sharing=objective("deberta_v3").embedding_sharing,
                              generator_layers=1)  # DeBERTa-v3's: half the depth
    assert [len(model.generator_parts.blocks), model.generator().encoder.num_layers] == [1, 1]
    # One step's gradients: RTD reaches E_Delta and never E_G, which MLM trains.
    table = model.encoder.token_embedding.embeddings  # E_G
    delta = model.discriminator_layer.token_delta  # E_Delta
    grads = _gradients(model, x, y, [table, delta])
    rtd_g, rtd_delta = grads["discriminator_loss"]
    assert not rtd_g.any() and np.abs(rtd_delta).max() > 1e-6
    assert np.abs(grads["generator_loss"][0]).max() > 1e-6
    # ELECTRA's sharing: the RTD loss trains the one table too.
    electra = ElectraPretrainer(BertEncoder(**TINY), generator_size=0.5, seed=1)
    assert electra.discriminator_layer is None and electra.discriminator() is electra.encoder
    shared = electra.encoder.token_embedding.embeddings
    assert np.abs(_gradients(electra, x, y, [shared])["discriminator_loss"][0]).max() > 1e-6

    # Two passes over four real batches lower the loss; both tables moved.
    model.compile(optimizer=keras.optimizers.Adam(3e-3), run_eagerly=RUN_EAGERLY)
    initial_table = to_numpy(table)
    losses = [[model.train_on_batch(*batch, return_dict=True)["loss"] for batch in batches]
              for _ in range(2)]
    assert np.mean(losses[1]) < 0.95 * np.mean(losses[0])
    e_g = to_numpy(model.encoder.token_embedding.embeddings)
    e_delta = to_numpy(model.discriminator_layer.token_delta)
    assert np.abs(e_delta).max() > 0 and np.abs(e_g - initial_table).max() > 0

    # The discriminator carries E_G + E_Delta: its encoder, its preset, transformers' files.
    encoder = model.discriminator()
    np.testing.assert_array_equal(to_numpy(encoder.token_embedding.embeddings), e_g + e_delta)
    model.save_to_preset(str(tmp_path / "preset"))
    back = BertEncoder.from_preset(str(tmp_path / "preset"))
    np.testing.assert_array_equal(to_numpy(back.token_embedding.embeddings), e_g + e_delta)
    path = save_huggingface(encoder, tmp_path / "transformers")
    theirs = transformers.AutoModel.from_pretrained(path).eval()
    assert type(theirs).__name__ == "DebertaV2Model"
    np.testing.assert_array_equal(theirs.embeddings.word_embeddings.weight.detach().numpy(),
                                  e_g + e_delta)
    inputs = {name: x[name] for name in ENCODER_INPUTS}
    with torch.no_grad():
        expected = theirs(input_ids=torch.from_numpy(inputs["token_ids"]).long(),
                          attention_mask=torch.from_numpy(inputs["padding_mask"]).long()
                          ).last_hidden_state.numpy()
    real = inputs["padding_mask"].astype(bool)
    assert_close(to_numpy(encoder(inputs)["sequence_output"])[real], expected[real], RTOL, ATOL)

    # A `.keras` file keeps E_Delta and every other weight.
    keras.saving.save_model(model, tmp_path / "gdes.keras")
    loaded = keras.saving.load_model(tmp_path / "gdes.keras")
    assert loaded.embedding_sharing == "gradient_disentangled"
    np.testing.assert_array_equal(to_numpy(loaded.discriminator_layer.token_delta), e_delta)
    for mine, theirs in zip(model.weights, loaded.weights, strict=True):
        np.testing.assert_array_equal(to_numpy(mine), to_numpy(theirs), err_msg=mine.path)
