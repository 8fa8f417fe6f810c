"""Which XLA FFI handlers flashbob.jax registers (flashbob/jax/_ffi.py), with a stand-in for
jax.ffi and the real libflashbob.so (FLASHBOB_LIBRARY, or the checkout's build/lib): no jax or
GPU needed. The library's handlers where the header of the (stand-in) jaxlib says FFI API 0.x with
x >= 1, registered under their targets at the addresses the library exports; the shim otherwise;
FLASHBOB_JAX_FFI forcing either; once per process. Whether the handlers' layouts are XLA's is
test_jax_attention.py's (GPU machine, against the real header)."""

import ctypes
import importlib.util
import os
import sys
import tempfile
import types
import unittest
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "python" / "flashbob"
TARGETS = [("flashbob_forward", "FlashBobJaxForward", "flashbob_xla_forward"),
           ("flashbob_backward", "FlashBobJaxBackward", "flashbob_xla_backward"),
           ("flashbob_bob", "FlashBobJaxBob", "flashbob_xla_bob"),
           ("flashbob_forward_jvp", "FlashBobJaxForwardJvp", "flashbob_xla_forward_jvp")]


class StandInFfi:
    """jax.ffi as _ffi uses it: an include directory, capsules, registrations recorded."""

    def __init__(self, include_dir):
        self.include = include_dir
        self.registered = []

    def include_dir(self):
        return self.include

    def pycapsule(self, function):
        return ("capsule", ctypes.cast(function, ctypes.c_void_p).value)

    def register_ffi_target(self, name, capsule, platform):
        self.registered.append((name, capsule[1], platform))


def load_ffi(include_dir):
    """A fresh flashbob.jax._ffi over a stand-in jax, without running flashbob/jax/__init__.py
    (which needs the real jax)."""
    ffi = StandInFfi(include_dir)
    sys.modules["jax"] = types.SimpleNamespace(ffi=ffi)
    package = types.ModuleType("flashbob.jax")
    package.__path__ = [str(PACKAGE / "jax")]
    sys.modules["flashbob.jax"] = package
    spec = importlib.util.spec_from_file_location("flashbob.jax._ffi", PACKAGE / "jax" / "_ffi.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, ffi


def header_dir(root, major, minor):
    """An include directory whose xla/ffi/api/c_api.h states the FFI API version (None: no
    header)."""
    api = Path(root) / "xla" / "ffi" / "api"
    api.mkdir(parents=True, exist_ok=True)
    if major is not None:
        (api / "c_api.h").write_text(f"#define XLA_FFI_API_MAJOR {major}\n"
                                     f"#define XLA_FFI_API_MINOR {minor}\n")
    return str(root)


class ChoiceTest(unittest.TestCase):
    def setUp(self):
        self.saved = {name: sys.modules.get(name) for name in ("jax", "flashbob.jax")}
        self.saved_choice = os.environ.pop("FLASHBOB_JAX_FFI", None)
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        for name, module in self.saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
        if self.saved_choice is not None:
            os.environ["FLASHBOB_JAX_FFI"] = self.saved_choice
        else:
            os.environ.pop("FLASHBOB_JAX_FFI", None)
        self.tmp.cleanup()

    def register(self, major, minor, choice=None):
        """(the module, the stand-in, the shim registrations) after one register_targets."""
        if choice is not None:
            os.environ["FLASHBOB_JAX_FFI"] = choice
        module, ffi = load_ffi(header_dir(Path(self.tmp.name) / f"{major}.{minor}", major, minor))
        shim_calls = []
        module._register_shim = shim_calls.append  # the shim's build is the GPU suite's
        module.register_targets(TARGETS)
        return module, ffi, shim_calls

    def test_the_library_handlers_where_the_api_is_one_they_follow(self):
        from flashbob import _capi
        library = _capi.library()
        for minor in (1, 2, 7):
            module, ffi, shim_calls = self.register(0, minor)
            self.assertEqual(module.registered(), "prebuilt")
            self.assertEqual(shim_calls, [])
            expected = [(target, ctypes.cast(getattr(library, symbol), ctypes.c_void_p).value,
                         "CUDA") for target, _, symbol in TARGETS]
            self.assertEqual(ffi.registered, expected)
            self.assertTrue(all(address for _, address, _ in ffi.registered))

    def test_the_shim_where_it_is_another_or_unknown(self):
        for major, minor in ((0, 0), (1, 0), (None, None)):
            module, ffi, shim_calls = self.register(major, minor)
            self.assertEqual(module.registered(), "shim", (major, minor))
            self.assertEqual(shim_calls, [TARGETS])
            self.assertEqual(ffi.registered, [])

    def test_the_knob_forces_either_and_refuses_other_values(self):
        module, ffi, shim_calls = self.register(0, 2, choice="shim")
        self.assertEqual((module.registered(), len(shim_calls), ffi.registered), ("shim", 1, []))
        module, ffi, shim_calls = self.register(0, 0, choice="prebuilt")
        self.assertEqual((module.registered(), shim_calls, len(ffi.registered)),
                         ("prebuilt", [], 4))
        os.environ["FLASHBOB_JAX_FFI"] = "both"
        module, ffi = load_ffi(header_dir(Path(self.tmp.name) / "x", 0, 1))
        from flashbob._capi import FlashBobError
        with self.assertRaisesRegex(FlashBobError, "FLASHBOB_JAX_FFI=both is neither prebuilt "
                                                   "nor shim"):
            module.register_targets(TARGETS)
        self.assertIsNone(module.registered())

    def test_the_shim_where_xla_refuses_the_library_handlers(self):
        module, ffi = load_ffi(header_dir(Path(self.tmp.name) / "refusing", 0, 1))

        def refuse(name, capsule, platform):
            raise RuntimeError("handler API version 0.1 is not supported")
        ffi.register_ffi_target = refuse
        shim_calls = []
        module._register_shim = shim_calls.append
        module.register_targets(TARGETS)
        self.assertEqual((module.registered(), shim_calls), ("shim", [TARGETS]))
        # Forced, the refusal is the caller's to see.
        os.environ["FLASHBOB_JAX_FFI"] = "prebuilt"
        module, ffi = load_ffi(header_dir(Path(self.tmp.name) / "refusing", 0, 1))
        ffi.register_ffi_target = refuse
        with self.assertRaisesRegex(RuntimeError, "not supported"):
            module.register_targets(TARGETS)
        self.assertIsNone(module.registered())

    def test_once_per_process(self):
        module, ffi, _ = self.register(0, 1)
        module.register_targets(TARGETS)
        self.assertEqual(len(ffi.registered), 4)


if __name__ == "__main__":
    unittest.main()
