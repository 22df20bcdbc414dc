"""`kbs demo`: real weights and real text, from an encoder to a served model.

1. Semantic search: loads the all-MiniLM-L6-v2 checkpoint through our own converter, embeds
   a few thousand State of the Union sentences since 1990 (mean pooling over real tokens,
   L2-normalised, as sentence-transformers does for this model) and prints each query's
   nearest neighbours, and how far our encoder is from `transformers.BertModel`.
2. Sentiment: fine-tunes that checkpoint on the Rotten Tomatoes review sentences
   (recipes/sentiment_rotten_tomatoes_cpu.json, in length buckets: each batch cut to its
   longest review, not padded to 64) and prints its held-out accuracy next to a TF-IDF +
   logistic regression baseline trained on the same split in the same run, and what length
   buckets save against fixed-length batches as bench/bucketed_finetuning.py last measured it
   (`--compare_fixed_length` re-trains with fixed-length batches here instead: as long again).
3. Serving: exports the fine-tuned classifier to saved_models/, starts `kbs serve` and sends
   raw sentences with the package's client.
"""

import os
import random
import re

import keras
import numpy as np
from keras import ops
from keras_bert_suite.data.corpora import sotu_files
from keras_bert_suite.presets import packaged_checkpoint_dir

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


def semantic_search(num_sentences=2000, top_k=3):
    from keras_bert_suite import BertEncoder, BertPreprocessor

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


SENTIMENT_RECIPE = "sentiment_rotten_tomatoes_cpu"


def sentiment(output_dir, overrides=()):
    """Fine-tunes the classifier; prints its held-out accuracy next to TF-IDF's."""
    from keras_bert_suite import recipe_runner
    from keras_bert_suite.tasks.classifier.rotten_tomatoes import tfidf_baseline
    from keras_bert_suite.tasks.classifier.recipe import read_examples

    recipe = recipe_runner.load_recipe(SENTIMENT_RECIPE, overrides=overrides)
    train, test = read_examples(recipe["data"])  # the split the fine-tuning run uses
    print(f"\nSentiment: Rotten Tomatoes review sentences, {len(train)} to train, "
          f"{len(test)} held out")
    predicted = tfidf_baseline(train.texts, train.labels, test.texts)
    baseline = float(np.mean(predicted == test.labels))
    print(f"  TF-IDF (word 1-2 + char 2-5 grams) + logistic regression: {baseline:.1%}")
    print(f"Fine-tuning {PRESET} ({recipe['description'].split(';')[0]})")
    summary = recipe_runner.run_recipe(recipe, output_dir, command="finetune",
                                       log=lambda message: print(f"  {message}"))
    metrics = summary["metrics"]
    print(f"\n  held-out accuracy  fine-tuned MiniLM {metrics['accuracy']:.1%}  vs  "
          f"TF-IDF + LR {baseline:.1%}  ({metrics['eval_examples']} sentences, "
          f"{metrics['train_seconds']:.0f} s of training in length buckets)")
    return summary, baseline


BUCKET_BENCH = os.path.join("bench", "results", "bucketed_finetuning.json")


def last_bucket_bench(path=BUCKET_BENCH):
    """{backend: (bucketed / fixed training time, date)} from bench/bucketed_finetuning.py's
    last run on this machine, or {} when it has not run here (its results are not committed)."""
    import json

    try:
        with open(path, encoding="utf-8") as handle:
            run = json.load(handle)
    except (OSError, ValueError):
        return {}
    seconds = {result["contestant"]: result["train_seconds"] for result in run["results"]}
    ratios = {}
    for name, bucketed in seconds.items():
        fixed = seconds.get(name.replace("bucketed", "fixed"))
        if name.startswith("ours ") and name.endswith(" bucketed") and fixed:  # "ours jax bucketed"
            ratios[name.split()[1]] = (bucketed / fixed, run["date"])
    return ratios


