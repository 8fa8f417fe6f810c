"""The front ends' shared argument checks (flashbob._checks), on stand-in arrays: no torch, JAX or
GPU needed. flashbob.torch and flashbob.jax run these same functions; their own suites (GPU
machine) check the messages through the user's calls."""

import unittest

from flashbob import _checks  # the installed package's, or python/ on PYTHONPATH (CTest)


class Array:
    def __init__(self, shape, dtype="bfloat16"):
        self.shape, self.dtype = tuple(shape), dtype


def dtype_ok(dtype):
    return dtype in ("bfloat16", "float16")


class TensorTest(unittest.TestCase):
    def test_accepts_the_kernels_dtypes_and_rank(self):
        for dtype in ("bfloat16", "float16"):
            _checks.tensor(Array((1, 2, 3, 16), dtype), "q", _checks.TORCH, dtype_ok)
        _checks.tensor(Array((5, 2, 16)), "q", _checks.PACKED, dtype_ok)

    def test_names_the_argument(self):
        with self.assertRaisesRegex(TypeError, "^k must be bfloat16 or float16, got float32$"):
            _checks.tensor(Array((1, 2, 3, 16), "float32"), "k", _checks.TORCH, dtype_ok)
        with self.assertRaisesRegex(ValueError, r"^v must be \(batch, seq, heads, head_dim\), got "
                                                r"shape \(2, 3, 16\)$"):
            _checks.tensor(Array((2, 3, 16)), "v", _checks.JAX, dtype_ok)
        with self.assertRaisesRegex(ValueError, r"^q must be \(total, heads, head_dim\)"):
            _checks.tensor(Array((1, 2, 3, 16)), "q", _checks.PACKED, dtype_ok)


class OperandsTest(unittest.TestCase):
    def test_grouped_query_heads_in_each_layout(self):
        # 4 query heads over 2 key/value heads, heads on axis 1 (torch), 2 (jax), 1 (packed).
        _checks.operands(Array((2, 4, 7, 64)), Array((2, 2, 9, 64)), Array((2, 2, 9, 64)),
                         _checks.TORCH)
        _checks.operands(Array((2, 7, 4, 64)), Array((2, 9, 2, 64)), Array((2, 9, 2, 64)),
                         _checks.JAX)
        _checks.operands(Array((7, 4, 64)), Array((9, 2, 64)), Array((9, 2, 64)), _checks.PACKED)

    def test_heads_that_do_not_divide(self):
        with self.assertRaisesRegex(ValueError, r"k's heads \(3\) must divide q's \(4\).*"
                                                r"q.shape\[1\] // k.shape\[1\]"):
            _checks.operands(Array((1, 4, 8, 64)), Array((1, 3, 8, 64)), Array((1, 3, 8, 64)),
                             _checks.TORCH)
        with self.assertRaisesRegex(ValueError, r"k's heads \(3\) must divide q's \(4\).*"
                                                r"q.shape\[2\] // k.shape\[2\]"):
            _checks.operands(Array((1, 8, 4, 64)), Array((1, 8, 3, 64)), Array((1, 8, 3, 64)),
                             _checks.JAX)
        with self.assertRaisesRegex(ValueError, r"k's heads \(0\)"):
            _checks.operands(Array((1, 8, 4, 64)), Array((1, 8, 0, 64)), Array((1, 8, 0, 64)),
                             _checks.JAX)

    def test_shapes_that_disagree(self):
        q = Array((2, 4, 8, 64))
        with self.assertRaisesRegex(ValueError, "k and v must agree in all but head_dim"):
            _checks.operands(q, Array((2, 4, 8, 64)), Array((2, 4, 9, 64)), _checks.TORCH)
        # v's head_dim may differ (head_dim_v).
        _checks.operands(q, Array((2, 4, 8, 64)), Array((2, 4, 8, 128)), _checks.TORCH)
        _checks.operands(Array((8, 4, 64)), Array((8, 4, 64)), Array((8, 4, 40)), _checks.PACKED)
        with self.assertRaisesRegex(ValueError, "differ in batch or head_dim"):
            _checks.operands(q, Array((1, 4, 8, 64)), Array((1, 4, 8, 64)), _checks.TORCH)
        with self.assertRaisesRegex(ValueError, "differ in batch or head_dim"):
            _checks.operands(q, Array((2, 4, 8, 32)), Array((2, 4, 8, 32)), _checks.TORCH)
        with self.assertRaisesRegex(ValueError, "^q .* and k .* differ in head_dim$"):
            _checks.operands(Array((8, 4, 64)), Array((8, 4, 32)), Array((8, 4, 32)),
                             _checks.PACKED)
        with self.assertRaisesRegex(TypeError, "q, k, v must share a dtype"):
            _checks.operands(q, Array((2, 4, 8, 64), "float16"), Array((2, 4, 8, 64)),
                             _checks.TORCH)


