"""A teacher's outputs computed once and streamed from disk, so a big teacher does not run
at every step of every epoch.

    write_teacher_outputs(teacher, train_batches, "teacher.tfrecord")   # one pass
    data = with_teacher_outputs(train_batches, "teacher.tfrecord", batch_size=32,
                                shuffle_buffer=10_000)
    BertDistiller(None, student).fit(data, epochs=3)

One TFRecord per example (each output as a serialized float32 tensor), in the order of the
batches written; `with_teacher_outputs` pairs them with the same examples again, then
shuffles and batches, so the examples may be reshuffled every epoch. The dataset must yield
the same examples in the same order both times: write from an unshuffled pipeline.
"""

import keras
import numpy as np

from keras_bert_suite.text.task_inputs import is_dataset


def _as_dict(outputs):
    return dict(outputs) if isinstance(outputs, dict) else {"logits": outputs}


def write_teacher_outputs(teacher, batches, path, verbose="auto"):
    """Runs `teacher` (inference) over `batches` (a tf.data.Dataset of (inputs, labels) or of
    inputs) and writes its outputs to the TFRecord file `path`. Returns the example count."""
    import tensorflow as tf

    if not is_dataset(batches):
        raise ValueError("write_teacher_outputs takes a tf.data.Dataset of batches (inputs, "
                         f"labels) or of inputs, got {type(batches).__name__}.")
    count = 0
    progress = keras.utils.Progbar(None, unit_name="example") if verbose else None
    with tf.io.TFRecordWriter(path) as writer:
        for batch in batches:
            inputs = batch[0] if isinstance(batch, tuple) else batch
            inputs = keras.tree.map_structure(np.asarray, inputs)  # tf tensors -> any backend
            outputs = _as_dict(teacher.predict_on_batch(inputs))
            outputs = {name: np.asarray(value, "float32") for name, value in outputs.items()}
            size = len(next(iter(outputs.values())))
            for row in range(size):
                features = {name: tf.train.Feature(bytes_list=tf.train.BytesList(value=[
                    tf.io.serialize_tensor(value[row]).numpy()])) for name, value in outputs.items()}
                writer.write(tf.train.Example(
                    features=tf.train.Features(feature=features)).SerializeToString())
            count += size
            if progress is not None:
                progress.add(size)
    return count


def with_teacher_outputs(batches, path, batch_size, shuffle_buffer=None, seed=None):
    """The examples of `batches` ((inputs, labels) batches, as written) paired with the
    teacher outputs in `path`: (inputs, {"labels": labels, "teacher_outputs": outputs})
    batches of `batch_size`, shuffled with `shuffle_buffer` (None: in order)."""
    import tensorflow as tf

    examples = batches.unbatch()
    first = next(iter(tf.data.TFRecordDataset(path).take(1)), None)
    if first is None:
        raise ValueError(f"{path} holds no teacher outputs; write them with "
                         "write_teacher_outputs(teacher, batches, path) first.")
    features = tf.train.Example.FromString(first.numpy()).features.feature
    names = sorted(features)
    shapes = {name: tf.io.parse_tensor(features[name].bytes_list.value[0], tf.float32).shape
              for name in names}  # every example's outputs have the first one's shapes
    spec = {name: tf.io.FixedLenFeature([], tf.string) for name in names}
    example_spec = examples.element_spec
    if not isinstance(example_spec, tuple):
        raise ValueError("with_teacher_outputs needs (inputs, labels) batches; for inputs "
                         "alone, pair them with the outputs yourself.")

    def parse(record):
        parsed = tf.io.parse_single_example(record, spec)
        outputs = {name: tf.ensure_shape(tf.io.parse_tensor(parsed[name], tf.float32),
                                         shapes[name]) for name in names}
        return outputs["logits"] if names == ["logits"] else outputs

    def pair(example, outputs):
        return example[0], {"labels": example[1], "teacher_outputs": outputs}

    data = tf.data.Dataset.zip((examples, tf.data.TFRecordDataset(path).map(parse)))
    data = data.map(pair)
    if shuffle_buffer:
        data = data.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    return data.batch(batch_size).prefetch(tf.data.AUTOTUNE)
