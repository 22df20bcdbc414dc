"""Pretraining speed: BertPretrainer training steps/s vs keras-hub BertMaskedLM and
transformers.BertForPreTraining, plus the tf.data pipeline's examples/s.

    python bench/pretraining_speed.py [--shapes mini minilm] [--rounds 2] [--threads 2]
                                      [--backends tensorflow jax torch]

The default (mini only, 2 rounds) takes ~9 minutes on 2 busy shared cores: a training step is
seconds there (transformers' ~20 s). Add `--shapes mini minilm` on a quieter or larger machine.

Batch 32 x 128 tokens, 20 predictions per sequence, vocabulary 30522, fp32, CPU, random weights
of the real shapes and random (fixed) inputs: speed does not depend on the values. Every library
runs with the same thread count, in its own process, A B A B interleaved (see _workers.py); the
table prints training steps/s and ratios measured in this one run.

Contestants, one training step each (forward, backward, AdamW update):

* ours: `BertPretrainer` (MLM + NSP heads) compiled with its defaults and
  `create_optimizer("adamw")` (BERT's AdamW: weight decay 0.01, global clipnorm 1.0), stepped
  with `train_on_batch(x, y)`; on TensorFlow also `jit_compile=True` (XLA). JAX always jits
  (Keras' "auto"); torch.compile is not a supported path here, so torch runs eagerly.
* keras-hub: `BertMaskedLM(BertBackbone(...), preprocessor=None)` with its default loss and
  weighted metric and the SAME optimizer (`create_optimizer("adamw")`), labels = masked ids with
  `sample_weight` = mask weights, same compile variants. It has no NSP head (ours does: slightly
  more work for ours).
* transformers: `BertForPreTraining` in train mode, torch AdamW (lr 1e-4, wd 0.01, eps 1e-6),
  `clip_grad_norm_(1.0)`. Its MLM decoder runs on all 128 positions (the library has no
  masked-positions-only path), so it does ~6x the decoder work: it is the peer users have, not a
  FLOP-for-FLOP twin.

FLOPs of a step: per token 6·N_non-embedding + 12·L·d·s, plus the
MLM decoder on the masked positions only, 6·B·P·H·V (and its H x H transform). "matmul roofline"
times, in torch, the GEMMs of exactly the dense part of that count: every encoder dense layer's
forward, input-gradient and weight-gradient matmul, and the decoder's three. A contestant's
"of roofline" = model FLOPs / its step time / the roofline's FLOP/s. The count is the same
model's for every contender (the usual MFU convention): ours skips part of it (its last encoder
layer runs at [CLS] and the masked positions only, ~13% of this count at the mini shape), so its
"of roofline" can pass 100% on a quiet machine; the steps/s ratios are what compare.

tf.data pipeline: real text (a few State of the Union addresses, corpora.sotu_files()) ->
unmasked NSP instances written to TFRecords once (create_pretraining_instances, as
create_pretraining_data.py does offline) -> read_pretraining_tfrecords(repeat) -> batch 32 ->
apply_dynamic_masking. Timed as examples/s while pulling batches, interleaved with the models, and
compared with the fastest model's examples/s (the pipeline must be faster).

Results go to stdout and bench/results/pretraining_speed.json.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _workers  # noqa: E402

SHAPES = {  # num_layers, hidden_dim, num_heads, intermediate_dim
    "mini": (4, 256, 4, 1024),     # BERT-mini (L-4 H-256)
    "minilm": (6, 384, 12, 1536),  # all-MiniLM-L6 shape
}
BATCH, LENGTH, PREDICTIONS, VOCABULARY = 32, 128, 20, 30522
PIPELINE_BATCHES_PER_CALL = 16  # enough that the prefetch buffer filled between calls is noise
SOTU_FILES = 6


def dense_matmul_flops(shape):
    """FLOPs of the dense matmuls of one training step (forward + both backward GEMMs)."""
    layers, hidden, _, intermediate = shape
    tokens, predicted = BATCH * LENGTH, BATCH * PREDICTIONS
    encoder = layers * (4 * hidden * hidden + 2 * hidden * intermediate)  # N_non-embedding
    head = hidden * hidden + hidden * VOCABULARY  # MLM transform + decoder (tied)
    return 6 * encoder * tokens + 6 * head * predicted


def model_flops(shape):
    layers, hidden, _, _ = shape
    attention = 12 * layers * hidden * LENGTH * BATCH * LENGTH  # 12·L·d·s per token
    return dense_matmul_flops(shape) + attention


def _batch():
    """One fixed batch: x, our labels, keras-hub's labels and sample weights."""
    import numpy as np

    rng = np.random.default_rng(0)
    token_ids = rng.integers(1000, VOCABULARY, (BATCH, LENGTH)).astype("int32")
    positions = np.sort(np.stack([rng.choice(np.arange(1, LENGTH - 1), PREDICTIONS, replace=False)
                                  for _ in range(BATCH)]), axis=1).astype("int32")
    labels = np.take_along_axis(token_ids, positions, axis=1)
    weights = np.ones((BATCH, PREDICTIONS), "float32")
    weights[:, -2:] = 0.0  # a couple of padded prediction slots, as in real data
    x = {"token_ids": token_ids, "segment_ids": np.zeros((BATCH, LENGTH), "int32"),
         "padding_mask": np.ones((BATCH, LENGTH), "int32"), "mask_positions": positions}
    nsp = rng.integers(0, 2, (BATCH,)).astype("int32")
    return x, labels, weights, nsp


