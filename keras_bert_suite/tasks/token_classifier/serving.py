"""The token classifier's whole text path: words or raw text -> a tag per word.

`tag_words` is what evaluation (seqeval on the gold words), `BertTokenClassifier.predict`
on raw input and the exported signatures all run; only the way the model is called differs.

Signatures: `serving_default(text [B])` -> words [B, W] (the tokenizer's words), tags [B, W],
tag_scores [B, W], num_words [B]; `tag_words(words [B, W], "" = padding)` -> tags, tag_scores,
num_words for pre-split words (the CoNLL convention). Rows are padded with "" / 0 after
num_words.
"""

import tensorflow as tf

from keras_bert_suite.export.signature import STRINGS, ServingSignature, graph_model_call
from keras_bert_suite.tasks.classifier.serving import label_table
from keras_bert_suite.tasks.token_classifier.postprocessor import per_sentence, word_tags

WARMUP_TEXT = {"text": ["Barack Obama visited Paris on Monday .", "i love new york city !!"]}
WARMUP_WORDS = {"words": [["Barack", "Obama", "visited", "Paris"], ["i", "love", "NYC", ""]]}


def tag_words(preprocessor, run_model, x, label_names):
    """x: words [B, W] or text [B] -> {tags, tag_scores, num_words (, words from text)}."""
    chunks = preprocessor.chunks(x)
    tag_ids, scores = word_tags(chunks, run_model(chunks.inputs)["logits"])
    tags = tf.gather(label_names, tag_ids)
    result = {"tags": per_sentence(tags, chunks, ""),
              "tag_scores": per_sentence(scores, chunks, 0.0),
              "num_words": chunks.num_words}
    if chunks.words is not None:
        result["words"] = per_sentence(chunks.words, chunks, "")
    return result


def serving_signatures(model):
    call = graph_model_call(model)
    labels = label_table(model.label_names, model.num_classes)

    def serve(text):
        return tag_words(model.preprocessor, call, text, labels)

    def serve_words(words):
        return tag_words(model.preprocessor, call, words, labels)

    words_spec = tf.TensorSpec([None, None], tf.string)
    return {"serving_default": ServingSignature(serve, [STRINGS], WARMUP_TEXT),
            "tag_words": ServingSignature(serve_words, [words_spec], WARMUP_WORDS)}
