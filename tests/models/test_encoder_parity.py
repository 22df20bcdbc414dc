"""BertEncoder with the real MiniLM weights gives transformers.BertModel's numbers (rtol 1e-4),
on every backend (deliberately no needs_* marker)."""

import pytest

from keras_bert_suite import BertEncoder
from tests.minilm_reference import assert_matches_reference, reference

pytestmark = pytest.mark.real


@pytest.mark.parametrize("source", ["builtin preset", "directory"])
def test_minilm_matches_transformers(source, minilm_dir):
    expected = reference(minilm_dir)
    preset = "minilm_l6_h384_uncased" if source == "builtin preset" else minilm_dir
    encoder = BertEncoder.from_preset(preset)

    assert_matches_reference(encoder(expected["inputs"]), expected)
