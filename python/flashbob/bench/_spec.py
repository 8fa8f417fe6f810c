"""What the benchmark measures: the operations, the implementations, their flop counts and the
grid of cells. Pure Python (no torch), so that it can be read and tested anywhere."""

import itertools
from collections import namedtuple

# Operation names as the command line takes them, in the order the tables print them.
OPS = ("fwd", "fwd-bwd", "fwd-jvp", "bob", "hvp")
OP_TITLES = {
    "fwd": "Forward",
    "fwd-bwd": "Forward + backward",
    "fwd-jvp": "Forward + JVP (torch.func.jvp)",
    "bob": "BoB: the second backward (grad of grad, the first with create_graph)",
    "hvp": "HVP step: forward, first backward (create_graph), second backward",
}

# Canonical flops per (query, key) pair and per unit of head dim, the counts every TFLOP/s of
# the repository uses (docs/bob-math.md, "Work"; flopsPerPair in tools/flashbob/AttentionRunner):
# forward 4 (S = Q K^T, P V), backward 10 (2.5x the forward), BoB 36. Forward + JVP adds the
# tangent's two score products (tQ K^T, Q tK^T) and two accumulations (tP V, P tV) to the
# forward: 12. The HVP step is forward + backward + BoB: 50. A causal mask at N = M halves each.
FLOPS_PER_PAIR = {"fwd": 4, "fwd-bwd": 4 + 10, "fwd-jvp": 4 + 8, "bob": 36, "hvp": 4 + 10 + 36}

# Implementations, FlashBoB first: the others are PyTorch's SDPA restricted to one backend each
# (torch.nn.attention.sdpa_kernel), and eager attention, softmax(q k^T s + mask) v written out
# in tensor ops, which every autograd mode differentiates (double backward, jvp).
IMPLS = ("flashbob", "sdpa-cudnn", "sdpa-flash", "sdpa-efficient", "sdpa-math", "eager")
IMPL_LABELS = {
    "flashbob": "FlashBoB",
    "sdpa-cudnn": "SDPA cuDNN",
    "sdpa-flash": "SDPA flash",
    "sdpa-efficient": "SDPA efficient",
    "sdpa-math": "SDPA math",
    "eager": "eager",
}
# The SDPBackend member of each SDPA implementation (torch.nn.attention.SDPBackend).
SDPA_BACKENDS = {
    "sdpa-cudnn": "CUDNN_ATTENTION",
    "sdpa-flash": "FLASH_ATTENTION",
    "sdpa-efficient": "EFFICIENT_ATTENTION",
    "sdpa-math": "MATH",
}

DTYPES = ("bf16", "fp16")

# One measurement: an operation by one implementation on one shape.
Cell = namedtuple("Cell", "op impl n d causal")
# A group of cells that share a table and a plot panel.
Group = namedtuple("Group", "op d causal")


def flops(op, batch, heads, n, m, d, causal):
    """The canonical flop count of `op` on (batch, heads) problems of N queries and M keys."""
    return FLOPS_PER_PAIR[op] * batch * heads * n * m * d * (0.5 if causal else 1.0)


def tflops(op, batch, heads, n, m, d, causal, ms):
    """TFLOP/s of `op` done in `ms` milliseconds (None without a positive time)."""
    if not ms or ms <= 0:
        return None
    return flops(op, batch, heads, n, m, d, causal) / (ms * 1e-3) / 1e12


def grid(ns, head_dims, causal_modes, ops, impls):
    """The cells in the order they run: N ascending outermost (a run cut short by its time limit
    has measured every shape below where it stopped), then head dim, mask, operation,
    implementation."""
    for n, d, causal, op, impl in itertools.product(ns, head_dims, causal_modes, ops, impls):
        yield Cell(op, impl, n, d, causal)


def groups(head_dims, causal_modes, ops):
    """The (op, d, causal) groups in table order: operation, then head dim, then mask."""
    return [Group(op, d, c) for op in ops for d in head_dims for c in causal_modes]


def format_n(n):
    """1024 -> "1K", 1048576 -> "1M", 1000 -> "1000"."""
    if n % (1 << 20) == 0:
        return f"{n >> 20}M"
    if n % 1024 == 0:
        return f"{n >> 10}K"
    return str(n)
