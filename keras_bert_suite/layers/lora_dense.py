"""LoRA (Hu et al. 2021) on the encoder's projections: `W x` becomes `(W + alpha / r * A B) x`
with W frozen and only A [in, r] and B [r, out] trained; B starts at 0, so training starts from
the pretrained function.

Keras' Dense and EinsumDense carry LoRA already (`enable_lora`, a `kernel` property that adds
A B). The projections here change two things:

* saving and loading keep W, A and B as they are. Keras saves W + A B and zeroes A and B when
  it loads; with both at zero neither gets a gradient, so a reloaded model could not go on
  training its adapters.
* the fused query/key/value projection (kernel [H, 3, N, Dh]) gets A [H, r] and B [r, 3 N Dh]:
  LoRA of the [H, 3H] matrix it is. EinsumDense would make A [H, 3, N, r], nine times the
  adapter parameters of LoRA on query, key and value.
"""

import keras
import numpy as np
from keras import ops

from keras_bert_suite import keras_compat


def stored_kernel(layer):
    """The kernel variable of a Dense / EinsumDense as it is stored: W alone while LoRA is
    on (the `kernel` property adds alpha / r A B), the int8 values once quantized. Found by
    the name Keras gives it, the `.../kernel` of every weights file."""
    kernels = [variable for variable in layer.weights if variable.name == "kernel"]
    if len(kernels) != 1:
        raise ValueError(f"'{layer.path}' has {len(kernels)} variables named 'kernel' "
                         f"({[variable.path for variable in layer.weights]}); expected one.")
    return kernels[0]


class KeepsLoraAdapters:
    """Mixin for a Dense / EinsumDense: while LoRA is on, files hold W, bias, A and B."""

    def _lora_variables(self):
        return [stored_kernel(self), self.bias, self.lora_kernel_a, self.lora_kernel_b]

    def save_own_variables(self, store):
        if not self.lora_enabled:
            return super().save_own_variables(store)
        for index, variable in enumerate(self._lora_variables()):
            store[str(index)] = variable

    def load_own_variables(self, store):
        if not self.lora_enabled:
            return super().load_own_variables(store)
        variables = self._lora_variables()
        if len(store) != len(variables):
            raise ValueError(
                f"Layer '{self.path}' has LoRA enabled (kernel, bias and the two adapters) but "
                f"the file holds {len(store)} of its weights: it was saved without LoRA. Load "
                f"it into a model without LoRA, then call enable_lora(rank).")
        for index, variable in enumerate(variables):
            variable.assign(store[str(index)])

    def quantize(self, mode=None, type_check=True, config=None):
        # Keras' Dense / EinsumDense.quantize refuse subclasses, and Model.quantize only warns,
        # leaving every transformer matmul in float. These subclasses change how LoRA
        # adapters are saved, and a quantized projection has none.
        if self.lora_enabled:
            raise ValueError(
                f"'{self.path}' has LoRA adapters: quantize the merged model instead "
                "(keras_bert_suite.transforms.without_lora(model).quantize('int8')).")
        keras_compat.quantize_subclass(super().quantize, mode, config)


class LoraDense(KeepsLoraAdapters, keras.layers.Dense):
    """keras.layers.Dense whose LoRA adapters survive saving and loading."""


class FusedQKV(KeepsLoraAdapters, keras.layers.EinsumDense):
    """The [H, 3, N, Dh] query/key/value projection (an EinsumDense), with LoRA of the
    [H, 3H] matrix. `.keras` and `.weights.h5` files written while it was a [H, 3H] Dense
    (bias [3H]) hold the same numbers in the same order: they load reshaped."""

    def load_own_variables(self, store):
        if (self.built and not self.lora_enabled and self.quantization_mode is None
                and len(store["0"].shape) == 2):
            shapes = {"0": stored_kernel(self).shape, "1": self.bias.shape}
            store = {key: np.reshape(store[key], shape) for key, shape in shapes.items()}
        super().load_own_variables(store)

    def enable_lora(self, rank, lora_alpha=None, a_initializer="he_uniform",
                    b_initializer="zeros"):
        if not self.built:
            raise ValueError("Cannot enable LoRA on a layer that is not built yet.")
        if self.lora_enabled:
            raise ValueError(f"LoRA is already enabled on '{self.path}'.")
        if self.quantization_mode is not None:
            raise ValueError(f"LoRA on a quantized ({self.quantization_mode}) projection is "
                             "not supported: enable LoRA on the float model, merge it, then "
                             "quantize.")
        kernel = stored_kernel(self)
        hidden, *outputs = kernel.shape
        with keras_compat.state_tracking_unlocked(self):  # new variables after build
            # float32 adapters, as Keras makes them: small updates would vanish in bf16/fp16.
            self.lora_kernel_a = self.add_weight(
                name="lora_kernel_a", shape=(hidden, rank), dtype="float32",
                initializer=keras.initializers.get(a_initializer))
            self.lora_kernel_b = self.add_weight(
                name="lora_kernel_b", shape=(rank, int(np.prod(outputs))), dtype="float32",
                initializer=keras.initializers.get(b_initializer))
        kernel.trainable = False
        self.lora_enabled = True
        self.lora_rank = rank
        self.lora_alpha = lora_alpha if lora_alpha is not None else rank

    @property
    def kernel(self):
        if not self.lora_enabled:
            return super().kernel
        update = ops.matmul(self.lora_kernel_a, self.lora_kernel_b)  # [H, 3 N Dh]
        kernel = stored_kernel(self)
        update = ops.reshape(update, kernel.shape) * (self.lora_alpha / self.lora_rank)
        return ops.cast(ops.add(kernel, update), self.compute_dtype)
