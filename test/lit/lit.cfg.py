# lit configuration for FlashBoB's IR and CLI tests.
import os
import lit.formats

config.name = "FlashBoB"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".test"]
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py.in", "Inputs"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.flashbob_obj_root, "test", "lit")

# Our tools first, then LLVM 22's FileCheck/not/count (the unsuffixed ones on PATH are older).
path = [config.flashbob_tools_dir, config.llvm_tools_dir, os.path.join(config.cuda_root, "bin")]
config.environment["PATH"] = os.pathsep.join(path + [config.environment.get("PATH", "")])
# Keep user settings from leaking into the tests.
for var in ["FLASHBOB_CACHE_DIR", "FLASHBOB_CACHE_MAX_MB", "FLASHBOB_DUMP_DIR",
            "FLASHBOB_PRINT_AUTOTUNING", "FLASHBOB_AUTOTUNE", "FLASHBOB_ARCH", "FLASHBOB_PRODUCER",
            "FLASHBOB_LONG_SWEEP", "FLASHBOB_REGISTER_A", "FLASHBOB_FUSED_BACKWARD",
            "FLASHBOB_PAD_IN_KERNEL", "FLASHBOB_TILES"]:
    config.environment.pop(var, None)
config.environment["HOME"] = config.test_exec_root

if os.path.exists(os.path.join(config.cuda_root, "bin", "ptxas")):
    config.available_features.add("ptxas")

# A full disk without filling one: a tiny tmpfs mounted in a private mount namespace, gone with
# the process that mounted it. Needs the privilege to mount (root, or user namespaces).
import shutil, subprocess, tempfile
if shutil.which("unshare"):
    probe = tempfile.mkdtemp(prefix="flashbob-lit-tmpfs-")
    mounted = subprocess.run(["unshare", "-m", "--propagation", "private", "mount", "-t", "tmpfs",
                              "-o", "size=4k", "flashbob-probe", probe],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0
    os.rmdir(probe)
    if mounted:
        config.available_features.add("private-tmpfs")
