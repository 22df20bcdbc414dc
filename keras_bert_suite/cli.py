"""The `kbs` command line."""

import argparse
import json
import os
import sys

from keras_bert_suite.names import QUANTIZED_PRECISIONS, SERVING_PRECISIONS


def _presets(args):
    from keras_bert_suite import list_presets

    for name, description in list_presets().items():
        print(f"{name:32s} {description}")


def _demo(args):
    from keras_bert_suite import demo

    demo.run(num_sentences=args.sentences, sentiment_overrides=args.set,
             compare_fixed_length=args.compare_fixed_length)


# `kbs convert --to` formats written from a model (the rest: our preset, from a checkpoint).
_EXPORTS = {"huggingface": "Hugging Face transformers checkpoint",
            "google": "Google BERT checkpoint", "keras_hub": "KerasHub preset"}


def _convert(args):
    from keras_bert_suite.presets import resolve_checkpoint

    if args.to in _EXPORTS:
        from keras_bert_suite.models import to_checkpoint

        model, vocabulary, lowercase = _model_to_convert(args.checkpoint)
        if args.to == "huggingface":
            to_checkpoint.save_huggingface(model, args.output, vocabulary=vocabulary,
                                           lowercase=lowercase)
        elif args.to == "keras_hub":
            to_checkpoint.save_keras_hub(model, args.output, vocabulary=vocabulary,
                                         lowercase=lowercase)
        else:
            to_checkpoint.save_google_bert(model, args.output, vocabulary=vocabulary)
        print(f"Wrote {type(model).__name__} {args.checkpoint} -> {args.output} "
              f"({_EXPORTS[args.to]})")
        return
    from keras_bert_suite import BertEncoder
    from keras_bert_suite.models.from_checkpoint import encoder_from_checkpoint

    checkpoint = resolve_checkpoint(args.checkpoint)  # read once: config and weights
    encoder = encoder_from_checkpoint(BertEncoder, checkpoint, args.checkpoint)
    vocabulary, lowercase = _wordpiece_vocabulary(args.checkpoint, checkpoint)
    encoder.save_preset(args.output, vocabulary=vocabulary, lowercase=lowercase)
    print(f"Converted {checkpoint.format} checkpoint {args.checkpoint} -> {args.output}")


def _model_to_convert(source):
    """(model, vocabulary, lowercase) for `kbs convert --to huggingface|google|keras_hub`: a
    `.keras` file or a task preset (task.json) gives its task model; a checkpoint with
    pretraining heads a BertPretrainer; any other checkpoint its encoder."""
    import keras

    from keras_bert_suite import BertEncoder, BertPretrainer
    from keras_bert_suite.models.from_checkpoint import encoder_from_checkpoint
    from keras_bert_suite.presets import resolve_checkpoint
    from keras_bert_suite.tasks import import_task_models, load_model
    from keras_bert_suite.tasks.task import BertTask
    from keras_bert_suite.tasks.task_presets import _saved_task
    from keras_bert_suite.text.vocab_io import load_vocabulary

    if str(source).endswith(".keras"):
        return load_model(source), None, None
    import_task_models()  # registers the classes a task.json names
    saved = _saved_task(source, BertTask)
    if saved is not None:
        task_class = keras.saving.get_registered_object(saved["registered_name"])
        return task_class.from_preset(source), None, None
    checkpoint = resolve_checkpoint(source)
    path, lowercase = _wordpiece_vocabulary(source, checkpoint)
    vocabulary = load_vocabulary(path) if path else None
    if "mlm/output_bias" in checkpoint.weights:  # reads the heads as well
        model = BertPretrainer.from_preset(
            source, next_sentence_prediction="nsp/kernel" in checkpoint.weights)
    else:
        model = encoder_from_checkpoint(BertEncoder, checkpoint, source)
    return model, vocabulary, lowercase


def _wordpiece_vocabulary(preset, checkpoint):
    """(the checkpoint's WordPiece vocabulary file or None, its casing): what its directory
    holds, or a built-in architecture's casing."""
    from keras_bert_suite.presets import PRESETS
    from keras_bert_suite.text import wordpiece_files

    if checkpoint.directory is None:
        return None, PRESETS[preset].lowercase
    return (wordpiece_files.vocabulary_file(checkpoint.directory),
            wordpiece_files.lowercase(checkpoint.directory))


