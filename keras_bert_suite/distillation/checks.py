"""The distiller's argument checks: everything that cannot work fails before training starts,
with a message that says what to change."""

import numbers
from keras_bert_suite.tasks.task import BertTask


def check_weights(temperature, **weights):
    if not isinstance(temperature, numbers.Real) or temperature <= 0:
        raise ValueError(f"temperature must be a positive number, got {temperature!r}.")
    for name, value in weights.items():
        if not isinstance(value, numbers.Real) or value < 0:
            raise ValueError(f"{name} must be a number >= 0, got {value!r}.")
    if not any(weights.get(name) for name in ("soft_weight", "hidden_weight", "attention_weight",
                                              "cosine_weight")):
        raise ValueError("Nothing to distil: soft_weight, hidden_weight, attention_weight and "
                         "cosine_weight are all 0 (that is plain fine-tuning; use the "
                         "student's own fit).")


def check_pair(teacher, student):
    """Same task class, same vocabulary, a student no deeper or wider than its teacher."""
    if not isinstance(student, BertTask):
        raise ValueError(f"student must be a task model (BertClassifier, ...), got "
                         f"{type(student).__name__}.")
    if teacher is None:
        return
    if type(teacher) is not type(student):
        raise ValueError(f"The teacher is a {type(teacher).__name__} and the student a "
                         f"{type(student).__name__}: distil between models of the same task "
                         "(student_from_teacher(teacher, num_layers=...) makes one).")
    t, s = teacher.encoder, student.encoder
    vocabularies = (_vocabulary(teacher), _vocabulary(student))
    if t.vocabulary_size != s.vocabulary_size or (
            None not in vocabularies and vocabularies[0] != vocabularies[1]):
        raise ValueError(
            f"The teacher's and the student's vocabularies differ ({t.vocabulary_size} vs "
            f"{s.vocabulary_size} tokens, or different tokens): both read the same token ids, "
            "so they need the same vocabulary. Build the student from the teacher's preset or "
            "with student_from_teacher.")
    if s.num_layers > t.num_layers or s.hidden_dim > t.hidden_dim:
        raise ValueError(
            f"The student ({s.num_layers} layers of width {s.hidden_dim}) is deeper or wider "
            f"than the teacher ({t.num_layers} layers of width {t.hidden_dim}): distillation "
            "makes a smaller model. Did you swap teacher and student?")
    if _units(teacher) != _units(student):
        raise ValueError(f"The teacher has num_classes={_units(teacher)} and the student "
                         f"{_units(student)}: give the student the teacher's num_classes.")


def _vocabulary(task):
    tokenizer = getattr(task.preprocessor, "tokenizer", None)
    return None if tokenizer is None else tuple(tokenizer.get_vocabulary())


def _units(task):
    return getattr(task, "num_classes", None)


def layer_map(teacher, student, mapping):
    """The teacher layer (1-based) each student layer learns from: `mapping`, checked, or
    TinyBERT's uniform map i -> i * L_t / L_s."""
    teacher_layers, student_layers = teacher.encoder.num_layers, student.encoder.num_layers
    if mapping is None:  # check_pair has refused a student deeper than its teacher
        return tuple(i * teacher_layers // student_layers for i in range(1, student_layers + 1))
    mapping = tuple(mapping)
    if len(mapping) != student_layers:
        raise ValueError(f"layer_map has {len(mapping)} entries for a {student_layers}-layer "
                         "student: give one teacher layer per student layer.")
    for index, layer in enumerate(mapping):
        if isinstance(layer, bool) or not isinstance(layer, int) or not (
                1 <= layer <= teacher_layers):
            raise ValueError(f"layer_map[{index}] = {layer!r} is not a teacher layer: use "
                             f"1..{teacher_layers} (1-based; the embeddings map to each other).")
    return mapping


def attention_layers(teacher, student, layers):
    """(teacher layer, student layer), 1-based; default the last of each (MiniLM)."""
    if layers is None:
        return teacher.encoder.num_layers, student.encoder.num_layers
    layers = tuple(layers)
    bounds = (teacher.encoder.num_layers, student.encoder.num_layers)
    if len(layers) != 2 or any(isinstance(x, bool) or not isinstance(x, int) or not 1 <= x <= n
                               for x, n in zip(layers, bounds)):
        raise ValueError(f"attention_layers must be (teacher layer, student layer) within "
                         f"1..{bounds[0]} and 1..{bounds[1]}, got {layers!r}.")
    return layers


def relation_heads(teacher, student, num_relation_heads, relations, layers):
    """Relation heads must split both models' query/key/value widths (at `layers`, the
    1-based (teacher, student) layers) evenly."""
    for relation in relations:
        if len(relation) != 2 or set(relation) - set("qkv"):
            raise ValueError(f"relations are pairs of 'q', 'k', 'v' such as 'qk' or 'vv', got "
                             f"{relation!r}.")
    heads = teacher.encoder.num_heads if num_relation_heads is None else num_relation_heads
    widths = {"teacher": _attention_width(teacher.encoder, layers[0]),
              "student": _attention_width(student.encoder, layers[1])}
    if isinstance(heads, bool) or not isinstance(heads, int) or heads < 1 or any(
            width % heads for width in widths.values()):
        raise ValueError(f"num_relation_heads={heads!r} must be a positive integer dividing "
                         f"both attention widths {widths}; pass one that does (e.g. their "
                         "greatest common divisor's factors).")
    return heads


def _attention_width(encoder, layer):
    """Heads x head size of a layer's query/key/value (a pruned layer has fewer heads)."""
    return encoder.block_at(layer - 1).attention_width
