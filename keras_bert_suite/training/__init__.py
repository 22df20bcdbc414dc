"""Training utilities: BERT's optimizers and schedules, losses, metrics, callbacks.

Where training runs (tf.distribute, keras.distribution) is `keras_bert_suite.distribution`.
"""

from keras_bert_suite.training.callbacks import (
    checkpointed_fit_arguments,
    restore_backup,
    training_callbacks,
)
from keras_bert_suite.training.losses import (
    IGNORE_LABEL,
    MaskedLMLoss,
    MaskedSparseCategoricalCrossentropy,
)
from keras_bert_suite.training.metrics import (
    MaskedLMAccuracy,
    MaskedLMPerplexity,
    MaskedSparseCategoricalAccuracy,
)
from keras_bert_suite.training.optimizers import create_optimizer
from keras_bert_suite.training.precision import loss_scaled, set_mixed_precision
from keras_bert_suite.training.schedules import PerUpdateSchedule, WarmupPolynomialDecay
