"""The buffer pool of a packed net's calls: no buffer twice within a call, a
call's results never handed to a later call, the same buffers reused call
after call, and packed nets predicting what they predicted without it."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import pickle
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sksign.deploy import _buffers, _runtime, pack
from sksign.deploy._buffers import Buffers, empty, zeros
from sksign.estimators import HTAFNetClassifier


def _span(arr):
    """[start, end) byte addresses of an array's memory."""
    start = arr.__array_interface__["data"][0]
    return start, start + arr.nbytes


def _overlap(a, b):
    (a0, a1), (b0, b1) = _span(a), _span(b)
    return a0 < b1 and b0 < a1


def _kept(pool):
    """The free arrays of a pool."""
    return [entry[1] for free in pool._free.values() for entry in free]


class _Counted(Buffers):
    """A pool that records the buffers it hands out."""

    __slots__ = ("handed",)

    def __init__(self):
        super().__init__()
        self.handed = []

    def take(self, key):
        entry = super().take(key)
        self.handed.append(entry[1])
        return entry


def test_empty_outside_a_call_is_a_new_array():
    """Check empty/zeros give plain numpy arrays where no call runs."""
    out = empty((3, 5), np.float32)
    assert out.shape == (3, 5)
    assert out.dtype == np.float32
    assert out.base is None
    z = zeros(7, np.uint64)
    assert z.shape == (7,)
    assert z.dtype == np.uint64
    assert not z.any()


def test_a_call_takes_distinct_buffers_and_gives_them_back():
    """Check one call's buffers of one shape are distinct, come back at its
    end, and the next call of the same shapes takes those same arrays again."""
    pool = Buffers()
    with pool.call():
        first = [empty((4, 6), np.float32) for _ in range(3)]
        z = zeros((4, 6), np.float32)
        assert not z.any()
    assert pool.kept_bytes == 4 * 4 * 6 * 4
    for i, a in enumerate([*first, z]):
        for b in [*first, z][i + 1 :]:
            assert not _overlap(a, b)
    raws = {id(raw) for raw in _kept(pool)}
    with pool.call():
        again = [empty((4, 6), np.float32) for _ in range(4)]
        other = empty(24, np.float32)  # another shape: another array
    assert {id(a) for a in again} == raws
    assert id(other) not in raws
    assert pool.kept_bytes == 5 * 24 * 4


def test_held_results_and_their_views_stay_with_the_caller():
    """Check arrays under held values (or under views of them, at an offset)
    are not handed to a later call, and a step's other arrays go back."""
    pool = Buffers()
    with pool.call() as call:
        out = empty((8, 4), np.float32)
        call.hold("out", out.reshape(-1), ())
        inner = empty((8, 4), np.float32)
        scratch = empty((8, 4), np.float32)
        call.hold("inner", inner[3:, 1:], ())
        assert pool.kept_bytes == scratch.nbytes
        out[:] = 1.0
        inner[:] = 2.0
    assert pool.kept_bytes == scratch.nbytes
    with pool.call():
        for _ in range(5):
            empty((8, 4), np.float32)[:] = -1.0
    assert (out == 1.0).all()
    assert (inner == 2.0).all()


def test_a_dropped_value_is_the_next_op_s_array():
    """Check a value read no more goes back to the pool at once, and the
    next op of its shape takes that same array within the call."""
    pool = Buffers()
    with pool.call() as call:
        a = empty(100, np.float32)
        call.hold("a", a, ("input",))
        b = empty(100, np.float32)
        call.hold("b", b, ("a",))
        assert b is not a
        call.drop("a")
        assert pool.kept_bytes == a.nbytes
        c = empty(100, np.float32)
        call.hold("c", c, ("b",))
        assert c is a
        call.drop("b")
        call.drop("missing")  # a value the pool never owned: nothing happens
    assert pool.kept_bytes == b.nbytes
    assert [raw is b for raw in _kept(pool)] == [True]


def test_a_view_of_an_input_keeps_its_array_until_both_are_dropped():
    """Check a step whose value is a view of its input's array (a reshape)
    holds that array alive: dropping one of the two names returns nothing."""
    pool = Buffers()
    with pool.call() as call:
        a = empty((4, 25), np.float32)
        call.hold("a", a, ())
        flat = a.reshape(-1)[10:]
        call.hold("flat", flat, ("a",))
        call.drop("a")
        assert pool.kept_bytes == 0
        assert empty((4, 25), np.float32) is not a
        call.drop("flat")
        assert pool.kept_bytes == a.nbytes


