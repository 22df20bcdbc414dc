"""`kbs create-pretraining-data`: the command line of pipeline.create_pretraining_data.

    kbs create-pretraining-data --input sotu --output_dir data/sotu_128 \\
        --layout paragraph_per_line --dupe_factor 5
    kbs create-pretraining-data --input 'gs://b/wiki/*.txt' --output_dir gs://b/wiki_128 \\
        -- --runner=DataflowRunner --project=P --region=us-central1 --temp_location=gs://b/tmp

Flags keep google-research/bert's names where it has one (`--max_seq_length`,
`--do_whole_word_mask`, `--random_seed`, `--do_lower_case`); Beam options go after `--`.
"""

import argparse

from keras_bert_suite.tasks.pretrainer.data import corpus_buckets
from keras_bert_suite.tasks.pretrainer.data import documents as document_io
from keras_bert_suite.tasks.pretrainer.data.instances import INSTANCE_FORMATS


def add_command(commands):
    command = commands.add_parser(
        "create-pretraining-data",
        help="text corpus -> sharded pretraining TFRecords (an Apache Beam pipeline)")
    add = command.add_argument
    add("--input", nargs="+", required=True,
        help="text files or globs (local or gs://), or 'sotu' for the State of the Union corpus")
    add("--output_dir", required=True, help="where the shards and statistics.json go")
    add("--layout", default="sentence_per_line", choices=document_io.LAYOUTS)
    add("--text_field", default="text", help="jsonl: the field holding the text")
    add("--vocab_file", help="vocab.txt (instead of the --tokenizer_preset's vocabulary)")
    add("--tokenizer_preset", default="minilm_l6_h384_uncased")
    add("--do_lower_case", type=_bool, default=None,
        help="true/false (default: the preset's casing; true with --vocab_file)")
    add("--max_seq_length", type=int, default=128)
    add("--max_predictions_per_seq", type=int, default=20)
    add("--masked_lm_prob", type=float, default=0.15)
    add("--dupe_factor", type=int, default=10)
    add("--short_seq_prob", type=float, default=0.1)
    add("--do_whole_word_mask", action="store_true")
    add("--max_ngram", type=int, default=1,
        help="mask n-grams of up to this many whole words, p(n) proportional to 1/n "
             "(ALBERT: 3; default 1, single tokens or words)")
    add("--instance_format", default="nsp", choices=INSTANCE_FORMATS,
        help="nsp: BERT's pairs (default); sop: ALBERT's sentence order; doc_sentences / "
             "full_sentences: RoBERTa's, MLM only; contiguous: MLM-only text cut to length")
    add("--unmasked", action="store_true",
        help="write no masks (for dynamic masking, as `kbs pretrain` does)")
    add("--max_instances_per_row", type=int, default=None,
        help="pack up to this many instances into each record (the packed schema, "
             "docs/pretraining.md); default one instance per record")
    add("--eval_fraction", type=float, default=0.0, help="documents held out into eval-*")
    add("--bucket_mb", type=float, default=corpus_buckets.DEFAULT_BUCKET_BYTES / 2**20,
        help="text per bucket; random-next segments come from the same bucket")
    add("--max_line_bytes", type=int, default=document_io.DEFAULT_MAX_LINE_BYTES,
        help="a document with a longer line is skipped (and counted)")
    add("--random_seed", type=int, default=12345)
    add("--num_workers", type=int, default=None,
        help="DirectRunner worker processes (default: one per CPU core)")
    add("pipeline_args", nargs="*", metavar="-- BEAM_OPTION",
        help="Apache Beam pipeline options after `--` (e.g. --runner=DataflowRunner ...)")
    command.set_defaults(run=run, user_errors=True)


def run(args):
    from keras_bert_suite.tasks.pretrainer.data.pipeline import create_pretraining_data

    inputs = args.input
    if inputs == ["sotu"]:
        from keras_bert_suite.data import corpora

        inputs = corpora.sotu_files()
    create_pretraining_data(
        inputs, args.output_dir, vocabulary=args.vocab_file,
        tokenizer_preset=args.tokenizer_preset, lowercase=args.do_lower_case,
        layout=args.layout, text_field=args.text_field, max_line_bytes=args.max_line_bytes,
        sequence_length=args.max_seq_length,
        max_predictions_per_seq=args.max_predictions_per_seq,
        masked_lm_prob=args.masked_lm_prob, dupe_factor=args.dupe_factor,
        short_seq_prob=args.short_seq_prob, whole_word_masking=args.do_whole_word_mask,
        max_ngram=args.max_ngram,
        instance_format=args.instance_format,
        static_masking=not args.unmasked, eval_fraction=args.eval_fraction,
        bucket_bytes=max(1, int(args.bucket_mb * 2**20)), seed=args.random_seed,
        num_workers=args.num_workers, pipeline_args=args.pipeline_args,
        max_instances_per_row=args.max_instances_per_row)


def _bool(text):
    if text.lower() in ("true", "1", "yes"):
        return True
    if text.lower() in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
