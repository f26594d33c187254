"""PCGrad's core (algos/pcgrad.py) against the paper's literal loop, written here, on random gradients."""

from __future__ import annotations

import pytest
import torch

from algos.pcgrad import check_order, cosine_matrix, pcgrad, pcgrad_from_gram, random_order


def literal_pcgrad(grads: list[torch.Tensor], order: list[list[int]]) -> torch.Tensor:
    """Yu et al. 2020, Algorithm 1, as written: project each g_i onto the normal plane of every g_j it conflicts
    with, visiting the other tasks in the given order; sum the projected gradients."""
    projected = []
    for i, g_i in enumerate(grads):
        g_i_pc = g_i.clone()
        for j in order[i]:
            g_j = grads[j]
            dot = torch.dot(g_i_pc, g_j)
            if dot < 0:
                g_i_pc = g_i_pc - dot / torch.dot(g_j, g_j) * g_j
        projected.append(g_i_pc)
    return torch.stack(projected).sum(dim=0)


@pytest.mark.parametrize("num_tasks", range(2, 9))
def test_coefficient_space_equals_the_literal_loop(num_tasks: int):
    generator = torch.Generator().manual_seed(100 + num_tasks)
    for trial in range(5):
        # a shared component plus noise: some pairs conflict, some do not
        shared = torch.randn(64, generator=generator, dtype=torch.float64)
        grads = [0.3 * shared + torch.randn(64, generator=generator, dtype=torch.float64) for _ in range(num_tasks)]
        order = random_order(num_tasks, generator)
        expected = literal_pcgrad(grads, order)
        got = pcgrad(grads, order=order)
        assert got.dtype == torch.float64
        torch.testing.assert_close(got, expected, rtol=0, atol=1e-6)
        assert (got - expected).abs().max() < 1e-10, f"T={num_tasks} trial {trial}"
        result = pcgrad_from_gram(torch.stack(grads) @ torch.stack(grads).T, order)
        literal_conflicts = count_literal_conflicts(grads, order)
        assert result.conflicts == literal_conflicts


def count_literal_conflicts(grads: list[torch.Tensor], order: list[list[int]]) -> int:
    conflicts = 0
    for i, g_i in enumerate(grads):
        g_i_pc = g_i.clone()
        for j in order[i]:
            dot = torch.dot(g_i_pc, grads[j])
            if dot < 0:
                g_i_pc = g_i_pc - dot / torch.dot(grads[j], grads[j]) * grads[j]
                conflicts += 1
    return conflicts


def test_the_order_matters_and_is_the_one_given():
    """With three mutually conflicting tasks the visiting order changes the result: the core must follow it."""
    grads = [torch.tensor([1.0, 0.0], dtype=torch.float64), torch.tensor([-0.8, 0.6], dtype=torch.float64)]
    grads.append(torch.tensor([-0.5, -0.9], dtype=torch.float64))
    first, second = [[1, 2], [0, 2], [0, 1]], [[2, 1], [2, 0], [1, 0]]
    assert not torch.allclose(literal_pcgrad(grads, first), literal_pcgrad(grads, second))
    for order in (first, second):
        torch.testing.assert_close(pcgrad(grads, order=order), literal_pcgrad(grads, order), rtol=0, atol=1e-12)


def test_no_conflicts_gives_the_plain_sum():
    generator = torch.Generator().manual_seed(1)
    grads = [torch.rand(32, generator=generator, dtype=torch.float64) for _ in range(5)]  # all dots > 0
    result = pcgrad_from_gram(torch.stack(grads) @ torch.stack(grads).T, random_order(5, generator))
    assert result.conflicts == 0
    torch.testing.assert_close(result.weights, torch.ones(5, dtype=torch.float64))
    torch.testing.assert_close(pcgrad(grads, generator=generator), torch.stack(grads).sum(0), rtol=0, atol=1e-12)


def test_an_absent_task_is_skipped_and_weighs_zero():
    """Documented choice: a task absent from the batch has g = 0; it is never a projection target (no division by
    zero), contributes nothing, and the others combine exactly as PCGrad over the present tasks alone."""
    generator = torch.Generator().manual_seed(2)
    present = [torch.randn(16, generator=generator, dtype=torch.float64) for _ in range(3)]
    grads = [present[0], torch.zeros(16, dtype=torch.float64), present[1], present[2]]
    order = random_order(4, generator)
    result = pcgrad_from_gram(torch.stack(grads) @ torch.stack(grads).T, order)
    assert result.weights[1] == 0 and result.present.tolist() == [True, False, True, True]
    assert torch.isfinite(result.weights).all()
    order_without = [[{0: 0, 2: 1, 3: 2}[j] for j in order[i] if j != 1] for i in (0, 2, 3)]
    torch.testing.assert_close(pcgrad(grads, order=order), literal_pcgrad(present, order_without), rtol=0, atol=1e-12)
    # ...and the literal loop on all four agrees too (0 . g is never < 0)
    torch.testing.assert_close(pcgrad(grads, order=order), literal_pcgrad(grads, order), rtol=0, atol=1e-12)


def test_single_task_and_all_zero():
    g = torch.randn(8, dtype=torch.float64)
    torch.testing.assert_close(pcgrad([g]), g)
    zero = pcgrad([torch.zeros(8), torch.zeros(8)])
    assert torch.equal(zero, torch.zeros(8))


def test_float32_gradients_keep_their_dtype_and_shape():
    generator = torch.Generator().manual_seed(3)
    grads = [torch.randn(4, 5, generator=generator) for _ in range(3)]
    order = random_order(3, generator)
    got = pcgrad(grads, order=order)
    assert got.shape == (4, 5) and got.dtype == torch.float32
    expected = literal_pcgrad([g.reshape(-1).double() for g in grads], order).reshape(4, 5)
    torch.testing.assert_close(got.double(), expected, rtol=1e-5, atol=1e-5)


def test_random_orders_are_shared_by_seed_and_valid():
    a = random_order(6, torch.Generator().manual_seed(7))
    b = random_order(6, torch.Generator().manual_seed(7))
    assert a == b
    assert check_order(a, 6) == a
    with pytest.raises(ValueError, match="must list each task other than 1 once"):
        check_order([[1], [1]], 2)
    with pytest.raises(ValueError, match="one sequence per task"):
        check_order([[1]], 2)


def test_cosine_matrix_from_the_gram():
    grads = torch.tensor([[1.0, 0.0], [0.0, 2.0], [-3.0, 0.0], [0.0, 0.0]], dtype=torch.float64)
    cos = cosine_matrix(grads @ grads.T)
    torch.testing.assert_close(torch.diagonal(cos)[:3], torch.ones(3, dtype=torch.float64))
    assert cos[0, 1] == 0 and cos[0, 2] == -1 and cos[3].abs().sum() == 0
