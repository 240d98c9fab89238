#!/usr/bin/env python3
"""Builds cuda/<name>.cu into cuda/<name>.ptx and cuda/<name>.fatbin with the CUDA 12.6 wheels.

    build-kernels.py TOOLCHAIN cuda/<name>.cu...     (run by scripts/gen-ptx.sh in a fixed directory)

TOOLCHAIN is the site-packages directory that holds nvidia/{cuda_nvrtc,cuda_nvcc,nvfatbin}
(installed by scripts/cuda-toolchain.sh). Per file:

 1. NVRTC compiles the source to compute_80 PTX (PTX ISA 8.5). NVRTC's defaults are nvcc's:
    full optimisation, FMA contraction, IEEE division and square root, no flush to zero, no
    fast math; the kernels rely on the last three. The program is named by its relative path
    and no line information is emitted, so the PTX does not depend on where the checkout lives.
 2. ptxas assembles the PTX for sm_80 and sm_90 (`ptxas -arch=sm_XX -v`); its report (registers,
    stack, spills, shared memory per function) goes to cuda/<name>.sm_XX.log for
    scripts/check-ptx.sh.
 3. nvFatbin packs the two cubins and the PTX into one fat binary (default compression): the
    driver loads the sm_80 code on compute capability 8.x, the sm_90 code on 9.0, and JIT-compiles
    the PTX on newer GPUs.

The CUDA 12 wheels ship no nvcc (nvidia-cuda-nvcc-cu12 holds ptxas, libnvvm and libdevice only),
hence NVRTC and nvFatbin, both driven here through ctypes. NVRTC has no C library headers: the
two the kernels include, <stdint.h> and <math.h>, are supplied below with the x86-64 Linux
definitions the kernels use (the maths functions themselves are built into NVRTC).
"""

import ctypes
import os
import subprocess
import sys

ARCHS = ("sm_80", "sm_90")
PTX_ARCH = "compute_80"

# The definitions the kernels take from the C library (LP64, as glibc on x86-64).
STUB_HEADERS = {
    "stdint.h": """#pragma once
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long uint64_t;
""",
    "math.h": """#pragma once
#define INFINITY (__int_as_float(0x7f800000))
""",
}


def fail(msg):
    sys.stderr.write(f"build-kernels: {msg}\n")
    sys.exit(1)


class Nvrtc:
    def __init__(self, toolchain):
        self.lib = ctypes.CDLL(os.path.join(toolchain, "nvidia/cuda_nvrtc/lib/libnvrtc.so.12"))
        self.lib.nvrtcGetErrorString.restype = ctypes.c_char_p

    def _string(self, prog, size_fn, get_fn):
        n = ctypes.c_size_t()
        size_fn(prog, ctypes.byref(n))
        buf = ctypes.create_string_buffer(n.value)
        get_fn(prog, buf)
        return buf.value

    def ptx(self, name, source, options):
        prog = ctypes.c_void_p()
        rc = self.lib.nvrtcCreateProgram(ctypes.byref(prog), source, name.encode(), 0, None, None)
        if rc:
            fail(f"nvrtcCreateProgram({name}): {self.lib.nvrtcGetErrorString(rc).decode()}")
        opts = (ctypes.c_char_p * len(options))(*[o.encode() for o in options])
        rc = self.lib.nvrtcCompileProgram(prog, len(options), opts)
        log = self._string(prog, self.lib.nvrtcGetProgramLogSize, self.lib.nvrtcGetProgramLog)
        if rc:
            fail(f"NVRTC rejected {name} ({self.lib.nvrtcGetErrorString(rc).decode()}):\n{log.decode()}")
        if log.strip():
            sys.stderr.write(log.decode())
        ptx = self._string(prog, self.lib.nvrtcGetPTXSize, self.lib.nvrtcGetPTX)
        self.lib.nvrtcDestroyProgram(ctypes.byref(prog))
        return ptx


class Fatbin:
    def __init__(self, toolchain):
        self.lib = ctypes.CDLL(os.path.join(toolchain, "nvidia/nvfatbin/lib/libnvfatbin.so.12"))
        self.lib.nvFatbinGetErrorString.restype = ctypes.c_char_p

    def _check(self, rc, what):
        if rc:
            fail(f"{what}: {self.lib.nvFatbinGetErrorString(rc).decode()}")

    def build(self, name, cubins, ptx):
        opts = [b"-64", b"-cuda", b"-host=linux", b"-compress-all"]
        handle = ctypes.c_void_p()
        self._check(
            self.lib.nvFatbinCreate(
                ctypes.byref(handle), (ctypes.c_char_p * len(opts))(*opts), len(opts)
            ),
            "nvFatbinCreate",
        )
        for arch, cubin in cubins:
            self._check(
                self.lib.nvFatbinAddCubin(
                    handle, cubin, len(cubin), arch[3:].encode(), name.encode()
                ),
                f"nvFatbinAddCubin({name}, {arch})",
            )
        # nvFatbin wants the terminating NUL counted in the size.
        code = ptx + b"\0"
        self._check(
            self.lib.nvFatbinAddPTX(
                handle, code, len(code), PTX_ARCH[8:].encode(), name.encode(), b""
            ),
            f"nvFatbinAddPTX({name})",
        )
        n = ctypes.c_size_t()
        self._check(self.lib.nvFatbinSize(handle, ctypes.byref(n)), "nvFatbinSize")
        buf = ctypes.create_string_buffer(n.value)
        self._check(self.lib.nvFatbinGet(handle, buf), "nvFatbinGet")
        self.lib.nvFatbinDestroy(ctypes.byref(handle))
        return buf.raw


def main():
    if len(sys.argv) < 3:
        fail("usage: " + __doc__.strip().splitlines()[2].strip())
    toolchain, sources = sys.argv[1], sys.argv[2:]
    ptxas = os.path.join(toolchain, "nvidia/cuda_nvcc/bin/ptxas")
    stubs = "nvrtc-include"
    os.makedirs(stubs, exist_ok=True)
    for header, text in STUB_HEADERS.items():
        with open(os.path.join(stubs, header), "w") as f:
            f.write(text)
    nvrtc, fatbin = Nvrtc(toolchain), Fatbin(toolchain)
    for cu in sources:
        name = os.path.splitext(os.path.basename(cu))[0]
        with open(cu, "rb") as f:
            source = f.read()
        options = [f"--gpu-architecture={PTX_ARCH}", f"-I{os.path.dirname(cu)}", f"-I{stubs}"]
        ptx = nvrtc.ptx(cu, source, options)
        base = os.path.join(os.path.dirname(cu), name)
        ptx_path = f"{base}.ptx"
        with open(ptx_path, "wb") as f:
            f.write(ptx)
        cubins = []
        for arch in ARCHS:
            cubin_path = f"{base}.{arch}.cubin"
            log_path = f"{base}.{arch}.log"
            with open(log_path, "wb") as log:
                r = subprocess.run(
                    [ptxas, f"-arch={arch}", "-v", ptx_path, "-o", cubin_path],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            if r.returncode:
                with open(log_path) as log:
                    fail(f"ptxas -arch={arch} rejected {ptx_path}:\n{log.read()}")
            with open(cubin_path, "rb") as f:
                cubins.append((arch, f.read()))
        with open(f"{base}.fatbin", "wb") as f:
            f.write(fatbin.build(name, cubins, ptx))


if __name__ == "__main__":
    main()
