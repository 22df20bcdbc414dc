"""A ModernBERT and a DeBERTa-v3 classifier (transformers-written, tokenizer.json only) exported
as raw-text SavedModels in every precision this CPU exports (float32, bfloat16, int8, and
int8_vnni where the CPU has VNNI / AMX), all served by ONE `kbs serve` (its model store over one
base path, a version per precision, labelled by it; REST and gRPC): every served fuzz string
answered, the exports pass the op check, float32 serves the Keras model's logits, the reduced
precisions keep its labels, and the servers answer what the SavedModel computes in-process."""

import os
import shutil
import textwrap

import numpy as np
import pytest

from keras_bert_suite import BertClassifier
from keras_bert_suite.export import cpu_features
from keras_bert_suite.names import SERVING_PRECISIONS
from tests.conftest import to_numpy
from tests.export.conftest import AWKWARD_TEXTS
from tests.families.deberta.conftest import CONFIG as DEBERTA_CONFIG
from tests.families.deberta.conftest import deberta_dir, deberta_learning_sentences  # noqa: F401
from tests.families.modernbert.conftest import (  # noqa: F401
    modernbert_checkpoints, modernbert_tokenizer_dir)
from tests.harness import assert_all_close
from tests.text.test_tokenizer_parity import HARD_CASES

pytestmark = [pytest.mark.real, pytest.mark.slow, pytest.mark.needs_savedmodel,
              pytest.mark.needs_tf_serving]

SEQUENCE_LENGTH = 32
# int8_vnni is refused on a CPU without VNNI / AMX (export/cpu_features.py).
VNNI = cpu_features.int8_vnni_flags()
EXPORTED = tuple(p for p in SERVING_PRECISIONS if p != "int8_vnni" or VNNI)
NUM_LABELS = 3
# What a server must answer: the tokenizer parity's hard cases, the BERT exports' awkward
# strings (empty, invalid UTF-8, controls, emoji, special-token text) and both families'
# special tokens as user text.
FUZZ = [text.encode("utf-8") for text in HARD_CASES] + AWKWARD_TEXTS + [
    b"[CLS][SEP][PAD][UNK][MASK] <s></s><pad><mask>", b"\xff\xfe\xc3\x28 \xf0\x28\x8c\xbc"]


def _modernbert_classifier(checkpoints, directory):
    import transformers

    source = checkpoints["transformers5"]
    config = transformers.AutoConfig.from_pretrained(source)
    config.num_labels = NUM_LABELS
    model = transformers.ModernBertForSequenceClassification(config)
    model.model.load_state_dict(transformers.ModernBertModel.from_pretrained(source).state_dict())
    _save(model, source, directory)


def _deberta_classifier(tokenizer_dir, directory):
    import torch
    import transformers

    torch.manual_seed(0)
    model = transformers.DebertaV2ForSequenceClassification(
        transformers.DebertaV2Config(**DEBERTA_CONFIG, num_labels=NUM_LABELS))
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "layernorm" in name.lower():
                parameter.add_(torch.randn_like(parameter) * 0.2)
    _save(model, tokenizer_dir, directory)


def _save(model, tokenizer_dir, directory):
    """The classifier with logits of order 1 (not 1e-3: labels that mean something), its
    tokenizer files beside it."""
    import torch

    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.startswith("classifier"):
                parameter.mul_(30)
    model.eval().save_pretrained(directory)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(tokenizer_dir, name), directory)


@pytest.fixture(scope="module")
def served_families(modernbert_checkpoints, deberta_dir, all_sotu_sentences,  # noqa: F811
                    tmp_path_factory):
    """Both classifiers exported once in every precision: saved_models/<family>/<version>,
    versions in EXPORTED's order, and a models.config labelling each version by its
    precision."""
    from keras_bert_suite.export import export_saved_model

    root = tmp_path_factory.mktemp("modern_families")
    base = root / "saved_models"
    calibration = all_sotu_sentences[3000:3016]  # int8_vnni's activation ranges: one batch
    models, versions = {}, {}
    for family, make, source in (("modernbert", _modernbert_classifier, modernbert_checkpoints),
                                 ("deberta", _deberta_classifier, deberta_dir)):
        checkpoint = root / family
        make(source, str(checkpoint))
        models[family] = BertClassifier.from_preset(str(checkpoint),
                                                    sequence_length=SEQUENCE_LENGTH)
        for precision in EXPORTED:
            path = export_saved_model(
                models[family], str(base), name=family, precision=precision, warmup=False,
                calibration_texts=calibration if precision == "int8_vnni" else None)
            versions[family, precision] = path
    config = root / "models.config"
    config.write_text("model_config_list {\n" + "".join(textwrap.dedent(f"""\
        config {{
          name: "{family}"
          base_path: "{base / family}"
          model_platform: "tensorflow"
          model_version_policy {{ all {{}} }}
        """) + "".join(f'  version_labels {{ key: "{precision}" value: '
                       f'{os.path.basename(versions[family, precision])} }}\n'
                       for precision in EXPORTED) + "}\n" for family in models) + "}\n")
    return {"models": models, "paths": versions, "config": str(config)}


