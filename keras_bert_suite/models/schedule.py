"""The encoder's forward pass, once: embeddings, the blocks in the order the encoder schedules
them, what runs after the last block, the pooler. The Keras encoder (`encoder._encode`: the
functional graph, `encode_at`, distillation) and the serving graph
(`export/serving_encoder.py`) run this same function over their own stages:

    stages.embed(inputs)                    -> x: the embeddings (after any projection)
    stages.context(inputs)                  -> what every block takes besides x, computed once
                                               (BERT: the attention mask; the block kind's
                                               `EncoderPieces.context`)
    stages.block(index, x, context, rows)   -> block `index`'s output (at `rows` when given)
    stages.finish(x)                        -> x after the last block (ModernBERT's final
                                               norm; BERT's: x)
    stages.pool(x, inputs)                  -> the pooled output
    stages.gather(x, rows)                  -> x at `rows` (an encoder without blocks)
"""


def encode(stages, inputs, rows=None, before_block=None):
    """(output, pooled, hidden states): the embedding output and every block's output in the
    order they run (one per layer, but `layers_per_group` per layer for ALBERT's groups, as
    transformers returns them; the last one after `finish`, as transformers' ModernBERT
    returns it).

    rows: None, or [B, R] positions with [CLS] (0) first: the last block then computes only
    those rows, and the output is [B, R, H].
    before_block: None, or f(block index, its input, context) called before every block runs
    (pruning's activation statistics).
    """
    x = stages.embed(inputs)
    context = stages.context(inputs)
    hidden_states = [x]
    schedule = stages.layer_blocks
    last = (len(schedule) - 1, len(schedule[-1]) - 1) if schedule else None
    for layer, block_indices in enumerate(schedule):
        for step, index in enumerate(block_indices):
            if before_block is not None:
                before_block(index, x, context)
            at = rows if (layer, step) == last else None
            x = stages.block(index, x, context, at)
            hidden_states.append(x)
    if rows is not None and last is None:  # nothing to skip: the rows are the embeddings'
        x = stages.finish(stages.gather(x, rows))
    else:
        # The last hidden state is the output, after `finish` (as transformers returns it).
        x = hidden_states[-1] = stages.finish(x)
    return x, stages.pool(x, inputs), hidden_states
