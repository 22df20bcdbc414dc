"""BertTask's Keras plumbing (tasks/task.py): an encoder and an optional preprocessor in the
config, and labels keyed by output name."""

import keras

from keras_bert_suite.models import quantization


def compile_arguments(defaults, optimizer, loss, metrics, weighted_metrics, kwargs):
    """compile()'s arguments with every "auto" one taken from `defaults` (a task: its
    default_optimizer, default_loss, default_loss_weights, default_metrics,
    default_weighted_metrics); `kwargs` gets the default loss weights."""
    if is_auto(optimizer):
        optimizer = defaults.default_optimizer()
    if is_auto(loss):
        loss = defaults.default_loss()
        if defaults.default_loss_weights() is not None:
            kwargs.setdefault("loss_weights", defaults.default_loss_weights())
    if is_auto(metrics):
        metrics = defaults.default_metrics()
    if is_auto(weighted_metrics):
        weighted_metrics = defaults.default_weighted_metrics()
    return dict(optimizer=optimizer, loss=loss, metrics=metrics,
                weighted_metrics=weighted_metrics, **kwargs)


def is_auto(value):
    return isinstance(value, str) and value == "auto"


class CompilesFromOwnDefaults:
    """Mixin for a keras.Model whose compile() fills in its own defaults: a `.keras` file's
    compile config goes back through that compile()."""

    def compile_from_config(self, config):
        # Keras skips this for models that override compile(); ours takes its arguments.
        self.compile(**keras.saving.deserialize_keras_object(config))
        if self.built:
            self.optimizer.build(self.trainable_variables)  # so saved optimizer state loads


class BertModelBase(CompilesFromOwnDefaults, quantization.QuantizableModel):
    """Mixin for a keras.Model with `self.encoder` and `self.preprocessor`.

    * `get_config` / `from_config` serialize both (subclasses add their own arguments) and
      the head's quantized layers (the encoder records its own);
    * `compute_loss` / `compute_metrics` re-key (y, sample_weight) with the task's
      `labels_by_output` (tasks/contract.py) before Keras' loss and metrics see them;
    * `compile_from_config` re-runs the model's own compile() (with its defaults) when a
      `.keras` file is loaded (`CompilesFromOwnDefaults`);
    * `has_lora_adapters`, the hook `quantize` asks, is the encoder's answer.
    """

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "encoder": keras.layers.serialize(self.encoder),
            "preprocessor": (keras.layers.serialize(self.preprocessor)
                             if self.preprocessor is not None else None),
            **quantization.record(self, skip=self.encoder),
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        quantized = config.pop(quantization.CONFIG_KEY, None)
        config["encoder"] = keras.layers.deserialize(config["encoder"])
        if config.get("preprocessor") is not None:
            config["preprocessor"] = keras.layers.deserialize(config["preprocessor"])
        model = cls(**config)
        quantization.restore(model, quantized, skip=model.encoder)
        return model

    def has_lora_adapters(self):
        return self.encoder.has_lora_adapters()

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        y, sample_weight = self.labels_by_output(y, sample_weight)
        return super().compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sample_weight,
                                    training=training)

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        y, sample_weight = self.labels_by_output(y, sample_weight)
        return super().compute_metrics(x, y, y_pred, sample_weight=sample_weight)
