"""The CPU decode step (`causal_conv1d_update`, one token) per state layout, in C: Mamba's state rows
of width elements, vLLM's of width-1, a ring buffer (`cache_seqlens`) of 16 at a head whose window
does not wrap and at one where it does, and a ring of width-1; width 4, silu, dim 4096, batch 1
and 64, each dtype. Beside them, in the same run, the baseline (transformers' torch decode step:
roll the state, write x, multiply, sum, silu) and the physical limit (torch copying the bytes the
step moves: the state read and written, x and out). Each figure: the library call alone through
ctypes (the arguments packed once), minimum over batches of calls, in microseconds. With
--against OTHER_LIBCC1D the same calls run through a second build of libcc1d, alternated with
the first, for a before/after table (the Python call's overhead: bench/call_overhead.py).

    PYTHONPATH=python CAUSAL_CONV1D_LIBRARY=build/cmake/libcc1d.so \\
        ~/.cache/causal-conv1d/venv/bin/python bench/cpu_decode.py [--quick] [--against OLD.so]
"""
import argparse
import ctypes
import os
import time

import torch

from causal_conv1d import _lib, _op_update, _pack

DIM, WIDTH = 4096, 4
# (name, state_len, cache_seqlens or None): head = cache_seqlens mod state_len.
LAYOUTS = [("Mamba's (rows of 4)", 4, None), ("vLLM's (rows of 3)", 3, None),
           ("ring of 16, head 5", 16, 21), ("ring of 16, head 1 (wraps)", 16, 17), ("ring of 3", 3, 17)]
DTYPES = [torch.bfloat16, torch.float16, torch.float32]


def best_us(fn, batches, calls):
    for _ in range(calls * 3):
        fn()
    best = float("inf")
    for _ in range(batches):
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - t) / calls * 1e6)
    return best


def c_call(lib, batch, dtype, state_len, seqlens):
    x = torch.randn(batch, DIM, dtype=dtype)
    args = dict(x=x, conv_state=torch.randn(batch, DIM, state_len, dtype=dtype),
                weight=torch.randn(DIM, WIDTH, dtype=dtype), bias=torch.randn(DIM, dtype=dtype),
                out=torch.empty_like(x))
    if seqlens is not None:
        args["cache_seqlens"] = torch.full((batch,), seqlens, dtype=torch.int32)
    packed = _pack.fill_args(_op_update.CUpdateArgs, args, activation=_lib.ACT_SILU,
                             backend=_lib.BACKEND_IDS["cpu"], stream=None)
    return lambda: lib.call("cc1d_causal_conv1d_update", packed), args  # args keeps the tensors alive


def baseline(batch, dtype):
    """transformers' torch decode step (Mamba's layout)."""
    x = torch.randn(batch, DIM, dtype=dtype)
    state = torch.randn(batch, DIM, WIDTH, dtype=dtype)
    w, b = torch.randn(DIM, WIDTH, dtype=dtype), torch.randn(DIM, dtype=dtype)

    def step():
        state.copy_(torch.roll(state, shifts=-1, dims=-1))
        state[:, :, -1] = x
        return torch.nn.functional.silu(torch.sum(state * w, dim=-1) + b)
    return step


def copy(batch, dtype):
    """torch copying the step's bytes: the state (read and written), and x into out."""
    state, state2 = (torch.randn(batch, DIM, WIDTH, dtype=dtype) for _ in range(2))
    x, out = torch.randn(batch, DIM, dtype=dtype), torch.empty(batch, DIM, dtype=dtype)
    return lambda: (state2.copy_(state), out.copy_(x))


def start(doc, options=None):
    """The decode benchmarks' command line (--quick, --against, and what `options` adds to the
    parser) and header: returns the arguments and the libraries to time, ("", this build) and
    (" (against)", the other one)."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="batch 1, one dtype, few calls: a check that it runs")
    ap.add_argument("--against", metavar="LIBCC1D", help="a second libcc1d build, alternated with the first")
    if options:
        options(ap)
    a = ap.parse_args()
    libs = [("", _lib.library())]
    if a.against:
        path = os.path.abspath(a.against)
        libs.append((" (against)", _lib.Library(path, ctypes.CDLL(path))))
    print(f"torch {torch.__version__} ({torch.get_num_threads()} threads); libcc1d "
          f"{os.environ.get('CAUSAL_CONV1D_LIBRARY', 'default')}; {os.cpu_count()} cores, load average "
          + " ".join(f"{v:.2f}" for v in os.getloadavg()))
    print()
    return a, libs


def main():
    a, libs = start(__doc__)
    batches, calls = (3, 5) if a.quick else (60, 50)
    print("| batch | dtype | library | " + " | ".join(name for name, _, _ in LAYOUTS)
          + " | baseline (torch, Mamba's) | copy of the bytes |")
    print("|" + "---|" * (len(LAYOUTS) + 5))
    for batch in (1,) if a.quick else (1, 64):
        for dtype in DTYPES[:1] if a.quick else DTYPES:
            calls_of = {tag: [c_call(lib, batch, dtype, s, q) for _, s, q in LAYOUTS] for tag, lib in libs}
            rounds = 1 if a.quick or not a.against else 2
            best = {tag: [float("inf")] * len(LAYOUTS) for tag, _ in libs}
            for _ in range(rounds):  # alternated, so that a slow phase of the machine hits both
                for tag, _ in libs:
                    for i, (fn, _) in enumerate(calls_of[tag]):
                        best[tag][i] = min(best[tag][i], best_us(fn, batches, calls))
            base, lim = best_us(baseline(batch, dtype), batches, calls), best_us(copy(batch, dtype), batches, calls)
            for tag, _ in libs:
                print(f"| {batch} | {str(dtype)[6:]} | libcc1d{tag} | " + " | ".join(f"{v:.1f}" for v in best[tag])
                      + f" | {base:.1f} | {lim:.1f} |")


if __name__ == "__main__":
    main()
