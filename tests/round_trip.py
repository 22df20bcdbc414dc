"""The config round trip every registered layer, loss and metric of ours must pass."""

import json

import keras


def check_config_round_trip(obj):
    """`from_config(get_config())` and Keras' serialize -> JSON -> deserialize (what a `.keras`
    file stores, looked up by the registered name) both rebuild an object with the same
    config. Returns the deserialized object, for checks on its behaviour."""
    config = obj.get_config()
    assert type(obj).from_config(config).get_config() == config

    serialized = keras.saving.serialize_keras_object(obj)
    assert serialized["registered_name"] == f"keras_bert_suite>{type(obj).__name__}"
    restored = keras.saving.deserialize_keras_object(json.loads(json.dumps(serialized)))
    assert type(restored) is type(obj)
    assert restored.get_config() == config
    return restored
