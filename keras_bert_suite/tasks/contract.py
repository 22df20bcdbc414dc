"""What a task model declares: the contract between a task (tasks/<task>/model.py) and the
code that trains, exports, distills and converts it without naming it.

A task registers once (keras_bert_suite/task_registry.py) and subclasses `BertTask`
(tasks/task.py), which brings the shared machinery (raw-text batching: tasks/text_batches.py; presets:
tasks/task_presets.py); what differs per task is below, each with the default a task gets
when it says nothing.
"""

from keras_bert_suite.text.preprocessor import BertPreprocessor
from keras_bert_suite.training.optimizers import create_optimizer

# The top of the BERT paper's fine-tuning grid (2e-5 .. 5e-5). The number of training steps
# is unknown at compile time, so the default rate is constant; for BERT's warm-up + linear
# decay pass `create_optimizer(learning_rate=..., num_train_steps=..., num_warmup_steps=...)`.
DEFAULT_LEARNING_RATE = 5e-5


class TaskContract:
    """The declarations of a task model; `BertTask` subclasses it, each task overrides what
    it needs. (Class attributes, read off the class: the recipe runner, export and the
    checkpoint writers ask before a model exists.)"""

    # The task's one name: its folder under keras_bert_suite/tasks/, its recipes' "task" and
    # the "task" of its SavedModel export.
    task_name = None

    # The rank of each encoder input: 2 for [B, T]; BertMultipleChoice takes [B, C, T] (3).
    # Checked on every call; export traces tokenized signatures of this rank.
    input_rank = 2
    input_legend = "[batch, sequence_length]"

    # Labels (and sample weights) with one entry per token, cut with a batch's length bucket.
    labels_per_token = False
    # Outputs with one entry per token: `predict` keeps sequence_length so batches line up.
    outputs_per_token = False

    # The attribute holding the head's Dense layer, the one other libraries' task
    # checkpoints hold too (transformers' BertFor*, KerasHub's TextClassifier); None: none.
    head_layer_name = None

    # What the model is in other libraries' checkpoint formats
    # (checkpoints/task_heads.CheckpointForm: transformers' class and where it keeps the head
    # per family, KerasHub's task, Google's format); None: the writers refuse it. Declared
    # beside `serving_signatures`: both say what the task is outside this library.
    checkpoint_form = None

    # The preprocessor `from_preset` builds, and its default sequence length.
    preprocessor_class = BertPreprocessor
    default_sequence_length = 128

    # Encoder config values the task needs (BertFeatureExtractor wants hidden states).
    preset_encoder_overrides = {}

    def serving_signatures(self, **options):
        """{signature name: export.signature.ServingSignature} with "serving_default" (raw
        text in) first; `options` are the task's answer options. What export traces."""
        raise NotImplementedError(
            f"{type(self).__name__} declares no serving signatures; export its encoder "
            "(export_saved_model(model.encoder, preprocessor=...)) or a task model instead.")

    def head_outputs(self, encoder_outputs, inputs):
        """The task's outputs from the encoder's ({"sequence_output", "pooled_output"}) and
        the task's `inputs`: the head alone, through the same layers as the model's graph
        (a task builds both from one function). Lets a caller that runs the encoder itself
        (distillation reads its hidden states, export runs the serving encoder) finish the
        forward pass without running the encoder twice."""
        raise NotImplementedError(
            f"{type(self).__name__} has no head_outputs; distill it on its logits only "
            "(hidden_weight=0, attention_weight=0).")

    # compile()'s defaults ("auto" arguments); None: Keras' own.

    def default_optimizer(self):
        """BERT's fine-tuning optimizer (training.create_optimizer: AdamW, weight decay 0.01
        except LayerNorm/bias, global clipnorm 1.0) at a constant DEFAULT_LEARNING_RATE."""
        return create_optimizer("adamw", learning_rate=DEFAULT_LEARNING_RATE)

    def default_loss(self):
        return None

    def default_metrics(self):
        return None

    def default_weighted_metrics(self):
        return None

    def default_loss_weights(self):
        return None

    def labels_by_output(self, y, sample_weight):
        """(y, sample_weight) re-keyed to the model's output names before Keras' loss and
        metrics see them, for a task whose labels are keyed otherwise (identity here)."""
        return y, sample_weight
