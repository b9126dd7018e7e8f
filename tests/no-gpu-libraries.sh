#!/bin/sh
# The executables link no GPU library: CUDA, cuBLAS and Vulkan are reached through the backend
# modules (backends/module.h), loaded at run time. Usage: no-gpu-libraries.sh BINARY... [-- MODULE...]
# Each MODULE given after "--" must link one of them (so that the pattern is known to match).
pattern='libcuda|libcudart|libcublas|libvulkan|libnvidia'
status=0
modules=0
for f in "$@"; do
  if [ "$f" = "--" ]; then modules=1; continue; fi
  libs=$(ldd "$f") || { echo "ldd $f failed"; exit 1; }
  found=$(printf '%s\n' "$libs" | grep -E "$pattern")
  if [ "$modules" = 0 ] && [ -n "$found" ]; then
    echo "FAIL $f links a GPU library:"; printf '%s\n' "$found"; status=1
  elif [ "$modules" = 1 ] && [ -z "$found" ]; then
    echo "FAIL module $f links no GPU library (the check would not see one)"; status=1
  else
    echo "ok   $f"
  fi
done
exit $status
