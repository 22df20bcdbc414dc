"""What distillation reads inside a task model: every layer's hidden state, and one layer's
queries, keys and values, from one forward pass (keras.ops only)."""

from keras_bert_suite.names import ENCODER_INPUTS


def run_with_hidden_states(task, inputs, training=None):
    """(the task's outputs, [embedding output, layer 1 output, ...]) in one pass: the
    encoder's own forward pass (`encode`, which its graph is made of) so that its hidden
    states are at hand, then the task's head (`head_outputs`, the same layers as the task's
    graph). `training` reaches every layer, the head's dropout included."""
    encoder = task.encoder
    encoder_inputs = {name: inputs[name] for name in ENCODER_INPUTS}
    sequence, pooled, hidden_states = encoder.encode(encoder_inputs, training=training)
    outputs = task.head_outputs({"sequence_output": sequence, "pooled_output": pooled}, inputs)
    return outputs, hidden_states


def queries_keys_values(encoder, layer, hidden_states):
    """{"q", "k", "v"}: transformer layer `layer`'s (1-based) projections of its input,
    heads concatenated -> [B, T, N * Dh] each (the block computes them: its kind's
    `queries_keys_values`)."""
    return encoder.block_at(layer - 1).queries_keys_values(hidden_states[layer - 1])
