"""The feature extractor's served text path: text -> sentence_embedding [B, D],
token_embeddings [B, T, D], padding_mask [B, T], truncated [B]."""

from keras_bert_suite.export.signature import text_outputs_signature


def serving_signatures(model):
    return {"serving_default": text_outputs_signature(
        model, model.preprocessor, ["sentence_embedding", "token_embeddings"])}
