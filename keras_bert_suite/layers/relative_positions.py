"""DeBERTa's relative positions (He et al. 2021, "DeBERTa"; v2/v3's log buckets): which row of
the relative embeddings each (query i, key j) pair reads.

The bucket of a distance d = i - j is d itself while |d| <= bucket_size / 2 and grows with
log |d| beyond (transformers' `make_log_bucket_position`); the row is bucket + S clamped to
[0, 2 S - 1], S = position_buckets (the relative embeddings hold 2 S rows). The log and ceil
run once, in numpy float32 as transformers computes them, into an int32 table by distance:
graphs only gather from it, so no backend's float log can round a bucket differently.
"""

import numpy as np
from keras import ops


def log_bucket_positions(distances, bucket_size, max_position):
    """transformers' `make_log_bucket_position` on int distances, in float32 like it."""
    distances = np.asarray(distances, dtype="int64")
    mid = bucket_size // 2
    sign = np.sign(distances).astype("float32")
    magnitude = np.where((distances < mid) & (distances > -mid), mid - 1, np.abs(distances))
    ratio = np.log(magnitude.astype("float32") / np.float32(mid)) / np.log(
        np.float32((max_position - 1) / mid))
    log_position = np.ceil(ratio * np.float32(mid - 1)) + np.float32(mid)
    return np.where(magnitude <= mid, distances.astype("float32"), log_position * sign)


def relative_index_table(position_buckets, max_relative_positions):
    """int32 [2 M + 1]: the relative-embedding row of distance d at index d + M. Beyond ±M
    the row is clamped to the first or last (checked), so `relative_indices` clips distances
    there and serves any length. position_buckets <= 0 (DeBERTa v2 without buckets): the
    bucket is the distance and S = max_relative_positions."""
    span = position_buckets if position_buckets > 0 else max_relative_positions
    reach = 2 * max(span, max_relative_positions)
    distances = np.arange(-reach, reach + 1)
    buckets = (log_bucket_positions(distances, position_buckets, max_relative_positions)
               if position_buckets > 0 else distances)
    table = np.clip(buckets.astype("int64") + span, 0, 2 * span - 1).astype("int32")
    if table[0] != 0 or table[-1] != 2 * span - 1 or np.any(np.diff(table) < 0):
        raise ValueError(f"position_buckets={position_buckets} with max_relative_positions="
                         f"{max_relative_positions} does not clamp within ±{reach}.")
    return table


def relative_indices(length, table, ops=ops):
    """[T, T] int32: the relative-embedding row of distance i - j for query i, key j, read
    from `table` (`relative_index_table`); distances beyond the table's reach clip to it.
    The position-to-content term reads the transpose (the buckets are odd in d)."""
    reach = (table.shape[0] - 1) // 2
    positions = ops.arange(length)
    distance = positions[:, None] - positions[None, :]  # [T, T]
    return ops.take(table, ops.clip(distance, -reach, reach) + reach)
