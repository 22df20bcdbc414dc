"""Which heads or neurons to remove: the globally least important fraction, never a layer's
last one."""

import logging
import numbers

logger = logging.getLogger(__name__)


def check_fraction(fraction, argument):
    if (isinstance(fraction, bool) or not isinstance(fraction, numbers.Real)
            or not 0 <= fraction < 1):
        raise ValueError(f"{argument} must be a number in [0, 1) (the share of the units to "
                         f"remove; every layer keeps at least one), got {fraction!r}.")
    return float(fraction)


def least_important(scores, fraction, argument="fraction", noun="unit"):
    """{layer: [indices]}: the round(fraction x total) units with the lowest scores over all
    layers (`scores`: one array per layer), skipping any that would leave a layer empty.

    >>> least_important([[0.3, -0.1, 0.2], [0.0, 0.5]], 0.5)
    {0: [1], 1: [0]}
    >>> least_important([[0.3, 0.1], [0.0]], 0.34)  # layer 1's only unit stays
    {0: [1]}
    """
    fraction = check_fraction(fraction, argument)
    left = [len(layer) for layer in scores]
    wanted = int(round(fraction * sum(left)))
    ranked = sorted((float(score), layer, index)
                    for layer, layer_scores in enumerate(scores)
                    for index, score in enumerate(layer_scores))
    chosen = {}
    for _, layer, index in ranked:
        if sum(len(indices) for indices in chosen.values()) == wanted:
            break
        if left[layer] == 1:
            continue
        chosen.setdefault(layer, []).append(index)
        left[layer] -= 1
    removed = sum(len(indices) for indices in chosen.values())
    if removed < wanted:
        logger.warning("%s=%s asks for %d %ss, but only %d can go while every layer keeps "
                       "one.", argument, fraction, wanted, noun, removed)
    return {layer: sorted(indices) for layer, indices in sorted(chosen.items())}
