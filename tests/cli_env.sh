# The CLI's environment variables (tools/cli_env.c, the only reader; the library takes them as
# mr_model_params): each one still reaches the engine, and a malformed value is an error naming it.
. tests/lib.sh
M=$SHARED/models/kjv-moe-q8_0.gguf
T=$(cat "$SHARED/golden/tokens-kjv64.txt")
OK=4M
lg() { "$MOERUN" logits -m "$M" --tokens "$T" --decode -t 2 "$@"; }

expect_ok env_plain lg -o "$TMPD/plain.lgts"

# pager settings: values out of range are refused by name (before any work), valid ones change only
# how the experts are read, never the logits
MOERUN_PAGER_CHUNK=1X expect_err env_chunk_suffix "MOERUN_PAGER_CHUNK='1X'" lg -o "$TMPD/x.lgts" --ram-budget $OK
MOERUN_PAGER_CHUNK=-1 expect_err env_chunk_negative "MOERUN_PAGER_CHUNK='-1'" lg -o "$TMPD/x.lgts" --ram-budget $OK
MOERUN_PAGER_IO_THREADS=0 expect_err env_io_threads_0 "MOERUN_PAGER_IO_THREADS='0'" lg -o "$TMPD/x.lgts" --ram-budget $OK
MOERUN_PAGER_IO_THREADS=65 expect_err env_io_threads_65 "MOERUN_PAGER_IO_THREADS='65'" lg -o "$TMPD/x.lgts" --ram-budget $OK
MOERUN_PAGER_POLICY=mru expect_err env_policy_unknown "unknown cache policy 'mru'" lg -o "$TMPD/x.lgts" --ram-budget $OK
MOERUN_PAGER_FAULT=bogus expect_err env_fault_bogus "pager fault 'bogus'" lg -o "$TMPD/x.lgts" --ram-budget $OK
MOERUN_PAGER_FAULT=slow:1 MOERUN_PAGER_POLICY=lru MOERUN_PAGER_NO_DIRECT=1 MOERUN_PAGER_CHUNK=0 MOERUN_PAGER_GUESS=0 \
    MOERUN_PAGER_IO_THREADS=3 expect_ok env_pager_all lg -o "$TMPD/paged.lgts" --ram-budget $OK
if cmp -s "$TMPD/plain.lgts" "$TMPD/paged.lgts"; then ok env_pager_identical; else fail env_pager_identical "logits differ"; fi
if grep -q "^pager: .*buffered" "$TMPD/e"; then ok env_pager_no_direct; else fail env_pager_no_direct "$(grep '^pager' "$TMPD/e")"; fi
# the arena: 4 KiB pages pre-faulted (default), faulted as used with MOERUN_PAGER_HUGE=0, huge pages
# where the kernel has them (from 2 MiB up) with MOERUN_PAGER_HUGE=1
MOERUN_PAGER_HUGE=0 expect_ok env_pager_no_huge lg -o "$TMPD/paged.lgts" --ram-budget $OK
if cmp -s "$TMPD/plain.lgts" "$TMPD/paged.lgts" && grep -q "^pager: [0-9]* slots" "$TMPD/e" && ! grep -q "huge pages" "$TMPD/e"
then ok env_pager_no_huge_summary; else fail env_pager_no_huge_summary "$(grep '^pager' "$TMPD/e")"; fi
expect_ok env_pager_default_arena lg -o "$TMPD/paged.lgts" --ram-budget $OK
if cmp -s "$TMPD/plain.lgts" "$TMPD/paged.lgts" && grep -q "^pager: [0-9]* slots" "$TMPD/e" && ! grep -q "huge pages" "$TMPD/e"
then ok env_pager_default_arena_summary; else fail env_pager_default_arena_summary "$(grep '^pager' "$TMPD/e")"; fi
MOERUN_PAGER_HUGE=1 expect_ok env_pager_huge lg -o "$TMPD/paged.lgts" --ram-budget $OK
if ! cmp -s "$TMPD/plain.lgts" "$TMPD/paged.lgts"; then fail env_pager_huge_identical "logits differ"
elif grep -q "^pager: .*huge pages" "$TMPD/e"; then ok env_pager_huge_identical
elif grep -Eq '\[(always|madvise)\]' /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null; then
    fail env_pager_huge_identical "THP available, the arena not on it: $(grep '^pager' "$TMPD/e")"