def test_a_value_that_is_its_input_keeps_the_array_until_both_are_dropped():
    """Check a step that returns its input's array as it is (an identity op)
    holds that array alive after the input's name is dropped."""
    pool = Buffers()
    with pool.call() as call:
        a = empty(100, np.float32)
        call.hold("a", a, ())
        call.hold("same", a, ("a",))
        call.drop("a")
        assert pool.kept_bytes == 0
        assert empty(100, np.float32) is not a
        call.drop("same")
        assert pool.kept_bytes == a.nbytes


def test_a_raising_call_gives_back_every_array():
    """Check a call that raises mid-way keeps none of its arrays from the
    pool: held values are no result of it."""
    pool = Buffers()

    def failing_call():
        with pool.call() as call:
            call.hold("a", empty(64, np.uint8), ())
            call.hold("b", empty(32, np.uint8), ("a",))
            empty(16, np.uint8)
            raise ValueError("bad op")

    with pytest.raises(ValueError, match="bad op"):
        failing_call()
    assert pool.kept_bytes == 64 + 32 + 16


def test_kept_bytes_stay_under_the_cap(monkeypatch):
    """Check a call's buffers beyond MAX_KEPT_BYTES go back to the allocator."""
    monkeypatch.setattr(_buffers, "MAX_KEPT_BYTES", 1000)
    pool = Buffers()
    with pool.call():
        for _ in range(5):
            empty(300, np.uint8)
    assert pool.kept_bytes == 900
    assert sum(raw.nbytes for raw in _kept(pool)) == 900


def test_a_worker_thread_takes_plain_arrays_during_a_call():
    """Check the pool is the calling thread's: a thread the call hands work to
    gets plain arrays, and its buffers never enter the pool."""
    pool = Buffers()
    got = []
    with pool.call():
        worker = threading.Thread(target=lambda: got.append(empty(64, np.uint8)))
        worker.start()
        worker.join()
    assert got[0].base is None
    assert pool.kept_bytes == 0


def test_nested_calls_and_a_raising_call_restore_the_outer_pool():
    """Check a call inside a call draws from its own pool, the outer one from
    its pool again after it, and a call that raises still ends."""
    outer, inner = Buffers(), Buffers()
    with outer.call():

        def failing_call():
            with inner.call():
                empty(16, np.uint8)
                raise RuntimeError("op failed")

        with pytest.raises(RuntimeError, match="op failed"):
            failing_call()
        empty(32, np.uint8)
    assert inner.kept_bytes == 16
    assert outer.kept_bytes == 32
    assert empty(8, np.uint8).base is None


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.lists(
            st.tuples(
                st.sampled_from([0, 8, (3, 8), 64]),
                st.booleans(),
                st.sets(st.integers(0, 7), max_size=3),
            ),
            max_size=8,
        ),
        min_size=1,
        max_size=6,
    )
)
def test_no_live_array_is_handed_out_again(calls):
    """Check, over random calls of steps of random sizes, each step reading
    earlier values that are then dropped at random, some values kept as
    results: the arrays of live values never overlap, and the results of
    earlier calls keep what was written into them."""
    pool = Buffers()
    results = []
    for n, steps in enumerate(calls):
        with pool.call() as call:
            live = {}
            for i, (size, keep, reads) in enumerate(steps):
                inputs = [f"v{j}" for j in sorted(reads) if f"v{j}" in live]
                a = empty(size, np.uint8)
                a[:] = n
                for other in live.values():
                    assert not (a.nbytes and other.nbytes and _overlap(a, other))
                call.hold(f"v{i}", a, inputs)
                live[f"v{i}"] = a
                for name in inputs:
                    if not keep:
                        call.drop(name)
                        del live[name]
            returned = [live[name] for name in live]
        results.extend((n, a) for a in returned)
        assert pool.kept_bytes == sum(raw.nbytes for raw in _kept(pool))
    for n, a in results:
        assert (a == n).all()


