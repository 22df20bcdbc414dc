"""The one way to find the encoder of a model: the model itself when it is an encoder, else
the task's `encoder`.

An encoder is recognised by the marker `is_bert_encoder = True` that `BertEncoder` defines,
not by its class: importing the class here would tie every transform to the encoder module
(and the encoder's own methods back to the transforms)."""


def _is_encoder(model):
    # `is True`, not truthiness: a stand-in object that answers every attribute is no encoder.
    return getattr(model, "is_bert_encoder", False) is True


def find_encoder(model):
    """`model` when it is a BertEncoder, else its `encoder` when that is one, else None."""
    if _is_encoder(model):
        return model
    encoder = getattr(model, "encoder", None)
    return encoder if _is_encoder(encoder) else None


def encoder_of(model, what="This"):
    """`find_encoder(model)`, or a ValueError naming `what` needed one."""
    encoder = find_encoder(model)
    if encoder is None:
        raise ValueError(f"{what} takes a BertEncoder or one of our task models "
                         f"(BertClassifier, ...), got {type(model).__name__}.")
    return encoder
