"""The fields of a SentencePiece model that `tokenizer.json` carries, read from and written to
the model's protobuf bytes (what tf-text's SentencePiece op loads).

protobuf's wire format, by hand, for the few fields involved (sentencepiece_model.proto):
ModelProto.pieces = 1, trainer_spec = 2, normalizer_spec = 3; SentencePiece.piece = 1,
score = 2, type = 3; TrainerSpec.model_type = 3, byte_fallback = 35; NormalizerSpec.name = 1,
precompiled_charsmap = 2, add_dummy_prefix = 3, remove_extra_whitespaces = 4,
escape_whitespaces = 5. The `sentencepiece` package's own proto module needs a protobuf
version that Apache Beam's pin excludes, and these fields have not changed since 2018.
"""

import dataclasses
import struct

# SentencePiece.Type
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
# TrainerSpec.ModelType
UNIGRAM, BPE = 1, 2

_VARINT, _FIXED64, _BYTES, _FIXED32 = 0, 1, 2, 5


@dataclasses.dataclass
class SentencePieceModel:
    """pieces: [(piece, score, type)] in id order; charsmap: the normalizer's compiled rules
    (b"" for none)."""
    pieces: list
    model_type: int = UNIGRAM
    byte_fallback: bool = False
    normalizer_name: str = "identity"
    charsmap: bytes = b""
    add_dummy_prefix: bool = True
    remove_extra_whitespaces: bool = True
    escape_whitespaces: bool = True


def read_model(proto):
    """The model's bytes -> SentencePieceModel (other fields are ignored)."""
    model = SentencePieceModel(pieces=[])
    for number, value in _fields(proto):
        if number == 1:
            piece = dict(_fields(value))
            model.pieces.append((piece.get(1, b"").decode("utf-8"),
                                 struct.unpack("<f", piece.get(2, b"\0\0\0\0"))[0],
                                 piece.get(3, NORMAL)))
        elif number == 2:
            trainer = dict(_fields(value))
            model.model_type = trainer.get(3, UNIGRAM)
            model.byte_fallback = bool(trainer.get(35, 0))
        elif number == 3:
            normalizer = dict(_fields(value))
            model.normalizer_name = normalizer.get(1, b"").decode("utf-8")
            model.charsmap = normalizer.get(2, b"")
            model.add_dummy_prefix = bool(normalizer.get(3, 1))
            model.remove_extra_whitespaces = bool(normalizer.get(4, 1))
            model.escape_whitespaces = bool(normalizer.get(5, 1))
    return model


def write_model(model):
    """SentencePieceModel -> the model's bytes."""
    pieces = b"".join(
        _bytes_field(1, _bytes_field(1, piece.encode("utf-8")) + _tag(2, _FIXED32)
                     + struct.pack("<f", score) + _varint_field(3, kind))
        for piece, score, kind in model.pieces)
    trainer = _varint_field(3, model.model_type) + _varint_field(35, int(model.byte_fallback))
    normalizer = (_bytes_field(1, model.normalizer_name.encode("utf-8"))
                  + _bytes_field(2, model.charsmap)
                  + _varint_field(3, int(model.add_dummy_prefix))
                  + _varint_field(4, int(model.remove_extra_whitespaces))
                  + _varint_field(5, int(model.escape_whitespaces)))
    return pieces + _bytes_field(2, trainer) + _bytes_field(3, normalizer)


def _fields(data):
    """(field number, value) of a message: ints for varints, bytes otherwise."""
    position = 0
    while position < len(data):
        key, position = _read_varint(data, position)
        number, wire_type = key >> 3, key & 7
        if wire_type == _VARINT:
            value, position = _read_varint(data, position)
        elif wire_type == _BYTES:
            size, position = _read_varint(data, position)
            value, position = data[position:position + size], position + size
        elif wire_type in (_FIXED32, _FIXED64):
            size = 4 if wire_type == _FIXED32 else 8
            value, position = data[position:position + size], position + size
        else:
            raise ValueError(f"Not a SentencePiece model: wire type {wire_type} at byte "
                             f"{position}.")
        yield number, value


def _read_varint(data, position):
    value = shift = 0
    while True:
        if position >= len(data):
            raise ValueError("Not a SentencePiece model: the bytes end inside a field.")
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, position


def _varint(value):
    out = bytearray()
    while True:
        out.append((value & 0x7F) | (0x80 if value > 0x7F else 0))
        value >>= 7
        if not value:
            return bytes(out)


def _tag(number, wire_type):
    return _varint(number << 3 | wire_type)


def _varint_field(number, value):
    return _tag(number, _VARINT) + _varint(value)


def _bytes_field(number, value):
    return _tag(number, _BYTES) + _varint(len(value)) + value