class OffsetsTest(unittest.TestCase):
    def is_int32(self, dtype):
        return dtype == "int32"

    def test_metadata(self):
        _checks.offsets(Array((3,), "int32"), Array((3,), "int32"), self.is_int32)
        with self.assertRaisesRegex(TypeError, "^cu_seqlens_k must be int32, got int64$"):
            _checks.offsets(Array((3,), "int32"), Array((3,), "int64"), self.is_int32)
        with self.assertRaisesRegex(ValueError, r"cu_seqlens_q must be 1-D"):
            _checks.offsets(Array((3, 1), "int32"), Array((3,), "int32"), self.is_int32)
        with self.assertRaisesRegex(ValueError, "must have the same length"):
            _checks.offsets(Array((3,), "int32"), Array((4,), "int32"), self.is_int32)
        with self.assertRaisesRegex(ValueError, r"batch \+ 1 >= 2 offsets, got 1"):
            _checks.offsets(Array((1,), "int32"), Array((1,), "int32"), self.is_int32)

    def test_packed_rows(self):
        _checks.packed_rows(Array((1, 2, 16)), Array((1, 2, 16)))
        with self.assertRaisesRegex(ValueError, "^k holds no rows"):
            _checks.packed_rows(Array((1, 2, 16)), Array((0, 2, 16)))


class OptionsTest(unittest.TestCase):
    def test_scale(self):
        self.assertEqual(_checks.scale(None), 0.0)
        self.assertEqual(_checks.scale(2), 2.0)
        self.assertIs(type(_checks.scale(2)), float)
        for bad in (0, -1.0, float("nan")):
            with self.assertRaisesRegex(ValueError, "scale must be positive"):
                _checks.scale(bad)

    def test_window(self):
        self.assertEqual(_checks.window((-1, 0)), (-1, 0))
        with self.assertRaisesRegex(ValueError, "window_size must be a pair"):
            _checks.window(3)
        for bad in ((-2, 0), (True, 0), (1.5, 0)):
            with self.assertRaisesRegex(ValueError, "window_size's left side must be an int >= -1"):
                _checks.window(bad)

    def test_window_fits_the_longer_sequence(self):
        self.assertEqual(_checks.window_fits((64, 3), 10, 64), (64, 3))
        with self.assertRaisesRegex(ValueError, r"^window_size's right side \(65\) is larger than "
                                                r"the sequences \(seq_q 10, seq_k 64\)"):
            _checks.window_fits((0, 65), 10, 64)
        with self.assertRaisesRegex(ValueError, r"\(max_seqlen_q 10, max_seqlen_k 64\)"):
            _checks.window_fits((65, 0), 10, 64, ("max_seqlen_q", "max_seqlen_k"))

    def test_longest(self):
        def is_array(value):
            return isinstance(value, Array)
        self.assertEqual(_checks.longest(7, "max_seqlen_q", 100, is_array), 7)
        self.assertEqual(_checks.longest(700, "max_seqlen_q", 100, is_array), 100)
        for bad, error in ((True, TypeError), (Array(()), TypeError), (1.0, TypeError),
                           (0, ValueError)):
            with self.assertRaisesRegex(error, "max_seqlen_k must be"):
                _checks.longest(bad, "max_seqlen_k", 100, is_array)


if __name__ == "__main__":
    unittest.main()
