"""The encoder's forward pass, once: embeddings, the blocks in the order the encoder schedules
them, the pooler. The Keras encoder (`encoder._encode`: the functional graph, `encode_at`,
distillation) and the serving graph (`export/serving_encoder.py`) run this same function over
their own stages:

    stages.embed(inputs)                    -> x: the embeddings (after any projection)
    stages.attention_mask(inputs)           -> what every block takes to mask attention
    stages.block(index, x, mask, rows)      -> block `index`'s output (at `rows` when given)
    stages.pool(x)                          -> the pooled output from [CLS]'s row
    stages.gather(x, rows)                  -> x at `rows` (an encoder without blocks)
"""


def encode(stages, inputs, rows=None, before_block=None):
    """(output, pooled, hidden states): the embedding output and every block's output in the
    order they run (one per layer, but `layers_per_group` per layer for ALBERT's groups, as
    transformers returns them).

    rows: None, or [B, R] positions with [CLS] (0) first: the last block then computes only
    those rows, and the output is [B, R, H].
    before_block: None, or f(block index, its input, attention mask) called before every
    block runs (pruning's activation statistics).
    """
    x = stages.embed(inputs)
    attention_mask = stages.attention_mask(inputs)
    hidden_states = [x]
    schedule = stages.layer_blocks
    last = (len(schedule) - 1, len(schedule[-1]) - 1) if schedule else None
    for layer, block_indices in enumerate(schedule):
        for step, index in enumerate(block_indices):
            if before_block is not None:
                before_block(index, x, attention_mask)
            at = rows if (layer, step) == last else None
            x = stages.block(index, x, attention_mask, at)
            hidden_states.append(x)
    if rows is not None and last is None:  # nothing to skip: the rows are the embeddings'
        x = stages.gather(x, rows)
    return x, stages.pool(x), hidden_states
