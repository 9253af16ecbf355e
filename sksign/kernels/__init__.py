"""Packed-bit kernels: bit packing and popcount Hamming distances and k-NN search.

Numpy and numba only (no torch): codes are packed 8 bits per byte, most
significant bit first (as :func:`numpy.packbits`), and compared as 64-bit words
with XOR + popcount. :mod:`sksign.metrics.pairwise` re-exports the packing and
distance functions under their older public path; the estimators build on the
word-level functions.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from sksign._public import public_names
from sksign.kernels._ir_loops import (
    counted_loop,
    llvm_function,
    load_vector,
    prefetch,
    splat,
)
from sksign.kernels._packing import (
    as_bits,
    check_n_bits,
    check_packed,
    check_packed_array,
    pack_bits,
    packed_to_words,
    unpack_bits,
)
from sksign.kernels._pairwise import (
    auto_batch_size,
    packed_hamming_distances,
    packed_kneighbors,
)
from sksign.kernels._popcount import popcount64, popcount_instructions, target_has
from sksign.kernels._vector_counts import (
    fma_exact,
    vector_kernels,
    xor_affine_block,
    xor_count_block,
)
from sksign.kernels._words import (
    effective_n_threads,
    search_words,
    words_hamming_distances,
    words_kneighbors,
)

# The public names are declared in sksign/_public.py. The others imported
# here (as_bits, check_n_bits, check_packed, check_packed_array,
# auto_batch_size, counted_loop, effective_n_threads, fma_exact, llvm_function,
# load_vector, popcount64, prefetch, search_words, splat, target_has, vector_kernels,
# xor_affine_block, xor_count_block) are internal checkers and kernels:
# importable for sksign's own modules (the k-NN estimators, sign geometry,
# deploy), not public.
__all__ = public_names(__name__)
