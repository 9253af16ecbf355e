"""Bit codes in and out of their packed forms: bits, uint8 bytes, uint64 words.

Codes are stored 8 bits per byte, most significant bit first, exactly like
:func:`numpy.packbits`. The popcount kernels read them as 64-bit words whose
padding bits are zero (:func:`packed_to_words`).
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from numbers import Integral

import numpy as np
from sklearn.utils.validation import check_array

from sksign._compat import Interval, validate_params

__all__ = [
    "as_bits",
    "check_n_bits",
    "check_packed",
    "check_packed_array",
    "pack_bits",
    "packed_to_words",
    "unpack_bits",
]


def as_bits(x, input_name="bits", *, strict=False):
    """Boolean array ``x > 0`` of an array of 0/1, +-1 or bool values.

    The one rule by which sksign turns values into bits: -1 and 0 give 0, +1
    (or any positive value) gives 1.

    Parameters
    ----------
    x : array-like
        Values of numeric or bool dtype. NaN or infinity raises a ValueError,
        any other dtype (strings, objects) a TypeError.

    input_name : str, default="bits"
        Name of `x` in error messages.

    strict : bool, default=False
        If True, `x` must hold one bit per value: bool, or 0/1, or -1/+1 (of
        any numeric dtype, floats included: 0.0/1.0 and -1.0/1.0 are fine).
        Any other value (2, 0.5, the bytes of packed codes) raises a
        ValueError naming a few of the values found, and so does a mix of 0
        and -1, which would read as the same bit. The check costs a few
        vectorised passes over `x` (none for bool).

    Returns
    -------
    bits : ndarray of dtype bool
        ``x > 0``, of the shape of `x`.

    See Also
    --------
    pack_bits : The same bits, packed 8 to a byte.

    Examples
    --------
    >>> from sksign.kernels import as_bits
    >>> as_bits([[1, -1, 0, 1]])
    array([[ True, False, False,  True]])
    >>> as_bits([[1, -1, -1, 1]], strict=True)
    array([[ True, False, False,  True]])
    """
    x = np.asarray(x)
    if x.dtype.kind in "fc" and np.isnan(x).any():
        raise ValueError(
            f"{input_name} contains NaN; expected 0/1, +-1 or bool values."
        )
    if x.dtype.kind == "f" and np.isinf(x).any():
        raise ValueError(
            f"{input_name} contains infinity; expected 0/1, +-1 or bool values."
        )
    if x.dtype.kind not in "biuf":
        raise TypeError(
            f"{input_name} must hold 0/1, +-1 or bool values; got dtype {x.dtype}."
        )
    bits = x > 0
    if strict and x.dtype.kind != "b" and x.size:
        _check_bit_values(x, bits, input_name)
    return bits


#: Values named in the error for an array that is not one bit per value.
_N_SHOWN = 5


def _check_bit_values(x, bits, input_name):
    """Raise unless finite numeric `x` holds only 0/1 or only -1/+1 values.

    `bits` is ``x > 0``. Two reductions bound the values; in those bounds
    0/1 integers need nothing more, -1/+1 integers a count of the nonzero
    values, and floats a comparison with 1 (and -1), so that a fraction
    (0.5) is caught. The error path alone looks for the values to name.
    """
    lo, hi = x.min(), x.max()
    if lo >= 0 and hi <= 1:  # 0/1: every positive value must be 1
        ok = x.dtype.kind in "iu" or (
            np.count_nonzero(x == 1) == np.count_nonzero(bits)
        )
    elif lo == -1 and hi <= 1:  # -1/+1: no 0, and no fraction
        if x.dtype.kind == "i":
            ok = np.count_nonzero(x) == x.size
        else:
            n_pos = np.count_nonzero(bits)
            ok = (
                np.count_nonzero(x == 1) == n_pos
                and np.count_nonzero(x == -1) == x.size - n_pos
            )
    else:
        ok = False
    if ok:
        return
    odd = x[(x != 0) & (x != 1) & (x != -1)]
    if odd.size == 0:  # only -1, 0 (and 1): two encodings at once
        raise ValueError(
            f"{input_name} mixes the values 0 and -1 (found "
            f"{np.unique(x).tolist()}): a code holds 0/1 values or -1/+1 values, "
            "not both, since 0 and -1 would read as the same bit; map it to one "
            "of them (for signs with zeros, decide which bit a 0 is)."
        )
    shown = np.unique(odd[: 1 << 16])
    more = ", ..." if shown.size > _N_SHOWN or odd.size > (1 << 16) else ""
    values = ", ".join(map(str, shown[:_N_SHOWN].tolist()))
    message = (
        f"{input_name} must hold one value per bit (0/1, -1/+1 or bool); found "
        f"other values: [{values}{more}]."
    )
    if x.dtype == np.uint8 and hi > 1:
        message += (
            f" {input_name} is uint8 with values up to {int(hi)}: it looks like "
            'packed bytes from SignCodeTransformer(output="packed") or pack_bits.'
        )
    message += (
        " Codes packed 8 bits per byte need packed=True, n_bits=<bits per code> "
        "(the transformer's n_bits_); they are never read as one bit per byte."
    )
    raise ValueError(message)


@validate_params(
    {"bits": ["array-like"], "axis": [Integral]},
    prefer_skip_nested_validation=True,
)
def pack_bits(bits, axis=-1):
    """Pack 0/1, +-1 or bool values into uint8, 8 bits per byte.

    The bit of a value is ``x > 0`` (so -1 and 0 give 0, +1 gives 1). Bits are
    packed most significant bit first, exactly like ``numpy.packbits(x > 0,
    axis=axis)``; the last byte of a row whose length is not a multiple of 8 is
    padded with zero bits.

    Parameters
    ----------
    bits : array-like
        Values to pack; NaN raises a ValueError.

    axis : int, default=-1
        Axis along which bits are packed.

    Returns
    -------
    packed : ndarray of dtype uint8
        `bits` with ``ceil(n / 8)`` bytes in place of the ``n`` values of `axis`.

    See Also
    --------
    unpack_bits : The inverse operation.

    Examples
    --------
    >>> from sksign.kernels import pack_bits
    >>> pack_bits([[1, -1, 1, 1, -1, -1, -1, -1, 1]])
    array([[176, 128]], dtype=uint8)
    """
    return np.packbits(as_bits(bits), axis=axis)


def check_packed(X, input_name="X", *, n_bits=None):
    """Validate a 2-D array of packed codes of dtype uint8.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_bytes)
        Packed codes (see :func:`pack_bits`). Any dtype other than uint8 raises
        a TypeError; a shape other than 2-D a ValueError.

    input_name : str, default="X"
        Name of `X` in error messages.

    n_bits : int, default=None
        If given, the bits per row: the rows must have ``ceil(n_bits / 8)``
        bytes, and the padding bits past `n_bits` in the last byte must be
        zero (as :func:`pack_bits` leaves them); else a ValueError naming
        `n_bits`, the expected byte count and the first offending rows. None
        checks neither.

    Returns
    -------
    X : ndarray of shape (n_samples, n_bytes), dtype uint8
        The validated codes (not copied when already such an array).

    Examples
    --------
    >>> import numpy as np
    >>> from sksign.kernels import check_packed
    >>> check_packed(np.array([[176, 128]], dtype=np.uint8))
    array([[176, 128]], dtype=uint8)
    >>> check_packed(np.array([[176, 128]], dtype=np.uint8), n_bits=9)
    array([[176, 128]], dtype=uint8)
    """
    X = check_array(X, dtype=None, input_name=input_name, ensure_all_finite=False)
    return check_packed_array(X, input_name, n_bits)


def check_packed_array(X, input_name="X", n_bits=None):
    """:func:`check_packed` on a 2-D ndarray already validated by
    scikit-learn (``check_array`` / ``validate_data``): its dtype, and with
    `n_bits` its width and padding bits, the same errors; `X` returned."""
    if X.dtype != np.uint8:
        raise TypeError(
            f"{input_name} must be bit-packed codes of dtype uint8 (see pack_bits); "
            f"got dtype {X.dtype}."
        )
    if n_bits is not None:
        check_n_bits(n_bits, X.shape[1])
        _check_padding(X, int(n_bits), input_name)
    return X


def _check_padding(X, n_bits, input_name):
    """Raise unless the bits past `n_bits` in the last byte of each row are 0.

    One pass over the last column of `X` (packed rows of ``ceil(n_bits / 8)``
    bytes).
    """
    if n_bits % 8 == 0:
        return
    mask = np.uint8(0xFF >> (n_bits % 8))
    (rows,) = np.nonzero(X[:, -1] & mask)
    if rows.size:
        n_bytes = X.shape[1]
        raise ValueError(
            f"{input_name} has nonzero padding bits: with n_bits={n_bits}, a row "
            f"holds ceil({n_bits} / 8) = {n_bytes} bytes whose last "
            f"{8 - n_bits % 8} bit(s) (mask 0x{int(mask):02X} of the last byte) "
            f"must be zero, as pack_bits leaves them; rows "
            f"{rows[:_N_SHOWN].tolist()}{', ...' if rows.size > _N_SHOWN else ''} "
            "break this. These are not codes of n_bits bits: check n_bits (or "
            "the packing)."
        )


def check_n_bits(n_bits, n_bytes):
    """Number of bits in packed rows of `n_bytes` bytes.

    Parameters
    ----------
    n_bits : int or None
        Bits per row; None means ``8 * n_bytes``. Must satisfy
        ``8 * (n_bytes - 1) < n_bits <= 8 * n_bytes``, that is
        ``n_bytes == ceil(n_bits / 8)`` (else a ValueError).

    n_bytes : int
        Bytes per packed row.

    Returns
    -------
    n_bits : int
        The number of bits per row.

    Examples
    --------
    >>> from sksign.kernels import check_n_bits
    >>> check_n_bits(None, 2), check_n_bits(9, 2)
    (16, 9)
    """
    if n_bits is None:
        return 8 * n_bytes
    if not 8 * (n_bytes - 1) < n_bits <= 8 * n_bytes:
        raise ValueError(
            f"n_bits={n_bits} does not fit packed rows of {n_bytes} bytes: "
            f"codes of n_bits={n_bits} bits are packed in ceil({n_bits} / 8) = "
            f"{-(-n_bits // 8)} bytes per row, and rows of {n_bytes} bytes hold "
            f"{8 * (n_bytes - 1) + 1} <= n_bits <= {8 * n_bytes}."
        )
    return int(n_bits)


def packed_to_words(packed, n_bits=None):
    """Copy packed uint8 rows into uint64 words with every padding bit zero.

    The form the popcount kernels read: bits past `n_bits` (in the last byte,
    and in the bytes up to the next multiple of 8) are cleared, so padding never
    changes a distance. The bit order inside a word does not matter for
    ``popcount(a ^ b)``.

    Parameters
    ----------
    packed : ndarray of shape (n_samples, n_bytes), dtype uint8
        Packed codes (see :func:`pack_bits`); another dtype raises a TypeError.

    n_bits : int, default=None
        Bits per row; None means ``8 * n_bytes``. Must satisfy
        ``8 * (n_bytes - 1) < n_bits <= 8 * n_bytes``.

    Returns
    -------
    words : ndarray of shape (n_samples, ceil(n_bits / 64)), dtype uint64
        A new C-contiguous array.

    See Also
    --------
    words_kneighbors : The k-NN search on words.
    words_hamming_distances : The distance matrix on words.

    Examples
    --------
    >>> from sksign.kernels import pack_bits, packed_to_words
    >>> words = packed_to_words(pack_bits([[1] * 70]), n_bits=70)
    >>> words.shape, words.dtype
    ((1, 2), dtype('uint64'))
    """
    packed = np.asarray(packed)
    if packed.dtype != np.uint8:
        raise TypeError(
            "packed must be bit-packed codes of dtype uint8 (see pack_bits); got "
            f"dtype {packed.dtype}."
        )
    if packed.ndim != 2:
        raise ValueError(
            f"packed must be a 2-D array of packed rows; got {packed.ndim} "
            "dimension(s)."
        )
    n_bits = check_n_bits(n_bits, packed.shape[1])
    n_rows = packed.shape[0]
    n_bytes = (n_bits + 7) // 8
    n_words = (n_bits + 63) // 64
    buf = np.zeros((n_rows, 8 * n_words), dtype=np.uint8)
    buf[:, :n_bytes] = packed[:, :n_bytes]
    if n_bits % 8:
        buf[:, n_bytes - 1] &= np.uint8((0xFF << (8 - n_bits % 8)) & 0xFF)
    return buf.view(np.uint64)


@validate_params(
    {
        "packed": ["array-like"],
        "n_bits": [Interval(Integral, 1, None, closed="left"), None],
        "axis": [Integral],
    },
    prefer_skip_nested_validation=True,
)
def unpack_bits(packed, n_bits=None, axis=-1):
    """Unpack uint8 codes into 0/1 bits, the inverse of :func:`pack_bits`.

    Parameters
    ----------
    packed : array-like of dtype uint8
        Packed codes, most significant bit first (as :func:`numpy.packbits`).

    n_bits : int, default=None
        Number of bits to keep along `axis`; padding bits past it are dropped.
        None keeps ``8 * n_bytes``. Must satisfy
        ``8 * (n_bytes - 1) < n_bits <= 8 * n_bytes``.

    axis : int, default=-1
        Axis along which the bytes are unpacked.

    Returns
    -------
    bits : ndarray of dtype uint8
        Zeros and ones, with `n_bits` values along `axis`.

    See Also
    --------
    pack_bits : The inverse operation.

    Examples
    --------
    >>> import numpy as np
    >>> from sksign.kernels import unpack_bits
    >>> unpack_bits(np.array([[176, 128]], dtype=np.uint8), n_bits=9)
    array([[1, 0, 1, 1, 0, 0, 0, 0, 1]], dtype=uint8)
    """
    packed = np.asarray(packed)
    if packed.dtype != np.uint8:
        raise TypeError(
            f"packed must be codes of dtype uint8 (see pack_bits); got dtype "
            f"{packed.dtype}."
        )
    n_bits = check_n_bits(n_bits, packed.shape[axis])
    return np.unpackbits(packed, axis=axis, count=n_bits)
