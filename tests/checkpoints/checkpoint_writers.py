"""Writers of small checkpoint directories for the reader tests."""

import json
import os

import numpy as np

# A 2-layer BERT small enough to write in milliseconds; for error-path tests.
TINY_HF_CONFIG = {
    "model_type": "bert", "architectures": ["BertModel"], "vocab_size": 50, "hidden_size": 8,
    "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 16,
    "max_position_embeddings": 16, "type_vocab_size": 2, "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1, "layer_norm_eps": 1e-12,
    "initializer_range": 0.02, "position_embedding_type": "absolute",
}


def tiny_hf_tensors(config=TINY_HF_CONFIG, seed=0):
    """Random weights under BertModel's names for `config` ([out, in] kernels)."""
    rng = np.random.default_rng(seed)
    hidden, intermediate = config["hidden_size"], config["intermediate_size"]
    shapes = {
        "embeddings.word_embeddings.weight": (config["vocab_size"], hidden),
        "embeddings.position_embeddings.weight": (config["max_position_embeddings"], hidden),
        "embeddings.token_type_embeddings.weight": (config["type_vocab_size"], hidden),
        "embeddings.LayerNorm.weight": (hidden,), "embeddings.LayerNorm.bias": (hidden,),
        "pooler.dense.weight": (hidden, hidden), "pooler.dense.bias": (hidden,),
    }
    for i in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{i}"
        for part in ("self.query", "self.key", "self.value", "output.dense"):
            shapes[f"{p}.attention.{part}.weight"] = (hidden, hidden)
            shapes[f"{p}.attention.{part}.bias"] = (hidden,)
        shapes.update({
            f"{p}.attention.output.LayerNorm.weight": (hidden,),
            f"{p}.attention.output.LayerNorm.bias": (hidden,),
            f"{p}.intermediate.dense.weight": (intermediate, hidden),
            f"{p}.intermediate.dense.bias": (intermediate,),
            f"{p}.output.dense.weight": (hidden, intermediate),
            f"{p}.output.dense.bias": (hidden,),
            f"{p}.output.LayerNorm.weight": (hidden,),
            f"{p}.output.LayerNorm.bias": (hidden,),
        })
    return {name: rng.normal(size=shape).astype("float32") for name, shape in shapes.items()}


def write_hf_dir(directory, config, tensors, tokenizer_config=None):
    """A Hugging Face directory: config.json + model.safetensors (+ tokenizer_config.json)."""
    from safetensors.numpy import save_file

    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config, f)
    save_file(tensors, os.path.join(directory, "model.safetensors"))
    if tokenizer_config is not None:
        with open(os.path.join(directory, "tokenizer_config.json"), "w") as f:
            json.dump(tokenizer_config, f)
    return str(directory)


def google_variables(hf_tensors, num_layers):
    """Hugging Face BertModel tensors renamed to google-research/bert's variables ([in, out])."""
    variables = {
        "bert/embeddings/word_embeddings": hf_tensors["embeddings.word_embeddings.weight"],
        "bert/embeddings/token_type_embeddings":
            hf_tensors["embeddings.token_type_embeddings.weight"],
        "bert/embeddings/position_embeddings": hf_tensors["embeddings.position_embeddings.weight"],
        "bert/embeddings/LayerNorm/gamma": hf_tensors["embeddings.LayerNorm.weight"],
        "bert/embeddings/LayerNorm/beta": hf_tensors["embeddings.LayerNorm.bias"],
        "bert/pooler/dense/kernel": hf_tensors["pooler.dense.weight"].T,
        "bert/pooler/dense/bias": hf_tensors["pooler.dense.bias"],
    }
    for i in range(num_layers):
        google, hf = f"bert/encoder/layer_{i}", f"encoder.layer.{i}"
        dense = {f"attention/self/{part}": f"attention.self.{part}"
                 for part in ("query", "key", "value")}
        dense.update({"attention/output/dense": "attention.output.dense",
                      "intermediate/dense": "intermediate.dense", "output/dense": "output.dense"})
        for google_name, hf_name in dense.items():
            variables[f"{google}/{google_name}/kernel"] = hf_tensors[f"{hf}.{hf_name}.weight"].T
            variables[f"{google}/{google_name}/bias"] = hf_tensors[f"{hf}.{hf_name}.bias"]
        for google_name, hf_name in (("attention/output/LayerNorm", "attention.output.LayerNorm"),
                                     ("output/LayerNorm", "output.LayerNorm")):
            variables[f"{google}/{google_name}/gamma"] = hf_tensors[f"{hf}.{hf_name}.weight"]
            variables[f"{google}/{google_name}/beta"] = hf_tensors[f"{hf}.{hf_name}.bias"]
    return variables