def keras_worker(shape_name):
    import keras
    import keras_hub

    from keras_bert_suite import BertEncoder, BertPretrainer
    from keras_bert_suite.training.optimizers import create_optimizer

    layers, hidden, heads, intermediate = SHAPES[shape_name]
    config = dict(vocabulary_size=VOCABULARY, num_layers=layers, num_heads=heads,
                  hidden_dim=hidden, intermediate_dim=intermediate)
    backend = keras.backend.backend()
    x, labels, weights, nsp = _batch()
    ours_y = {"mlm_labels": labels, "mlm_weights": weights, "nsp_labels": nsp}

    def ours():
        return BertPretrainer(BertEncoder(**config))

    def hub():
        return keras_hub.models.BertMaskedLM(
            backbone=keras_hub.models.BertBackbone(**config), preprocessor=None)

    variants = {"": {}} if backend != "tensorflow" else {"": {}, " xla": {"jit_compile": True}}
    contestants = {}
    for suffix, compile_args in variants.items():
        model = ours()
        model.compile(optimizer=create_optimizer("adamw"), **compile_args)
        contestants[f"ours {backend}{suffix}"] = lambda m=model: m.train_on_batch(x, ours_y)
        model = hub()
        model.compile(optimizer=create_optimizer("adamw"), **compile_args)
        contestants[f"keras-hub {backend}{suffix}"] = (
            lambda m=model: m.train_on_batch(x, labels, sample_weight=weights))
    _workers.serve(contestants)


