"""LabelledHeadTask: the classifier's and the token classifier's common part."""

from keras_bert_suite.tasks.task import BertTask


class LabelledHeadTask(BertTask):
    """A task whose head is dropout -> Dense(num_classes) with optional label names (the
    classifier's and the token classifier's): what they keep and serialize alike."""

    def keep_head(self, num_classes, dropout, label_names, dropout_layer, head):
        """Called at the end of __init__, once the functional graph exists."""
        self.num_classes = num_classes
        self.dropout = dropout
        self.label_names = label_names
        self.classifier_dropout = dropout_layer
        self.classifier_head = head
        self.compile()

    def get_config(self):
        return {**super().get_config(), "num_classes": self.num_classes,
                "dropout": self.dropout, "label_names": self.label_names}