def google_head_variables(hidden, vocabulary_size, seed=0):
    """Random MLM / NSP head variables as run_pretraining.py names them."""
    rng = np.random.default_rng(seed)
    normal = lambda *shape: rng.normal(size=shape).astype("float32")  # noqa: E731
    return {
        "cls/predictions/transform/dense/kernel": normal(hidden, hidden),
        "cls/predictions/transform/dense/bias": normal(hidden),
        "cls/predictions/transform/LayerNorm/gamma": normal(hidden),
        "cls/predictions/transform/LayerNorm/beta": normal(hidden),
        "cls/predictions/output_bias": normal(vocabulary_size),
        "cls/seq_relationship/output_weights": normal(2, hidden),  # [2, H], used transposed
        "cls/seq_relationship/output_bias": normal(2),
    }


def write_google_dir(directory, bert_config, variables, vocabulary_path=None):
    """bert_config.json + bert_model.ckpt written the way the original TF1 code did it:
    tf.compat.v1 variables in a graph, saved by tf.compat.v1.train.Saver."""
    import shutil

    import tensorflow as tf

    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "bert_config.json"), "w") as f:
        json.dump(bert_config, f)
    if vocabulary_path:
        shutil.copyfile(vocabulary_path, os.path.join(directory, "vocab.txt"))
    with tf.Graph().as_default():
        for name, value in variables.items():
            tf.compat.v1.get_variable(name, initializer=tf.constant(value))
        saver = tf.compat.v1.train.Saver()
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            saver.save(session, os.path.join(directory, "bert_model.ckpt"),
                       write_meta_graph=False, write_state=False)
    return str(directory)


def bert_config_json(hf_config):
    """google-research/bert's bert_config.json keys (no layer_norm_eps: it is fixed at 1e-12)."""
    keys = ("attention_probs_dropout_prob", "hidden_act", "hidden_dropout_prob", "hidden_size",
            "initializer_range", "intermediate_size", "max_position_embeddings",
            "num_attention_heads", "num_hidden_layers", "type_vocab_size", "vocab_size")
    return {key: hf_config[key] for key in keys}


# === TF Model Garden (TF2, object-based) checkpoints, written by Model Garden's own tools ===

OBJECT_SUFFIX = "/.ATTRIBUTES/VARIABLE_VALUE"