def _tokenize(args):
    from keras_bert_suite.text.tokenizer_files import tokenizer_from_preset

    tokenizer = tokenizer_from_preset(args.preset)
    texts = args.text or [line.rstrip("\n") for line in sys.stdin]
    for text, ids in zip(texts, tokenizer.encode_batch(texts)):
        print(json.dumps({"text": text, "token_ids": ids,
                          "tokens": [tokenizer.id_to_token(i) for i in ids]}, ensure_ascii=False))


def _vocab(args):
    from keras_bert_suite.text import learn_vocabulary

    learn_vocabulary(args.files, args.output, vocabulary_size=args.size,
                     lowercase=not args.cased)
    print(f"Wrote {args.output}")


def _recipe_command(command):
    """`kbs pretrain|finetune|distill RECIPE`: load the recipe, check its kind, run it."""
    def run(args):
        from keras_bert_suite import recipe_runner

        recipe = recipe_runner.load_recipe(args.recipe, overrides=args.set)
        output = args.output or os.path.join("runs", recipe["name"])
        print(f"Recipe {recipe['name']} -> {output}", file=sys.stderr)
        recipe_runner.run_recipe(recipe, output, command=command)
    return run


def _embed(args):
    from keras_bert_suite.tasks.feature_extractor.embed import embed_file

    count = embed_file(args.file, args.output, preset=args.preset, layers=args.layers,
                       pooling=args.pooling, normalize=not args.no_normalize, tokens=args.tokens,
                       sequence_length=args.sequence_length, batch_size=args.batch_size,
                       truncate=args.truncate)
    print(f"Embedded {count} lines -> {args.output}", file=sys.stderr)


def _serve(args):
    from keras_bert_suite.serving.server import run_server

    run_server(model_base_path=args.model_base_path, model_name=args.model_name,
               model_config_file=args.model_config_file, host=args.host, port=args.port,
               grpc_port=args.grpc_port, max_request_bytes=args.max_request_bytes,
               poll_seconds=args.file_system_poll_wait_seconds)


def _export(args):
    from keras_bert_suite import BertPreprocessor
    from keras_bert_suite.export import export_saved_model
    from keras_bert_suite.export.serving_encoder import check_precision
    from keras_bert_suite.tasks import load_model

    if not os.path.isfile(args.model):
        raise FileNotFoundError(f"{args.model} does not exist (expected a .keras file saved "
                                "with model.save).")
    precision = _export_precision(args)  # wrong flags fail before the model loads
    calibration_texts = _calibration_texts(args.calibration_data)
    check_precision(precision)  # and int8_vnni on a CPU without VNNI / AMX
    model = load_model(args.model, compile=False)
    preprocessor = None
    if args.preprocessor:
        preprocessor = BertPreprocessor.from_preset(args.preprocessor,
                                                    sequence_length=args.sequence_length)
    from keras_bert_suite.recipe_runner.recipe_files import parse_override

    options = dict(parse_override(option) for option in args.option)
    if args.pair:
        options["pair"] = True
    path = export_saved_model(
        model, args.base_dir, name=args.name, version=args.version,
        preprocessor=preprocessor, label_names=args.labels.split(",") if args.labels else None,
        warmup=not args.no_warmup, precision=precision, calibration_texts=calibration_texts,
        **options)
    print(f"Exported {args.model} -> {path}")


def _export_precision(args):
    if args.quantize and args.precision not in (None, args.quantize):
        raise ValueError(f"--quantize {args.quantize} and --precision {args.precision} "
                         "contradict each other: give one of them.")
    precision = args.quantize or args.precision or "float32"
    if args.calibration_data and precision != "int8_vnni":
        raise ValueError(f"--calibration_data is for --quantize int8_vnni, not {precision} "
                         "(int8 quantizes only the kernels: it has no activation ranges to "
                         "calibrate).")
    return precision


def _calibration_texts(path):
    """A text file's non-empty lines (one text per line), or None without a file."""
    if path is None:
        return None
    if not os.path.isfile(path):
        raise FileNotFoundError(f"--calibration_data {path} does not exist (expected a text "
                                "file with one text per line).")
    with open(path, encoding="utf-8", errors="replace") as f:
        texts = [line.strip() for line in f if line.strip()]
    if not texts:
        raise ValueError(f"--calibration_data {path} has no text (expected one text per line).")
    print(f"Calibrating int8_vnni on {len(texts)} texts from {path}")
    return texts


