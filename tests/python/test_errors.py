"""Invalid arguments: each raises ValueError or TypeError naming the argument, what was expected
and what came — the same for every backend, because Python validates before any backend runs."""

import pytest
import torch

import causal_conv1d
from causal_conv1d import causal_conv1d_fn

B, D, L, W = 2, 8, 16, 4


def _args():
    g = torch.Generator().manual_seed(0)
    return dict(
        x=torch.randn(B, D, L, generator=g),
        weight=torch.randn(D, W, generator=g),
        bias=torch.randn(D, generator=g),
        seq_idx=torch.zeros(B, L, dtype=torch.int32),
        initial_states=torch.randn(B, D, W - 1, generator=g),
        return_final_states=True,
        final_states_out=torch.empty(B, D, W - 1),
        activation="silu",
    )


META = torch.device("meta")  # a second device that exists on every machine

# id -> (change to the valid arguments, exception type, substrings the message must contain)
CASES = {
    "x_not_tensor": (lambda a: a.update(x=[[1.0]]), TypeError, ["'x'", "torch.Tensor", "list"]),
    "x_rank_2": (lambda a: a.update(x=a["x"][0]), ValueError, ["'x'", "3 dims", "(8, 16)"]),
    "x_rank_4": (lambda a: a.update(x=a["x"][None]), ValueError, ["'x'", "3 dims", "(1, 2, 8, 16)"]),
    "x_dtype_float64": (lambda a: a.update(x=a["x"].double()), TypeError, ["'x'", "float32", "torch.float64"]),
    "x_dtype_int32": (lambda a: a.update(x=a["x"].to(torch.int32)), TypeError, ["'x'", "torch.int32"]),
    "x_seqlen_0": (lambda a: a.update(x=a["x"][..., :0], seq_idx=None), ValueError, ["'x'", ">= 1", "(2, 8, 0)"]),
    "weight_not_tensor": (lambda a: a.update(weight=None), TypeError, ["'weight'", "NoneType"]),
    "weight_rank_1": (lambda a: a.update(weight=a["weight"][:, 0]), ValueError, ["'weight'", "(dim, width)", "(8,)"]),
    "weight_rank_3": (lambda a: a.update(weight=a["weight"][None]), ValueError, ["'weight'", "(1, 8, 4)"]),
    "weight_dim_mismatch": (lambda a: a.update(weight=torch.randn(D + 1, W)), ValueError, ["'weight'", "= 8", "(9, 4)"]),
    "weight_dtype_float64": (lambda a: a.update(weight=a["weight"].double(), bias=a["bias"].double()), TypeError,
                             ["'weight'", "torch.float64"]),
    "width_0": (lambda a: a.update(weight=torch.randn(D, 0), initial_states=None, final_states_out=None),
                ValueError, ["'weight'", "between 1 and 8", "got 0"]),
    "width_9": (lambda a: a.update(weight=torch.randn(D, 9), initial_states=None, final_states_out=None),
                ValueError, ["'weight'", "between 1 and 8", "got 9"]),
    "weight_device": (lambda a: a.update(weight=a["weight"].to(META)), ValueError, ["'weight'", "cpu", "meta"]),
    "bias_not_tensor": (lambda a: a.update(bias=1.0), TypeError, ["'bias'", "float"]),
    "bias_shape": (lambda a: a.update(bias=torch.randn(D + 2)), ValueError, ["'bias'", "(8,)", "(10,)"]),
    "bias_rank_2": (lambda a: a.update(bias=torch.randn(D, 1)), ValueError, ["'bias'", "(8,)", "(8, 1)"]),
    "bias_dtype_mismatch": (lambda a: a.update(bias=a["bias"].half()), TypeError,
                            ["'bias'", "torch.float32", "torch.float16"]),
    "bias_device": (lambda a: a.update(bias=a["bias"].to(META)), ValueError, ["'bias'", "meta"]),
    "seq_idx_dtype_int64": (lambda a: a.update(seq_idx=a["seq_idx"].long()), TypeError,
                            ["'seq_idx'", "torch.int32", "torch.int64"]),
    "seq_idx_dtype_float": (lambda a: a.update(seq_idx=a["seq_idx"].float()), TypeError, ["'seq_idx'", "torch.float32"]),
    "seq_idx_shape": (lambda a: a.update(seq_idx=a["seq_idx"][:, :-1]), ValueError, ["'seq_idx'", "(2, 16)", "(2, 15)"]),
    "seq_idx_rank_3": (lambda a: a.update(seq_idx=a["seq_idx"][None]), ValueError, ["'seq_idx'", "(1, 2, 16)"]),
    "seq_idx_device": (lambda a: a.update(seq_idx=a["seq_idx"].to(META)), ValueError, ["'seq_idx'", "meta"]),
    "initial_states_shape": (lambda a: a.update(initial_states=torch.randn(B, D, W)), ValueError,
                             ["'initial_states'", "(2, 8, 3)", "(2, 8, 4)"]),
    "initial_states_channel_last_confusion": (lambda a: a.update(initial_states=torch.randn(B, W - 1, D)), ValueError,
                                              ["'initial_states'", "(2, 8, 3)", "(2, 3, 8)"]),
    "initial_states_dtype": (lambda a: a.update(initial_states=a["initial_states"].bfloat16()), TypeError,
                             ["'initial_states'", "torch.float32", "torch.bfloat16"]),
    "initial_states_device": (lambda a: a.update(initial_states=a["initial_states"].to(META)), ValueError,
                              ["'initial_states'", "meta"]),
    "final_states_out_shape": (lambda a: a.update(final_states_out=torch.empty(B, D, W + 1)), ValueError,
                               ["'final_states_out'", "(2, 8, 3)", "(2, 8, 5)"]),
    "final_states_out_dtype": (lambda a: a.update(final_states_out=torch.empty(B, D, W - 1, dtype=torch.float16)),
                               TypeError, ["'final_states_out'", "torch.float32", "torch.float16"]),
    "final_states_out_device": (lambda a: a.update(final_states_out=a["final_states_out"].to(META)), ValueError,
                                ["'final_states_out'", "meta"]),
    "activation_unknown": (lambda a: a.update(activation="relu"), ValueError, ["'activation'", "silu", "'relu'"]),
    "activation_bool": (lambda a: a.update(activation=True), ValueError, ["'activation'", "True"]),
}


