"""BertDistiller: trains a student task model on a teacher's outputs, with `fit`."""

import keras
from keras import ops

from keras_bert_suite.distillation import checks, internals, losses
from keras_bert_suite.tasks.model_base import CompilesFromOwnDefaults, compile_arguments
from keras_bert_suite.tasks.text_batches import TrainsOnTaskText

TEACHER_OUTPUTS = "teacher_outputs"
# MiniLM's relations: v1 transfers the attention distribution (queries x keys) and the
# value relation; v2 (MiniLMv2) uses ("qq", "kk", "vv").
DEFAULT_RELATIONS = ("qk", "vv")


@keras.saving.register_keras_serializable(package="keras_bert_suite")
class BertDistiller(TrainsOnTaskText, CompilesFromOwnDefaults, keras.Model):
    """Knowledge distillation from a teacher task model into a smaller student of the same
    task (Hinton et al. 2015; DistilBERT; TinyBERT; MiniLM), trained with `fit`.

    The loss per batch is
        hard_weight      x the student's own task loss on the labels (when labels are given)
      + soft_weight      x T^2 KL(teacher || student) of the outputs softened by temperature T
                           (squared error for a one-logit regression head)
      + hidden_weight    x MSE between student layer i and teacher layer layer_map[i]
                           (TinyBERT; the embedding outputs too; a learned projection when
                           the widths differ)
      + cosine_weight    x 1 - cos(teacher, student) of the last layer's hidden states,
                           averaged over real tokens (DistilBERT; equal widths)
      + attention_weight x KL between the teacher's and the student's self-attention
                           relations at `attention_layers` (MiniLM: `relations` "qk" is the
                           attention distribution, "vv" the value relation), on
                           `num_relation_heads` heads so the widths may differ.
    Per-token outputs (token classifier) are averaged over real tokens, masked-LM outputs over
    real predictions (the pretrainer's `mlm_weights`), span logits over the sequence.

    The teacher is frozen and runs in inference mode. Instead of running it every step, its
    outputs can be computed once (`teacher_outputs.write_teacher_outputs`) and given with the
    labels as y = {"labels": labels, "teacher_outputs": outputs}
    (`teacher_outputs.with_teacher_outputs` streams them from disk); then pass teacher=None
    (only logits are distilled then). Raw text works as for the student's own `fit` when the
    student has a preprocessor. The trained student is `distiller.student`: save, export and
    serve it as any task model.

    Args:
        teacher: a task model (BertClassifier, BertTokenClassifier, BertSpanLabeler,
            BertMultipleChoice, BertPretrainer), or None with precomputed teacher outputs.
        student: a task model of the same class, the same vocabulary, no deeper or wider
            than the teacher (`student_from_teacher` makes one DistilBERT's way).
        temperature: softening temperature T (> 0).
        soft_weight, hard_weight, hidden_weight, cosine_weight, attention_weight: loss
            weights (>= 0). DistilBERT's triple loss on a pretrainer, as its authors trained
            it: soft_weight=5.0 (T = 2), hard_weight=2.0 (the masked LM), cosine_weight=1.0.
        layer_map: teacher layer (1-based) for each student layer, for the hidden-state loss;
            default uniform (TinyBERT): student layer i <- teacher layer i * L_t / L_s.
        attention_layers: (teacher layer, student layer), 1-based, for the relation loss;
            default the last layers (MiniLM).
        relations: pairs of "q", "k", "v" (e.g. ("qk", "vv"), MiniLMv2's ("qq", "kk", "vv")).
        num_relation_heads: relation heads (default: the teacher's attention heads).

    Example (a 2-layer student from a 4-layer teacher, both tiny and random here):
    >>> from keras_bert_suite import BertClassifier
    >>> from keras_bert_suite.distillation import student_from_teacher
    >>> teacher = BertClassifier.from_preset(
    ...     "bert_uncased_L-4_H-256_A-4", load_weights=False, num_classes=2, sequence_length=16)
    >>> student = student_from_teacher(teacher, num_layers=2)  # teacher layers 0 and 3
    >>> distiller = BertDistiller(teacher, student, temperature=2.0, hidden_weight=1.0,
    ...                           attention_weight=1.0)
    >>> history = distiller.fit(["a gripping drama", "a dull mess"], [1, 0], verbose=0)
    >>> sorted(history.history)
    ['accuracy', 'attention_loss', 'hard_loss', 'hidden_loss', 'loss', 'soft_loss']
    >>> student.predict(["what a film"], verbose=0).shape
    (1, 2)
    """

    def __init__(self, teacher, student, temperature=2.0, soft_weight=0.5, hard_weight=0.5,
                 hidden_weight=0.0, attention_weight=0.0, layer_map=None,
                 attention_layers=None, relations=DEFAULT_RELATIONS, num_relation_heads=None,
                 cosine_weight=0.0, **kwargs):
        super().__init__(**kwargs)
        checks.check_weights(temperature=temperature, soft_weight=soft_weight,
                             hard_weight=hard_weight, hidden_weight=hidden_weight,
                             attention_weight=attention_weight, cosine_weight=cosine_weight)
        checks.check_pair(teacher, student)
        uses_internals = hidden_weight > 0 or attention_weight > 0 or cosine_weight > 0
        if uses_internals and teacher is None:
            raise ValueError("hidden_weight, attention_weight and cosine_weight need the teacher "
                             "itself (its layers, not only its outputs): pass teacher=, or set "
                             "them to 0.")
        if cosine_weight > 0 and student.encoder.hidden_dim != teacher.encoder.hidden_dim:
            raise ValueError(
                f"cosine_weight compares hidden states of equal width; the student's is "
                f"{student.encoder.hidden_dim} and the teacher's {teacher.encoder.hidden_dim}. "
                f"Use a student of the teacher's width (student_from_teacher), or "
                f"hidden_weight, which learns a projection between widths.")
        if teacher is not None:
            teacher.trainable = False  # frozen: the student learns, the teacher teaches
        self.teacher = teacher
        self.student = student
        self.temperature = temperature
        self.soft_weight = soft_weight
        self.hard_weight = hard_weight
        self.hidden_weight = hidden_weight
        self.attention_weight = attention_weight
        self.cosine_weight = cosine_weight
        self.relations = tuple(relations)
        self.layer_map = self.attention_layers = self.num_relation_heads = None
        self.hidden_projection = None
        if hidden_weight > 0:
            self.layer_map = checks.layer_map(teacher, student, layer_map)
            if student.encoder.hidden_dim != teacher.encoder.hidden_dim:
                # TinyBERT's W_h: student width -> teacher width, trained with the student.
                self.hidden_projection = HiddenProjection(teacher.encoder.hidden_dim,
                                                          name="hidden_projection")
                self.hidden_projection.build((None, None, student.encoder.hidden_dim))
        if attention_weight > 0:
            self.attention_layers = checks.attention_layers(teacher, student, attention_layers)
            self.num_relation_heads = checks.relation_heads(
                teacher, student, num_relation_heads, self.relations, self.attention_layers)
        self.output_names = student.output_names  # compile()'s loss/metric dicts by name
        self.loss_trackers = {name: keras.metrics.Mean(name=f"{name}_loss") for name in
                              ("hard", "soft", "hidden", "attention", "cosine")
                              if getattr(self, f"{name}_weight") > 0}
        # Every variable exists now (teacher, student, projection): built, so `fit` creates
        # the optimizer's slots before TensorFlow traces the train step, which it would
        # otherwise trace twice (once creating variables, once guaranteed not to).
        self.built = True
        self.compile()

    # === Forward pass ===

    def call(self, inputs, training=None):
        """{"student": the student's outputs, "teacher": the teacher's (None without a
        teacher)} and, with intermediate losses, "hidden_loss" / "attention_loss" /
        "cosine_loss" [B]."""
        if self.hidden_weight == 0 and self.attention_weight == 0 and self.cosine_weight == 0:
            teacher = None if self.teacher is None else _no_gradient(
                self.teacher(inputs, training=False))
            return {"student": self.student(inputs, training=training), "teacher": teacher}
        student, student_hidden = internals.run_with_hidden_states(self.student, inputs,
                                                                   training=training)
        teacher, teacher_hidden = internals.run_with_hidden_states(self.teacher, inputs,
                                                                   training=False)
        teacher_hidden = [ops.stop_gradient(h) for h in teacher_hidden]
        outputs = {"student": student, "teacher": _no_gradient(teacher)}
        padding_mask = inputs["padding_mask"]
        if self.hidden_weight > 0:
            outputs["hidden_loss"] = self._hidden_loss(teacher_hidden, student_hidden,
                                                       padding_mask)
        if self.attention_weight > 0:
            outputs["attention_loss"] = self._attention_loss(teacher_hidden, student_hidden,
                                                             padding_mask)
        if self.cosine_weight > 0:
            outputs["cosine_loss"] = losses.cosine_loss(teacher_hidden[-1], student_hidden[-1],
                                                        padding_mask)
        return outputs

    def _hidden_loss(self, teacher_hidden, student_hidden, padding_mask):
        per_layer = []
        for student_layer, teacher_layer in enumerate((0,) + self.layer_map):
            hidden = student_hidden[student_layer]
            if self.hidden_projection is not None:
                hidden = self.hidden_projection(hidden)
            per_layer.append(losses.hidden_state_loss(teacher_hidden[teacher_layer], hidden,
                                                      padding_mask))
        return ops.mean(ops.stack(per_layer), axis=0)  # [B]

    def _attention_loss(self, teacher_hidden, student_hidden, padding_mask):
        teacher_layer, student_layer = self.attention_layers
        teacher_qkv = internals.queries_keys_values(self.teacher.encoder, teacher_layer,
                                                    teacher_hidden)
        student_qkv = internals.queries_keys_values(self.student.encoder, student_layer,
                                                    student_hidden)
        teacher_qkv = {name: ops.stop_gradient(value) for name, value in teacher_qkv.items()}
        per_relation = [
            losses.relation_loss((teacher_qkv[a], teacher_qkv[b]),
                                 (student_qkv[a], student_qkv[b]),
                                 self.num_relation_heads, padding_mask)
            for a, b in self.relations]
        return ops.mean(ops.stack(per_relation), axis=0)  # [B]

    # === Training set-up ===

    def compile(self, optimizer="auto", loss="auto", metrics="auto", weighted_metrics="auto",
                **kwargs):
        """Like the student's compile: every "auto" argument is the student's default (its
        task loss is the hard-label term; its metrics are logged on the labels; its optimizer,
        AdamW at 5e-5 for a fine-tuning task)."""
        super().compile(**compile_arguments(self.student, optimizer, loss, metrics,
                                            weighted_metrics, kwargs))

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        labels, teacher_outputs = split_targets(y)
        student_outputs = y_pred["student"]
        if teacher_outputs is None:
            teacher_outputs = y_pred["teacher"]
        if teacher_outputs is None:
            raise ValueError("BertDistiller without a teacher needs the teacher's outputs in "
                             "the targets: y = {'labels': ..., 'teacher_outputs': ...} (see "
                             "teacher_outputs.with_teacher_outputs).")
        if labels is not None:
            labels, sample_weight = self.student.labels_by_output(labels, sample_weight)
        terms = {}
        if self.hard_weight > 0 and labels is not None:
            terms["hard"] = super().compute_loss(x, labels, student_outputs, sample_weight,
                                                 training=training)
        terms["soft"] = self._soft_loss(teacher_outputs, student_outputs, x, sample_weight)
        for name in ("hidden", "attention", "cosine"):
            if f"{name}_loss" in y_pred:
                terms[name] = ops.mean(y_pred[f"{name}_loss"])
        total = 0.0
        for name, value in terms.items():
            if name in self.loss_trackers:
                self.loss_trackers[name].update_state(value)
            total = total + getattr(self, f"{name}_weight") * value
        return total

    def _soft_loss(self, teacher_outputs, student_outputs, x, sample_weight):
        if not isinstance(student_outputs, dict):
            teacher_outputs = _single(teacher_outputs)
            mask = x["padding_mask"] if len(student_outputs.shape) == 3 else None
            return ops.mean(losses.soft_target_loss(teacher_outputs, student_outputs,
                                                    self.temperature, mask))
        weights = self.student.default_loss_weights() or {}
        total = 0.0
        for name, student_logits in student_outputs.items():
            mask = None
            if len(student_logits.shape) == 3 and isinstance(sample_weight, dict):
                mask = sample_weight.get(name)  # the pretrainer's real predictions
            per_example = losses.soft_target_loss(teacher_outputs[name], student_logits,
                                                  self.temperature, mask)
            total = total + weights.get(name, 1.0) * ops.mean(per_example)
        return total

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        labels, _ = split_targets(y)
        if labels is None:
            return self.get_metrics_result()
        labels, sample_weight = self.student.labels_by_output(labels, sample_weight)
        return super().compute_metrics(x, labels, y_pred["student"], sample_weight)

    # === Raw text, as the student's own fit ===

    def text_task(self):
        """`fit` / `evaluate` (TrainsOnTaskText) preprocess and batch raw text as the
        student's own do."""
        return self.student

    def predict(self, x, **kwargs):
        """The student's predictions (the distiller itself is a training wrapper)."""
        return self.student.predict(x, **kwargs)

    # === Serialization ===

    def get_config(self):
        return {
            "name": self.name,
            "teacher": (keras.saving.serialize_keras_object(self.teacher)
                        if self.teacher is not None else None),
            "student": keras.saving.serialize_keras_object(self.student),
            "temperature": self.temperature,
            "soft_weight": self.soft_weight,
            "hard_weight": self.hard_weight,
            "hidden_weight": self.hidden_weight,
            "attention_weight": self.attention_weight,
            "cosine_weight": self.cosine_weight,
            "layer_map": list(self.layer_map) if self.layer_map else None,
            "attention_layers": (list(self.attention_layers) if self.attention_layers
                                 else None),
            "relations": list(self.relations),
            "num_relation_heads": self.num_relation_heads,
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        for key in ("teacher", "student"):
            if config.get(key) is not None:
                config[key] = keras.saving.deserialize_keras_object(config[key])
        return cls(**config)


class HiddenProjection(keras.layers.Dense):
    """The hidden-state loss's projection between widths (a Dense layer, built with the
    distiller). A `.keras` file of a distiller saved before it ever ran, by a version that
    built the projection at its first call, holds no weights for it: it keeps its initial
    ones, as that file's distiller had none yet."""

    def load_own_variables(self, store):
        if len(store.keys()) == 0:
            return
        super().load_own_variables(store)


def split_targets(y):
    """(labels or None, teacher outputs or None) from y: plain labels, or
    {"labels": ..., "teacher_outputs": ...}."""
    if isinstance(y, dict) and TEACHER_OUTPUTS in y:
        return y.get("labels"), y[TEACHER_OUTPUTS]
    return y, None


def _single(outputs):
    return outputs["logits"] if isinstance(outputs, dict) and "logits" in outputs else outputs


def _no_gradient(outputs):
    if isinstance(outputs, dict):
        return {name: ops.stop_gradient(value) for name, value in outputs.items()}
    return ops.stop_gradient(outputs)
