"""Recipes: JSON files of settings, merged over a task's defaults, with `--set` overrides.

A recipe is a JSON file in `recipes/` (or any path). Its "task" picks the schema (see
`recipe_runner.SCHEMAS`): a dict of every key the task understands with its default, and the
keys whose values are free-form. Every key a recipe leaves out takes the default.
`--set key=value` overrides one key: dotted keys (`training.optimizer.learning_rate=5e-4`),
values parsed as JSON (`128`, `true`, `null`, `[1, 2]`, `"text"`), and a bare word that is
not JSON is taken as a string (`data.corpus=sotu`). Unknown keys and values of the wrong type
are `RecipeError`s that name the key.
"""

import copy
import dataclasses
import difflib
import json
import os

from keras_bert_suite.tasks.recipe_contract import RecipeError

RECIPES_DIR = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "recipes")
_REQUIRED_TYPES = {bool: (bool,), int: (int,), float: (int, float), str: (str,),
                   list: (list,), dict: (dict,)}


@dataclasses.dataclass(frozen=True)
class Schema:
    """The keys a task's recipes may set: `defaults` (nested dicts), `free_form` dotted keys
    whose values are passed through unchecked (e.g. BertEncoder arguments; a value of more
    than one type, checked where it is used)."""

    defaults: dict
    free_form: frozenset = frozenset()
    renamed: dict = dataclasses.field(default_factory=lambda: dict(RENAMED_KEYS))

    def __post_init__(self):
        object.__setattr__(self, "free_form", frozenset(self.free_form) | COMMON_FREE_FORM)


# Keys of every recipe that take more than one type: training.jit_compile is "auto", true or
# false, as for `model.compile` (checked by TrainingRun).
COMMON_FREE_FORM = frozenset({"training.jit_compile"})


# Keys older recipes used -> their one name now (a length the data emits is
# `sequence_length`; `max_sequence_length` is the encoder's position table; every recipe
# sets its optimizer under training.optimizer).
RENAMED_KEYS = {"data.max_seq_length": "data.sequence_length",
                "data.max_query_length": "data.max_question_length",
                **{f"training.{key}": f"training.optimizer.{key}" for key in (
                    "learning_rate", "warmup_fraction", "weight_decay", "global_clipnorm")}}
# Keys older recipes used that no longer exist -> what to set instead.
RETIRED_KEYS = {"model.next_sentence_prediction": (
    'set model.objective instead: "mlm_nsp" for MLM + next-sentence prediction (what true '
    'meant), "mlm" for MLM only (false), or "mlm_sop", "electra", "deberta_v3", "ltr" (docs/pretraining.md)')}


def resolve_recipe_path(name_or_path):
    """A path to a recipe file, or the name of one in recipes/ (with or without .json)."""
    candidates = [name_or_path]
    if os.path.sep not in name_or_path:
        candidates += [os.path.join(RECIPES_DIR, name_or_path),
                       os.path.join(RECIPES_DIR, name_or_path + ".json")]
    for path in candidates:
        if os.path.isfile(path):
            return path
    available = sorted(os.path.splitext(f)[0] for f in os.listdir(RECIPES_DIR)
                       if f.endswith(".json")) if os.path.isdir(RECIPES_DIR) else []
    raise RecipeError(f"No recipe {name_or_path!r}: not a file, and not one of "
                      f"{available} in {RECIPES_DIR}.")


def read_recipe_file(path):
    """The JSON object in `path`."""
    try:
        with open(path, encoding="utf-8") as f:
            values = json.load(f)
    except json.JSONDecodeError as error:
        raise RecipeError(f"Recipe {path} is not valid JSON: {error}") from None
    if not isinstance(values, dict):
        raise RecipeError(f"Recipe {path} must hold a JSON object, got {type(values).__name__}.")
    return values


def apply_recipe(schema, values, overrides, source):
    """`values` (from `source`) merged over the schema's defaults, then the overrides."""
    recipe = copy.deepcopy(schema.defaults)
    for key, value in values.items():
        set_key(schema, recipe, key, value, source)
    for override in overrides:
        key, value = parse_override(override)
        set_key(schema, recipe, key, value, source="--set")
    return recipe


def parse_override(text):
    """"a.b=value" -> ("a.b", value): value parsed as JSON, a bare non-JSON word as a string."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key or any(not part for part in key.split(".")):
        raise RecipeError(f"Bad override {text!r}: expected key=value with a dotted key, e.g. "
                          f"training.batch_size=64.")
    raw = raw.strip()
    try:
        return key, json.loads(raw)
    except json.JSONDecodeError as error:
        if not raw or raw[0] in "[{\"" or raw[0].isdigit() or raw[0] in "-.":
            raise RecipeError(f"Bad override {text!r}: {raw!r} is not valid JSON ({error}).") \
                from None
        return key, raw  # a bare word: data.corpus=sotu


def set_key(schema, recipe, key, value, source):
    """Sets dotted `key` in `recipe`; RecipeError for a key the schema lacks or a wrong type."""
    if key in schema.renamed:
        raise RecipeError(f"{source}: recipe key '{key}' is now '{schema.renamed[key]}'; "
                          "rename it.")
    if key in RETIRED_KEYS:
        raise RecipeError(f"{source}: recipe key '{key}' was retired; {RETIRED_KEYS[key]}.")
    parts = key.split(".")
    node, default_node, path = recipe, schema.defaults, []
    for part in parts[:-1]:
        path.append(part)
        if ".".join(path) in schema.free_form:
            node = node[part]
            default_node = None
            continue
        if default_node is not None and not isinstance(default_node.get(part), dict):
            _unknown(".".join(path), default_node, source)
        node, default_node = node[part], (default_node[part] if default_node is not None else None)
    last = parts[-1]
    if default_node is not None:
        if last not in default_node:
            _unknown(key, default_node, source)
        default = default_node[last]
        if isinstance(default, dict) and key not in schema.free_form:
            if not isinstance(value, dict):
                raise RecipeError(f"{source}: '{key}' is a section; set its keys "
                                  f"({', '.join(default)}), not {value!r}.")
            for sub_key, sub_value in value.items():
                set_key(schema, recipe, f"{key}.{sub_key}", sub_value, source)
            return
        if key not in schema.free_form:
            _check_type(key, value, default, source)
    node[last] = value


def _unknown(key, default_node, source):
    name = key.rsplit(".", 1)[-1]
    close = difflib.get_close_matches(name, list(default_node), n=1)
    hint = f" Did you mean '{key.rsplit('.', 1)[0] + '.' if '.' in key else ''}{close[0]}'?" \
        if close else ""
    raise RecipeError(f"{source}: unknown recipe key '{key}'.{hint} Known keys here: "
                      f"{', '.join(sorted(default_node))}.")


def _check_type(key, value, default, source):
    if default is None or value is None:
        return
    allowed = _REQUIRED_TYPES.get(type(default), (type(default),))
    if isinstance(value, bool) and bool not in allowed:
        allowed = ()  # True is an int to Python, not to a recipe
    if not isinstance(value, allowed):
        raise RecipeError(f"{source}: '{key}' must be a {type(default).__name__} (like "
                          f"{json.dumps(default)}), got {json.dumps(value)}.")
