"""Classification examples from a tensorflow-datasets data set (when tfds is installed).

tensorflow-datasets is an optional dependency: it is imported only when `load_tfds` runs.

Example (needs glue/sst2 prepared by tensorflow-datasets, e.g. with `download=True` on a
machine with internet access; the test machine has no copy, so it is not run there):
>>> train = load_tfds("glue/sst2", "train", text_column="sentence")  # doctest: +SKIP
>>> len(train.label_names)  # doctest: +SKIP
2
"""

import numpy as np

from keras_bert_suite.tasks.classifier.data import ClassificationExamples


def load_tfds(name, split, text_column="text", text_pair_column=None, label_column="label",
              data_dir=None, download=False):
    """Reads a tfds classification data set into `ClassificationExamples`.

    Args:
        name: tfds name, e.g. "glue/sst2"; split: e.g. "train", "validation".
        text_column, text_pair_column, label_column: feature names (label_column=None: no
            labels). A `ClassLabel` label gives ids and `label_names`; a float label
            (e.g. glue/stsb) gives regression labels.
        data_dir: where tfds keeps prepared data; download: let tfds download and prepare it
            (off by default: this library never downloads data sets itself).
    """
    try:
        import tensorflow_datasets as tfds
    except ImportError:
        raise ImportError(
            "load_tfds needs tensorflow-datasets, which is not installed: "
            "pip install tensorflow-datasets. Or read the data set's CSV/TSV/JSON Lines files "
            "with keras_bert_suite.tasks.classifier.data.read_classification_file.") from None
    dataset, info = tfds.load(name, split=split, data_dir=data_dir, download=download,
                              with_info=True)
    features = info.features
    wanted = [c for c in (text_column, text_pair_column, label_column) if c is not None]
    missing = [c for c in wanted if c not in features]
    if missing:
        raise ValueError(f"{name} has no feature(s) {missing}; its features are {list(features)}.")
    texts, pairs, labels = [], [], []
    for example in tfds.as_numpy(dataset):
        texts.append(example[text_column].decode("utf-8"))
        if text_pair_column is not None:
            pairs.append(example[text_pair_column].decode("utf-8"))
        if label_column is not None:
            labels.append(example[label_column])
    label_names = getattr(features[label_column], "names", None) if label_column else None
    if label_column is None:
        labels = None
    elif label_names is not None:
        labels = np.asarray(labels, dtype=np.int32)
    else:
        labels = np.asarray(labels, dtype=np.float32)
    return ClassificationExamples(
        texts=texts, text_pairs=pairs if text_pair_column is not None else None, labels=labels,
        label_names=label_names, line_numbers=np.arange(len(texts), dtype=np.int64),
        path=f"tfds:{name}[{split}]")
