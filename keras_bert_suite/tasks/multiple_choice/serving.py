"""Multiple choice served: question [B], choices [B, C] -> scores [B, C] (logits),
probabilities [B, C], predicted_choice [B] (index), truncated [B, C]."""

import tensorflow as tf

from keras_bert_suite.export.signature import STRINGS, ServingSignature, graph_model_call

WARMUP_INPUTS = {"question": ["Where do you keep milk cold?"],
                 "choices": [["in the fridge", "in the oven", "on the roof", "in a book"]]}


def choose(model, call, question, choices):
    packed, truncated = model.preprocessor.pack_with_truncation(question, choices)
    logits = call(packed)["logits"]  # [B, C]
    return {"scores": logits, "probabilities": tf.nn.softmax(logits, axis=-1),
            "predicted_choice": tf.argmax(logits, axis=-1), "truncated": truncated}


def serving_signatures(model):
    call = graph_model_call(model)

    def serve(question, choices):
        return choose(model, call, question, choices)

    choices_spec = tf.TensorSpec([None, None], tf.string)
    return {"serving_default": ServingSignature(serve, [STRINGS, choices_spec], WARMUP_INPUTS)}
