"""ElectraPretrainer: ELECTRA's generator and discriminator trained together (Clark et al. 2020)."""

import keras
from keras import ops

from keras_bert_suite.layers.generator_sampling import ReplaceTokens, SampleTokens, at_positions
from keras_bert_suite.layers.masked_lm_head import MaskedLMHead
from keras_bert_suite.layers.replaced_token_head import ReplacedTokenHead
from keras_bert_suite.layers.blocks.encoder_pieces import first_token
from keras_bert_suite.layers.initializer import BertInitializer
from keras_bert_suite.models.encoder import BertEncoder, EncoderParts, _encode
from keras_bert_suite.names import ENCODER_INPUTS, MASK_POSITIONS
from keras_bert_suite.tasks.pretrainer.gradient_disentangled import (
    GRADIENT_DISENTANGLED, SHARED, GradientDisentangledDiscriminator, check_embedding_sharing)
from keras_bert_suite.tasks.pretrainer.model import BertPretrainer, check_pretraining_inputs
from keras_bert_suite.tasks.pretrainer.replaced_token_detector import ReplacedTokenDetector
from keras_bert_suite.tasks.head_parts import freeze_unused_pooler, resolve_encoder
from keras_bert_suite.tasks.task import BertTask
from keras_bert_suite.training.optimizers import create_optimizer

# The metrics fit() logs beside the total `loss`.
METRIC_NAMES = ("generator_loss", "generator_accuracy", "discriminator_loss",
                "discriminator_accuracy", "replaced_fraction")


