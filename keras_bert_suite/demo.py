"""`kbs demo`: semantic search over real State of the Union sentences with real MiniLM weights.

Loads the all-MiniLM-L6-v2 checkpoint through our own converter, embeds a few thousand
sentences from the addresses since 1990 (mean pooling over real tokens, L2-normalised, as
sentence-transformers does for this model), and prints each query's nearest neighbours.
When `transformers` is installed it also prints how far our encoder is from
`transformers.BertModel` on the queries.
"""

import os
import random
import re

import keras
import numpy as np
from keras import ops

PRESET = "minilm_l6_h384_uncased"
QUERIES = (
    "We must lower the cost of health care for working families.",
    "Our soldiers are fighting terrorists overseas.",
    "Clean energy will create new jobs and protect the planet.",
    "Every child deserves a good teacher and a good school.",
)


def mean_pooled_embeddings(encoder, preprocessor, texts, batch_size=64, progress=True):
    """[len(texts), H] unit vectors: the mean of `sequence_output` over real tokens."""
    batches = []
    bar = keras.utils.Progbar(len(texts), unit_name="sentence") if progress else None
    for start in range(0, len(texts), batch_size):
        inputs = preprocessor(texts[start:start + batch_size])
        # predict_on_batch returns numpy on some backends; compute in backend tensors.
        sequence = ops.convert_to_tensor(encoder.predict_on_batch(inputs)["sequence_output"])
        mask = ops.cast(ops.convert_to_tensor(inputs["padding_mask"]), sequence.dtype)[..., None]
        pooled = ops.sum(sequence * mask, axis=1) / ops.maximum(ops.sum(mask, axis=1), 1.0)
        batches.append(ops.convert_to_numpy(ops.normalize(pooled, axis=-1)))
        if bar:
            bar.add(len(texts[start:start + batch_size]))
    return np.concatenate(batches)


def sotu_sentences(limit, since=1990, seed=0):
    """Up to `limit` sentences of 8-40 words from the addresses since `since`, with a source."""
    from keras_bert_suite.data.corpora import sotu_files

    sentences = []
    for path in sotu_files():
        name = os.path.basename(path)[:-len(".txt")]
        if int(name[:4]) < since:
            continue
        with open(path, encoding="utf-8") as handle:
            text = " ".join(handle.read().split())
        for sentence in re.split(r"(?<=[.!?])\s+", text):
            if 8 <= len(sentence.split()) <= 40:
                sentences.append((sentence, name))
    random.Random(seed).shuffle(sentences)
    return sentences[:limit]


def _parity_with_transformers(encoder, preprocessor, checkpoint_dir, texts):
    try:
        import torch
        import transformers
    except ImportError:
        return None
    inputs = preprocessor(texts)
    reference = transformers.BertModel.from_pretrained(checkpoint_dir).eval()
    with torch.inference_mode():
        expected = reference(
            input_ids=torch.tensor(np.asarray(inputs["token_ids"]), dtype=torch.long),
            token_type_ids=torch.tensor(np.asarray(inputs["segment_ids"]), dtype=torch.long),
            attention_mask=torch.tensor(np.asarray(inputs["padding_mask"]), dtype=torch.long),
        ).last_hidden_state.numpy()
    actual = ops.convert_to_numpy(encoder.predict_on_batch(inputs)["sequence_output"])
    real = np.asarray(inputs["padding_mask"]).astype(bool)
    return float(np.abs(actual - expected)[real].max())


def run(num_sentences=2000, top_k=3):
    from keras_bert_suite import BertEncoder, BertPreprocessor
    from keras_bert_suite.checkpoints import packaged_checkpoint_dir

    print(f"Keras backend: {keras.backend.backend()}")
    print(f"Loading {PRESET} (real all-MiniLM-L6-v2 weights) through keras_bert_suite's converter")
    encoder = BertEncoder.from_preset(PRESET)
    preprocessor = BertPreprocessor.from_preset(PRESET, sequence_length=64)
    print(f"  {encoder.num_layers} layers, hidden {encoder.hidden_dim}, "
          f"{encoder.count_params():,} parameters")

    difference = _parity_with_transformers(
        encoder, preprocessor, packaged_checkpoint_dir("all-MiniLM-L6-v2"), list(QUERIES))
    if difference is not None:
        print(f"  max |ours - transformers.BertModel| on the queries: {difference:.1e}")

    corpus = sotu_sentences(num_sentences)
    print(f"\nEmbedding {len(corpus)} State of the Union sentences (1990 onwards)")
    vectors = mean_pooled_embeddings(encoder, preprocessor, [text for text, _ in corpus])
    queries = mean_pooled_embeddings(encoder, preprocessor, list(QUERIES), progress=False)
    scores = queries @ vectors.T  # cosine similarity, [queries, sentences]
    for query, row in zip(QUERIES, scores):
        print(f"\nQuery: {query}")
        for index in np.argsort(-row)[:top_k]:
            text, source = corpus[index]
            print(f"  {row[index]:.3f}  [{source}] {text}")
    return scores
