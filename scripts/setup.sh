#!/usr/bin/env bash
# Installs what the project needs on a fresh Debian machine: Debian packages, then npm packages.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# python3 + python3-boto3 + python3-numpy + python3-torch: Batch jobs run locally as child
# processes, reach S3 with boto3, train with PyTorch (1.13 on CPU here). python3-onnx: tests
# build the small ONNX models they need. chromium: the browser tests (driven by
# playwright-core, no browser download). xtb: the molecular oracle (GFN2-xTB).
# bubblewrap: the local sandbox for untrusted candidate code (reward search).
# python3-doc, manpages, manpages-dev, fortunes, debian-reference-en (and man-db's groff to
# render the man pages): the refinery's default local corpus, real text nobody here wrote.
# ffmpeg (+ fonts-dejavu-core for drawtext): the video pipeline generates, cuts and reads videos.
$SUDO apt-get install -y -qq --no-install-recommends \
  python3 python3-boto3 python3-numpy python3-torch python3-onnx chromium xtb bubblewrap \
  python3-doc manpages manpages-dev fortunes debian-reference-en groff-base ffmpeg fonts-dejavu-core > /dev/null

# allowScripts in package.json keeps onnxruntime-node's postinstall from downloading;
# patch-package applies patches/ to the local Step Functions engine.
npm ci --no-audit --no-fund
