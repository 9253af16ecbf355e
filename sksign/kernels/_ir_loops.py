"""LLVM-IR pieces shared by the register-block intrinsics (the k-NN's
:func:`~sksign.kernels._vector_counts.xor_count_block`, the packed nets'
int16 pair sums, the look-up sums, the AVX2 nibble kernels): a counted loop
that carries values in registers, an LLVM intrinsic declared once in a
module, a scalar broadcast to every lane of a vector, a vector loaded
from an element of an array, and a prefetch of an element's cache line."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from llvmlite import ir
from numba.core import cgutils

__all__ = ["counted_loop", "llvm_function", "load_vector", "prefetch", "splat"]


def counted_loop(builder, n, initial, body, name):
    """Emit ``for k in range(n)``, carrying the values `initial` through it.

    ``body(k, values)`` emits one step and returns the new values, as many
    as `initial` and of the same types; it may add blocks (a loop of its
    own), the back edge leaving from the block it ends in. Returns the
    values after the loop: `initial` where ``n <= 0``. The builder is left
    at the end of the loop's exit block.
    """
    i64 = ir.IntType(64)
    entry = builder.block
    loop = builder.append_basic_block(f"{name}_loop")
    done = builder.append_basic_block(f"{name}_done")
    builder.cbranch(builder.icmp_signed(">", n, ir.Constant(i64, 0)), loop, done)
    builder.position_at_end(loop)
    k = builder.phi(i64)
    k.add_incoming(ir.Constant(i64, 0), entry)
    values = []
    for value in initial:
        values.append(builder.phi(value.type))
        values[-1].add_incoming(value, entry)
    new = body(k, values)
    latch = builder.block
    k_next = builder.add(k, ir.Constant(i64, 1))
    k.add_incoming(k_next, latch)
    for phi, value in zip(values, new, strict=True):
        phi.add_incoming(value, latch)
    builder.cbranch(builder.icmp_signed("<", k_next, n), loop, done)
    builder.position_at_end(done)
    finals = []  # the phis head the exit block
    for first, last in zip(initial, new, strict=True):
        finals.append(builder.phi(first.type))
        finals[-1].add_incoming(first, entry)
        finals[-1].add_incoming(last, latch)
    return finals


def llvm_function(builder, name, ret, args):
    """The LLVM function `name` (an intrinsic such as
    ``llvm.x86.avx2.pshuf.b``) of return type `ret` and argument types
    `args`, declared in the builder's module once."""
    fnty = ir.FunctionType(ret, args)
    return cgutils.get_or_insert_function(builder.module, fnty, name)


def splat(builder, scalar, vector_type):
    """`scalar` in every lane of a vector of `vector_type`."""
    undefined = ir.Constant(vector_type, ir.Undefined)
    one = builder.insert_element(undefined, scalar, ir.Constant(ir.IntType(32), 0))
    lanes = ir.VectorType(ir.IntType(32), vector_type.count)
    return builder.shuffle_vector(one, undefined, ir.Constant(lanes, [0] * lanes.count))


def load_vector(builder, base, index, vector_type, align=1):
    """A vector of `vector_type` loaded from ``base[index]`` (`base` a
    pointer to its elements; `align` in bytes)."""
    ptr = builder.bitcast(builder.gep(base, [index]), vector_type.as_pointer())
    return builder.load(ptr, align=align)


def prefetch(builder, base, index):
    """Ask for the cache line of ``base[index]`` (a read, kept in every cache
    level: ``prefetcht0`` on x86). A hint: an address past the array is
    never read and does not fault."""
    i32 = ir.IntType(32)
    ptr = builder.gep(base, [index])
    fetch = llvm_function(
        builder, "llvm.prefetch.p0", ir.VoidType(), [ptr.type, i32, i32, i32]
    )
    # read (0), temporal locality 3 (all levels), data cache (1)
    builder.call(
        fetch, [ptr, ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)]
    )