def torch_worker(shape_name, threads):
    import torch
    import transformers

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    layers, hidden, heads, intermediate = SHAPES[shape_name]
    model = transformers.BertForPreTraining(transformers.BertConfig(
        vocab_size=VOCABULARY, num_hidden_layers=layers, hidden_size=hidden,
        num_attention_heads=heads, intermediate_size=intermediate)).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, eps=1e-6)
    x, labels, weights, nsp = _batch()
    mlm_labels = torch.full((BATCH, LENGTH), -100, dtype=torch.long)  # -100 = not predicted
    for row in range(BATCH):
        keep = weights[row] > 0
        mlm_labels[row, torch.tensor(x["mask_positions"][row][keep], dtype=torch.long)] = (
            torch.tensor(labels[row][keep], dtype=torch.long))
    inputs = {"input_ids": torch.tensor(x["token_ids"], dtype=torch.long),
              "token_type_ids": torch.tensor(x["segment_ids"], dtype=torch.long),
              "attention_mask": torch.tensor(x["padding_mask"], dtype=torch.long),
              "labels": mlm_labels, "next_sentence_label": torch.tensor(nsp, dtype=torch.long)}

    def transformers_step():
        optimizer.zero_grad(set_to_none=True)
        model(**inputs).loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()

    # The GEMMs counted in dense_matmul_flops: for Y = X @ W, also dX = dY @ W.T, dW = X.T @ dY.
    tokens, predicted = BATCH * LENGTH, BATCH * PREDICTIONS
    gemms = []
    for rows, fan_in, fan_out, repeat in (
            (tokens, hidden, 3 * hidden, layers), (tokens, hidden, hidden, layers),
            (tokens, hidden, intermediate, layers), (tokens, intermediate, hidden, layers),
            (predicted, hidden, hidden, 1), (predicted, hidden, VOCABULARY, 1)):
        gemms.append((torch.randn(rows, fan_in), torch.randn(fan_in, fan_out),
                      torch.randn(rows, fan_out), repeat))

    def matmul_roofline():
        with torch.inference_mode():
            for activations, weight, gradient, repeat in gemms:
                for _ in range(repeat):
                    activations @ weight, gradient @ weight.T, activations.T @ gradient

    _workers.serve({"transformers torch": transformers_step, "matmul roofline": matmul_roofline})


