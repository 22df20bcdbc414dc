#!/usr/bin/env bash
# Injected-bug check: does the test suite still catch known bugs?
#
#   inject.sh [TREE] [OVERRIDE_TSV]
#
# TREE          source tree to test (default: this repository). It is imported with PYTHONPATH=TREE
#               and pytest runs from it, so point it at a shrunk / changed checkout.
# OVERRIDE_TSV  optional; same format as catchers.tsv. A patch listed there uses those node
#               ids instead of catchers.tsv's (also: $CATCHERS_OVERRIDE).
#
# For each patch in $PATCH_DIR (default: patches/ next to this script) that has a row in
# catchers.tsv (patch name without .patch <TAB> space-separated pytest node ids), the patch
# is applied to TREE, the node ids run (pytest -x), and the patch is reverted with a reverse
# apply (uncommitted changes in TREE are left alone). Verdicts:
#   CAUGHT   a catching test failed (pytest exit 1)
#   MISSED   every catching test passed or was skipped (pytest exit 0), or no catcher listed
#   ERROR    pytest could not run them (exit 2-5: e.g. a node id that no longer exists)
#   NOAPPLY  the patch does not apply to TREE (the code moved: re-make the patch)
# Before the patches, the baseline run checks that every catcher passes on the unpatched
# tree (a catcher that fails anyway proves nothing); BASELINE=0 skips it.
#
# Environment: KERAS_BACKEND (default tensorflow), PYTHON (default TREE/.venv/bin/python),
# PATCH_DIR, CATCHERS (default catchers.tsv next to this script), ONLY (a regex on patch
# names), PYTEST_ARGS (extra pytest arguments), LOG_DIR (default /tmp/inject-logs).
# Exit status: 0 when every bug is CAUGHT, 1 otherwise.

set -u
HERE=$(cd "$(dirname "$0")" && pwd)
TREE=$(cd "${1:-$HERE/../..}" && pwd) || exit 2
OVERRIDE=${2:-${CATCHERS_OVERRIDE:-}}
PATCH_DIR=${PATCH_DIR:-$HERE/patches}
CATCHERS=${CATCHERS:-$HERE/catchers.tsv}
PYTHON=${PYTHON:-$TREE/.venv/bin/python}
BACKEND=${KERAS_BACKEND:-tensorflow}
LOG_DIR=${LOG_DIR:-/tmp/inject-logs}
mkdir -p "$LOG_DIR"

export PYTHONPATH="$TREE" KERAS_BACKEND="$BACKEND" TF_CPP_MIN_LOG_LEVEL=3 \
       KBS_OWN_PROCESSES_BACKEND="${KBS_OWN_PROCESSES_BACKEND:-$BACKEND}"

imported=$(cd "$TREE" && "$PYTHON" -c 'import keras_bert_suite, os; print(os.path.dirname(os.path.dirname(os.path.realpath(keras_bert_suite.__file__))))' 2>/dev/null)
if [ "$imported" != "$(realpath "$TREE")" ]; then
    echo "keras_bert_suite is imported from '$imported', not from $TREE: aborting." >&2
    exit 2
fi

# catchers: patch -> node ids (override rows win)
declare -A NODES
read_tsv() {
    local name nodes
    while IFS=$'\t' read -r name nodes; do
        [[ -z "$name" || "$name" == \#* ]] && continue
        NODES[$name]=$nodes
    done < "$1"
}
read_tsv "$CATCHERS"
[ -n "$OVERRIDE" ] && read_tsv "$OVERRIDE"

in_git=0
git -C "$TREE" rev-parse --show-toplevel >/dev/null 2>&1 \
    && [ "$(git -C "$TREE" rev-parse --show-toplevel)" = "$(realpath "$TREE")" ] && in_git=1
patch_op() {  # apply | check | revert, patch file
    local mode=$1 file=$2
    if [ $in_git = 1 ]; then
        case $mode in apply) git -C "$TREE" apply "$file" ;;
                      check) git -C "$TREE" apply --check "$file" ;;
                      revert) git -C "$TREE" apply -R "$file" ;; esac
    else
        case $mode in apply) patch -s -p1 -d "$TREE" --forward < "$file" ;;
                      check) patch -s -p1 -d "$TREE" --forward --dry-run < "$file" ;;
                      revert) patch -s -p1 -d "$TREE" -R < "$file" ;; esac
    fi
}
CURRENT=""
cleanup() {
    if [ -n "$CURRENT" ]; then
        patch_op revert "$CURRENT" || echo "COULD NOT REVERT $CURRENT in $TREE" >&2
        CURRENT=""
    fi
}
trap 'cleanup; exit 130' INT TERM
trap cleanup EXIT

