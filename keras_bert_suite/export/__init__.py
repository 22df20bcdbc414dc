"""SavedModel export for TensorFlow Serving: raw-text signatures, op check, warmup requests.

Generic: each task declares its signatures (`serving_signatures`, built in its own
`tasks/<name>/serving.py`); export traces them and adds `encoder_inputs`.
"""

from keras_bert_suite.export.op_check import check_servable_ops, unservable_ops
from keras_bert_suite.export.saved_model import export_saved_model
from keras_bert_suite.export.signature import ServingSignature
