"""The span labeler's whole text path: (question, context) strings -> answers.

`answer_questions` is what evaluation, `BertSpanLabeler.predict` on raw strings and the
exported `serving_default` all run; only the way the model is called differs (batched
`predict` eagerly, a plain call inside the traced graph).
"""

from keras_bert_suite.export.signature import STRINGS, ServingSignature, graph_model_call
from keras_bert_suite.tasks.span_labeler.postprocessor import best_answers

WARMUP_INPUTS = {
    "question": ["Who wrote the letter?", "Where did they meet?"],
    "context": ["The letter was written by Anna Karenina in Moscow.",
                "They met in Paris in the spring of 1921, before the war."]}


def answer_questions(preprocessor, run_model, question, context, **answer_options):
    """question, context [B] strings -> {answer, start, end, score, null_score_diff} [B]
    (see `best_answers`); `run_model(window inputs) -> {"start_logits", "end_logits"}`."""
    windows = preprocessor.windows(question, context)
    outputs = run_model(windows.inputs)
    return best_answers(windows, outputs["start_logits"], outputs["end_logits"],
                        **answer_options)


def serving_signatures(model, **answer_options):
    """serving_default(question [B], context [B]) -> answer, start, end (character offsets
    into the context: answer == context[start:end]), score, null_score_diff."""
    call = graph_model_call(model)

    def serve(question, context):
        return answer_questions(model.preprocessor, call, question, context, **answer_options)

    return {"serving_default": ServingSignature(serve, [STRINGS, STRINGS], WARMUP_INPUTS)}
