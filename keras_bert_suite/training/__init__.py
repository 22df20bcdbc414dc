"""Training utilities: BERT's optimizers and schedules, pretraining metrics, callbacks."""

from keras_bert_suite.training.callbacks import (
    checkpointed_fit_arguments,
    restore_backup,
    training_callbacks,
)
from keras_bert_suite.training.distribution import Distribution, create_distribution
from keras_bert_suite.training.metrics import MaskedLMAccuracy, MaskedLMPerplexity
from keras_bert_suite.training.optimizers import create_optimizer
from keras_bert_suite.training.precision import loss_scaled, set_mixed_precision
from keras_bert_suite.training.schedules import PerUpdateSchedule, WarmupPolynomialDecay