def test_one_kbs_serve_answers_both_families_in_every_precision(served_families,
                                                                all_sotu_sentences):
    import tensorflow as tf

    from keras_bert_suite.export import unservable_ops
    from keras_bert_suite.serving import GrpcClient, RestClient
    from keras_bert_suite.serving.grpc_server import start_grpc_server
    from keras_bert_suite.serving.model_store import ModelStore
    from keras_bert_suite.serving.server import RestServer

    sentences = [s for s in all_sotu_sentences[6000:6400] if len(s) < 200][:64]
    texts = [s.encode("utf-8") for s in sentences] + FUZZ
    store = ModelStore(config_file=served_families["config"], poll_seconds=0)
    grpc_server, port = start_grpc_server(store, port=0)
    served, agreement = {}, {}
    try:
        with RestServer(store, port=0) as rest, GrpcClient(f"127.0.0.1:{port}") as grpc_client:
            for (family, precision), path in served_families["paths"].items():
                assert unservable_ops(path) == {}, (family, precision)
                rows = RestClient(rest.url).predict(family, instances=texts, label=precision)
                logits = np.array([row["logits"] for row in rows], np.float32)
                by_grpc = grpc_client.predict(family, {"text": texts}, label=precision)
                # The served SavedModel called in-process, on the same batch (int8_vnni
                # quantizes each call's inputs over the batch's range): REST's JSON and
                # gRPC's protos carry its answers unchanged.
                evaluated = store.resolve(family, label=precision).signatures[
                    "serving_default"](text=tf.constant(texts))["logits"].numpy()
                what = f"{family} {precision}"
                assert logits.shape == (len(texts), NUM_LABELS) and np.isfinite(logits).all()
                assert_all_close(logits, evaluated, rtol=1e-6, atol=1e-6, what=what + " REST")
                assert_all_close(by_grpc["logits"], evaluated, rtol=1e-6, atol=1e-6,
                                 what=what + " gRPC")
                served[family, precision] = evaluated[:len(sentences)]
    finally:
        grpc_server.stop(grace=None)
    for family, model in served_families["models"].items():
        keras_logits = to_numpy(model(model.preprocessor(sentences), training=False))
        assert_all_close(served[family, "float32"], keras_logits, rtol=1e-4, atol=1e-5,
                         what=f"{family} float32 served vs Keras")
        labels = keras_logits.argmax(-1)
        for precision in EXPORTED[1:]:  # reduced kernels, not float32 again
            assert np.abs(served[family, precision] - served[family, "float32"]).max() > 1e-6
            agreement[family, precision] = float(
                np.mean(served[family, precision].argmax(-1) == labels))
    print("label agreement with float32:", agreement)
    assert min(agreement.values()) >= 0.9, agreement


@pytest.mark.skipif(not VNNI, reason="int8_vnni is exported only on CPUs with AVX512_VNNI, "
                    "AVX_VNNI or AMX (the other precisions ran above)")
def test_int8_vnni_runs_int8_arithmetic_on_smoothed_inputs(served_families):
    """Both kinds' int8_vnni exports run oneDNN's quantized matmul, and every matmul their
    kind smooths is smoothed: ModernBERT's first qkv too (fed by the embeddings' norm, as the
    block has no attention norm of its own)."""
    from keras_bert_suite.export.op_check import saved_model_ops
    from keras_bert_suite.export.serving_encoder import ServingEncoder
    from keras_bert_suite.layers.serving.int8_matmul import Int8Kernel

    for family, model in served_families["models"].items():
        path = served_families["paths"][family, "int8_vnni"]
        assert "QuantizedMatMulWithBiasAndDequantize" in saved_model_ops(path), family
        encoder = model.encoder
        smoothed = {f"layer_{index}/{template}"
                    for index in range(len(encoder.transformer_layers))
                    for template in encoder.block_kind.smoothed_inputs}
        kernels = ServingEncoder(encoder, "int8_vnni").weights
        assert smoothed and {name for name, kernel in kernels.items()
                             if isinstance(kernel, Int8Kernel)
                             and kernel.input_scales is not None} == smoothed, family
