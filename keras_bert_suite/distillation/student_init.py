"""A student made from its teacher, DistilBERT's way: the same model with fewer transformer
layers, each copied from a teacher layer (embeddings, pooler and head copied as they are)."""

import keras

from keras_bert_suite.models.lora import without_lora


def evenly_spaced_layers(teacher_layers, student_layers):
    """0-based teacher layers for a student: the first, the last and evenly between them —
    12 -> 6 gives DistilBERT's (0, 2, 4, 7, 9, 11)."""
    if student_layers == 1:
        return (0,)
    step = (teacher_layers - 1) / (student_layers - 1)
    return tuple(int(i * step + 0.5) for i in range(student_layers))


def student_from_teacher(teacher, num_layers=None, layers=None):
    """A copy of `teacher` (a task model or a BertEncoder) that keeps transformer layers
    `layers` (0-based teacher indices, in order) or `num_layers` evenly spaced ones
    (`evenly_spaced_layers`). Its weights are the teacher's exactly: student layer i is
    teacher layer layers[i]; the embeddings, pooler, task head and preprocessor are copied.
    A LoRA teacher gives a plain student with the merged weights.

    >>> from keras_bert_suite import BertEncoder
    >>> teacher = BertEncoder.from_preset("minilm_l6_h384_uncased")
    >>> student = student_from_teacher(teacher, num_layers=3)
    >>> student.num_layers, evenly_spaced_layers(6, 3)
    (3, (0, 3, 5))
    """
    from keras_bert_suite.models.encoder import BertEncoder

    teacher = without_lora(teacher)
    encoder = teacher if isinstance(teacher, BertEncoder) else teacher.encoder
    layers = _check_layers(encoder.num_layers, num_layers, layers)
    config = keras.saving.serialize_keras_object(teacher)
    encoder_config = config["config"] if teacher is encoder else config["config"]["encoder"]["config"]
    _keep_layers(encoder_config, layers)
    student = keras.saving.deserialize_keras_object(config)
    student_encoder = student if isinstance(student, BertEncoder) else student.encoder

    weights = {}
    teacher_weights = encoder.weight_map()
    for name in student_encoder.weight_map():
        weights[name] = keras.ops.convert_to_numpy(teacher_weights[_teacher_name(name, layers)])
    student_encoder.load_weight_map(weights)
    if student is not student_encoder:  # the head: every weight outside the encoder
        inside = {id(v) for v in encoder.weights}
        student_inside = {id(v) for v in student_encoder.weights}
        sources = [v for v in teacher.weights if id(v) not in inside]
        targets = [v for v in student.weights if id(v) not in student_inside]
        for source, target in zip(sources, targets, strict=True):
            target.assign(keras.ops.convert_to_numpy(source))  # a copy: JAX shares buffers
        student.preprocessor = teacher.preprocessor
    return student


def _check_layers(teacher_layers, num_layers, layers):
    if (num_layers is None) == (layers is None):
        raise ValueError("Pass one of num_layers= (evenly spaced teacher layers) or layers= "
                         "(0-based teacher layer indices).")
    if layers is None:
        if isinstance(num_layers, bool) or not isinstance(num_layers, int) or not (
                1 <= num_layers <= teacher_layers):
            raise ValueError(f"num_layers must be 1..{teacher_layers} (the teacher's "
                             f"{teacher_layers} layers), got {num_layers!r}.")
        return evenly_spaced_layers(teacher_layers, num_layers)
    layers = tuple(layers)
    bad = [x for x in layers if isinstance(x, bool) or not isinstance(x, int)
           or not 0 <= x < teacher_layers]
    if not layers or bad or list(layers) != sorted(set(layers)):
        raise ValueError(f"layers must be increasing, distinct teacher layer indices in "
                         f"0..{teacher_layers - 1} (0-based), got {layers!r}.")
    return layers


def _keep_layers(encoder_config, layers):
    """The encoder config with len(layers) layers; per-layer lists keep the chosen entries."""
    old = encoder_config["num_layers"]
    encoder_config["num_layers"] = len(layers)
    for key, value in encoder_config.items():
        if key.startswith("layer_") and isinstance(value, list) and len(value) == old:
            encoder_config[key] = [value[i] for i in layers]


def _teacher_name(name, layers):
    """"layer_{i}/..." in the student -> "layer_{layers[i]}/..." in the teacher."""
    if not name.startswith("layer_"):
        return name
    index, rest = name[len("layer_"):].split("/", 1)
    return f"layer_{layers[int(index)]}/{rest}"
