"""Raw text into Keras' fit / evaluate / predict: a task's data plumbing (tasks/task.py's
class doc says what the user sees).

`TextBatching` turns raw text (in memory, or a `tf.data.Dataset` of text) into what Keras
takes, with the task's preprocessor: preprocessed once into rows, batched in length buckets
(text/length_buckets.py), validation data alike; `_predict_text` runs a task's served text
path over raw text, `predict` (its sorted rows put back in the caller's order).
`TrainsOnTaskText` is the `fit` / `evaluate` pair on top, shared by the
task models and by models that train a task (BertDistiller trains its student's).
"""

import keras
import numpy as np

from keras_bert_suite.text import length_buckets, task_inputs
from keras_bert_suite.training.optimizers import build_optimizer_before_tracing


class TextBatching:
    """Data plumbing of a task model: `self.preprocessor` (or None), the task's
    `labels_per_token`."""

    def preprocess_samples(self, x, y=None, sample_weight=None):
        """Raw text (and labels) -> (encoder inputs, labels, weights): eagerly on text in
        memory, inside tf.data on a dataset of text."""
        return self.preprocessor(x, y=y, sample_weight=sample_weight)

    def _text_pipeline(self, x, y=None, sample_weight=None, batch_size=None, verbose=0):
        """Raw text -> what Keras takes instead: a preprocessing `tf.data` pipeline for a
        dataset of text, `(inputs, y, sample_weight)` numpy arrays for text in memory
        (`task_inputs.preprocessed_arrays`); None when `x` is encoder inputs already."""
        if isinstance(x, dict):
            return None
        if task_inputs.is_dataset(x):
            spec = x.element_spec
            features = spec[0] if isinstance(spec, tuple) else spec
            if isinstance(features, dict) or self.preprocessor is None:
                return None
        elif not task_inputs.is_text(x):
            return None
        if self.preprocessor is None:
            raise ValueError(f"{type(self).__name__} got raw text but has no preprocessor: "
                             "pass preprocessor=BertPreprocessor.from_preset(...) or token ids.")
        if task_inputs.is_dataset(x):
            if y is not None or sample_weight is not None or batch_size is not None:
                raise ValueError("When x is a tf.data.Dataset, do not pass y, sample_weight or "
                                 "batch_size: the dataset yields batches of (text, label).")
            return task_inputs.text_dataset(self.preprocess_samples, x)
        return task_inputs.preprocessed_arrays(self.preprocess_samples, x, y, sample_weight,
                                               verbose=verbose)

    def keras_data(self, x, y=None, sample_weight=None, batch_size=None, shuffle=False,
                   verbose=0, bucket_boundaries=None, group_by_length=0, sort_by_length=False):
        """`(x, y, sample_weight, batch_size, shuffle)` for Keras' own fit / evaluate /
        predict, with raw text preprocessed (see `_text_pipeline`) and, with
        `bucket_boundaries` ("auto" or lengths), batched in length buckets
        (text/length_buckets.py): shuffled in groups of `group_by_length` length-sorted
        batches, or, with `sort_by_length` (evaluate, predict), all rows sorted by length."""
        return self._keras_rows(x, y, sample_weight, batch_size, shuffle, verbose,
                                bucket_boundaries, group_by_length, sort_by_length)[:5]

    def _keras_rows(self, x, y, sample_weight, batch_size, shuffle, verbose,
                    bucket_boundaries, group_by_length, sort_by_length):
        """`keras_data`'s five values and the order of the rows in them: None when they
        keep the caller's, else the caller's index of each row (predict puts its outputs
        back with it)."""
        pipeline = self._text_pipeline(x, y, sample_weight, batch_size, verbose=verbose)
        if pipeline is None:
            if task_inputs.is_dataset(x):
                shuffle = False  # a dataset shuffles itself; Keras would only warn
            return x, y, sample_weight, batch_size, shuffle, None
        if task_inputs.is_dataset(pipeline):
            boundaries = self._boundaries(pipeline.element_spec, bucket_boundaries)
            if boundaries is not None:
                pipeline = pipeline.map(
                    lambda *batch: length_buckets.cut_to_bucket(
                        batch if len(batch) > 1 else batch[0], boundaries,
                        self.labels_per_token))
            return pipeline, None, None, None, False, None
        inputs, labels, weights = pipeline
        batch_size = batch_size or 32
        boundaries = self._boundaries(inputs, bucket_boundaries)
        if boundaries is None:
            return inputs, labels, weights, batch_size, shuffle, None
        rows = tuple(part for part in (inputs, labels, weights) if part is not None)
        order = None
        if sort_by_length:  # evaluate / predict: sorted by length, so batches cut the most
            order = np.argsort(length_buckets.row_lengths(inputs).numpy(), kind="stable")
            rows = tuple(keras.tree.map_structure(lambda a: a[order], part) for part in rows)
        batches = length_buckets.bucketed_batches(
            length_buckets.rows_dataset(rows), batch_size, boundaries, shuffle=shuffle,
            group_batches=group_by_length or 0, per_token_labels=self.labels_per_token)
        return batches, None, None, None, False, order

    def _boundaries(self, inputs, bucket_boundaries):
        """The bucket lengths for inputs whose token axis is `inputs["token_ids"]`'s last,
        or None (fixed length)."""
        if bucket_boundaries is None:
            return None
        if isinstance(inputs, tuple):
            inputs = inputs[0]
        length = inputs["token_ids"].shape[-1]
        if length is None:  # a dataset of text mapped to unknown lengths: nothing to cut
            return None
        step = length_buckets.length_step(getattr(self, "jit_compile", "auto"))
        return length_buckets.bucket_boundaries(int(length), bucket_boundaries, step)

    def _validation_data(self, validation_data, batch_size, bucket_boundaries=None):
        if validation_data is None:
            return None
        if task_inputs.is_dataset(validation_data):
            x, y, sample_weight, batch_size = validation_data, None, None, None
        else:
            x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(validation_data)
        data = self.keras_data(x, y, sample_weight, batch_size,
                               bucket_boundaries=bucket_boundaries, sort_by_length=True)
        if data[0] is x:  # not raw text: Keras takes it as it is
            return validation_data
        if task_inputs.is_dataset(data[0]):
            return data[0]
        return tuple(part for part in data[:3] if part is not None)

    def fit_inputs(self, x, y, sample_weight, batch_size, validation_data, shuffle,
                   validation_split=None, verbose=0, bucket_boundaries=None,
                   group_by_length=0):
        """`fit`'s data with raw text preprocessed (also what a model that trains this task,
        such as `BertDistiller`, feeds to its own fit)."""
        if validation_split and task_inputs.is_text(x):
            raise ValueError("validation_split does not work on raw text (it would split "
                             "windows of one example apart); pass validation_data=(texts, "
                             "labels) instead.")
        x, y, sample_weight, batch_size, shuffle = self.keras_data(
            x, y, sample_weight, batch_size, shuffle, verbose=verbose,
            bucket_boundaries=bucket_boundaries, group_by_length=group_by_length)
        return (x, y, sample_weight, batch_size,
                self._validation_data(validation_data, batch_size, bucket_boundaries), shuffle)

    def predict(self, x, batch_size=None, bucket_boundaries="auto", **kwargs):
        """`keras.Model.predict`; raw text is batched in length buckets as in `fit`, unless
        the task's outputs have a token axis (their batches must line up)."""
        if self.outputs_per_token:
            bucket_boundaries = None
        x, _, _, batch_size, _, order = self._keras_rows(
            x, None, None, batch_size, False, kwargs.get("verbose", "auto"),
            bucket_boundaries, 0, sort_by_length=True)
        outputs = super().predict(x, batch_size=batch_size, **kwargs)
        if order is None:
            return outputs
        inverse = np.argsort(order)  # row i of the sorted batches is the caller's order[i]
        return keras.tree.map_structure(lambda array: array[inverse], outputs)

    def _predict_text(self, text_path, columns, batch_size=None, verbose="auto",
                      chunk_size=256, **options):
        """Runs a task's text path (`text_path(preprocessor, run_model, *columns, **options)`,
        the function its export serves) over raw-text `columns` in chunks of examples; returns
        {output: numpy [N, ...]}, strings decoded to str."""
        if self.preprocessor is None:
            raise ValueError(f"{type(self).__name__} got raw text but has no preprocessor; "
                             "build it with one (from_preset does) or pass encoder inputs.")
        columns = [task_inputs.as_string_array(column) for column in columns]
        count = len(columns[0])
        if any(len(column) != count for column in columns):
            raise ValueError(f"{type(self).__name__}.predict: the text inputs have different "
                             f"lengths {[len(c) for c in columns]}; give one row per example.")

        def run_model(inputs):
            inputs = {name: np.asarray(value) for name, value in inputs.items()}
            outputs = keras.Model.predict(self, inputs, batch_size=batch_size or 32, verbose=0)
            # named as the serving functions see them (graph_model_call)
            return outputs if isinstance(outputs, dict) else {"logits": outputs}

        show = verbose == 1 or (verbose == "auto" and count > chunk_size)
        progress = keras.utils.Progbar(count, verbose=1) if show else None
        parts = []
        for begin in range(0, max(count, 1), chunk_size):
            chunk = [column[begin:begin + chunk_size] for column in columns]
            outputs = text_path(self.preprocessor, run_model, *chunk, **options)
            parts.append({name: np.asarray(value) for name, value in outputs.items()})
            if progress is not None:
                progress.add(len(chunk[0]))
        return {name: task_inputs.decode_strings(_concatenate_rows([p[name] for p in parts]))
                for name in parts[0]}


