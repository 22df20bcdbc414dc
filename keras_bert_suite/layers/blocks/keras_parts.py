"""What every block layer's `parts` (its sublayers under the names its math calls them by)
does the same way in Keras; each kind's layer adds its attention."""


class KerasParts:
    """block: the block layer; denses: {module: its dense layer}; training: the call's."""

    def __init__(self, block, denses, training):
        self.block, self.denses, self.training = block, denses, training

    def dense(self, module, x):
        return self.denses[module](x)

    def norm(self, module, x):
        return getattr(self.block, module)(x)

    def activation(self, x):
        return self.block._activation(x)

    def dropout(self, name, x):
        return getattr(self.block, name)(x, training=self.training)
