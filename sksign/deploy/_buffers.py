"""The buffers of a packed net's call, kept for its next call.

An image net's float maps take megabytes a layer (16 channels of 32 x 32
float32 for 64 samples: 4 MB). Fresh numpy arrays of that size are fresh
memory to the process: glibc hands the freed top of its heap back to the
kernel at the end of a call, and the kernel maps and zeroes those pages
again on their first touch in the next. For Bi-Real ResNet-18 at batch 64
that was 12,000 page faults and half of the call's time (68 ms, 36 ms
without them); an element-wise ``add`` took 1.8 ms instead of 0.25.

A :class:`Buffers` pool per net hands out arrays during a call
(:func:`empty`, the ops' ``np.empty``). The runtime tells the call what
each step made (:meth:`_Call.hold`) and which values no later step reads
(:meth:`_Call.drop`): an array goes back to the pool as soon as no live
value lies in it, so the next op takes it while it is still in cache, and
the next call of the same shapes finds the rest. An array under a live
value is never handed out again, so an op never writes into a value
another op still reads; the arrays under the call's results stay with the
caller. A small call (the runtime's ``POOL_MIN_BYTES``) bypasses the pool:
glibc serves its arrays from the heap, still in cache.

Concurrent calls (threads of a model server) each take their own arrays;
the pool keeps at most :data:`MAX_KEPT_BYTES` between calls. No lock:
``list.pop`` and ``list.append`` are atomic under the GIL, and a forked
child finds no lock held by a thread it does not have. Two calls giving
back at once may leave :attr:`Buffers.kept_bytes` off by an array (it
guards the cap, not correctness).
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import threading

import numpy as np

__all__ = [
    "ALIGN",
    "MAX_KEPT_BYTES",
    "Buffers",
    "aligned",
    "aligned_arrays",
    "empty",
    "zeros",
]

#: Bytes of free buffers a net keeps between calls, at most (beyond that,
#: the buffers of a call go back to the allocator).
MAX_KEPT_BYTES = 2**28


#: Bytes a packed net's weights and tables start on: a cache line, so that
#: no vector load of a table row or weight row straddles two lines. A load
#: that does costs about two: the float32 table sums of a 3 x 3 convolution
#: of 32 (64) channels on 32 samples of 32 x 32 (16 x 16) maps took 4.26
#: (3.76) ms from tables 16 bytes off a line, 2.49 (2.20) ms from aligned
#: ones (Intel Xeon, AVX-512, one thread); numpy aligns its arrays to 16.
ALIGN = 64


def aligned(array):
    """`array` as a C-contiguous array whose data starts on an :data:`ALIGN`
    byte boundary: `array` itself if it is one (or empty), else a copy.

    Examples
    --------
    >>> import numpy as np
    >>> from sksign.deploy._buffers import ALIGN, aligned
    >>> a = aligned(np.arange(10, dtype=np.float32)[1:])
    >>> a.ctypes.data % ALIGN, a.tolist()[:3]
    (0, [1.0, 2.0, 3.0])
    """
    array = np.asarray(array)
    if array.flags.c_contiguous and (array.ctypes.data % ALIGN == 0 or not array.size):
        return array  # (an empty array holds nothing to load)
    raw = np.empty(array.nbytes + ALIGN, np.uint8)
    start = -raw.ctypes.data % ALIGN
    out = raw[start : start + array.nbytes].view(array.dtype).reshape(array.shape)
    out[...] = array
    return out


def aligned_arrays(value):
    """`value` with its arrays :func:`aligned`: an array, or a tuple or list
    whose array items are aligned (other items, nested ones included, as
    they are)."""
    if isinstance(value, np.ndarray):
        return aligned(value)
    if isinstance(value, (tuple, list)):
        return type(value)(
            aligned(v) if isinstance(v, np.ndarray) else v for v in value
        )
    return value


class _ThisThread(threading.local):
    """The call running on this thread: its pool and the arrays it took (a
    thread outside any call reads the class's Nones, with no exception to
    catch: :func:`empty` costs a small op a microsecond less)."""

    pool = None
    taken = None


_CALL = _ThisThread()


def empty(shape, dtype):
    """``np.empty(shape, dtype)``, from the pool of the call running on this
    thread (a plain new array outside a call, or on a worker thread)."""
    taken = _CALL.taken
    if taken is None:
        return np.empty(shape, dtype)
    entry = _CALL.pool.take((shape, dtype))
    taken.append(entry)
    return entry[1]


def zeros(shape, dtype):
    """``np.zeros(shape, dtype)``, from the pool as :func:`empty`."""
    out = empty(shape, dtype)
    out.fill(0)
    return out


class Buffers:
    """Free arrays by shape and dtype, shared by the calls of one net.

    A net's ops ask for the same shapes call after call, so a free array is
    handed out as it is, with no view to make (a few microseconds an op
    matter to a small net at batch 1). Each is kept as ``(key, array,
    address, nbytes)``, its address read once.
    """

    __slots__ = ("_free", "_kept")

    def __init__(self):
        self._free = {}  # (shape, dtype) -> [entries of free arrays]
        self._kept = 0

    def take(self, key):
        """The entry of a free array of ``key = (shape, dtype)``, or a new one."""
        free = self._free.get(key)
        if free:
            try:
                entry = free.pop()
            except IndexError:  # another thread took the last one
                pass
            else:
                self._kept -= entry[3]
                return entry
        arr = np.empty(*key)
        return key, arr, _address(arr), arr.nbytes

    def give(self, entries):
        """Keep `entries` for the next calls, up to :data:`MAX_KEPT_BYTES`."""
        free, kept = self._free, self._kept
        for entry in entries:
            if kept + entry[3] > MAX_KEPT_BYTES:
                break
            same = free.get(entry[0])
            if same is None:
                free[entry[0]] = [entry]
            else:
                same.append(entry)
            kept += entry[3]
        self._kept = kept

    @property
    def kept_bytes(self):
        """Bytes of the arrays kept between calls."""
        return self._kept

    def call(self):
        """A context for one call on this thread (see :class:`_Call`)."""
        return _Call(self)


class _Call:
    """One call's use of a pool: :func:`empty` draws from it on this thread.

    The runtime tells it what each step made (:meth:`hold`) and which values
    are read no more (:meth:`drop`); an array goes back to the pool as soon
    as no live value lies in it, so the next op takes it while it is still
    in cache, and a call holds at once only the arrays of its live values.
    The arrays under the values still held at the end (the call's results)
    stay with the caller; a call that raises gives back every array.
    """

    __slots__ = ("_outer", "_owner", "_pool", "_refs", "_taken")

    def __init__(self, pool):
        self._pool = pool
        self._owner = {}  # value name -> entry of the array it lies in
        self._refs = {}  # id(entry) -> live values lying in it

    def hold(self, name, value, inputs):
        """Record the value `name` a step made from the values `inputs`.

        The arrays the step took that `value` does not lie in (its scratch)
        go back to the pool now; `value` may also be a view of an input.
        """
        taken = self._taken
        owner = _owner(value, taken)
        if owner is None:  # an input, or a view of one?
            owner = _owner(value, [self._owner.get(s) for s in inputs])
        if taken:
            scratch = [entry for entry in taken if entry is not owner]
            taken.clear()
            if scratch:
                self._pool.give(scratch)
        if owner is not None:
            self._owner[name] = owner
            self._refs[id(owner)] = self._refs.get(id(owner), 0) + 1

    def drop(self, name):
        """The value `name` is read no more: its array goes back to the pool
        once no other value lies in it."""
        entry = self._owner.pop(name, None)
        if entry is None:
            return
        left = self._refs[id(entry)] - 1
        if left:
            self._refs[id(entry)] = left
        else:
            del self._refs[id(entry)]
            self._pool.give([entry])

    def __enter__(self):
        self._outer = (_CALL.pool, _CALL.taken)
        self._taken = _CALL.taken = []
        _CALL.pool = self._pool
        return self

    def __exit__(self, exc_type, *exc):
        _CALL.pool, _CALL.taken = self._outer
        # a step's arrays not yet held: the step raised, nothing is returned
        back = list(self._taken)
        if exc_type is not None:
            back += {id(e): e for e in self._owner.values()}.values()
        self._pool.give(back)
        return False


def _owner(value, entries):
    """The entry among `entries` whose array `value` lies in, or None.

    A pooled array and numpy's views of it (reshape, slices) name it as their
    ``base``; the address is compared only for other views.
    """
    base = value.base
    for entry in entries:
        if entry is not None and (value is entry[1] or base is entry[1]):
            return entry
    if base is None:  # a new array of its own
        return None
    p = _address(value)
    for entry in entries:
        if entry is not None and 0 <= p - entry[2] < entry[3]:
            return entry
    return None


def _address(arr):
    return arr.__array_interface__["data"][0]
