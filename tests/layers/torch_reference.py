"""transformers modules as references for the layers' math: random weights (LayerNorm scales
and offsets too, which start at 1 and 0) read out as numpy arrays."""

import numpy as np

# Ours vs transformers: the same float32 math summed in another order (einsum vs bmm, the
# scale applied before or after a matmul) differs by a few ULPs per op; a wrong radius, theta,
# bucket or epsilon moves outputs by 1e-2 relative or more.
RTOL = 1e-4


def atol_for(expected):
    """An absolute slack for values near 0, scaled to the values compared."""
    return 1e-5 * float(np.max(np.abs(expected)))


def padded_batch(vocabulary_size):
    """Token ids and padding mask [2, 20] (int64, as torch takes them): random ids, the second
    row 13 tokens then padding (id 0)."""
    token_ids = np.random.default_rng(0).integers(1, vocabulary_size, size=(2, 20))
    padding_mask = np.ones((2, 20), dtype="int64")
    padding_mask[1, 13:] = 0
    return token_ids * padding_mask, padding_mask


def randomized(build, seed=0, scale=0.2):
    """`build()` (a torch module) in eval mode, with every parameter moved by N(0, scale²)
    noise; built and moved under `seed`, so every process gets the same weights."""
    import torch

    torch.manual_seed(seed)
    module = build()
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.add_(torch.randn_like(parameter) * scale)
    return module.eval()


def numpy_weights(module):
    """{transformers parameter name: float32 numpy array}."""
    return {name: parameter.detach().numpy().astype("float32")
            for name, parameter in module.named_parameters()}


def run(module, *args, **kwargs):
    """module(*args) without gradients, numpy inputs as torch tensors."""
    import torch

    def tensor(x):
        return torch.from_numpy(x) if isinstance(x, np.ndarray) else x

    with torch.no_grad():
        return module(*(tensor(x) for x in args), **{k: tensor(v) for k, v in kwargs.items()})
