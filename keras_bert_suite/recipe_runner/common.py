"""The recipe keys every task shares, spelled once, and the optimizer they describe.

A task's schema (`finetuning.DEFAULTS`, `pretraining.DEFAULTS`) is
`common_defaults(...)` merged with the keys only that task has, so `training.batch_size`,
`training.optimizer.learning_rate` or `distribution.strategy` mean the same in every recipe.
"""

import copy

from keras_bert_suite.distribution import DISTRIBUTION_DEFAULTS
from keras_bert_suite.training import create_optimizer


def common_defaults(learning_rate, warmup_fraction, num_train_steps, sequence_length=128,
                    batch_size=32, preset="minilm_l6_h384_uncased", load_weights=True,
                    data_seed=0):
    """The shared sections with a task's own defaults for the values that differ."""
    return {
        "description": "",
        "model": {
            "preset": preset,
            "load_weights": load_weights,
            "encoder_overrides": {},  # BertEncoder arguments, e.g. {"dropout": 0.0}
        },
        "data": {
            # What the task's preprocessor emits; the encoder's position table
            # (max_sequence_length) must be at least this long.
            "sequence_length": sequence_length,
            "seed": data_seed,
        },
        "training": {
            "batch_size": batch_size,  # the global batch, split over the replicas
            "per_replica_batch_size": None,  # set instead: global = this x replicas
            "num_train_steps": num_train_steps,  # optimizer updates
            # "auto" (mixed_bfloat16 on TPU, float32 elsewhere), "float32", "mixed_bfloat16"
            # (TPU, recent GPUs) or "mixed_float16" (older GPUs; loss-scaled)
            "precision": "auto",
            "run_eagerly": False,
            "jit_compile": "auto",  # or true / false, as for model.compile
            "seed": 1234,  # Keras' global seed: weight initialisation and dropout
            "optimizer": {
                "name": "adamw",  # or "lamb" for large batches
                "learning_rate": learning_rate,
                # BERT's linear warm-up: num_warmup_steps, or this fraction of the updates
                "num_warmup_steps": None,
                "warmup_fraction": warmup_fraction,
                "weight_decay": 0.01,
                "global_clipnorm": 1.0,
                "gradient_accumulation_steps": None,
                "beta_1": 0.9,
                "beta_2": 0.999,
                "epsilon": 1e-6,
            },
        },
        # Where it trains (keras_bert_suite/distribution/): none, one_device, mirrored,
        # multi_worker, tpu (TensorFlow); data_parallel, model_parallel (JAX).
        "distribution": copy.deepcopy(DISTRIBUTION_DEFAULTS),
    }


def merged(base, extra):
    """`base` with `extra`'s keys added (nested sections merged)."""
    result = copy.deepcopy(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = merged(result[key], value)
        else:
            result[key] = copy.deepcopy(value)
    return result


def recipe_optimizer(optimizer_config, num_train_steps, **options):
    """`training.optimizer` -> BERT's optimizer with warm-up and linear decay to 0 over
    `num_train_steps` updates (`training.create_optimizer`, given `options` too)."""
    config = dict(optimizer_config)
    name = config.pop("name")
    fraction = config.pop("warmup_fraction")
    if config["num_warmup_steps"] is None:
        config["num_warmup_steps"] = int(fraction * num_train_steps)
    return create_optimizer(name, num_train_steps=num_train_steps, **config, **options)
