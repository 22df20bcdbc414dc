"""SavedModel export for TensorFlow Serving: raw-text signatures, op check, warmup requests."""

from keras_bert_suite.export.op_check import check_servable_ops, unservable_ops
from keras_bert_suite.export.saved_model import export_saved_model
from keras_bert_suite.export.tasks import register_task, task_names
