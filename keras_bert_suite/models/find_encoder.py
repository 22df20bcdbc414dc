"""`find_encoder` and `encoder_of` moved to keras_bert_suite.transforms.find_encoder; this
path stays for export/ and earlier code that import it from here."""

from keras_bert_suite.transforms.find_encoder import encoder_of, find_encoder

__all__ = ["encoder_of", "find_encoder"]
