"""BERT's block as the paper writes it, once for training and serving.

Post-LayerNorm ("Attention is all you need", section 3.1, the order BERT kept):

    x = LN(x + Dropout(Attention(x)))
    x = LN(x + Dropout(W_out act(W_in x + b_in) + b_out))

`parts` gives the sublayers by their weight-table module names: the Keras layers in training
(`layer.py`), TensorFlow forms on 2-D activations in the export's precision in the serving
graph (`serving.py`):

    parts.attention(x, queries)   self-attention; `queries`: None, or the rows to compute
    parts.dense(module, x)        "intermediate", "output"
    parts.norm(module, x)         "attention_layer_norm", "output_layer_norm"
    parts.activation(x)           the feed-forward GELU
    parts.dropout(name, x)        "attention_dropout", "output_dropout" (identity in serving)
"""


def block(x, parts, queries=None):
    """The block's output at every row of `x`, or at the rows `queries` holds ([B, Q, H])."""
    x = attention_sublayer(x, parts, queries)
    return output_sublayer(x, feed_forward_hidden(x, parts), parts)


def attention_sublayer(x, parts, queries=None):
    """LN(x + Attention(x)), at the rows of `queries` when given."""
    attended = parts.attention(x, queries)
    x = x if queries is None else queries
    return parts.norm("attention_layer_norm", x + parts.dropout("attention_dropout", attended))


def feed_forward_hidden(x, parts):
    """act(x W_in + b_in) [.., I]: the feed-forward neurons' activations (what neuron pruning
    scores by)."""
    return parts.activation(parts.dense("intermediate", x))


def output_sublayer(x, hidden, parts):
    """LN(x + hidden W_out + b_out)."""
    output = parts.dense("output", hidden)
    return parts.norm("output_layer_norm", x + parts.dropout("output_dropout", output))