class TrainsOnTaskText:
    """`fit` / `evaluate` of a keras.Model that takes a task's raw text: the data goes through
    `self.text_task()` (a `TextBatching` task model: the model itself, or the student a
    distiller trains) before Keras sees it. (A method, not a property: Keras' saving walks
    a model's attributes, and one that returns the model itself would never end.)"""

    def text_task(self):
        return self

    def fit(self, x=None, y=None, batch_size=None, sample_weight=None, validation_data=None,
            shuffle=True, bucket_boundaries="auto",
            group_by_length=length_buckets.DEFAULT_GROUP_BATCHES, **kwargs):
        """`keras.Model.fit`; with a preprocessor, `x` may be raw text (see the class doc),
        batched in length buckets (`bucket_boundaries`: "auto", a list of lengths, or None
        for fixed-length batches) with rows of similar length grouped (`group_by_length`
        batches per group; 0: plain shuffle)."""
        x, y, sample_weight, batch_size, validation_data, shuffle = self.text_task().fit_inputs(
            x, y, sample_weight, batch_size, validation_data, shuffle,
            kwargs.get("validation_split"), kwargs.get("verbose", "auto"),
            bucket_boundaries, group_by_length)
        build_optimizer_before_tracing(self)
        return super().fit(x, y, batch_size=batch_size, sample_weight=sample_weight,
                           validation_data=validation_data, shuffle=shuffle, **kwargs)

    def evaluate(self, x=None, y=None, batch_size=None, sample_weight=None,
                 bucket_boundaries="auto", **kwargs):
        """`keras.Model.evaluate`; raw text is batched in length buckets as in `fit`."""
        x, y, sample_weight, batch_size, _ = self.text_task().keras_data(
            x, y, sample_weight, batch_size, verbose=kwargs.get("verbose", "auto"),
            bucket_boundaries=bucket_boundaries, sort_by_length=True)
        return super().evaluate(x, y, batch_size=batch_size, sample_weight=sample_weight,
                                **kwargs)


def _concatenate_rows(arrays):
    """Concatenates chunks of rows; [rows, width, ...] chunks of different widths are padded
    (with b"" or 0) to the widest first."""
    if arrays[0].ndim < 2:
        return np.concatenate(arrays)
    width = max(array.shape[1] for array in arrays)
    padded = []
    for array in arrays:
        full = np.full((array.shape[0], width) + array.shape[2:],
                       b"" if array.dtype == object else 0, dtype=array.dtype)
        full[:, :array.shape[1]] = array
        padded.append(full)
    return np.concatenate(padded)