def write_model_garden_dir(directory, model, vocabulary_path=None, pretrainer=False,
                           released_layout=True):
    """`model` (ours) as a Model Garden TF2 checkpoint directory: exported to the original BERT
    layout, then converted by Model Garden's tf2_bert_encoder_checkpoint_converter, with
    bert_config.json (and vocab.txt) beside it. `pretrainer`: a BertPretrainerV2 checkpoint
    (encoder + masked-LM head). `released_layout`: renamed to bert_model.ckpt.* as the v3
    releases ship it; else as the converter leaves it (`model-1.*` + a `checkpoint` file)."""
    import glob
    import shutil
    import tempfile

    from official.legacy.bert import configs
    from official.nlp.tools import tf2_bert_encoder_checkpoint_converter as converter

    from keras_bert_suite import save_google_bert

    os.makedirs(directory, exist_ok=True)
    with tempfile.TemporaryDirectory() as original:
        save_google_bert(model, original)
        config_path = shutil.copy(os.path.join(original, "bert_config.json"), directory)
        # The converter's own names: `encoder` for an encoder, `model` for a pretrainer
        # (whose checkpoint_items already hold `encoder` and `masked_lm`).
        converter.convert_checkpoint(
            configs.BertConfig.from_json_file(config_path), os.path.join(directory, "model"),
            os.path.join(original, "bert_model.ckpt"),
            checkpoint_model_name="model" if pretrainer else "encoder",
            converted_model="pretrainer" if pretrainer else "encoder")
    if vocabulary_path:
        shutil.copyfile(vocabulary_path, os.path.join(directory, "vocab.txt"))
    if released_layout:
        os.remove(os.path.join(directory, "checkpoint"))
        for path in glob.glob(os.path.join(directory, "model-1.*")):
            suffix = os.path.basename(path)[len("model-1"):]  # .index, .data-00000-of-00001
            os.rename(path, os.path.join(directory, "bert_model.ckpt" + suffix))
    return str(directory)


def object_checkpoint_variables(prefix):
    """{key: array} of an object-based checkpoint's variables (no object graph, no counter)."""
    import tensorflow as tf

    reader = tf.train.load_checkpoint(prefix)
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()
            if name.endswith(OBJECT_SUFFIX) and not name.startswith("save_counter/")}


def write_object_checkpoint(prefix, variables):
    """{key: array} written as an object-based checkpoint with exactly those keys: each key's
    object path (`encoder/layer_with_weights-4/_output_dense/kernel`) is rebuilt from plain
    tf.Modules, so that broken variants of a real checkpoint are cheap to make. Local names
    must not need TensorFlow's escaping (no `/` or `.` inside one)."""
    import tensorflow as tf

    nodes = {(): tf.Module()}
    for key, value in variables.items():
        *path, leaf = key[: -len(OBJECT_SUFFIX)].split("/")
        for depth in range(1, len(path) + 1):
            if tuple(path[:depth]) not in nodes:
                nodes[tuple(path[:depth])] = tf.Module()
                setattr(nodes[tuple(path[:depth - 1])], path[depth - 1],
                        nodes[tuple(path[:depth])])
        setattr(nodes[tuple(path)], leaf, tf.Variable(value))
    return tf.train.Checkpoint(root=nodes[()]).write(prefix)


def model_garden_encoder(bert_config, exact_gelu=True):
    """Model Garden's BertEncoder as its converter builds it for `bert_config` (a
    configs.BertConfig), optionally with the exact GELU: Model Garden's "gelu" is the tanh
    approximation (~4e-3 off on MiniLM, as KerasHub's), BERT's and ours the exact one."""
    from official.nlp.tools import tf2_bert_encoder_checkpoint_converter as converter

    if not exact_gelu:
        return converter._create_bert_model(bert_config)
    import tensorflow as tf
    from official.modeling import tf_utils

    original = tf_utils.get_activation
    tf_utils.get_activation = lambda name: lambda x: tf.nn.gelu(x, approximate=False)
    try:
        return converter._create_bert_model(bert_config)
    finally:
        tf_utils.get_activation = original


def run_model_garden_encoder(encoder, inputs):
    """{"sequence_output", "pooled_output"} (numpy) of a Model Garden encoder on our inputs."""
    outputs = encoder({"input_word_ids": inputs["token_ids"],
                       "input_mask": inputs["padding_mask"],
                       "input_type_ids": inputs["segment_ids"]})
    if not isinstance(outputs, dict):  # the legacy network answers [sequence, pooled]
        outputs = dict(zip(("sequence_output", "pooled_output"), outputs))
    return {name: outputs[name].numpy() for name in ("sequence_output", "pooled_output")}