def pipeline_worker():
    """tf.data: TFRecords of real text -> batch 32 -> dynamic masking; one call = N batches."""
    import tempfile

    from keras_bert_suite.data import corpora
    from keras_bert_suite.tasks.pretrainer.data.documents import read_documents
    from keras_bert_suite.tasks.pretrainer.data.dynamic_masking import DynamicMasker, apply_dynamic_masking
    from keras_bert_suite.tasks.pretrainer.data.instances import create_pretraining_instances
    from keras_bert_suite.tasks.pretrainer.data.tfrecords import (
        read_pretraining_tfrecords, write_pretraining_tfrecords)
    from keras_bert_suite.text import BertTokenizer

    tokenizer = BertTokenizer.from_preset("minilm_l6_h384_uncased")
    files = corpora.sotu_files()
    files = files[::len(files) // SOTU_FILES][:SOTU_FILES]
    documents = list(read_documents(files, layout="paragraph_per_line"))
    instances = create_pretraining_instances(
        documents, tokenizer, sequence_length=LENGTH, max_predictions_per_seq=PREDICTIONS,
        dupe_factor=2, static_masking=False, seed=0)
    directory = tempfile.mkdtemp(prefix="pretraining_speed_")
    shards = [os.path.join(directory, f"part-{i}.tfrecord") for i in range(2)]
    write_pretraining_tfrecords(instances, shards, sequence_length=LENGTH,
                                max_predictions_per_seq=PREDICTIONS)
    masker = DynamicMasker.from_tokenizer(tokenizer, max_predictions_per_seq=PREDICTIONS)
    dataset = read_pretraining_tfrecords(shards, sequence_length=LENGTH,
                                         max_predictions_per_seq=PREDICTIONS, repeat=True)
    dataset = apply_dynamic_masking(dataset.batch(BATCH, drop_remainder=True), masker, seed=7)
    iterator = iter(dataset)

    def pull():
        for _ in range(PIPELINE_BATCHES_PER_CALL):
            next(iterator)

    print(f"pipeline: {len(instances)} instances from {len(files)} SOTU files", file=sys.stderr)
    try:
        _workers.serve({"tf.data pipeline": pull})
    finally:
        for path in shards:
            os.remove(path)
        os.rmdir(directory)


def run(shape_name, rounds, threads, backends, pipeline):
    env = _workers.thread_env(threads)
    script = os.path.abspath(__file__)
    workers = [_workers.Worker([script, "--worker", "torch", "--shape", shape_name,
                                "--threads", str(threads)], env)]
    try:
        for backend in backends:
            workers.append(_workers.Worker([script, "--worker", "keras", "--shape", shape_name],
                                           {**env, "KERAS_BACKEND": backend}))
        seconds = _workers.interleave(workers + [pipeline], rounds=rounds, repeats=1)
    finally:
        for worker in workers:
            worker.close()
    shape = SHAPES[shape_name]
    roofline = dense_matmul_flops(shape) / seconds.pop("matmul roofline")
    pipeline_examples = BATCH * PIPELINE_BATCHES_PER_CALL / seconds.pop("tf.data pipeline")
    reference = seconds["transformers torch"]
    rows = []
    for name, value in sorted(seconds.items(), key=lambda item: item[1]):
        hub = seconds.get(name.replace("ours", "keras-hub"))
        rows.append({
            "contestant": name, "backend": name.split()[1], "steps_per_s": 1 / value,
            "examples_per_s": BATCH / value, "vs_transformers": reference / value,
            "vs_keras_hub_same_backend": hub / value if name.startswith("ours") and hub else None,
            "fraction_of_matmul_roofline": model_flops(shape) / value / roofline})
    fastest = max(row["examples_per_s"] for row in rows)
    return {"shape": shape_name, "layers_hidden_heads_intermediate": shape,
            "model_gflop_per_step": model_flops(shape) / 1e9, "roofline_gflops": roofline / 1e9,
            "pipeline_examples_per_s": pipeline_examples,
            "pipeline_vs_fastest_model": pipeline_examples / fastest, "rows": rows}


def print_table(result, threads):
    layers, hidden, _, _ = result["layers_hidden_heads_intermediate"]
    print(f"\n{result['shape']} L-{layers} H-{hidden} (batch {BATCH} x {LENGTH}, {PREDICTIONS} "
          f"predictions, fp32, {threads} threads; {result['model_gflop_per_step']:.0f} GFLOP/step; "
          f"matmul roofline {result['roofline_gflops']:.0f} GFLOP/s)")
    print(f"{'contestant':26s} {'steps/s':>8s} {'ex/s':>6s} {'x keras-hub':>12s} "
          f"{'x transformers':>15s} {'of roofline':>12s}")
    for row in result["rows"]:
        hub = row["vs_keras_hub_same_backend"]
        print(f"{row['contestant']:26s} {row['steps_per_s']:8.3f} {row['examples_per_s']:6.1f} "
              f"{(f'{hub:.2f}' if hub else ''):>12s} {row['vs_transformers']:15.2f} "
              f"{row['fraction_of_matmul_roofline']:12.0%}")
    print(f"tf.data pipeline (dynamic masking): {result['pipeline_examples_per_s']:.0f} examples/s "
          f"= {result['pipeline_vs_fastest_model']:.1f}x the fastest model's examples/s")


def main():
    args = _workers.bench_parser(__doc__.splitlines()[0], SHAPES, ["mini"], 2,
                                 ["keras", "torch", "pipeline"]).parse_args()
    if args.worker == "keras":
        return keras_worker(args.shape)
    if args.worker == "torch":
        return torch_worker(args.shape, args.threads)
    if args.worker == "pipeline":
        return pipeline_worker()

    results = _workers.results_header(
        args.threads, batch=BATCH, sequence_length=LENGTH, predictions=PREDICTIONS,
        vocabulary=VOCABULARY, shapes=[])
    env = _workers.thread_env(args.threads)
    pipeline = _workers.Worker([os.path.abspath(__file__), "--worker", "pipeline"],
                               {**env, "KERAS_BACKEND": "tensorflow"})
    try:
        for shape_name in args.shapes:
            result = run(shape_name, args.rounds, args.threads, args.backends, pipeline)
            results["shapes"].append(result)
            print_table(result, args.threads)
    finally:
        pipeline.close()
    results["load_average_at_end"] = os.getloadavg()
    print(f"load average (1/5/15 min): start {results['load_average_at_start']}, "
          f"end {results['load_average_at_end']}")
    _workers.write_results("pretraining_speed", results)


if __name__ == "__main__":
    main()