run_pytest() {  # log, node ids...
    local log=$1; shift
    # shellcheck disable=SC2086
    (cd "$TREE" && nice -n 10 "$PYTHON" -m pytest -q -p no:cacheprovider -x -rfE \
        ${PYTEST_ARGS:-} "$@") > "$log" 2>&1
}

patches=()
for p in "$PATCH_DIR"/*.patch; do
    name=$(basename "$p" .patch)
    [[ -n "${ONLY:-}" && ! "$name" =~ $ONLY ]] && continue
    patches+=("$p")
done

echo "tree: $TREE  backend: $BACKEND  patches: ${#patches[@]}  logs: $LOG_DIR"
if [ "${BASELINE:-1}" != 0 ]; then
    all=()
    for p in "${patches[@]}"; do
        # shellcheck disable=SC2206
        all+=(${NODES[$(basename "$p" .patch)]:-})
    done
    mapfile -t all < <(printf '%s\n' "${all[@]}" | sort -u)
    start=$SECONDS
    if run_pytest "$LOG_DIR/baseline.log" "${all[@]}"; then
        echo "baseline: all ${#all[@]} catchers pass on the unpatched tree ($((SECONDS - start))s)"
    else
        echo "baseline: FAILS on the unpatched tree ($((SECONDS - start))s); see $LOG_DIR/baseline.log:"
        grep -E "^(FAILED|ERROR) " "$LOG_DIR/baseline.log" | head -5
        echo "fix the tree or catchers.tsv first (or BASELINE=0)."
        exit 2
    fi
fi

printf '%-42s %-8s %6s  %s\n' PATCH VERDICT TIME DETAIL
missed=0
for p in "${patches[@]}"; do
    name=$(basename "$p" .patch)
    nodes=${NODES[$name]:-}
    log="$LOG_DIR/$name.log"
    if [ -z "$nodes" ]; then
        printf '%-42s %-8s %6s  %s\n' "$name" MISSED - "no catching test in catchers.tsv"
        missed=$((missed + 1)); continue
    fi
    if ! patch_op check "$p" >/dev/null 2>&1; then
        printf '%-42s %-8s %6s  %s\n' "$name" NOAPPLY - "patch does not apply to $TREE"
        missed=$((missed + 1)); continue
    fi
    patch_op apply "$p" && CURRENT=$p
    start=$SECONDS
    # shellcheck disable=SC2086
    run_pytest "$log" $nodes
    rc=$?
    elapsed=$((SECONDS - start))
    cleanup
    first=$(grep -m1 -E "^(FAILED|ERROR) " "$log" | sed -E 's/^(FAILED|ERROR) //; s/ - .*//')
    case $rc in
        1) verdict=CAUGHT detail=$first ;;
        0) verdict=MISSED detail="$(tail -1 "$log")" ;;
        *) verdict=ERROR  detail="pytest exit $rc: $(tail -1 "$log")" ;;
    esac
    [ $verdict = CAUGHT ] || missed=$((missed + 1))
    printf '%-42s %-8s %5ss  %s\n' "$name" "$verdict" "$elapsed" "$detail"
done
echo "$(( ${#patches[@]} - missed ))/${#patches[@]} caught"
[ $missed = 0 ]
