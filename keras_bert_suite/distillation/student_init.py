"""A student made from its teacher, DistilBERT's way: the same model with fewer transformer
layers, each copied from a teacher layer (embeddings, pooler and head copied as they are)."""

from keras_bert_suite.transforms.find_encoder import encoder_of
from keras_bert_suite.transforms.merge_lora import without_lora
from keras_bert_suite.transforms.rebuild import rebuild, weight_arrays


def evenly_spaced_layers(teacher_layers, student_layers):
    """0-based teacher layers for a student: the first, the last and evenly between them —
    12 -> 6 gives (0, 2, 4, 7, 9, 11), the layers the released DistilBERT was initialised
    from (transformers' extract_distilbert.py)."""
    if student_layers == 1:
        return (0,)
    step = (teacher_layers - 1) / (student_layers - 1)
    return tuple(int(i * step + 0.5) for i in range(student_layers))


def every_other_layer(teacher_layers):
    """0-based teacher layers 0, 2, 4, ...: "one layer out of two", as the DistilBERT paper
    describes its initialisation (12 -> (0, 2, 4, 6, 8, 10))."""
    return tuple(range(0, teacher_layers, 2))


def student_from_teacher(teacher, num_layers=None, layers=None):
    """A copy of `teacher` (a task model or a BertEncoder) that keeps transformer layers
    `layers` (0-based teacher indices, in order; or "every_other": `every_other_layer`) or
    `num_layers` evenly spaced ones (`evenly_spaced_layers`). Its weights are the teacher's exactly: student layer i is
    teacher layer layers[i]; the embeddings, pooler, task head and preprocessor are copied.
    A LoRA teacher gives a plain student with the merged weights. A teacher whose layers
    share one group of blocks (ALBERT) gives a student that runs the same blocks fewer times.

    >>> from keras_bert_suite import BertEncoder
    >>> teacher = BertEncoder.from_preset("minilm_l6_h384_uncased")
    >>> student = student_from_teacher(teacher, num_layers=3)
    >>> student.num_layers, evenly_spaced_layers(6, 3)
    (3, (0, 3, 5))
    """
    teacher = without_lora(teacher)
    encoder = encoder_of(teacher, "student_from_teacher")
    if isinstance(layers, str):
        if layers != "every_other":
            raise ValueError(f"layers must be a list of teacher layers or 'every_other', got "
                             f"{layers!r}.")
        layers = every_other_layer(encoder.num_layers)
    layers = _check_layers(encoder.num_layers, num_layers, layers)
    weights = weight_arrays(encoder)
    if encoder.num_layer_groups is None:
        changes = _kept_layers(encoder.get_config(), layers)
        # Per-layer block options follow their layers (ModernBERT's attention kinds).
        changes["block_options"] = encoder.block_kind.encoder.kept_options(
            encoder.block_options, layers)
        weights = _renumbered(weights, layers)
    elif encoder.num_layer_groups == 1:  # every layer runs the same blocks
        changes = {"num_layers": len(layers)}
    else:
        raise ValueError(
            f"student_from_teacher: the teacher's layers share {encoder.num_layer_groups} "
            f"groups of blocks (num_layer_groups), so a layer is not a block to keep or drop. "
            f"Build the student with num_layer_groups=1, or from a teacher without shared "
            f"layers.")
    return rebuild(teacher, changes, weights)


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


def _kept_layers(encoder_config, layers):
    """The encoder config changes for len(layers) layers: per-layer lists keep the chosen
    entries."""
    old = encoder_config["num_layers"]
    changes = {"num_layers": len(layers)}
    for key, value in encoder_config.items():
        if key.startswith("layer_") and isinstance(value, list) and len(value) == old:
            changes[key] = [value[i] for i in layers]
    return changes


def _renumbered(weights, layers):
    """The teacher's weights with "layer_{layers[i]}/..." named "layer_{i}/..."; the other
    layers' left out."""
    student_index = {teacher: student for student, teacher in enumerate(layers)}
    renamed = {}
    for name, value in weights.items():
        if not name.startswith("layer_"):
            renamed[name] = value
            continue
        index, rest = name[len("layer_"):].split("/", 1)
        if int(index) in student_index:
            renamed[f"layer_{student_index[int(index)]}/{rest}"] = value
    return renamed
