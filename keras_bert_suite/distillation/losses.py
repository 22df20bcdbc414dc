"""The distillation losses, as functions of tensors (keras.ops only, float32 inside).

* `soft_target_loss`: Hinton et al. 2015 — KL(teacher || student) of the temperature-softened
  distributions over the last axis, times T^2 so its gradients keep their size as T changes.
* `hidden_state_loss`: TinyBERT (Jiao et al. 2020) — mean squared error between a student
  layer's output (projected to the teacher's width when they differ) and a teacher layer's.
* `relation_loss`: MiniLM (Wang et al. 2020, 2021) — KL between the teacher's and the
  student's self-attention relations softmax(A B^T / sqrt(d)) of a layer's queries, keys and
  values, computed on relation heads, so the two may differ in width and in head count.
* `cosine_loss`: DistilBERT (Sanh et al. 2019) — 1 - cos between the teacher's and the
  student's last hidden states.

Each returns one value per example [B], averaged over the positions `mask` marks (the cosine
term: each row's share of the batch's token mean); the distiller averages over the batch.
"""

from keras import ops


def _float(x):
    return ops.cast(x, "float32")


def masked_mean(values, mask):
    """values [B, ...positions] averaged over the positions where mask [B, ...] is 1 -> [B]."""
    values = _float(values)
    if mask is None:
        return ops.mean(ops.reshape(values, (ops.shape(values)[0], -1)), axis=-1)
    mask = _float(mask)
    batch = ops.shape(values)[0]
    total = ops.sum(ops.reshape(values * mask, (batch, -1)), axis=-1)
    count = ops.sum(ops.reshape(mask, (batch, -1)), axis=-1)
    return total / ops.maximum(count, 1.0)


def kl_divergence(teacher_log_probs, student_log_probs):
    """KL(p_t || p_s) over the last axis from log-probabilities -> [...]."""
    return ops.sum(ops.exp(teacher_log_probs) * (teacher_log_probs - student_log_probs), axis=-1)


def soft_target_loss(teacher_logits, student_logits, temperature=1.0, mask=None):
    """T^2 KL(softmax(t / T) || softmax(s / T)) over the last axis, averaged over `mask`'s
    positions ([B] or [B, T], 1 = counts) -> [B]. One logit (regression): squared error."""
    teacher_logits, student_logits = _float(teacher_logits), _float(student_logits)
    if teacher_logits.shape[-1] == 1:
        return masked_mean(ops.squeeze(ops.square(student_logits - teacher_logits), -1), mask)
    teacher = ops.log_softmax(teacher_logits / temperature, axis=-1)
    student = ops.log_softmax(student_logits / temperature, axis=-1)
    per_row = kl_divergence(teacher, student) * (temperature ** 2)  # [B] or [B, T]
    return masked_mean(per_row, mask)


def hidden_state_loss(teacher_hidden, student_hidden, padding_mask):
    """Mean squared error over the features, averaged over real tokens: [B, T, H] x 2 -> [B]."""
    error = ops.mean(ops.square(_float(student_hidden) - _float(teacher_hidden)), axis=-1)
    # > 0: a packed row numbers its instances 1, 2, ...; each real token counts once.
    return masked_mean(error, ops.greater(padding_mask, 0))


def cosine_loss(teacher_hidden, student_hidden, padding_mask):
    """DistilBERT's cosine embedding loss: 1 - cos(teacher, student) of each token's hidden
    state, averaged over the batch's real tokens (padding_mask > 0) as DistilBERT's code
    does, so a long row weighs more than a short one: [B, T, H] x 2 -> [B], each row's share
    of that mean times B (their mean is the loss, like the other terms')."""
    teacher, student = _float(teacher_hidden), _float(student_hidden)
    dot = ops.sum(teacher * student, axis=-1)
    norms = ops.sqrt(ops.sum(ops.square(teacher), axis=-1) * ops.sum(ops.square(student), axis=-1))
    real = _float(ops.greater(padding_mask, 0))
    per_row = ops.sum((1.0 - dot / ops.maximum(norms, 1e-12)) * real, axis=-1)  # [B]
    rows = ops.cast(ops.shape(real)[0], "float32")
    return per_row * rows / ops.maximum(ops.sum(real), 1.0)


def same_instance_keys(padding_mask):
    """[B, T, T] true where query t may see key s: s is a real token of t's instance. A packed
    row numbers its instances 1, 2, ... (0 = padding), so its relations stay within each
    instance as its attention does; an unpacked row (1 / 0) keeps every real key."""
    mask = ops.cast(padding_mask, "int32")
    return ops.logical_and(ops.equal(mask[:, :, None], mask[:, None, :]),
                           ops.greater(mask, 0)[:, None, :])


def relation_log_probs(a, b, num_relation_heads, padding_mask):
    """log softmax(A B^T / sqrt(d)) per relation head: A, B [B, T, W] are split into
    `num_relation_heads` heads of W / R features -> [B, R, T, T] (keys of other instances
    and padding excluded)."""
    batch, length, width = ops.shape(a)[0], ops.shape(a)[1], a.shape[-1]
    size = width // num_relation_heads

    def heads(x):  # [B, T, W] -> [B, R, T, W / R]
        return ops.transpose(ops.reshape(_float(x), (batch, length, num_relation_heads, size)),
                             (0, 2, 1, 3))

    scores = ops.einsum("brtd,brsd->brts", heads(a), heads(b)) / (size ** 0.5)  # [B, R, T, T]
    scores = ops.where(same_instance_keys(padding_mask)[:, None], scores, -1e9)
    return ops.log_softmax(scores, axis=-1)


def relation_loss(teacher_pair, student_pair, num_relation_heads, padding_mask):
    """KL(teacher relation || student relation) for one (A, B) pair of [B, T, W] tensors from
    each model, averaged over relation heads and real query tokens -> [B]."""
    teacher = relation_log_probs(*teacher_pair, num_relation_heads, padding_mask)
    student = relation_log_probs(*student_pair, num_relation_heads, padding_mask)
    per_query = ops.mean(kl_divergence(teacher, student), axis=1)  # [B, T]
    return masked_mean(per_query, ops.greater(padding_mask, 0))
