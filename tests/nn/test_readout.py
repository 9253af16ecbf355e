"""The batch-independent readout (sksign.nn.layers.readout)."""

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch import nn

from sksign.nn.layers.readout import Readout


def _pair(n_in, n_out, seed=0):
    torch.manual_seed(seed)
    head = Readout(n_in, n_out)
    plain = nn.Linear(n_in, n_out)
    plain.load_state_dict(head.state_dict())
    return head, plain


@given(
    n_in=st.integers(1, 700),
    n_out=st.integers(1, 12),
    n_rows=st.integers(1, 90),
    seed=st.integers(0, 2**16),
)
def test_eval_rows_equal_float64_reference_and_do_not_depend_on_batch(
    n_in, n_out, n_rows, seed
):
    """Check each row's eval output is the float64 product rounded to
    float32, whether predicted alone or in the batch."""
    head, _ = _pair(n_in, n_out, seed)
    head.eval()
    gen = torch.Generator().manual_seed(seed)
    x = (torch.rand(n_rows, n_in, generator=gen) > 0.5).float()
    with torch.no_grad():
        full = head(x)
        alone = torch.cat([head(x[i : i + 1]) for i in range(n_rows)])
    w = head.weight.detach().double().numpy()
    b = head.bias.detach().double().numpy()
    expected = (x.double().numpy() @ w.T + b).astype(np.float32)
    assert full.dtype == torch.float32
    np.testing.assert_array_equal(full.numpy(), expected)
    np.testing.assert_array_equal(alone.numpy(), full.numpy())


def test_train_mode_is_nn_linear_and_backward_flows():
    """Check train mode equals nn.Linear exactly, gradients included."""
    head, plain = _pair(37, 5)
    x = torch.randn(9, 37)
    out, ref = head(x), plain(x)
    torch.testing.assert_close(out, ref, rtol=0, atol=0)
    out.sum().backward()
    ref.sum().backward()
    torch.testing.assert_close(head.weight.grad, plain.weight.grad, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_eval_keeps_the_input_dtype(dtype):
    """Check float64 passes through and half inputs come back in their dtype."""
    head = Readout(6, 2).to(dtype).eval()
    x = torch.randn(3, 6, dtype=dtype)
    with torch.no_grad():
        out = head(x)
    assert out.dtype == dtype
    ref = (x.double() @ head.weight.double().T + head.bias.double()).to(dtype)
    torch.testing.assert_close(out, ref, rtol=0, atol=0)


def test_state_dict_and_repr_are_nn_linear_ones():
    """Check saved weights load into nn.Linear and back (same keys)."""
    head, plain = _pair(4, 3)
    assert head.state_dict().keys() == plain.state_dict().keys()
    assert repr(head).replace("Readout", "Linear") == repr(plain)
