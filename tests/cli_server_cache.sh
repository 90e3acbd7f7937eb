#!/bin/sh
# moerun server --cache-ram / --cache-dir (the prompt cache shared by all slots): tests/server_cache.py
# on tiny-deepseek4 (2 slots: batched steps; its state cannot be cut back, so every reuse inside a
# history is a restore) and kjv-moe (qwen3moe, 1 slot): replies byte-identical to the server without
# the cache, a diverging prompt reads only its tail, a restart restores, bad files are refused, a full
# disk never fails a request, POST /slots/N?action=save|restore|erase.
. tests/lib.sh
if ! command -v python3 >/dev/null 2>&1; then fail server_cache "python3 is not installed"; exit 1; fi
export LC_ALL=C
python3 tests/server_cache.py "$MOERUN" "$SHARED/models/tiny-deepseek4.gguf" server_cache_ds4 2
python3 tests/server_cache.py "$MOERUN" "$SHARED/models/kjv-moe-q8_0.gguf" server_cache_kjv 1
