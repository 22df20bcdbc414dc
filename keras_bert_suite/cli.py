"""The `kbs` command line."""

import argparse
import json
import os
import sys


def _presets(args):
    from keras_bert_suite import list_presets

    for name, description in list_presets().items():
        print(f"{name:32s} {description}")


def _demo(args):
    from keras_bert_suite import demo

    demo.run(num_sentences=args.sentences)


def _convert(args):
    from keras_bert_suite import BertEncoder
    from keras_bert_suite.models.presets import encoder_from_checkpoint, resolve_checkpoint

    checkpoint = resolve_checkpoint(args.checkpoint)  # read once: config, weights and vocab
    encoder = encoder_from_checkpoint(BertEncoder, checkpoint, args.checkpoint)
    encoder.save_preset(args.output, vocabulary=checkpoint.vocabulary_path,
                        lowercase=checkpoint.lowercase)
    print(f"Converted {checkpoint.format} checkpoint {args.checkpoint} -> {args.output}")


def _tokenize(args):
    from keras_bert_suite import BertTokenizer

    tokenizer = BertTokenizer.from_preset(args.preset)
    texts = args.text or [line.rstrip("\n") for line in sys.stdin]
    for text, ids in zip(texts, tokenizer.encode_batch(texts)):
        print(json.dumps({"text": text, "token_ids": ids,
                          "tokens": [tokenizer.id_to_token(i) for i in ids]}, ensure_ascii=False))


def _vocab(args):
    from keras_bert_suite.text import learn_vocabulary

    learn_vocabulary(args.files, args.output, vocabulary_size=args.size,
                     lowercase=not args.cased)
    print(f"Wrote {args.output}")


def _pretrain(args):
    from keras_bert_suite import recipe_runner

    recipe = recipe_runner.load_recipe(args.recipe, overrides=args.set)
    output = args.output or os.path.join("runs", recipe["name"])
    print(f"Recipe {recipe['name']} -> {output}", file=sys.stderr)
    recipe_runner.run_recipe(recipe, output, command="pretrain")


def build_parser():
    parser = argparse.ArgumentParser(
        prog="kbs", description="keras_bert_suite: BERT for Keras 3, from pretraining to TF Serving.")
    commands = parser.add_subparsers(dest="command", required=True)

    commands.add_parser("presets", help="list the built-in presets").set_defaults(run=_presets)

    demo = commands.add_parser("demo", help="semantic search with the real MiniLM weights")
    demo.add_argument("--sentences", type=int, default=2000)
    demo.set_defaults(run=_demo)

    convert = commands.add_parser(
        "convert", help="convert a Hugging Face / Google BERT / KerasHub checkpoint to a preset dir")
    convert.add_argument("checkpoint", help="checkpoint directory or built-in preset name")
    convert.add_argument("output", help="directory to write")
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

    pretrain = commands.add_parser(
        "pretrain", help="run a pretraining recipe (resumes a run left in --output)")
    pretrain.add_argument("recipe", help="a name in recipes/ (e.g. pretrain_cpu_smoke) or a path")
    pretrain.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                          help="override a recipe value: dotted key, JSON value "
                               "(e.g. --set training.optimizer.learning_rate=5e-4)")
    pretrain.add_argument("--output", help="run directory (default runs/<recipe name>)")
    pretrain.set_defaults(run=_pretrain, user_errors=True)
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
