"""Version directories (next number, immutability, atomic rename) and the servable-op check."""

import os

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_suite.export import check_servable_ops, export_saved_model, unservable_ops
from keras_bert_suite.export.versions import atomic_version_dir, next_version


def test_versions_count_up_and_ignore_other_entries(tmp_path):
    model_dir = str(tmp_path / "model")
    assert next_version(model_dir) == 1
    for name in ("1", "7", ".tmp-9-abc", "notes"):
        os.makedirs(os.path.join(model_dir, name))
    assert next_version(model_dir) == 8
    with atomic_version_dir(model_dir) as (directory, version):
        assert version == 8 and not os.path.exists(os.path.join(model_dir, "8"))
        os.makedirs(directory)
        open(os.path.join(directory, "saved_model.pb"), "w").close()
    assert os.listdir(os.path.join(model_dir, "8")) == ["saved_model.pb"]


def test_failed_export_leaves_nothing_behind(tmp_path):
    model_dir = str(tmp_path / "model")
    with pytest.raises(RuntimeError, match="boom"):
        with atomic_version_dir(model_dir, version=3) as (directory, _):
            os.makedirs(directory)
            open(os.path.join(directory, "saved_model.pb"), "w").close()
            raise RuntimeError("boom")
    assert os.listdir(model_dir) == []


def test_existing_or_bad_version_is_refused(tmp_path):
    os.makedirs(tmp_path / "m" / "2")
    with pytest.raises(FileExistsError, match="already exists"):
        with atomic_version_dir(str(tmp_path / "m"), version=2):
            pass
    for bad in (0, -1, "3", 1.5, True):
        with pytest.raises(ValueError, match="positive int"):
            with atomic_version_dir(str(tmp_path / "m"), version=bad):
                pass


@pytest.mark.needs_savedmodel
def test_export_needs_a_preprocessor_and_task_options_it_knows(tmp_path):
    import keras

    from keras_bert_suite import BertClassifier
    from tests.export.conftest import PRESET

    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    with pytest.raises(ValueError, match="needs a preprocessor"):
        export_saved_model(model, str(tmp_path))
    classifier = BertClassifier.from_preset(PRESET, load_weights=False, num_classes=2,
                                            sequence_length=16)
    with pytest.raises(TypeError, match="doc_stride"):  # a span labeler's option
        export_saved_model(classifier, str(tmp_path), name="c", doc_stride=64)
    assert os.listdir(tmp_path) == []


def _save(tmp_path, fn):
    module = tf.Module()
    module.f = tf.function(fn, input_signature=[tf.TensorSpec([None], tf.float32)])
    path = str(tmp_path / "m")
    tf.saved_model.save(module, path, signatures={"serving_default": module.f})
    return path


@pytest.mark.needs_savedmodel
def test_op_check_rejects_python_functions_and_names_them(tmp_path):
    path = _save(tmp_path, lambda x: tf.py_function(np.sin, [x], tf.float32))
    assert "EagerPyFunc" in unservable_ops(path)
    with pytest.raises(ValueError, match="EagerPyFunc: in"):
        check_servable_ops(path)


@pytest.mark.needs_savedmodel
def test_op_check_rejects_round_robin_trim_and_accepts_core_ops(tmp_path):
    import tensorflow_text as text

    def trimmed(x):
        ids = tf.RaggedTensor.from_tensor(tf.cast(x, tf.int32)[None])
        return tf.cast(text.RoundRobinTrimmer(2).trim([ids])[0].flat_values, tf.float32)

    assert unservable_ops(_save(tmp_path / "ok", lambda x: tf.sin(x) * 2)) == {}
    bad = unservable_ops(_save(tmp_path / "bad", trimmed))
    assert any("RoundRobin" in op for op in bad), bad


def test_op_check_says_what_a_saved_model_is(tmp_path):
    with pytest.raises(FileNotFoundError, match="saved_model.pb"):
        check_servable_ops(str(tmp_path))
