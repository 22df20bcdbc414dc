"""The only places this library reaches into Keras' private attributes, one function each.

Everything else uses public Keras API. Each hook below does something no public API does (as
of Keras 3.15.1); tests/test_keras_compat.py checks, on every backend, that Keras still
behaves the way each hook assumes, so a Keras upgrade that breaks one fails there, by name,
and not somewhere deep in a model test.

Checked with Keras 3.15.1 (the newest Keras 3 release published when this was written; see
setup.cfg for the tested range).
"""

import contextlib


def all_layers(model, include_self=True):
    """Every layer inside `model`, recursively (sublayers of sublayers too), in Keras' order.

    Keras has no public recursive layer list: `Model.layers` is one level deep and a plain
    Layer has no `layers` at all. `Model.quantize` walks this same private list
    (`Layer._flatten_layers`), so it is the set of layers quantization can reach; KerasHub
    walks it too. Checked with Keras 3.15.1."""
    return list(model._flatten_layers(include_self=include_self, recursive=True))


@contextlib.contextmanager
def state_tracking_unlocked(layer):
    """Lets `layer` create variables (or take sublayers) after it is built; on exit its
    tracking is locked or open as it was before.

    Keras locks a layer's attribute tracking when `build` returns, so `add_weight` afterwards
    raises. Keras' own `enable_lora` and `quantize` unlock it the same way (`Layer._tracker`):
    our fused query/key/value projection adds LoRA adapters of its own shape after build.
    And Keras' per-instance `quantize` wrapper locks the tracking when it returns even on a
    Model, whose tracking is otherwise never locked (a task's preprocessor is set after).
    Checked with Keras 3.15.1."""
    tracker = layer._tracker
    was_locked = tracker.locked
    tracker.unlock()
    try:
        yield
    finally:
        if was_locked:
            tracker.lock()
        else:
            tracker.unlock()


def quantize_subclass(quantize, mode, config):
    """Calls Keras' `Dense.quantize` / `EinsumDense.quantize` (the bound method `quantize`,
    e.g. `super().quantize`) on an instance of a subclass.

    Keras' layers refuse to quantize a subclass unless called with `type_check=False` (an
    argument of the method, undocumented), and `Model.quantize` then only warns, leaving
    the layer in float. Our projections subclass Dense / EinsumDense only to change how LoRA
    adapters are saved, which a quantized projection does not have. Checked with Keras 3.15.1.
    """
    return quantize(mode, type_check=False, config=config)


def gradients_already_summed(optimizer_mixin):
    """Class decorator for a mixin of a Keras optimizer that sums the replicas' gradients
    itself (in `apply`, before clipping): Keras' TensorFlow optimizer then must not sum them
    again.

    Keras' TensorFlow optimizer clips first and sums the replicas' gradients afterwards, in
    `_all_reduce_sum_gradients` (called by `_backend_update_step`); there is no public
    switch to leave that sum out. The hook only matters on the TensorFlow backend under a
    tf.distribute strategy; elsewhere Keras never calls it. Checked with Keras 3.15.1."""

    def _all_reduce_sum_gradients(self, grads_and_vars):
        return grads_and_vars  # summed already, in `apply`

    optimizer_mixin._all_reduce_sum_gradients = _all_reduce_sum_gradients
    return optimizer_mixin


def update_replaces_weight_decay(optimizer_class):
    """Class decorator for a Keras optimizer whose update step applies the decoupled weight
    decay itself: Keras' own decay pass is skipped while `decays_in_update()` is true, and
    `update_all(grads, variables, learning_rate)` may update every variable at once (it
    returns False to leave the step to Keras' per-variable `update_step` loop).

    Keras decays in `_apply_weight_decay` (one pass per op per variable) right before it
    calls `_backend_update_step` (on TensorFlow, the tf.distribute-aware loop over
    `update_step`); neither is public. Checked with Keras 3.15.1."""
    keras_update_step = optimizer_class._backend_update_step
    keras_weight_decay = optimizer_class._apply_weight_decay

    def _apply_weight_decay(self, variables):
        if not self.decays_in_update():
            keras_weight_decay(self, variables)

    def _backend_update_step(self, grads, trainable_variables, learning_rate):
        if not self.update_all(grads, trainable_variables, learning_rate):
            keras_update_step(self, grads, trainable_variables, learning_rate)

    optimizer_class._apply_weight_decay = _apply_weight_decay
    optimizer_class._backend_update_step = _backend_update_step
    return optimizer_class
