#!/bin/sh
# The real CUDA module with cuBLAS hidden: in a private mount namespace the folder holding
# libcublas is covered by an empty one, as on a machine without it. `hearth devices` must still
# work and say that CUDA did not load because of libcublas. Skipped (77) without the CUDA module
# or without the right to make a mount namespace (unshare -m needs root or user namespaces).
# Usage: hidden-cuda-libraries.sh HEARTH CUDA_MODULE
hearth=$1
module=$2
[ -f "$module" ] || { echo "SKIPPED: no CUDA module ($module)"; exit 77; }
cublas=$(ldd "$module" | awk '/libcublas\.so/ { print $3; exit }')
[ -n "$cublas" ] && [ -f "$cublas" ] || { echo "SKIPPED: libcublas is not found here anyway"; exit 77; }
unshare -m true 2>/dev/null || { echo "SKIPPED: cannot make a mount namespace here"; exit 77; }
empty=$(mktemp -d)
out=$(unshare -m sh -c "mount --bind '$empty' '$(dirname "$cublas")' && '$hearth' devices --json")
rc=$?
rmdir "$empty"
echo "$out"
[ $rc -eq 0 ] || { echo "FAIL: hearth devices exited with $rc"; exit 1; }
echo "$out" | grep -q '"name":"cuda","loaded":false,"devices":0,"reason":"libcublas' ||
  { echo "FAIL: the cuda entry does not say libcublas is missing"; exit 1; }
echo "ok: CUDA not loaded, reason given; hearth devices ran"
