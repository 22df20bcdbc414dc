"""The BERT family's pretraining objectives, one row each: what data they read and what model
they train. `kbs pretrain` picks one with `model.objective`; the data keys left null in a
recipe (`data.instance_format`, `data.max_ngram`, `data.targets`) take the objective's.

    objective = OBJECTIVES["mlm_sop"]       # ALBERT
    objective.instance_format, objective.max_ngram   # -> "sop", 3

| name    | paper                    | instances      | masking       | loss                        |
|---------|--------------------------|----------------|---------------|-----------------------------|
| mlm_nsp | BERT (Devlin et al.)     | nsp pairs      | tokens        | MLM + next sentence         |
| mlm     | RoBERTa (Liu et al.)     | doc_sentences  | tokens        | MLM                         |
| mlm_sop | ALBERT (Lan et al.)      | sop pairs      | n-grams, n<=3 | MLM + sentence order        |
| electra | ELECTRA (Clark et al.)   | doc_sentences  | tokens        | generator MLM + 50 x RTD    |
| deberta_v3 | DeBERTaV3 (He et al.) | doc_sentences  | tokens        | ELECTRA's, gradient-disentangled embedding sharing |
| ltr     | GPT-1 / BERT's ablation  | doc_sentences  | none          | next token, causal attention|

Shared layers (ALBERT's) are an encoder setting, not an objective: a recipe sets
`model.encoder_overrides.num_layer_groups`.
"""

import dataclasses


@dataclasses.dataclass(frozen=True)
class Objective:
    description: str
    instance_format: str  # tasks/pretrainer/data/instances.py
    max_ngram: int  # 1 = single tokens (whole words with data.whole_word_masking)
    targets: str  # "masked" (MLM) or "next_token" (left-to-right LM)
    sentence_pair_head: bool  # NSP / SOP head on each instance's [CLS]
    causal: bool = False  # attention to earlier positions only
    electra: bool = False  # generator + discriminator (ElectraPretrainer)
    # ElectraPretrainer's: "shared" (ELECTRA) or "gradient_disentangled" (DeBERTa-v3's GDES)
    embedding_sharing: str = "shared"


OBJECTIVES = {
    "mlm_nsp": Objective("BERT: masked LM + next-sentence prediction", "nsp", 1, "masked",
                         True),
    "mlm": Objective("RoBERTa: masked LM only on DOC-SENTENCES, masked afresh each pass",
                     "doc_sentences", 1, "masked", False),
    "mlm_sop": Objective("ALBERT: n-gram masked LM (n <= 3) + sentence-order prediction",
                         "sop", 3, "masked", True),
    "electra": Objective("ELECTRA: a small generator's MLM + 50 x the discriminator's "
                         "replaced-token detection", "doc_sentences", 1, "masked", False,
                         electra=True),
    "deberta_v3": Objective("DeBERTaV3: ELECTRA's generator MLM + 50 x replaced-token "
                            "detection, the discriminator's token table stop_gradient(E_G) + "
                            "E_Delta (GDES)", "doc_sentences", 1, "masked", False,
                            electra=True, embedding_sharing="gradient_disentangled"),
    "ltr": Objective("GPT-1 (BERT's 'LTR & No NSP'): the next token, left-to-right attention",
                     "doc_sentences", 1, "next_token", False, causal=True),
}

# The data keys an objective fills in when a recipe leaves them null.
DATA_KEYS = ("instance_format", "max_ngram", "targets")


def objective(name):
    """The row for `name`, or a ValueError listing the objectives."""
    if name not in OBJECTIVES:
        raise ValueError(f"Unknown pretraining objective {name!r}; choose one of "
                         f"{', '.join(OBJECTIVES)}.")
    return OBJECTIVES[name]


def resolved_data(name, data):
    """`data` with the objective's instance format, n-gram size and targets where null."""
    row = objective(name)
    return {**data, **{key: getattr(row, key) for key in DATA_KEYS if data.get(key) is None}}
