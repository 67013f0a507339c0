"""A few tokens a call on the CPU (`causal_conv1d_update` with x of (batch, dim, T): speculative
decoding's drafts), in C: 1 to 64 tokens (or those of --tokens), width 4 with Mamba's state rows
of 4, width 3 with vLLM's rows of 2 (no decode kernel serves width 3), and width 4 with a
channel-last state of 3 steps; silu, dim 4096, batch 1 and 64, bf16 and fp32. Beside them, in the same run, the baseline
(torch: the window and the tokens concatenated, a depthwise conv1d, silu, the state's new steps
copied back) and the physical limit (torch copying the bytes the call moves: the state read and
written, x and out). Each figure: the library call alone through ctypes (the arguments packed
once), minimum over batches of calls, in microseconds. With --against OTHER_LIBCC1D the same calls
run through a second build, alternated with the first.

    PYTHONPATH=python CAUSAL_CONV1D_LIBRARY=build/cmake/libcc1d.so \\
        ~/.cache/causal-conv1d/venv/bin/python bench/cpu_update_tokens.py [--quick] [--against OLD.so] \\
        [--tokens 1,2,4,6,8,12,16,20,32,64]
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cpu_decode import DIM, best_us, start  # noqa: E402

from causal_conv1d import _lib, _op_update, _pack  # noqa: E402

# (name, width, state_len, channel-last state)
LAYOUTS = [("width 4, Mamba's rows of 4", 4, 4, False), ("width 3, vLLM's rows of 2", 3, 2, False),
           ("width 4, channel-last state of 3", 4, 3, True)]
TOKENS = [1, 2, 4, 6, 8, 12, 16, 20, 32, 64]


def inputs(batch, dtype, width, state_len, state_cl, tokens):
    x = torch.randn(batch, DIM, tokens, dtype=dtype)
    state = (torch.randn(batch, state_len, DIM, dtype=dtype).transpose(1, 2) if state_cl
             else torch.randn(batch, DIM, state_len, dtype=dtype))
    return dict(x=x, conv_state=state, weight=torch.randn(DIM, width, dtype=dtype), bias=torch.randn(DIM, dtype=dtype),
                out=torch.empty_like(x))


def c_call(lib, args):
    packed = _pack.fill_args(_op_update.CUpdateArgs, args, activation=_lib.ACT_SILU,
                             backend=_lib.BACKEND_IDS["cpu"], stream=None)
    return lambda: lib.call("cc1d_causal_conv1d_update", packed)


def baseline(args):
    x, state, w, b = args["x"], args["conv_state"], args["weight"], args["bias"]
    W, T, S = w.shape[1], x.shape[2], state.shape[2]

    def step():
        seq = torch.cat([state[:, :, S - (W - 1):], x], dim=-1)
        out = F.silu(F.conv1d(seq, w[:, None, :], b, groups=DIM))
        state.copy_(torch.cat([state, x], dim=-1)[:, :, -S:])
        return out
    return step


def copy(args):
    state, x = args["conv_state"], args["x"]
    state2, out = torch.empty_like(state), torch.empty_like(x)
    return lambda: (state2.copy_(state), out.copy_(x))


def main():
    a, libs = start(__doc__, lambda ap: ap.add_argument(
        "--tokens", type=lambda v: [int(t) for t in v.split(",")], default=TOKENS, help="token counts, comma-separated"))
    tokens = a.tokens
    batches, calls = (2, 3) if a.quick else (15, 20)
    print("| layout | batch | dtype | library | " + " | ".join(f"{t} token{'s' if t > 1 else ''}" for t in tokens)
          + " |")
    print("|" + "---|" * (len(tokens) + 4))
    for name, width, state_len, state_cl in LAYOUTS[:1] if a.quick else LAYOUTS:
        for batch in (1,) if a.quick else (1, 64):
            for dtype in (torch.bfloat16,) if a.quick else (torch.bfloat16, torch.float32):
                cases = [inputs(batch, dtype, width, state_len, state_cl, t) for t in tokens]
                best = {tag: [float("inf")] * len(tokens) for tag, _ in libs}
                for _ in range(1 if a.quick or not a.against else 2):  # alternated: a slow phase hits both
                    for tag, lib in libs:
                        for i, args in enumerate(cases):
                            best[tag][i] = min(best[tag][i], best_us(c_call(lib, args), batches, calls))
                rows = [(f"libcc1d{tag}", best[tag]) for tag, _ in libs]
                rows.append(("baseline (torch)", [best_us(baseline(c), batches, calls) for c in cases]))
                rows.append(("copy of the bytes", [best_us(copy(c), batches, calls) for c in cases]))
                for label, figures in rows:
                    print(f"| {name} | {batch} | {str(dtype)[6:]} | {label} | "
                          + " | ".join(f"{v:.1f}" for v in figures) + " |")


if __name__ == "__main__":
    main()
