#!/usr/bin/env bash
# Installs the peers' dependencies next to them: a Python venv (.venv, boto3)
# and node_modules (AWS SDK v3, uuid). The handlers benchmark runs the peers
# when these are present and says how to install them when not; nothing else
# (./scripts/test included) needs them.
set -euo pipefail
cd "$(dirname "$0")"
python3 -m venv .venv
.venv/bin/pip install --quiet -r requirements.txt
if [ -f package-lock.json ]; then npm ci --silent; else npm install --silent; fi
echo "peers ready: $(.venv/bin/python -c 'import boto3; print("boto3", boto3.__version__)'), node $(node --version)"
