#!/usr/bin/env python3
"""On a machine with an NVIDIA GPU: loads each committed cuda/<name>.fatbin, and its PTX alone
(forcing the driver's JIT), with cuModuleLoadDataEx and the JIT logs, looks up every kernel the
Rust side uses, and prints the driver version, the result and the load time of each.

    python3 scripts/gpu-load-check.py          (from the repository root; exit status 1 on failure)
"""

import ctypes as C
import sys
import time

KERNELS = {
    "rff": "rff_block_gram rff_block_gram_reduce rff_update_theta rff_predict rff_features rff_weights",
    "trsolve": "tr_solve_f32 tr_solve tr_sketch_f32 tr_sketch",
    "exact": "exact_tile exact_matvec exact_tile_csr exact_matvec_csr",
}
# CUjit_option values: error log, its size, info log, its size, verbose.
OPTIONS = (5, 6, 3, 4, 12)
LOG = 1 << 14


def main():
    cu = C.CDLL("libcuda.so.1")
    assert cu.cuInit(0) == 0, "cuInit"
    version = C.c_int()
    cu.cuDriverGetVersion(C.byref(version))
    dev = C.c_int()
    cu.cuDeviceGet(C.byref(dev), 0)
    major, minor = C.c_int(), C.c_int()
    cu.cuDeviceGetAttribute(C.byref(major), 75, dev)
    cu.cuDeviceGetAttribute(C.byref(minor), 76, dev)
    print(f"driver CUDA {version.value}, device 0 compute capability {major.value}.{minor.value}")
    ctx = C.c_void_p()
    assert cu.cuDevicePrimaryCtxRetain(C.byref(ctx), dev) == 0, "cuDevicePrimaryCtxRetain"
    cu.cuCtxSetCurrent(ctx)
    failed = False
    for name, kernels in KERNELS.items():
        for ext in ("fatbin", "ptx"):
            image = open(f"cuda/{name}.{ext}", "rb").read() + b"\0"
            err, info = C.create_string_buffer(LOG), C.create_string_buffer(LOG)
            opts = (C.c_int * 5)(*OPTIONS)
            vals = (C.c_void_p * 5)(C.cast(err, C.c_void_p), LOG, C.cast(info, C.c_void_p), LOG, 1)
            module = C.c_void_p()
            t = time.perf_counter()
            rc = cu.cuModuleLoadDataEx(C.byref(module), image, 5, opts, vals)
            dt = time.perf_counter() - t
            missing = kernels.split()
            if rc == 0:
                f = C.c_void_p()
                missing = [k for k in missing if cu.cuModuleGetFunction(C.byref(f), module, k.encode())]
                cu.cuModuleUnload(module)
            ok = rc == 0 and not missing
            failed |= not ok
            print(f"{'ok  ' if ok else 'FAIL'} cuda/{name}.{ext}: rc {rc}, {dt * 1e3:.1f} ms, missing {missing}")
            for label, buf in (("error log", err), ("info log", info)):
                if buf.value.strip():
                    print(f"     {label}: {buf.value.decode(errors='replace').strip()}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