def report_bucket_saving(path=BUCKET_BENCH):
    """Prints what length buckets save, from the bench's last run rather than a second
    fine-tune (which would double the demo's time)."""
    ratios = last_bucket_bench(path)
    if not ratios:
        print("\n  What the length buckets save against fixed-length batches: run "
              "`python bench/bucketed_finetuning.py` (docs/benchmarks.md has its last figures), "
              "or `kbs demo --compare_fixed_length` to re-train with fixed-length batches here.")
        return
    shown = ", ".join(f"{backend} {ratio:.2f}x" for backend, (ratio, _) in ratios.items())
    date = next(iter(ratios.values()))[1]
    print(f"\n  Length buckets vs fixed-length batches, bench/bucketed_finetuning.py on this "
          f"machine ({date}): {shown} the fixed-length training time.")


def fixed_length_comparison(bucketed, output_dir, overrides=()):
    """The same fine-tune with every batch padded to the full length (what a TPU gets);
    prints the training time the length buckets saved, and both accuracies."""
    from keras_bert_suite import recipe_runner

    recipe = recipe_runner.load_recipe(
        SENTIMENT_RECIPE, overrides=[*overrides, "training.bucket_boundaries=null"])
    length = recipe["data"]["sequence_length"]
    print(f"\nThe same fine-tune with every batch padded to {length} tokens")
    fixed = recipe_runner.run_recipe(recipe, output_dir, command="finetune",
                                     log=lambda message: print(f"  {message}"))["metrics"]
    ours = bucketed["metrics"]
    saved = fixed["train_seconds"] - ours["train_seconds"]
    print(f"\n  length buckets: {ours['train_seconds']:.0f} s of training, "
          f"{ours['accuracy']:.1%} held out;  padded to {length}: "
          f"{fixed['train_seconds']:.0f} s, {fixed['accuracy']:.1%}")
    print(f"  time saved by length buckets: {saved:.0f} s "
          f"({ours['train_seconds'] / fixed['train_seconds']:.2f}x the fixed-length time)")
    return fixed


SERVED_SENTENCES = (
    "A gorgeous, witty, seductive movie.",
    "The plot is paper-thin and the jokes fall flat.",
    "Not the best film of the year, but far from the worst.",
    "",  # served models answer any string
)


def _free_port():
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def serve_and_query(model, base_dir, name="sentiment", sentences=SERVED_SENTENCES):
    """Exports `model` to base_dir/name/<version>/, starts `kbs serve` on it, sends raw
    sentences with the REST client and prints the answers; stops the server."""
    import subprocess
    import sys

    from keras_bert_suite.export import export_saved_model
    from keras_bert_suite.serving import RestClient

    path = export_saved_model(model, base_dir, name=name)
    print(f"\nServing: exported the classifier to {path} (TF Serving layout)")
    port = _free_port()
    command = [sys.executable, "-m", "keras_bert_suite.cli", "serve", "--model_base_path",
               base_dir, "--port", str(port)]
    print(f"  $ kbs serve --model_base_path {base_dir} --port {port}")
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    try:
        # Retries cover the server's start-up (it imports TensorFlow and loads the model).
        client = RestClient(f"http://127.0.0.1:{port}", timeout=60, retries=40,
                            backoff_seconds=0.5)
        answers = client.predict(name, instances=[{"text": text} for text in sentences])
        print(f"  POST /v1/models/{name}:predict  (the package's REST client)")
        for text, answer in zip(sentences, answers):
            probabilities = dict(zip(answer["label_names"], answer["probabilities"]))
            shown = ", ".join(f"{label} {p:.2f}" for label, p in probabilities.items())
            print(f"  {answer['predicted_label']:>6}  ({shown})  {text!r}")
        return answers
    finally:
        server.terminate()
        server.wait(timeout=30)


def run(num_sentences=2000, output_dir=os.path.join("runs", "demo"),
        saved_models="saved_models", sentiment_overrides=(), compare_fixed_length=False):
    semantic_search(num_sentences)
    summary, _ = sentiment(os.path.join(output_dir, "sentiment"), sentiment_overrides)
    serve_and_query(summary["model"], saved_models)
    if compare_fixed_length:
        fixed_length_comparison(summary, os.path.join(output_dir, "sentiment_fixed_length"),
                                sentiment_overrides)
    else:
        report_bucket_saving()
    return summary
