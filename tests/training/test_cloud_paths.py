"""A run's output directory on a tf.io.gfile filesystem (gs:// in real use): `ram://` here,
TensorFlow's in-memory filesystem, which every backend's process reaches through tf.io.gfile
and which Keras treats as remote as it treats gs:// (any `scheme://` path)."""

import json
import os
import uuid

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_suite import BertPretrainer
from keras_bert_suite.recipe_runner import load_recipe, run_pretraining
from keras_bert_suite.storage import write_json
from keras_bert_suite import storage
from tests.test_pretrain_recipe import TINY, Interrupt


@pytest.fixture
def ram_dir():
    path = f"ram://kbs-test-{uuid.uuid4().hex}"
    yield path
    if tf.io.gfile.exists(path):
        tf.io.gfile.rmtree(path)


def _read_json(path):
    with tf.io.gfile.GFile(path) as f:
        return json.load(f)


def test_storage_functions_on_a_gfile_path(ram_dir, tmp_path):
    storage.makedirs(f"{ram_dir}/a/b")
    write_json(f"{ram_dir}/a/b/x.json", {"rows": [1, 2]})
    assert _read_json(f"{ram_dir}/a/b/x.json") == {"rows": [1, 2]}
    assert storage.listdir(f"{ram_dir}/a/b") == ["x.json"]  # the temporary file is gone
    assert storage.isdir(f"{ram_dir}/a") and not storage.isdir(f"{ram_dir}/a/b/x.json")
    with storage.local_directory(f"{ram_dir}/tree") as local:
        assert not storage.is_remote(local) and os.path.isdir(local)
        os.makedirs(os.path.join(local, "sub"))
        for name in ("one.txt", os.path.join("sub", "two.txt")):
            with open(os.path.join(local, name), "w") as f:
                f.write(name)
    assert not os.path.exists(local)  # the local staging copy is removed
    assert sorted(storage.listdir(f"{ram_dir}/tree")) == ["one.txt", "sub"]
    with storage.open_file(f"{ram_dir}/tree/sub/two.txt") as f:
        assert f.read() == os.path.join("sub", "two.txt")
    storage.rmtree(f"{ram_dir}/tree")
    storage.rmtree(f"{ram_dir}/tree")  # nothing there: not an error
    assert not storage.exists(f"{ram_dir}/tree")
    with storage.local_directory(str(tmp_path / "here")) as local:  # a local path: itself
        assert local == str(tmp_path / "here")


@pytest.mark.real
def test_pretraining_writes_resumes_and_loads_on_a_gfile_path(ram_dir, tmp_path, sotu_files):
    output = f"{ram_dir}/run"
    recipe = load_recipe("pretrain_cpu_smoke", overrides=TINY)
    with pytest.raises(RuntimeError, match="interrupted"):
        run_pretraining(recipe, output, callbacks=[Interrupt()], verbose=0, log=lambda *_: None)
    assert [row["step"] for row in _read_json(f"{output}/history.json")["history"]] == [0, 2]
    assert [name for name in storage.listdir(f"{output}/backup") if name.endswith(".h5")] == [
        "epoch-000001.weights.h5"]  # the backup after step 2
    assert _read_json(f"{output}/recipe.json")["training"] == recipe["training"]

    logged = []
    summary = run_pretraining(recipe, output, verbose=0, log=logged.append)
    assert any(line.startswith(f"Resuming from the backup in {output} at step 2")
               for line in logged), logged
    history = _read_json(f"{output}/history.json")["history"]
    assert [row["step"] for row in history] == [0, 2, 4]  # continued from the backup
    assert summary["step"] == 4 and history == summary["history"]
    assert {"history.json", "logs", "preset", "pretrainer.keras", "recipe.json"} <= set(
        storage.listdir(output))
    assert not storage.exists(f"{output}/backup")  # fit completed
    assert tf.io.gfile.listdir(f"{output}/logs")  # TensorBoard
    assert {"config.json", "model.weights.npz", "vocab.txt", "task.json",
            "task.weights.h5"} <= set(storage.listdir(f"{output}/preset"))

    trained = summary["model"].get_weights()
    loaded = keras.saving.load_model(f"{output}/pretrainer.keras")  # Keras reads ram:// itself
    assert isinstance(loaded, BertPretrainer)
    assert int(keras.ops.convert_to_numpy(loaded.optimizer.iterations)) == 4
    for a, b in zip(trained, loaded.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)
    # The preset directory, copied back from the filesystem, loads the same weights.
    local = str(tmp_path / "preset")
    os.makedirs(local)
    for name in storage.listdir(f"{output}/preset"):
        tf.io.gfile.copy(f"{output}/preset/{name}", os.path.join(local, name))
    from_preset = BertPretrainer.from_preset(local)
    for a, b in zip(loaded.encoder.get_weights(), from_preset.encoder.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)