@pytest.mark.parametrize("backend", ["cpu", "aten"])
@pytest.mark.parametrize("case", list(CASES))
def test_invalid_argument(case, backend):
    change, exc, needles = CASES[case]
    args = _args()
    change(args)
    with pytest.raises(exc) as info:
        causal_conv1d_fn(**args, backend=backend)
    msg = str(info.value)
    for n in needles:
        assert n in msg, f"message {msg!r} lacks {n!r}"
    # Python's own validation, not a backend's error, must be what fired.
    assert msg.startswith("causal_conv1d_fn: "), msg


def test_final_states_out_ignored_without_return_final_states():
    """As upstream: final_states_out is only used when return_final_states is True."""
    a = _args()
    a.update(return_final_states=False, final_states_out=torch.empty(1))
    out = causal_conv1d_fn(**a)
    assert isinstance(out, torch.Tensor)


def test_unknown_backend_argument():
    a = _args()
    with pytest.raises(ValueError, match=r"'backend'.*auto, cpu, nvrtc, emulate, aten.*'cuda'"):
        causal_conv1d_fn(**a, backend="cuda")


def test_unknown_backend_env(monkeypatch):
    monkeypatch.setenv("CAUSAL_CONV1D_BACKEND", "gpu")
    a = _args()
    with pytest.raises(ValueError, match=r"CAUSAL_CONV1D_BACKEND.*'gpu'"):
        causal_conv1d_fn(**a)


def test_unknown_backend_use_backend():
    with pytest.raises(ValueError, match=r"use_backend\(name\).*'fast'"):
        with causal_conv1d.use_backend("fast"):
            pass


def test_ref_validates_too():
    a = _args()
    with pytest.raises(ValueError, match="causal_conv1d_ref: argument 'activation'"):
        causal_conv1d.causal_conv1d_ref(a["x"], a["weight"], activation="gelu")
    with pytest.raises(ValueError, match="causal_conv1d_ref: argument 'weight'"):
        causal_conv1d.causal_conv1d_ref(a["x"], a["weight"][:3])


def test_interface_module_names():
    from causal_conv1d import causal_conv1d_interface as ci

    for name in ("causal_conv1d_fn", "causal_conv1d_ref", "causal_conv1d_update", "causal_conv1d_update_ref"):
        assert callable(getattr(ci, name))
    assert causal_conv1d.causal_conv1d_fn is ci.causal_conv1d_fn
    assert causal_conv1d.causal_conv1d_update is ci.causal_conv1d_update
    assert isinstance(causal_conv1d.__version__, str) and causal_conv1d.__version__
    import inspect

    params = list(inspect.signature(ci.causal_conv1d_fn).parameters)
    assert params == ["x", "weight", "bias", "seq_idx", "initial_states", "return_final_states",
                      "final_states_out", "activation", "backend"]
    assert inspect.signature(ci.causal_conv1d_fn).parameters["backend"].kind is inspect.Parameter.KEYWORD_ONLY
