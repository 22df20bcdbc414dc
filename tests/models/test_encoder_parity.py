"""BertEncoder with the real MiniLM weights gives transformers.BertModel's numbers (<= 1e-4),
on every backend (deliberately no needs_* marker)."""

import pytest

from keras_bert_suite import BertEncoder
from tests.minilm_reference import PARITY_TOLERANCE, max_differences, reference

pytestmark = pytest.mark.real


@pytest.mark.parametrize("source", ["builtin preset", "directory"])
def test_minilm_matches_transformers(source, minilm_dir):
    expected = reference(minilm_dir)
    preset = "minilm_l6_h384_uncased" if source == "builtin preset" else minilm_dir
    encoder = BertEncoder.from_preset(preset)

    sequence_diff, pooled_diff = max_differences(encoder(expected["inputs"]), expected)

    assert sequence_diff <= PARITY_TOLERANCE, f"sequence_output differs by {sequence_diff:.2e}"
    assert pooled_diff <= PARITY_TOLERANCE, f"pooled_output differs by {pooled_diff:.2e}"
