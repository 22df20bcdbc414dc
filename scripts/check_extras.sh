#!/usr/bin/env bash
# Each pip extra of setup.cfg, installed alone into a fresh virtualenv, runs the command it
# is documented for: what `pip install keras_bert_suite[extra]` gives a user.
#
#   scripts/check_extras.sh [EXTRA ...]      (default: every extra below; ~3 min each)
#
# A venv lives under $WORK (default a new temporary folder) only while its check runs.
# Prints one line per extra, PASS or FAIL, and exits 1 if any failed.

set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-python3.11}
WORK=${WORK:-$(mktemp -d)}
EXTRAS=("$@")
[ ${#EXTRAS[@]} -eq 0 ] && EXTRAS=(base checkpoints jax torch keras_hub serving models pretraining ner)

# extra -> the shell command it must run (inside the venv, from an empty folder).
check_command() {
    case $1 in
    base) echo 'kbs presets | grep -q roberta_base' ;;
    checkpoints) echo 'python -c "from keras_bert_suite import BertEncoder, BertPreprocessor; e = BertEncoder.from_preset(\"minilm_l6_h384_uncased\"); p = BertPreprocessor.from_preset(\"minilm_l6_h384_uncased\", sequence_length=16); print(e(p([\"hello world\"]))[\"pooled_output\"].shape)"' ;;
    jax) echo 'KERAS_BACKEND=jax python -c "import keras; assert keras.backend.backend() == \"jax\"; from keras_bert_suite import BertEncoder; import numpy as np; e = BertEncoder(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16); print(e({\"token_ids\": np.ones((1, 4), \"int32\"), \"segment_ids\": np.zeros((1, 4), \"int32\"), \"padding_mask\": np.ones((1, 4), \"int32\")})[\"sequence_output\"].shape)"' ;;
    torch) echo 'KERAS_BACKEND=torch python -c "import keras; assert keras.backend.backend() == \"torch\"; from keras_bert_suite import BertEncoder; import numpy as np; e = BertEncoder(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16); print(e({\"token_ids\": np.ones((1, 4), \"int32\"), \"segment_ids\": np.zeros((1, 4), \"int32\"), \"padding_mask\": np.ones((1, 4), \"int32\")})[\"sequence_output\"].shape)"' ;;
    keras_hub) echo 'python -c "from keras_bert_suite import BertEncoder, save_keras_hub; save_keras_hub(BertEncoder(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16), \"kh\")" && python -c "import keras_hub; keras_hub.models.BertBackbone.from_preset(\"kh\")"' ;;
    serving) echo 'python -c "from keras_bert_suite.serving import RestClient; from tensorflow_serving.apis import predict_pb2"' ;;
    models) echo 'python -c "from keras_bert_suite.tasks.span_labeler.metric import f1_score; assert abs(f1_score(\"the cat sat\", \"a cat sat down\") - 0.8) < 1e-9"' ;;
    pretraining) echo 'printf "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n.\na\nfirst\nsecond\nsentence\ndocument\nit\nhas\ntwo\nstarts\nends\nhere\nthe\nof\n" > vocab.txt && printf "The first sentence of a document. It has two.\n\nA second document starts here. It ends here.\n" > corpus.txt && kbs create-pretraining-data --input corpus.txt --output_dir records --vocab_file vocab.txt --max_seq_length 32 --dupe_factor 1 && ls -R records | grep -q tfrecord' ;;
    ner) echo 'python -c "from keras_bert_suite.tasks.token_classifier.metric import entity_scores; s = entity_scores([[\"B-PER\", \"O\"]], [[\"B-PER\", \"O\"]]); print(s); assert s[\"f1\"] == 1.0"' ;;
    *) return 1 ;;
    esac
}

failed=0
for extra in "${EXTRAS[@]}"; do
    venv="$WORK/venv-$extra"
    spec="$ROOT"
    [ "$extra" != base ] && spec="$ROOT[$extra]"
    started=$(date +%s)
    log="$WORK/$extra.log"
    if ! command=$(check_command "$extra"); then
        echo "FAIL $extra: no such extra in this script"; failed=1; continue
    fi
    (
        set -e
        "$PYTHON" -m venv "$venv"
        "$venv/bin/python" -m pip install --quiet --upgrade pip
        "$venv/bin/python" -m pip install --quiet "$spec"
        mkdir -p "$WORK/run-$extra" && cd "$WORK/run-$extra"
        PATH="$venv/bin:$PATH" TF_CPP_MIN_LOG_LEVEL=3 bash -c "$command"
    ) >"$log" 2>&1
    status=$?
    seconds=$(( $(date +%s) - started ))
    if [ $status -eq 0 ]; then
        echo "PASS $extra (${seconds}s)"
    else
        echo "FAIL $extra (${seconds}s): see $log"; tail -5 "$log"; failed=1
    fi
    rm -rf "$venv" "$WORK/run-$extra"
done
exit $failed