def _add_recipe_command(commands, name, description, example, override):
    """`kbs NAME RECIPE [--set KEY=VALUE ...] [--output DIR]`."""
    command = commands.add_parser(name, help=description)
    command.add_argument("recipe", help=f"a name in recipes/ (e.g. {example}) or a path")
    command.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                         help=f"override a recipe value: dotted key, JSON value "
                              f"(e.g. --set {override})")
    command.add_argument("--output", help="run directory (default runs/<recipe name>)")
    command.set_defaults(run=_recipe_command(name), user_errors=True)


def build_parser():
    parser = argparse.ArgumentParser(
        prog="kbs", description="keras_bert_suite: BERT for Keras 3, from pretraining to TF Serving.")
    commands = parser.add_subparsers(dest="command", required=True)

    commands.add_parser("presets", help="list the built-in presets").set_defaults(run=_presets)

    demo = commands.add_parser(
        "demo", help="semantic search, sentiment fine-tuning vs TF-IDF, export and serving "
                     "with the real MiniLM weights")
    demo.add_argument("--sentences", type=int, default=2000)
    demo.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                      help="override a value of the sentiment recipe (e.g. training.epochs=2)")
    demo.add_argument("--compare_fixed_length", action="store_true",
                      help="also fine-tune with fixed-length batches and print the time the "
                           "length buckets saved (doubles the demo's time; without it the demo "
                           "prints bench/bucketed_finetuning.py's last measurement)")
    # Kept so scripts written for the old default still run: skipping is now the default.
    demo.add_argument("--skip_fixed_length", action="store_true", help=argparse.SUPPRESS)
    demo.set_defaults(run=_demo)

    convert = commands.add_parser(
        "convert", help="convert a checkpoint to a preset dir, or a model to Hugging Face, "
                        "Google BERT or KerasHub")
    convert.add_argument("checkpoint", help="checkpoint directory, built-in preset name, task "
                         "preset directory or .keras file")
    convert.add_argument("output", help="directory to write")
    convert.add_argument("--to", choices=["preset", *_EXPORTS], default="preset",
                         help="preset: our preset directory (any checkpoint's encoder); "
                         "huggingface: a transformers directory (config.json, "
                         "model.safetensors, tokenizer files) of the encoder, the pretraining "
                         "heads or a task model; google: an original BERT checkpoint "
                         "(bert_config.json, bert_model.ckpt, vocab.txt) of the encoder and "
                         "the pretraining heads; keras_hub: a KerasHub preset (BertBackbone or the "
                         "family's backbone, e.g. RobertaBackbone; BertTextClassifier or the "
                         "family's for a classifier, BertMaskedLM for a BERT pretrainer; "
                         "other task heads are not exported)")
    convert.set_defaults(run=_convert)

    tokenize = commands.add_parser("tokenize", help="print WordPiece ids (text args or stdin lines)")
    tokenize.add_argument("text", nargs="*")
    tokenize.add_argument("--preset", default="minilm_l6_h384_uncased")
    tokenize.set_defaults(run=_tokenize)

    vocab = commands.add_parser("vocab", help="learn a WordPiece vocabulary from text files")
    vocab.add_argument("files", nargs="+")
    vocab.add_argument("--output", required=True)
    vocab.add_argument("--size", type=int, default=30522)
    vocab.add_argument("--cased", action="store_true")
    vocab.set_defaults(run=_vocab)

    from keras_bert_suite.tasks.pretrainer.data import command as data_command

    data_command.add_command(commands)
    _add_recipe_command(commands, "pretrain",
                        "run a pretraining recipe (resumes a run left in --output)",
                        "pretrain_cpu_smoke", "training.optimizer.learning_rate=5e-4")
    _add_recipe_command(commands, "finetune", "run a fine-tuning recipe (classification, "
                        "squad, ner, multiple_choice)", "sentiment_rotten_tomatoes_cpu",
                        "training.epochs=2")
    _add_recipe_command(commands, "distill", "run a distillation recipe: a fine-tuned "
                        "teacher -> a smaller student", "distill_rotten_tomatoes_cpu",
                        "distillation.student_layers=2")

    embed = commands.add_parser("embed", help="sentence or token vectors for a text file")
    embed.add_argument("file", help="one text per line (.txt) or JSON Lines with \"text\"")
    embed.add_argument("--output", required=True, help=".npy (sentence vectors) or .jsonl")
    embed.add_argument("--preset", default="minilm_l6_h384_uncased")
    embed.add_argument("--layers", default="last_hidden",
                       help="embeddings, last_hidden, second_to_last, sum_all, sum_last_four, "
                            "concat_last_four")
    embed.add_argument("--pooling", default="mean", choices=["mean", "cls"])
    embed.add_argument("--no_normalize", action="store_true", help="skip L2 normalisation")
    embed.add_argument("--tokens", action="store_true", help="token vectors (JSON Lines)")
    embed.add_argument("--sequence_length", type=int, default=128)
    embed.add_argument("--batch_size", type=int, default=64)
    embed.add_argument("--truncate", action="store_true",
                       help="cut lines longer than --sequence_length instead of refusing them")
    embed.set_defaults(run=_embed, user_errors=True)

    serve = commands.add_parser(
        "serve", help="development server with TF Serving's REST (and gRPC) API for saved_models/")
    serve.add_argument("--model_base_path", default="saved_models",
                       help="directory of models (<name>/<version>/), or one model's directory "
                            "with --model_name")
    serve.add_argument("--model_name", help="serve --model_base_path as this one model")
    serve.add_argument("--model_config_file",
                       help="text ModelServerConfig (e.g. serving/models.config): version "
                            "policies and labels")
    serve.add_argument("--host", default="127.0.0.1",
                       help="interface to bind (default: this machine only)")
    serve.add_argument("--port", type=int, default=8501, help="REST port (0: any free port)")
    serve.add_argument("--grpc_port", type=int, default=None,
                       help="also serve gRPC PredictionService on this port (TF Serving: 8500; "
                            "0: any free port)")
    serve.add_argument("--max_request_bytes", type=int, default=32 * 1024 * 1024)
    serve.add_argument("--file_system_poll_wait_seconds", type=float, default=1.0,
                       help="how often to look for new versions (0: never)")
    serve.set_defaults(run=_serve, user_errors=True)

    export = commands.add_parser(
        "export", help="export a .keras task model to saved_models/<name>/<version>/ for TF Serving")
    export.add_argument("model", help="a .keras file (a task model or a BertEncoder)")
    export.add_argument("--name", required=True, help="model name (TF Serving's model name)")
    export.add_argument("--base_dir", default="saved_models")
    export.add_argument("--version", type=int, help="default: one more than the newest")
    export.add_argument("--preprocessor", help="preset/checkpoint for the tokenizer when the "
                                               "model has no preprocessor of its own (a bare "
                                               "BertEncoder)")
    export.add_argument("--sequence_length", type=int, default=128,
                        help="with --preprocessor: the packed length")
    export.add_argument("--pair", action="store_true", help="classifier on text pairs "
                                                            "(the same as --option pair=true)")
    export.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                        help="a task's export option, e.g. max_answer_length=30 (span labeler); "
                             "repeatable")
    export.add_argument("--labels", help="comma-separated label names")
    export.add_argument("--no_warmup", action="store_true")
    export.add_argument("--precision", choices=SERVING_PRECISIONS, default=None,
                        help="float32 (default); bfloat16: the encoder's matmuls in bf16 "
                             "(faster on CPUs with AMX or AVX512_BF16); int8, int8_vnni: the "
                             "same as --quantize (docs/benchmarks.md, \"Raw text to "
                             "prediction\", has the measured speed of each)")
    export.add_argument("--quantize", choices=QUANTIZED_PRECISIONS,
                        help="int8: the encoder's matmul kernels stored in int8, computed in "
                             "float32 (serves on any CPU); int8_vnni: int8 arithmetic with "
                             "activations quantized per call (oneDNN), the FFN output's in "
                             "bf16: serve it only on CPUs with AVX512_VNNI, AVX_VNNI or AMX "
                             "(refused on an exporting CPU without them; docs/export.md)")
    export.add_argument("--calibration_data", metavar="TEXT_FILE",
                        help="with --quantize int8_vnni: a text file, one text per line, like "
                             "what the model will serve (a few hundred lines); sets the int8 "
                             "smoothing from measured activation ranges (more accurate)")
    export.set_defaults(run=_export, user_errors=True)
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    if not getattr(args, "user_errors", False) or os.environ.get("KBS_DEBUG"):
        return args.run(args)
    # Bad recipes and bad input data raise ValueError (RecipeError, the data/ checks) or
    # FileNotFoundError with a message naming the problem: print it, not a traceback.
    try:
        args.run(args)
    except (ValueError, FileNotFoundError) as error:
        print(f"kbs {args.command}: error: {error}\n(set KBS_DEBUG=1 for the traceback)",
              file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