def generator_sizes(encoder, generator_size):
    """(hidden, heads, intermediate) of the generator: `generator_size` of the
    discriminator's each (ELECTRA's rule), at least one head, hidden a multiple of heads."""
    if not 0.0 < generator_size <= 1.0:
        raise ValueError(f"generator_size is a fraction of the discriminator's width in "
                         f"(0, 1] (ELECTRA: 0.25 small, 1/3 base), got {generator_size!r}.")
    heads = max(1, int(encoder.num_heads * generator_size))
    hidden = max(heads, int(encoder.hidden_dim * generator_size) // heads * heads)
    intermediate = max(1, int(encoder.intermediate_dim * generator_size))
    return hidden, heads, intermediate


def generator_config(encoder, generator_size, generator_layers=None):
    """The generator's EncoderConfig: the discriminator's block kind and options at
    `generator_size` of its width (`generator_sizes`) and `generator_layers` deep (None: the
    discriminator's depth), one unpruned block per layer, reading the discriminator's
    embeddings (E wide: a projection E -> hidden where they differ)."""
    hidden, heads, intermediate = generator_sizes(encoder, generator_size)
    layers = encoder.num_layers if generator_layers is None else generator_layers
    if isinstance(layers, bool) or not isinstance(layers, int) or layers < 1:
        raise ValueError(f"generator_layers is None (the discriminator's depth) or a number "
                         f"of layers >= 1 (DeBERTa-v3: half the discriminator's), got "
                         f"{generator_layers!r}.")
    width = encoder.embedding_dim or encoder.hidden_dim
    return encoder.config.replace(
        num_layers=layers, hidden_dim=hidden, num_heads=heads, intermediate_dim=intermediate,
        embedding_dim=None if width == hidden else width, layer_num_heads=None,
        layer_intermediate_dims=None, num_layer_groups=None, layers_per_group=1)


@keras.saving.register_keras_serializable(package="keras_bert_suite")
class ElectraPretrainer(BertTask):
    """ELECTRA pretraining: a small generator fills the masked positions with tokens it
    samples, and the discriminator (the model that fine-tunes) tells for every token whether
    it was replaced.

    * The generator has the discriminator's depth (or `generator_layers`: DeBERTa-v3's is
      half as deep at the full width) and `generator_size` of its width, heads
      and feed-forward size; the two share the whole embeddings block (token, position and
      segment tables and their LayerNorm), and the generator's masked-LM decoder is tied to
      it. Each keeps its own embedding -> hidden projection where the widths differ.
    * Tokens are sampled from the generator's softmax without gradient; the discriminator
      reads the original tokens with the samples at the masked positions. A sample equal to
      the original counts as original ("replaced" means a different token).
    * Loss = generator MLM cross-entropy (mean over real predictions) + `rtd_weight` (50) x
      discriminator sigmoid cross-entropy (mean over real tokens).
    * The generator's blocks are the discriminator's kind (BERT's, DeBERTa-v3's with its own
      relative embeddings, ...).
    * `embedding_sharing`: "shared" (ELECTRA: one token table that both losses train) or
      "gradient_disentangled" (DeBERTa-v3's GDES, `gradient_disentangled.py`): the
      discriminator reads stop_gradient(E_G) + E_Delta, so the generator's MLM loss alone
      trains the table E_G (`encoder`'s) and the RTD loss only E_Delta (zeros at first, held
      by `discriminator_layer`). `discriminator()`, `detector()` and `save_to_preset` give
      the discriminator with E_G + E_Delta as its table; `encoder` itself keeps E_G.

    Data: the same as `BertPretrainer` without NSP: x = `token_ids` (masked), `segment_ids`,
    `padding_mask`, `mask_positions` [B, P]; y = {"mlm_labels", "mlm_weights"}. Padded
    prediction slots point at position 0 ([CLS], which is never masked) and change nothing.

    `encoder` is the discriminator's; `detector()` returns it with its replaced-token head
    as a `ReplacedTokenDetector` (transformers' ElectraForPreTraining via save_huggingface),
    and `save_to_preset` writes a preset that ReplacedTokenDetector and every task read.
    `generator()` returns the generator as a masked-LM `BertPretrainer` (transformers'
    ElectraForMaskedLM via save_huggingface).
    Logged: `loss`, `generator_loss`, `generator_accuracy`, `discriminator_loss`,
    `discriminator_accuracy` (over real tokens) and `replaced_fraction`.

    >>> import numpy as np
    >>> from keras_bert_suite import BertEncoder
    >>> electra = ElectraPretrainer(BertEncoder(
    ...     vocabulary_size=50, num_layers=1, num_heads=4, hidden_dim=16, intermediate_dim=32,
    ...     embedding_dim=8), generator_size=0.25, seed=1)
    >>> x = {"token_ids": np.array([[2, 4, 9, 3]], "int32"), "segment_ids": np.zeros((1, 4), "int32"),
    ...      "padding_mask": np.ones((1, 4), "int32"), "mask_positions": np.array([[1, 0]], "int32")}
    >>> y = {"mlm_labels": np.array([[7, 0]], "int32"), "mlm_weights": np.array([[1.0, 0.0]], "float32")}
    >>> sorted(electra.fit(x, y, verbose=0).history)
    ['discriminator_accuracy', 'discriminator_loss', 'generator_accuracy', 'generator_loss', 'loss', 'replaced_fraction']
    """

    task_name = "electra_pretrainer"

    def __init__(self, encoder=None, generator_size=0.25, rtd_weight=50.0, preprocessor=None,
                 seed=None, embedding_sharing=SHARED, generator_layers=None, backbone=None,
                 **kwargs):
        encoder = resolve_encoder(encoder, backbone)
        check_embedding_sharing(embedding_sharing)
        config = generator_config(encoder, generator_size, generator_layers)
        policy = encoder.layer_dtype_policy
        initializer = BertInitializer(stddev=encoder.initializer_range)
        projection = None
        if config.embedding_dim is not None:
            projection = keras.layers.Dense(config.hidden_dim, kernel_initializer=initializer,
                                            dtype=policy, name="generator_projection")
        kind = encoder.block_kind
        blocks = [kind.make(config, i, policy, f"generator_layer_{i}")
                  for i in range(config.num_blocks)]
        pieces = kind.encoder._replace(pool=first_token)  # the generator has no pooler
        generator = EncoderParts(encoder.embeddings, projection, blocks, config.layer_schedule,
                                 keras.layers.Identity(name="generator_cls"), encoder.causal,
                                 config, pieces, pieces.layers(config, policy))
        generator_head = MaskedLMHead(
            encoder.token_embedding, layer_norm_epsilon=encoder.layer_norm_epsilon,
            initializer_range=encoder.initializer_range, activation=encoder.activation,
            dtype=policy, name="generator_head")
        sampler = SampleTokens(seed, name="sample_tokens")
        detector_head = ReplacedTokenHead(encoder.hidden_dim, activation=encoder.activation,
                                          initializer_range=encoder.initializer_range,
                                          dtype=policy, name="replaced_token_head")

        # === Functional graph ===
        inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name)
                  for name in ENCODER_INPUTS + (MASK_POSITIONS,)}
        originals = {name: inputs[name] for name in ENCODER_INPUTS}
        positions = inputs[MASK_POSITIONS]
        with_cls = ops.concatenate([ops.zeros_like(positions[:, :1]), positions], axis=1)
        rows, _, _ = _encode(generator, originals, rows=with_cls)  # [B, 1 + P, Hg]
        mlm_logits = generator_head(rows[:, 1:])  # [B, P, V]
        sampled = sampler(mlm_logits)  # [B, P]
        corrupted = ReplaceTokens(name="replace_tokens")(inputs["token_ids"], positions, sampled)
        discriminator_inputs = {**originals, "token_ids": corrupted}
        discriminator = None
        if embedding_sharing == GRADIENT_DISENTANGLED:
            discriminator = GradientDisentangledDiscriminator(encoder, dtype=policy,
                                                              name="discriminator")
            sequence = discriminator(discriminator_inputs)
        else:
            sequence = encoder(discriminator_inputs)["sequence_output"]
        outputs = {"mlm_logits": mlm_logits, "rtd_logits": detector_head(sequence),
                   "sampled_ids": sampled}
        super().__init__(inputs, outputs, encoder, preprocessor, **kwargs)
        freeze_unused_pooler(encoder)  # the heads read sequence outputs only
        self.generator_size = generator_size
        self.generator_layers = generator_layers
        self.rtd_weight = float(rtd_weight)
        self.seed = seed
        self.embedding_sharing = embedding_sharing
        self.discriminator_layer = discriminator  # GDES: E_Delta's holder, else None
        self.generator_parts = generator
        self.generator_head = generator_head
        self.replaced_token_head = detector_head
        self.trackers = {name: keras.metrics.Mean(name=name) for name in METRIC_NAMES}
        self.compile()

    def _check_inputs(self, inputs):
        check_pretraining_inputs(self, inputs)

    # === Loss and metrics ===

    def default_optimizer(self):
        return create_optimizer("adamw")  # pretraining's constant 1e-4

    def default_loss(self):
        return None  # compute_loss below: the two terms need the sampled tokens

    def default_weighted_metrics(self):
        return None

    def loss_terms(self, x, y, y_pred):
        """{"generator_loss", "discriminator_loss", "generator_accuracy",
        "discriminator_accuracy", "replaced_fraction"} of one batch."""
        labels = ops.cast(y["mlm_labels"], "int32")
        weights = ops.cast(y.get("mlm_weights", ops.ones_like(labels)), "float32")
        logits = ops.cast(y_pred["mlm_logits"], "float32")
        cross_entropy = ops.sparse_categorical_crossentropy(labels, logits, from_logits=True)
        slots = ops.maximum(ops.sum(weights), 1.0)
        generator_loss = ops.sum(cross_entropy * weights) / slots
        hit = ops.cast(ops.equal(ops.cast(ops.argmax(logits, axis=-1), "int32"), labels),
                       "float32")
        generator_accuracy = ops.sum(hit * weights) / slots

        replaced = self.replaced_tokens(x, y, y_pred["sampled_ids"])  # [B, T] 0/1
        real = ops.cast(ops.greater(x["padding_mask"], 0), "float32")
        rtd_logits = ops.cast(y_pred["rtd_logits"], "float32")
        tokens = ops.maximum(ops.sum(real), 1.0)
        binary = ops.binary_crossentropy(replaced, rtd_logits, from_logits=True)
        discriminator_loss = ops.sum(binary * real) / tokens
        correct = ops.cast(ops.equal(ops.cast(ops.greater(rtd_logits, 0.0), "float32"),
                                     replaced), "float32")
        return {"generator_loss": generator_loss, "discriminator_loss": discriminator_loss,
                "generator_accuracy": generator_accuracy,
                "discriminator_accuracy": ops.sum(correct * real) / tokens,
                "replaced_fraction": ops.sum(replaced * real) / tokens}

    @staticmethod
    def replaced_tokens(x, y, sampled):
        """[B, T] float 1.0 where the discriminator's input differs from the original token:
        a real prediction slot whose sample is not the label."""
        labels = ops.cast(y["mlm_labels"], "int32")
        weights = y.get("mlm_weights", ops.ones_like(labels))
        changed = ops.logical_and(ops.not_equal(ops.cast(sampled, "int32"), labels),
                                  ops.greater(weights, 0))
        hit, value = at_positions(x[MASK_POSITIONS], ops.cast(changed, "int32"),
                                  ops.shape(x["token_ids"])[1])
        return ops.cast(ops.logical_and(hit, ops.greater(value, 0)), "float32")

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        terms = self.loss_terms(x, y, y_pred)
        total = terms["generator_loss"] + self.rtd_weight * terms["discriminator_loss"]
        if self.losses:
            total = total + ops.sum(self.losses)
        return total

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        for name, value in self.loss_terms(x, y, y_pred).items():
            self.trackers[name].update_state(value)
        return self.get_metrics_result()

    @property
    def metrics(self):
        return [*super().metrics, *self.trackers.values()]

    def labels_by_output(self, y, sample_weight):
        if not isinstance(y, dict) or "mlm_labels" not in y or not set(y) <= {
                "mlm_labels", "mlm_weights"}:
            got = sorted(y) if isinstance(y, dict) else type(y).__name__
            raise ValueError(f"ElectraPretrainer expects labels {{'mlm_labels', 'mlm_weights'}} "
                             f"(as BertPretrainer without NSP); got {got}.")
        return y, sample_weight

    # === The discriminator, weights and presets ===

    def discriminator(self):
        """The discriminator's encoder: `encoder` itself with ELECTRA's sharing; under GDES a
        copy of it whose token table is E_G + E_Delta."""
        if self.discriminator_layer is None:
            return self.encoder
        copy = self.encoder.__class__.from_config(self.encoder.get_config())
        copy.set_weights(self.encoder.get_weights())
        copy.token_embedding.embeddings.assign(self.discriminator_layer.token_table())
        return copy

    def detector(self):
        """The discriminator as a ReplacedTokenDetector (sharing this model's weights with
        ELECTRA's sharing; under GDES on the `discriminator()` copy)."""
        detector = ReplacedTokenDetector(self.discriminator(), preprocessor=self.preprocessor)
        for mine, theirs in zip(self.replaced_token_head.weights,
                                detector.replaced_token_head.weights):
            theirs.assign(mine)
        return detector

    def generator(self):
        """The generator on its own: a masked-LM BertPretrainer (no NSP) on an encoder of the
        generator's sizes, with a copy of this model's generator weights and of the shared
        embeddings block, so it computes this model's `mlm_logits`. ELECTRA's authors
        released their generators too; `save_huggingface` writes it as ElectraForMaskedLM."""
        sizes = generator_config(self.encoder, self.generator_size, self.generator_layers)
        config = {key: value for key, value in self.encoder.get_config().items()
                  if key != "name"}
        config.update({key: getattr(sizes, key) for key in (
            "num_layers", "hidden_dim", "num_heads", "intermediate_dim", "embedding_dim", "layer_num_heads",
            "layer_intermediate_dims", "num_layer_groups", "layers_per_group")},
            pooler_activation="gelu")  # ELECTRA's; the generator has no pooler
        generator = BertPretrainer(BertEncoder.from_config(config),
                                   preprocessor=self.preprocessor, next_sentence_prediction=False)
        encoder, parts = generator.encoder, self.generator_parts
        for mine, source in [(encoder.embeddings, parts.embeddings),
                             (encoder.embedding_projection, parts.embedding_projection),
                             *zip(encoder.transformer_layers, parts.blocks, strict=True),
                             *zip(encoder.shared_layers.values(), parts.shared.values(),
                                  strict=True),
                             (generator.masked_lm_head, self.generator_head)]:
            if mine is not None:  # a layer, or a lone variable among the kind's shared ones
                for variable, value in zip(getattr(mine, "weights", [mine]),
                                           getattr(source, "weights", [source]), strict=True):
                    variable.assign(value)
        return generator

    # The discriminator's weight names (the encoder's plus `rtd/...`), its preset (which a
    # ReplacedTokenDetector and any task read) and its head from a checkpoint: the
    # detector's own code, which reads `encoder` and `replaced_token_head` as this model has.
    # Under GDES the discriminator's token table is E_G + E_Delta: the `detector()` copy's.
    def weight_map(self):
        if self.discriminator_layer is not None:
            return self.detector().weight_map()
        return ReplacedTokenDetector.weight_map(self)

    preset_weights = ReplacedTokenDetector.preset_weights
    _from_checkpoint = vars(ReplacedTokenDetector)["_from_checkpoint"]  # the classmethod, unbound

    def get_config(self):
        return {**super().get_config(), "generator_size": self.generator_size,
                "rtd_weight": self.rtd_weight, "seed": self.seed,
                "embedding_sharing": self.embedding_sharing,
                "generator_layers": self.generator_layers}
