"""Knowledge distillation: a teacher task model's outputs (and hidden states, attention
relations) train a smaller student of the same task (`BertDistiller`, with `fit`); a student
made from its teacher's layers (`student_from_teacher`); teacher outputs computed once and
streamed from disk (`write_teacher_outputs`, `with_teacher_outputs`)."""

from keras_bert_suite.distillation.distiller import BertDistiller
from keras_bert_suite.distillation.student_init import (
    every_other_layer, evenly_spaced_layers, student_from_teacher)
from keras_bert_suite.distillation.teacher_outputs import (
    with_teacher_outputs, write_teacher_outputs)

__all__ = ["BertDistiller", "every_other_layer", "evenly_spaced_layers", "student_from_teacher",
           "with_teacher_outputs", "write_teacher_outputs"]
