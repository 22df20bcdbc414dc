"""The one way to find the encoder of a model: the model itself when it is a `BertEncoder`,
else the task's `encoder`."""


def find_encoder(model):
    """`model` when it is a BertEncoder, else its `encoder` when that is one, else None."""
    from keras_bert_suite.models.encoder import BertEncoder

    if isinstance(model, BertEncoder):
        return model
    encoder = getattr(model, "encoder", None)
    return encoder if isinstance(encoder, BertEncoder) else None


def encoder_of(model, what="This"):
    """`find_encoder(model)`, or a ValueError naming `what` needed one."""
    encoder = find_encoder(model)
    if encoder is None:
        raise ValueError(f"{what} takes a BertEncoder or one of our task models "
                         f"(BertClassifier, ...), got {type(model).__name__}.")
    return encoder
