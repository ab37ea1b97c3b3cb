"""tests/book/last_bits.py, the last-bits run of `make test-portable`: what it nudges and what it leaves exact."""

import pytest
import torch
from last_bits import LastBits, parse


@pytest.fixture
def mode():
    with LastBits(seed=3, ulps=4) as m:
        yield m


def ulps_apart(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return ((a - b).abs() / (torch.finfo(a.dtype).eps * b.abs())).round()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_an_inexact_product_moves_by_a_few_ulps_and_the_same_values_move_alike(dtype):
    gen = torch.Generator().manual_seed(0)
    a, b = torch.randn(30, 40, generator=gen, dtype=dtype), torch.randn(40, 20, generator=gen, dtype=dtype)
    plain = a @ b
    with LastBits(seed=3, ulps=4) as m:
        nudged, again = a @ b, a @ b
    assert m.nudged == 2
    assert torch.equal(nudged, again)  # a machine is deterministic
    apart = ulps_apart(nudged, plain)
    assert apart.max() <= 8 and (apart > 0).float().mean() > 0.5  # most elements move, none by much
    with LastBits(seed=4, ulps=4):
        assert not torch.equal(a @ b, nudged)  # another seed, another machine


def test_ties_stay_ties_and_exact_results_stay_exact(mode):
    scores = torch.tensor([[0.3, 0.3, -1.7]], dtype=torch.float64)
    weights = scores.softmax(-1)
    assert weights[0, 0] == weights[0, 1]  # equal scores, equal weights
    halves = torch.tensor([1.0, 1.0]).softmax(-1)
    assert halves.tolist() == [0.5, 0.5]  # dyadic: exact on every machine
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    assert torch.equal(x + torch.zeros(3, 4, dtype=torch.float64), x)  # x + 0 is x everywhere
    assert torch.equal(x.T.T, x) and torch.equal(x.clone(), x) and torch.equal(x.max(0).values, x.max(0).values)
    assert torch.equal(x * 0, torch.zeros(3, 4, dtype=torch.float64))  # zero stays zero
    integers = torch.arange(12.0).view(3, 4) @ torch.ones(4, 2)
    assert integers.tolist() == [[6.0, 6.0], [22.0, 22.0], [38.0, 38.0]]


def test_a_round_off_that_is_zero_in_exact_arithmetic_comes_out_another_way():
    """A cell the merging experiments once had: two computations equal in exact arithmetic, 1e-16 apart on this
    machine."""
    gen = torch.Generator().manual_seed(2)
    w, x = torch.randn(16, 16, generator=gen, dtype=torch.float64), torch.randn(16, generator=gen, dtype=torch.float64)
    plain = ((w @ x) - (w.T.T.contiguous() @ x + 0.0)).abs().max().item()
    seen = set()
    for seed in range(4):
        with LastBits(seed=seed):
            one, other = w @ x, (w * 1.0000000000000002) @ x
            seen.add(f"{(one - other).abs().max().item():.0e}")
    assert len(seen) > 1, (plain, seen)  # the printed round-off depends on the machine


def test_compiled_code_runs_outside_the_mode_and_compiles_as_often():
    import last_bits
    from torch._dynamo.testing import CompileCounter

    original = torch.compile
    try:
        mode = last_bits.install("1")
        counter = CompileCounter()
        layer = torch.compile(torch.nn.Linear(8, 8), backend=counter)
        for n in (2, 3, 4):
            layer(torch.randn(n, 8))
        assert counter.frame_count == 2  # the first shape, then one graph with a symbolic size
        mode.__exit__(None, None, None)
    finally:
        torch.compile = original
        torch.compiler.reset()


def test_settings_are_read_with_a_clear_error():
    assert parse("7") == (7, 4) and parse("7:2") == (7, 2)
    with pytest.raises(ValueError, match="MHA_LAST_BITS must be SEED or SEED:ULPS"):
        parse("seven")
    with pytest.raises(ValueError, match="ulps must be between 1 and 64, found 0"):
        LastBits(ulps=0)


def test_permuted_inputs_give_permuted_outputs_as_on_any_machine():
    """The single-head-limits chapter's permutation equivariance: reordering the queries reorders the outputs,
    bit for bit, on any machine. A product's output that happens to equal its input at the same place must not be
    left exact in one order and nudged in the other (only pointwise operations pass an input through)."""
    gen = torch.Generator().manual_seed(5)
    w = torch.randn(5, 5, generator=gen, dtype=torch.float64).softmax(-1)
    v = torch.randn(5, 2, generator=gen, dtype=torch.float64)
    w[0] = torch.tensor([1.0, 0, 0, 0, 0])  # query 1 attends to itself only: output row 0 is v's row 0
    perm = torch.tensor([1, 0, 2, 3, 4])
    with LastBits(seed=3, ulps=4):
        out, out_perm = w @ v, w[perm] @ v
    assert torch.equal(out[perm], out_perm)
