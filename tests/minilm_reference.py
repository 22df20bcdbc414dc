"""The reference that parity tests compare against: transformers.BertModel (torch, eval mode)
on the real all-MiniLM-L6-v2 weights, fed real sentence pairs padded to one length.

Computed once per pytest process (lru_cache) and shared by tests/models, tests/tasks and tests/checkpoints.
"""

import functools

import keras
import numpy as np

from tests.numerics import assert_close

# Sentence pairs of very different lengths, so the batch has real padding and both segments.
SENTENCE_PAIRS = [
    ("The quick brown fox jumps over the lazy dog.", "It was not amused."),
    ("Hello world", "Hi"),
    ("A gripping, beautifully acted drama that never quite finds its footing in the third act, "
     "but remains worth watching for the performances alone.",
     "Critics were divided; audiences, however, loved it."),
    ("Where is the nearest train station?", "Turn left after the bank and walk 200 meters."),
]

# Ours vs transformers on real weights: other kernels, other summation order. Measured on the
# three backends: at most 3.5e-6 apart on MiniLM outputs that reach |5.6|. rtol 1e-4 leaves
# ~30x room on another CPU; atol only bounds values near 0 (their error is set by the
# accumulated terms' scale, ~1, not by the value). A real bug moves outputs by >= 1e-3.
PARITY_RTOL, PARITY_ATOL = 1e-4, 2e-5


@functools.lru_cache(maxsize=None)
def reference(minilm_dir):
    """{"inputs": encoder inputs (int32 numpy), "sequence_output", "pooled_output"}."""
    import torch
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(minilm_dir)
    first, second = zip(*SENTENCE_PAIRS)
    batch = tokenizer(list(first), list(second), padding=True, return_tensors="np")
    model = transformers.BertModel.from_pretrained(minilm_dir).eval()
    with torch.no_grad():
        outputs = model(**{name: torch.from_numpy(value) for name, value in batch.items()})
    assert batch["attention_mask"].min() == 0, "the batch should contain padding"
    return {
        "inputs": {
            "token_ids": batch["input_ids"].astype("int32"),
            "segment_ids": batch["token_type_ids"].astype("int32"),
            "padding_mask": batch["attention_mask"].astype("int32"),
        },
        "sequence_output": outputs.last_hidden_state.numpy(),
        "pooled_output": outputs.pooler_output.numpy(),
    }


def assert_matches_reference(outputs, expected):
    """sequence_output over real tokens and pooled_output within the parity tolerance.

    Padded positions are left out: their values are not defined by BERT (each implementation
    masks keys its own way) and nothing downstream reads them.
    """
    real = expected["inputs"]["padding_mask"].astype(bool)  # [B, T]
    sequence = np.asarray(keras.ops.convert_to_numpy(outputs["sequence_output"]))
    pooled = np.asarray(keras.ops.convert_to_numpy(outputs["pooled_output"]))
    assert_close(sequence[real], expected["sequence_output"][real], rtol=PARITY_RTOL,
                 atol=PARITY_ATOL, err_msg="sequence_output")
    assert_close(pooled, expected["pooled_output"], rtol=PARITY_RTOL, atol=PARITY_ATOL,
                 err_msg="pooled_output")