def test_concurrent_calls_never_share_a_buffer():
    """Check calls of one pool on two threads at once each write only their
    own buffers."""
    pool = Buffers()
    barrier = threading.Barrier(2)
    bad = []

    def work(tag):
        for _ in range(50):
            with pool.call():
                a = empty(4096, np.uint8)
                a[:] = tag
                barrier.wait()
                if not (a == tag).all():
                    bad.append(tag)
                barrier.wait()

    threads = [threading.Thread(target=work, args=(t,)) for t in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bad


@pytest.fixture(scope="module")
def packed_nets():
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    images = np.pad((X / 16.0).reshape(-1, 1, 8, 8), ((0, 0), (0, 0), (4, 4), (4, 4)))
    nets = {}
    nets["mlp"] = (
        pack(HTAFNetClassifier((32, 32), max_epochs=2, random_state=0).fit(X, y)),
        X.astype(np.float32),
    )
    bireal = HTAFNetClassifier(
        architecture="bireal",
        architecture_params={"width": 5},
        max_epochs=1,
        batch_size=64,
        random_state=0,
    ).fit(images[:128].astype(np.float32), y[:128])
    nets["bireal"] = (pack(bireal), images.reshape(len(X), -1).astype(np.float32))
    return nets


@pytest.mark.parametrize("name", ["mlp", "bireal"])
@pytest.mark.parametrize("pool_min_bytes", [0, _runtime.POOL_MIN_BYTES])
def test_a_result_is_not_overwritten_by_the_next_call(
    packed_nets, name, pool_min_bytes, monkeypatch
):
    """Check a packed net's output, and the values kept with it, still hold
    after more calls of the same shape, and equal a fresh net's (every call
    pooled, or only those above the runtime's threshold)."""
    monkeypatch.setattr(_runtime, "POOL_MIN_BYTES", pool_min_bytes)
    packed, X = packed_nets[name]
    net = packed.net_
    hidden = net.layers[1]["output"]
    first = net.forward(X[:20])
    both = net.forward(X[:20], keep=(hidden,))
    saved_first, saved = first.copy(), {k: v.copy() for k, v in both.items()}
    for a in (20, 40, 60):
        net.forward(X[a : a + 20], keep=(hidden,))
        net.forward(X[a : a + 20])
    np.testing.assert_array_equal(first, saved_first)
    for k, v in both.items():
        np.testing.assert_array_equal(v, saved[k])
    fresh = pickle.loads(pickle.dumps(net))
    assert fresh._buffers.kept_bytes == 0
    np.testing.assert_array_equal(fresh.forward(X[:20]), saved_first)


def test_an_image_net_takes_no_new_buffer_in_its_second_call(packed_nets, monkeypatch):
    """Check the second call of the same batch takes every array from the
    first call's (a batch of one chunk whose largest value takes the pool:
    this small net's chunk made larger, and the pool's floor lower)."""
    monkeypatch.setattr(_runtime, "MAP_CHUNK", 64)
    monkeypatch.setattr(_runtime, "POOL_MIN_BYTES", 2**18)
    packed, X = packed_nets["bireal"]
    net = pickle.loads(pickle.dumps(packed.net_))
    net._buffers = _Counted()
    X = X[: _runtime.MAP_CHUNK]
    assert len(X) * net._sample_bytes >= _runtime.POOL_MIN_BYTES
    out = net.forward(X)
    pooled = {id(raw) for raw in _kept(net._buffers)}
    kept = net._buffers.kept_bytes
    assert kept > 0
    assert len(net._buffers.handed) > len(pooled) // 2
    net._buffers.handed.clear()
    again = net.forward(X)
    assert {id(raw) for raw in net._buffers.handed} <= pooled
    assert net._buffers.kept_bytes == kept
    np.testing.assert_array_equal(again, out)


def test_chunked_and_threaded_calls_equal_row_by_row(packed_nets):
    """Check a batch run in chunks of MAP_CHUNK samples, and calls of one net
    on two threads at once, give what each sample gives alone."""
    packed, X = packed_nets["bireal"]
    net = packed.net_
    X = X[:150]
    alone = np.concatenate([net.forward(X[i : i + 1]) for i in range(len(X))])
    np.testing.assert_array_equal(net.forward(X), alone)
    got = {}

    def work(part):
        got[part] = [net.forward(X[part::2]) for _ in range(3)]

    threads = [threading.Thread(target=work, args=(p,)) for p in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for part in (0, 1):
        for out in got[part]:
            np.testing.assert_array_equal(out, alone[part::2])


def test_a_small_call_bypasses_the_pool(packed_nets):
    """Check a call whose largest value is under POOL_MIN_BYTES takes nothing
    from the pool, and a batch above it does."""
    packed, X = packed_nets["mlp"]
    net = pickle.loads(pickle.dumps(packed.net_))
    net._buffers = _Counted()
    small = int(_runtime.POOL_MIN_BYTES // net._sample_bytes)
    net.forward(X[: max(small - 1, 1)])
    assert net._buffers.handed == []
    big = np.concatenate([X] * (small // len(X) + 1))[: small + 1]
    net.forward(big)
    assert net._buffers.handed
    assert net._buffers.kept_bytes > 0


def test_each_value_dies_after_the_last_step_that_reads_it():
    """Check the release plan of a small graph with a skip connection: a
    value is dropped after its last reader, a value no step reads after the
    step that made it, and the net's input and output never."""

    def step(output, *inputs):
        return ({"output": output, "inputs": list(inputs)},)

    steps = [
        step("a", "input"),
        step("b", "a"),
        step("unread", "b"),
        step("c", "b"),
        step("d", "a", "c"),
        step("out", "d"),
    ]
    assert _runtime._dead_after(steps, "out") == [
        [],
        [],
        ["unread"],
        ["b"],
        ["a", "c"],
        ["d"],
    ]
