"""causal_conv1d_cuda: the module name of upstream causal-conv1d's compiled extension, for
clients that import it directly (mamba_ssm's mamba_inner_fn and Mamba-2 paths, their forks).

    import causal_conv1d_cuda
    out = causal_conv1d_cuda.causal_conv1d_fwd(x, weight, bias, None, None, None, True)     # 1.2-1.5.0
    causal_conv1d_cuda.causal_conv1d_fwd(x, weight, bias, None, None, out, None, True)      # 1.5.1-1.6

causal_conv1d_fwd, causal_conv1d_bwd and causal_conv1d_update accept every positional form a
release of upstream's extension had (told apart by the argument count), on CUDA and CPU tensors
and every backend of causal_conv1d (keyword-only `backend=`). The forms and their semantics:
causal_conv1d._raw.
"""

from causal_conv1d._raw import causal_conv1d_bwd, causal_conv1d_fwd, causal_conv1d_update

__all__ = ["causal_conv1d_fwd", "causal_conv1d_bwd", "causal_conv1d_update"]
