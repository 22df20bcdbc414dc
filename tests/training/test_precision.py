"""The mixed-precision helpers."""

import keras
import pytest

from keras_bert_suite.training import create_optimizer, loss_scaled, set_mixed_precision


def test_mixed_precision_helpers():
    try:
        policy = set_mixed_precision("mixed_float16")
        assert keras.config.dtype_policy().name == "mixed_float16"
        assert policy.variable_dtype == "float32"
        optimizer = create_optimizer()
        assert isinstance(loss_scaled(optimizer), keras.optimizers.LossScaleOptimizer)
    finally:
        set_mixed_precision("float32")
    assert loss_scaled(optimizer) is optimizer
    assert loss_scaled(optimizer, "mixed_bfloat16") is optimizer
    with pytest.raises(ValueError, match="mixed_bfloat16"):
        set_mixed_precision("float8")
