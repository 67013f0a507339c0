"""bench/sass_profile.py's choice of a kernel's steady-state loop, on opcode lists shaped like
the kernels': the figure `test_sass_profile` budgets and RESULTS.md tabulates is that loop's
instructions per output, so a wrong choice misreports a kernel without any test failing."""
import sys

from helpers import REPO

sys.path.insert(0, str(REPO / "bench"))
from sass_profile import steady_loop  # noqa: E402  (bench/ is not a package)


def layout(*loops):
    """Opcodes of loops laid end to end, each a list of opcodes; returns (ops, [(start, end)])."""
    ops, spans = [], []
    for body in loops:
        spans.append((len(ops), len(ops) + len(body) - 1))
        ops += body + ["BRA"]
        spans[-1] = (spans[-1][0], spans[-1][1] + 1)  # the backward branch closes the loop
    return ops, spans


def test_a_computing_loop_wins_a_tie_against_shorter_data_moves():
    # The update kernel: a token loop (load, taps, silu, store), the ring's state writes (load,
    # store) and the padding rows' zeroing (store only), each storing one 2-byte element a trip.
    token = ["LDG.E.U16", "IMAD", "FFMA", "FFMA", "FFMA", "FFMA", "MUFU.EX2", "FMUL", "F2FP", "STG.E.U16"]
    state = ["LDG.E.U16", "IMAD", "IADD3", "STG.E.U16"]
    zeros = ["IMAD", "STG.E.U16"]
    ops, spans = layout(zeros, state, token)
    loop = steady_loop(ops, spans, 2)
    assert loop["insns"] == len(token) + 1 and loop["outputs"] == 1


def test_the_shortest_loop_with_16_byte_stores_wins():
    scalar = ["LDG.E", "FFMA", "STG.E", "STG.E", "STG.E", "STG.E", "STG.E"]  # more bytes, 4-byte stores
    vec = ["LDG.E.128", "FFMA", "FFMA", "STG.E.128"]
    longer_vec = vec + ["IMAD"] * 5
    ops, spans = layout(scalar, longer_vec, vec)
    loop = steady_loop(ops, spans, 2)
    assert loop["insns"] == len(vec) + 1 and loop["outputs"] == 8 and loop["stg128"] == 1


def test_more_bytes_stored_wins_before_computing():
    two = ["LDG.E", "STG.E", "STG.E"]
    one = ["LDG.E", "FFMA", "STG.E"]
    ops, spans = layout(one, two)
    assert steady_loop(ops, spans, 4)["outputs"] == 2


def test_no_storing_loop_gives_none():
    ops, spans = layout(["LDG.E", "FFMA"])
    assert steady_loop(ops, spans, 4) is None