else skip env_pager_huge_identical "no transparent huge pages on this kernel"; fi
MOERUN_PAGER_NO_DIRECT=0 expect_ok env_pager_direct lg -o "$TMPD/paged.lgts" --ram-budget $OK
if grep -q "^pager: .*O_DIRECT" "$TMPD/e"; then ok env_pager_direct_summary
else skip env_pager_direct_summary "no O_DIRECT on this file system: $(grep '^pager' "$TMPD/e")"; fi

# repacking off: the same logits (the kernels on the file's layout)
Q=$SHARED/models/tiny-llama-q4_0.gguf
expect_ok env_repack "$MOERUN" logits -m "$Q" --tokens "$T" -t 2 -o "$TMPD/r1.lgts"
MOERUN_NO_REPACK=1 expect_ok env_no_repack "$MOERUN" logits -m "$Q" --tokens "$T" -t 2 -o "$TMPD/r0.lgts"
if cmp -s "$TMPD/r1.lgts" "$TMPD/r0.lgts"; then ok env_no_repack_identical; else fail env_no_repack_identical "logits differ"; fi

# deepseek4: the reference's F32 prefill keys change the prefill's logits (decode reads F16 either way)
D=$SHARED/models/tiny-deepseek4.gguf
T3=$(tr ',' '\n' <"$SHARED/golden/tokens-300.txt" | head -64 | paste -sd, -)
expect_ok env_ds4_default "$MOERUN" logits -m "$D" --tokens "$T3" -t 2 -o "$TMPD/d0.lgts"
MOERUN_DS4_PREFILL_F32=1 expect_ok env_ds4_f32 "$MOERUN" logits -m "$D" --tokens "$T3" -t 2 -o "$TMPD/d1.lgts"
if cmp -s "$TMPD/d0.lgts" "$TMPD/d1.lgts"; then fail env_ds4_prefill_f32 "MOERUN_DS4_PREFILL_F32=1 changed nothing"; else ok env_ds4_prefill_f32; fi

# the kernels' ISA: quant-check names the one in use; unknown or unavailable names are a warning
Q4=$SHARED/golden/quants/q4_0.bin
if MOERUN_ISA=scalar "$MOERUN" quant-check "$Q4" 2>"$TMPD/e" | grep -q "^q4_0 *scalar .*PASS"; then ok env_isa_scalar
else fail env_isa_scalar "$(cat "$TMPD/e")"; fi
MOERUN_ISA=bogus "$MOERUN" quant-check "$Q4" >"$TMPD/o" 2>"$TMPD/e"
if grep -q "warning: MOERUN_ISA=bogus is not one of" "$TMPD/e" && grep -q PASS "$TMPD/o"; then ok env_isa_unknown
else fail env_isa_unknown "$(cat "$TMPD/e")"; fi

# moerun --help lists every variable the CLI reads
"$MOERUN" --help >"$TMPD/help"
missing=""
for v in $(grep -hoE '(getenv|env_get|env_on)\("[A-Z0-9_]*"\)' tools/*.c | sed 's/.*("\(.*\)")/\1/' | sort -u); do
    [ "$v" = MR_SHARED ] && continue # cache-sim's default data directory (its own --help)
    grep -q "$v" "$TMPD/help" || missing="$missing $v"
done
[ -z "$missing" ] && ok env_help_complete || fail env_help_complete "not in moerun --help:$missing"
