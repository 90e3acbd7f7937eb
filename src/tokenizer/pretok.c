/* Byte-level BPE pre-tokenizers: the regex sets named by tokenizer.ggml.pre, run with PCRE2
 * (UTF + UCP) so that \p{L}, \p{N}, ... use a maintained Unicode database instead of our own tables.
 *
 * The expected token ids come from the reference (llama.cpp, src/unicode.cpp), which does not run
 * these regexes with a Unicode engine. It (a) applies the regexes of a set one after another, each
 * splitting the pieces left by the previous one (unmatched gaps become pieces too); (b) for regexes
 * using \p{..} matches std::regex on a "collapsed" text where every non-ASCII code point is replaced
 * by one byte standing for its category, and for the others std::wregex; (c) has hand-written
 * splitters for the gpt2 / llama3 / qwen2 regexes that behave like the regexes. To reproduce it
 * exactly with PCRE2 we rewrite each regex before compiling it (rewrite_pattern()) and prepare the
 * subject (build_subject()):
 *   - \s is ASCII whitespace there (std::regex, C locale) and every non-ASCII White_Space code point
 *     is turned into U+000B before matching; we do the same, so U+3000 etc. also stop matching
 *     literal ranges such as the deepseek-llm "\x{3000}-\x{3002}".
 *   - \p{Lu}, \p{Ll}, \p{Lt}, \p{Lm}, \p{Lo} all mean "any letter" in the collapsed text.
 *   - The collapsed text keeps ASCII as is and maps \p{S} to "$+<=>^`|" for ASCII: '~' is not a
 *     symbol there. Regexes using \p{S} are written below with that exception spelt out.
 *   - $ is the end of the piece only (ECMAScript, not multiline): \z.
 *   - The reference's category table is Unicode 15.1; the PCRE2 in Debian 12 (10.42) has Unicode 14.
 *     The code points assigned in between are added to the \p{..} classes (delta_* below, transcribed
 *     from the reference's src/unicode-data.cpp), so both agree on every code point.
 *   - Invalid UTF-8 bytes are U+FFFD (as in the reference); encoded surrogates, which the reference
 *     accepts as code points, are matched as U+E000 (same category "other", same literal ranges).
 * Match semantics are the same otherwise: both are backtracking engines with ordered alternation.
 * Empty matches are handled like std::regex_iterator (retry non-empty at the same place, then move
 * on one character). */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "tokenizer/tokenizer.h"
#include "base/base.h"

#include <stdlib.h>
#include <string.h>

/* ---- code points assigned in Unicode 15.0/15.1 with the reference's categories (unicode-data.cpp)
 * that PCRE2 10.42 (Unicode 14.0) reports as unassigned. ---- */
static const char delta_N[] = "\\x{11F50}-\\x{11F59}\\x{1D2C0}-\\x{1D2D3}\\x{1E4F0}-\\x{1E4F9}";
static const char delta_L[] =
    "\\x{1123F}-\\x{11240}\\x{11F02}\\x{11F04}-\\x{11F10}\\x{11F12}-\\x{11F33}\\x{1342F}\\x{13441}-\\x{13446}"
    "\\x{1B132}\\x{1B155}\\x{1DF25}-\\x{1DF2A}\\x{1E030}-\\x{1E06D}\\x{1E4D0}-\\x{1E4EB}\\x{2B739}"
    "\\x{2EBF0}-\\x{2EE5D}\\x{31350}-\\x{323AF}";
static const char delta_M[] =
    "\\x{CF3}\\x{ECE}\\x{10EFD}-\\x{10EFF}\\x{11241}\\x{11F00}-\\x{11F01}\\x{11F03}\\x{11F34}-\\x{11F3A}"
    "\\x{11F3E}-\\x{11F42}\\x{13440}\\x{13447}-\\x{13455}\\x{1E08F}\\x{1E4EC}-\\x{1E4EF}";
static const char delta_P[] = "\\x{11B00}-\\x{11B09}\\x{11F43}-\\x{11F4F}";
static const char delta_S[] =
    "\\x{2FFC}-\\x{2FFF}\\x{31EF}\\x{1F6DC}\\x{1F774}-\\x{1F776}\\x{1F77B}-\\x{1F77F}\\x{1F7D9}"
    "\\x{1FA75}-\\x{1FA77}\\x{1FA87}-\\x{1FA88}\\x{1FAAD}-\\x{1FAAF}\\x{1FABB}-\\x{1FABD}\\x{1FABF}"
    "\\x{1FACE}-\\x{1FACF}\\x{1FADA}-\\x{1FADB}\\x{1FAE8}\\x{1FAF7}-\\x{1FAF8}";

/* ---- the regex sets (reference: llm_tokenizer_bpe in src/llama-vocab.cpp). Written in the
 * reference's notation; non-ASCII literals as \x{..}. Sets whose regex the reference runs with a
 * hand-written splitter (gpt2, llama3, qwen2) end in "|\s+", which that splitter does. ---- */
#define CONTR "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define RX_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"
#define RX_LLAMA3 CONTR "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RX_QWEN2 CONTR "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* deepseek-v3 main regex; \p{S} excludes '~' (see top): "[^..\p{S}]" becomes "(?:~|[^..])" and
 * "[\p{P}\p{S}]" becomes "(?:(?!~)[..])". */
#define RX_DS3 "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|(?:~|[^\\r\\n\\p{L}\\p{P}\\p{S}])?[\\p{L}\\p{M}]+" \
               "| ?(?:(?!~)[\\p{P}\\p{S}])+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RX_DSLLM_LETTERS "\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}\\x{1C4}-\\x{293}" \
    "\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}\\x{37F}\\x{386}\\x{388}-\\x{38A}\\x{38C}" \
    "\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}" \
    "\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}" \
    "\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}" \
    "\\x{1F59}\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}" \
    "\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}" \
    "\\x{2102}\\x{2107}\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}\\x{212A}-\\x{212D}" \
    "\\x{212F}-\\x{2134}\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}\\x{2C00}-\\x{2C7B}" \
    "\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}" \
    "\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}" \
    "\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}" \
    "\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}\\x{1E900}-\\x{1E943}]+"
#define RX_CJK_CODER "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+"
#define RX_CJK_DS3 "[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+"
#define RX_PORO " ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{FF0C}\\x{3001}\\x{964}\\x{6D4}\\x{60C})]+"
#define RX_CASE2(DIG, TAIL) \
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+" TAIL \
    "|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*" TAIL \
    "|" DIG "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RX_LUL(DIG) \
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+" CONTR "?" \
    "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*" CONTR "?" \
    "|" DIG "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* kimi-k2: the reference's hand-written splitter (Han runs by fixed ranges, then letters that are
 * not Han with an optional contraction, ...) expressed as a regex. */
#define HAN "\\x{4E00}-\\x{9FFF}\\x{3400}-\\x{4DBF}\\x{20000}-\\x{2A6DF}\\x{2A700}-\\x{2B73F}\\x{2B740}-\\x{2B81F}" \
            "\\x{2B820}-\\x{2CEAF}\\x{2CEB0}-\\x{2EBEF}\\x{F900}-\\x{FAFF}\\x{2F800}-\\x{2FA1F}"
#define RX_KIMI "[" HAN "]+|[^\\r\\n\\p{L}\\p{N}]?(?:(?![" HAN "])\\p{L})+(?:'[sStTmMdD]|'[rR][eE]|'[vV][eE]|'[lL][lL])?" \
                "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* afmoe / tiny_aya digit grouping: a hand-written splitter in the reference (see split_afmoe). */
#define AFMOE_DIGITS "\x01\\p{N}+"

enum {
    SET_DEFAULT, SET_GPT2, SET_LLAMA3, SET_QWEN2, SET_JAIS2, SET_DEEPSEEK_LLM, SET_DEEPSEEK3, SET_YOUTU,
    SET_DEEPSEEK_CODER, SET_FALCON, SET_STARCODER, SET_QWEN35, SET_PORO, SET_VIKING, SET_TEKKEN,
    SET_CHAMELEON, SET_GPT4O, SET_TINY_AYA, SET_KIMI_K2, SET_SUPERBPE, SET_BAILINGMOE, SET_SEED_CODER,
    SET_AFMOE, SET_EXAONE_MOE, SET_COUNT
};

#define MAX_RX 7
static const struct { const char *name; const char *rx[MAX_RX]; } sets[SET_COUNT] = {
    [SET_DEFAULT] = { "default", { "[\\p{P}\\$\\+<=>\\^~\\|]+", RX_GPT2, "\\p{N}+", "[0-9][0-9][0-9]" } },
    [SET_GPT2] = { "gpt2", { RX_GPT2 } },
    [SET_LLAMA3] = { "llama3", { RX_LLAMA3 } },
    [SET_QWEN2] = { "qwen2", { RX_QWEN2 } },
    [SET_JAIS2] = { "jais2", { CONTR "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+"
                               "|\\s{512}(?!\\S)|\\s{256}(?!\\S)|\\s{128}(?!\\S)|\\s{64}(?!\\S)|\\s{32}(?!\\S)|\\s{16}(?!\\S)"
                               "|\\s{8}(?!\\S)|\\s{4}(?!\\S)|\\s{1,2}(?!\\S)|\\s{1}" } },
    [SET_DEEPSEEK_LLM] = { "deepseek-llm", { "[\\r\\n]", RX_DSLLM_LETTERS,
        "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+",
        "\\s+$", RX_CJK_CODER, "\\p{N}+" } },
    [SET_DEEPSEEK3] = { "deepseek-v3", { "\\p{N}{1,3}", RX_CJK_DS3, RX_DS3 } },
    [SET_YOUTU] = { "youtu", {
        "[\\x{AC00}-\\x{D7A3}\\x{3131}-\\x{318E}]+|[\\x{FF01}\\x{2026}\\x{201C}\\x{201D}\\x{2018}\\x{2019}\\x{2014}"
        "\\x{FF1A}\\x{FF1B}\\x{FF0C}\\x{3001}-\\x{303F}\\x{FE30}-\\x{FE4F}]+|[\\x{3105}-\\x{312F}]+|" RX_CJK_DS3,
        RX_LUL("\\p{N}") } },
    [SET_DEEPSEEK_CODER] = { "deepseek-coder", { "[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", RX_CJK_CODER, "\\p{N}" } },
    [SET_FALCON] = { "falcon", { "[\\p{P}\\$\\+<=>\\^~\\|]+", RX_GPT2, "[0-9][0-9][0-9]" } },
    [SET_STARCODER] = { "starcoder", { "\\p{N}", RX_GPT2 } },
    [SET_QWEN35] = { "qwen35", { CONTR "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*"
                                 "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+" } },
    [SET_PORO] = { "poro", { RX_PORO } },
    [SET_VIKING] = { "viking", { RX_PORO, "\\p{N}" } },
    [SET_TEKKEN] = { "tekken", { RX_CASE2("\\p{N}", "") } },
    [SET_CHAMELEON] = { "chameleon", { "<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", "([\\t\\n]|    |  )",
                                       "\\p{N}", "[\\p{P}!-/:-@\\[-`{-~]", RX_GPT2 } },
    [SET_GPT4O] = { "gpt-4o", { RX_CASE2("\\p{N}{1,3}", CONTR "?") } },
    [SET_TINY_AYA] = { "tiny_aya", { AFMOE_DIGITS, RX_LUL("\\p{N}{1,3}") } },
    [SET_KIMI_K2] = { "kimi-k2", { RX_KIMI } },
    [SET_SUPERBPE] = { "superbpe", { "\\p{N}+", "(?=(\\d{3})+(?!\\d))" } },
    [SET_BAILINGMOE] = { "bailingmoe", { "'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}"
                                         "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+" } },
    [SET_SEED_CODER] = { "seed-coder", { CONTR "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+"
                                         "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+" } },
    [SET_AFMOE] = { "afmoe", { AFMOE_DIGITS,
        "[\\x{4E00}-\\x{9FFF}\\x{3400}-\\x{4DBF}\\x{8C48}-\\x{FAFF}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}\\x{FF65}-\\x{FF9F}"
        "\\x{2F00}-\\x{2FDF}\\x{E40}-\\x{E7F}\\x{E80}-\\x{EFF}\\x{1780}-\\x{17FF}\\x{1000}-\\x{109F}\\x{AA60}-\\x{AA7F}"
        "\\x{A9E0}-\\x{A9FF}\\x{AC00}-\\x{D7AF}\\x{1100}-\\x{11FF}]+", RX_DS3 } },
    [SET_EXAONE_MOE] = { "exaone-moe", { CONTR "|[^\\r\\n\\p{L}\\p{N}]?(?:\\p{L}\\p{M}*(?: \\p{L}\\p{M}*)*)+|\\p{N}"
                                         "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]?|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+" } },
};

/* tokenizer.ggml.pre names -> set and vocabulary flags (reference: llama_vocab::impl::load). */
#define NC MR_PRE_F_NOCLEAN
#define IM MR_PRE_F_IGNORE_MERGES
#define AB MR_PRE_F_ADD_BOS
static const struct { const char *name; int set, flags; } pre_names[] = {
    { "", SET_DEFAULT, 0 }, { "default", SET_DEFAULT, 0 },
    { "llama3", SET_LLAMA3, IM | AB }, { "llama-v3", SET_LLAMA3, IM | AB }, { "llama-bpe", SET_LLAMA3, IM | AB },
    { "falcon3", SET_LLAMA3, IM | AB }, { "falcon-h1", SET_LLAMA3, IM | AB }, { "pixtral", SET_LLAMA3, IM | AB },
    { "midm-2.0", SET_LLAMA3, IM | AB }, { "lfm2", SET_LLAMA3, IM | AB }, { "jina-v5-nano", SET_LLAMA3, IM | AB },
    { "deepseek-llm", SET_DEEPSEEK_LLM, NC }, { "deepseek-coder", SET_DEEPSEEK_CODER, NC },
    { "deepseek-v3", SET_DEEPSEEK3, NC }, { "youtu", SET_YOUTU, NC | IM },
    { "falcon", SET_FALCON, 0 }, { "mpt", SET_GPT2, 0 }, { "starcoder", SET_STARCODER, 0 },
    { "gpt-2", SET_GPT2, 0 }, { "phi-2", SET_GPT2, 0 }, { "jina-es", SET_GPT2, 0 }, { "jina-de", SET_GPT2, 0 },
    { "gigachat", SET_GPT2, 0 }, { "jina-v2-es", SET_GPT2, 0 }, { "jina-v2-de", SET_GPT2, 0 },
    { "a.x-4.0", SET_GPT2, 0 }, { "mellum", SET_GPT2, 0 }, { "modern-bert", SET_GPT2, 0 },
    { "jais-2", SET_JAIS2, 0 }, { "jina-v1-en", SET_GPT2, 0 }, { "jina-v2-code", SET_GPT2, 0 },
    { "roberta-bpe", SET_GPT2, 0 }, { "refact", SET_STARCODER, 0 }, { "command-r", SET_STARCODER, NC },
    { "qwen2", SET_QWEN2, NC }, { "deepseek-r1-qwen", SET_QWEN2, NC }, { "kormo", SET_QWEN2, NC },
    { "f2llmv2", SET_QWEN2, NC }, { "qwen35", SET_QWEN35, NC }, { "stablelm2", SET_QWEN2, 0 },
    { "olmo", SET_GPT2, 0 }, { "dbrx", SET_LLAMA3, 0 }, { "smaug-bpe", SET_LLAMA3, 0 },
    { "poro-chat", SET_PORO, NC }, { "glm4", SET_LLAMA3, MR_PRE_F_NO_BOS_ID },
    { "chatglm-bpe", SET_LLAMA3, MR_PRE_F_NO_BOS_ID }, { "viking", SET_VIKING, NC }, { "jais", SET_GPT2, 0 },
    { "tekken", SET_TEKKEN, NC | IM | AB }, { "smollm", SET_STARCODER, NC }, { "codeshell", SET_STARCODER, 0 },
    { "bloom", SET_PORO, 0 }, { "gpt3-finnish", SET_PORO, 0 }, { "exaone", SET_STARCODER, 0 },
    { "exaone4", SET_GPT2, 0 }, { "exaone-moe", SET_EXAONE_MOE, 0 }, { "chameleon", SET_CHAMELEON, AB | NC },
    { "minerva-7b", SET_STARCODER, 0 }, { "megrez", SET_QWEN2, 0 }, { "gpt-4o", SET_GPT4O, NC },
    { "llama4", SET_GPT4O, NC }, { "kanana2", SET_GPT4O, NC }, { "tiny_aya", SET_TINY_AYA, NC },
    { "superbpe", SET_SUPERBPE, NC }, { "trillion", SET_GPT2, NC }, { "granite-docling", SET_GPT2, NC },
    { "bailingmoe", SET_BAILINGMOE, NC }, { "bailingmoe2", SET_BAILINGMOE, NC }, { "llada-moe", SET_BAILINGMOE, NC },
    { "seed-coder", SET_SEED_CODER, NC }, { "hunyuan", SET_QWEN2, NC }, { "hunyuan-dense", SET_DEEPSEEK3, NC },
    { "joyai-llm", SET_DEEPSEEK3, NC }, { "kimi-k2", SET_KIMI_K2, NC }, { "grok-2", SET_QWEN2, NC },
    { "afmoe", SET_AFMOE, NC }, { "minimax-m2", SET_GPT4O, NC }, { "solar-open", SET_QWEN2, NC },
    /* not a name the reference knows: the converter writes "mpt" for GPT-NeoX vocabularies */
    { "gpt-neox", SET_GPT2, 0 },
};
#undef NC
#undef IM
#undef AB

int mr_pretok_lookup(const char *name, int *flags) {
    for (size_t i = 0; i < sizeof pre_names / sizeof pre_names[0]; i++)
        if (!strcmp(name, pre_names[i].name)) {
            if (flags) *flags = pre_names[i].flags;
            return pre_names[i].set;
        }
    mr_set_error("tokenizer: unknown pre-tokenizer type '%s'", name);
    return -1;
}

const char *mr_pretok_set_name(int set_id) {
    return set_id >= 0 && set_id < SET_COUNT ? sets[set_id].name : "?";
}

/* ---- pattern rewriting (see the top comment) ---- */
typedef struct { char *s; size_t n, cap; int oom; } sbuf;
static void sb_put(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = (b->cap ? b->cap * 2 : 256);
        while (cap < b->n + n + 1) cap *= 2;
        char *p = mr_realloc(b->s, cap);
        if (!p) { b->oom = 1; return; }
        b->s = p; b->cap = cap;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
}
static void sb_puts(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

#define WS_BODY "\\t\\n\\x0B\\f\\r "

static char *rewrite_pattern(const char *p) {
    sbuf b = { 0 };
    int in_class = 0;
    for (size_t i = 0; p[i];) {
        char c = p[i];
        if (c == '\\' && p[i + 1]) {
            char e = p[i + 1];
            if (e == 'p' && p[i + 2] == '{') {
                const char *end = strchr(p + i + 3, '}');
                if (!end) { free(b.s); return NULL; }
                size_t nl = (size_t)(end - (p + i + 3));
                char cat = p[i + 3];
                const char *delta = NULL;
                if (nl == 1 || (nl == 2 && cat == 'L')) { /* \p{Lu} etc. are any letter */
                    switch (cat) {
                    case 'L': delta = delta_L; break;
                    case 'N': delta = delta_N; break;
                    case 'P': delta = delta_P; break;
                    case 'S': delta = delta_S; break;
                    case 'M': delta = delta_M; break;
                    default: break;
                    }
                }
                if (!delta) { free(b.s); return NULL; }
                char prop[8] = { '\\', 'p', '{', cat, '}', 0 };
                if (!in_class) sb_puts(&b, "[");
                sb_puts(&b, prop);
                sb_puts(&b, delta);
                if (!in_class) sb_puts(&b, "]");
                i = (size_t)(end - p) + 1;
                continue;
            }
            if (e == 's') { sb_puts(&b, in_class ? WS_BODY : "[" WS_BODY "]"); i += 2; continue; }
            if (e == 'S') {
                if (in_class) { free(b.s); return NULL; }
                sb_puts(&b, "[^" WS_BODY "]"); i += 2; continue;
            }
            if (e == 'd') { sb_puts(&b, in_class ? "0-9" : "[0-9]"); i += 2; continue; }
            if (e == 'w' || e == 'W' || e == 'D' || e == 'b' || e == 'B') { free(b.s); return NULL; }
            sb_put(&b, p + i, 2);
            i += 2;
            continue;
        }
        if (!in_class && c == '[') {
            in_class = 1;
            sb_put(&b, p + i, 1);
            i++;
            if (p[i] == '^') { sb_put(&b, "^", 1); i++; }
            continue;
        }
        if (in_class && c == ']') { in_class = 0; sb_put(&b, "]", 1); i++; continue; }
        if (!in_class && c == '$') { sb_puts(&b, "\\z"); i++; continue; }
        sb_put(&b, p + i, 1);
        i++;
    }
    if (b.oom || in_class) { free(b.s); return NULL; }
    return b.s;
}

/* ---- compiled sets ---- */
struct mr_pretok {
    int set;
    int n;
    pcre2_code *code[MAX_RX];
    int afmoe[MAX_RX];
    uint32_t max_ovec;
};

void mr_pretok_free(mr_pretok *p) {
    if (!p) return;
    for (int i = 0; i < p->n; i++) pcre2_code_free(p->code[i]);
    free(p);
}

mr_pretok *mr_pretok_new(int set_id) {
    if (set_id < 0 || set_id >= SET_COUNT) { mr_set_error("tokenizer: bad pre-tokenizer set %d", set_id); return NULL; }
    mr_pretok *p = mr_calloc(1, sizeof *p);
    if (!p) { mr_set_error("tokenizer: out of memory"); return NULL; }
    p->set = set_id;
    for (int i = 0; i < MAX_RX && sets[set_id].rx[i]; i++) {
        const char *src = sets[set_id].rx[i];
        int afmoe = src[0] == '\x01';
        char *pat = rewrite_pattern(src + afmoe);
        if (!pat) { mr_set_error("tokenizer: cannot rewrite regex %d of set %s", i, sets[set_id].name); goto fail; }
        int err; PCRE2_SIZE eoff;
        pcre2_code *c = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &err, &eoff, NULL);
        if (!c) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(err, msg, sizeof msg);
            mr_set_error("tokenizer: regex %d of set %s: %s at %zu", i, sets[set_id].name, (char *)msg, (size_t)eoff);
            free(pat);
            goto fail;
        }
        free(pat);
        (void)pcre2_jit_compile(c, PCRE2_JIT_COMPLETE); /* falls back to the interpreter if unavailable */
        p->code[p->n] = c;
        p->afmoe[p->n] = afmoe;
        p->n++;
    }
    return p;
fail:
    mr_pretok_free(p);
    return NULL;
}

/* ---- UTF-8 ---- */
size_t mr_utf8_decode_ref(const char *str, size_t len, uint32_t *cps) {
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0, n = 0;
    while (i < len) {
        unsigned c = s[i];
        uint32_t cp;
        if (!(c & 0x80)) { cps[n++] = c; i++; continue; }
        if (!(c & 0x40)) goto invalid;
        if (!(c & 0x20)) {
            if (i + 1 >= len || (s[i + 1] & 0xc0) != 0x80) goto invalid;
            cp = ((c & 0x1fu) << 6) | (s[i + 1] & 0x3fu);
            i += 2;
        } else if (!(c & 0x10)) {
            if (i + 2 >= len || (s[i + 1] & 0xc0) != 0x80 || (s[i + 2] & 0xc0) != 0x80) goto invalid;
            cp = ((c & 0x0fu) << 12) | ((s[i + 1] & 0x3fu) << 6) | (s[i + 2] & 0x3fu);
            i += 3;
        } else if (!(c & 0x08)) {
            if (i + 3 >= len || (s[i + 1] & 0xc0) != 0x80 || (s[i + 2] & 0xc0) != 0x80 || (s[i + 3] & 0xc0) != 0x80)
                goto invalid;
            cp = ((c & 0x07u) << 18) | ((s[i + 1] & 0x3fu) << 12) | ((s[i + 2] & 0x3fu) << 6) | (s[i + 3] & 0x3fu);
            i += 4;
        } else {
            goto invalid;
        }
        /* the reference throws (and aborts the tokenization) for these */
        cps[n++] = cp > 0x10FFFF ? 0xFFFD : cp;
        continue;
    invalid:
        cps[n++] = 0xFFFD;
        i++;
    }
    return n;
}

int mr_utf8_encode(uint32_t cp, char out[4]) {
    if (cp <= 0x7f) { out[0] = (char)cp; return 1; }
    if (cp <= 0x7ff) { out[0] = (char)(0xc0 | (cp >> 6)); out[1] = (char)(0x80 | (cp & 0x3f)); return 2; }
    if (cp <= 0xffff) {
        out[0] = (char)(0xe0 | (cp >> 12)); out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | ((cp >> 18) & 0x07)); out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3f)); out[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* Unicode White_Space (the reference's unicode_set_whitespace). */
static int is_white_space(uint32_t c) {
    if ((c >= 9 && c <= 13) || c == 0x20 || c == 0x85 || c == 0xa0 || c == 0x1680) return 1;
    if (c >= 0x2000 && c <= 0x200a) return 1;
    return c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

/* GPT-2 byte-level mapping: printable Latin-1 bytes map to themselves, the other 68 bytes to
 * U+0100.. in byte order (reference: unicode_byte_to_utf8_map). */
static int byte_is_printable(unsigned b) { return (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae); }

uint32_t mr_bpe_byte_to_cp(uint8_t b) {
    if (byte_is_printable(b)) return b;
    if (b <= 0x20) return 256u + b;              /* 0x00..0x20 -> U+0100..U+0120 */
    if (b >= 0x7f && b <= 0xa0) return 289u + (b - 0x7fu); /* 0x7F..0xA0 -> U+0121..U+0142 */
    return 323;                                   /* 0xAD -> U+0143 */
}

int mr_bpe_cp_to_byte(uint32_t cp) {
    if (cp < 256) return byte_is_printable(cp) ? (int)cp : -1;
    if (cp <= 288) return (int)(cp - 256);
    if (cp <= 322) return (int)(cp - 289 + 0x7f);
    if (cp == 323) return 0xad;
    return -1;
}

/* ---- splitting ---- */
typedef struct {
    uint32_t *cps; size_t n;
    char *subj; size_t subj_len;
    size_t *off;       /* n + 1 byte offsets of each code point in subj */
} subject;

static void subject_free(subject *s) { free(s->cps); free(s->subj); free(s->off); }

static int build_subject(subject *s, const char *text, size_t len) {
    memset(s, 0, sizeof *s);
    s->cps = mr_malloc((len + 1) * sizeof *s->cps);
    s->off = mr_malloc((len + 1) * sizeof *s->off);
    s->subj = mr_malloc(len * 4 + 1);
    if (!s->cps || !s->off || !s->subj) { subject_free(s); mr_set_error("tokenizer: out of memory"); return -1; }
    s->n = mr_utf8_decode_ref(text, len, s->cps);
    size_t o = 0;
    for (size_t i = 0; i < s->n; i++) {
        uint32_t c = s->cps[i];
        if (c >= 0x80 && is_white_space(c)) c = 0x0B;   /* the reference's whitespace fallback */
        else if (c >= 0xD800 && c <= 0xDFFF) c = 0xE000; /* not encodable for PCRE2; same class */
        s->off[i] = o;
        o += (size_t)mr_utf8_encode(c, s->subj + o);
    }
    s->off[s->n] = o;
    s->subj_len = o;
    return 0;
}

/* code point index (relative to cp0) of byte offset b (relative to the subject start of cp0) */
static size_t cp_at(const subject *s, size_t cp0, size_t cpn, size_t b) {
    size_t base = s->off[cp0], lo = 0, hi = cpn;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (s->off[cp0 + mid] - base < b) lo = mid + 1; else hi = mid;
    }
    return lo;
}

static int push_len(mr_i32vec *v, size_t n) {
    if (n == 0) return 0; /* empty pieces produce no tokens */
    return mr_i32vec_push(v, (int32_t)n);
}

static int match_error(int rc) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(rc, msg, sizeof msg);
    mr_set_error("tokenizer: regex match failed: %s", (char *)msg);
    return -1;
}

/* One regex over one piece [cp0, cp0 + cpn): append the new piece lengths to out. */
static int split_piece(const pcre2_code *code, int afmoe, const subject *s, size_t cp0, size_t cpn,
                       pcre2_match_data *md, mr_i32vec *out) {
    const PCRE2_SPTR sub = (PCRE2_SPTR)(s->subj + s->off[cp0]);
    const size_t blen = s->off[cp0 + cpn] - s->off[cp0];
    size_t start_cp = 0, pos = 0, prev_end = 0;
    uint32_t opts = 0;
    for (;;) {
        if (pos > blen) break;
        int rc = pcre2_match(code, sub, blen, pos, opts | PCRE2_NO_UTF_CHECK, md, NULL);
        /* very long words in regexes that repeat groups exhaust the JIT's 32 KiB stack; the
         * interpreter keeps its backtracking state on the heap */
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
            rc = pcre2_match(code, sub, blen, pos, opts | PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH) {
            if (!opts) break;
            /* empty match could not be followed by a non-empty one here: move on one character */
            opts = 0;
            if (pos >= blen) break;
            size_t c = cp_at(s, cp0, cpn, pos);
            pos = s->off[cp0 + c + 1] - s->off[cp0];
            continue;
        }
        if (rc < 0) return match_error(rc);
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t ms = cp_at(s, cp0, cpn, ov[0]), me = cp_at(s, cp0, cpn, ov[1]);
        if (afmoe) {
            /* reference unicode_regex_split_custom_afmoe: a digit run is cut into a head of
             * (len % 3) digits and groups of 3; whatever precedes the run joins its first group */
            size_t cnt = me - ms, r = cnt % 3, cur = ms;
            if (r) { cur += r; if (push_len(out, cur - prev_end)) return -1; prev_end = cur; }
            while (cur < me) { cur += 3; if (push_len(out, cur - prev_end)) return -1; prev_end = cur; }
        } else {
            if (ms > start_cp && push_len(out, ms - start_cp)) return -1;
            if (push_len(out, me - ms)) return -1;
            start_cp = me;
        }
        if (ov[0] == ov[1]) {
            if (ov[1] >= blen) break;
            opts = PCRE2_NOTEMPTY_ATSTART | PCRE2_ANCHORED;
        } else {
            opts = 0;
        }
        pos = ov[1];
    }
    if (afmoe) {
        if (prev_end < cpn && push_len(out, cpn - prev_end)) return -1;
    } else if (start_cp < cpn && push_len(out, cpn - start_cp)) {
        return -1;
    }
    return 0;
}

int mr_pretok_split(const mr_pretok *p, const char *text, size_t len, char **out, size_t *out_cap,
                    size_t *out_len, mr_i32vec *lens) {
    subject s;
    mr_i32vec a = { 0 }, b = { 0 };
    pcre2_match_data *md = NULL;
    int ret = -1;
    lens->n = 0;
    *out_len = 0;
    if (len == 0) return 0;
    if (len > (size_t)1 << 30) { mr_set_error("tokenizer: text too long (%zu bytes)", len); return -1; }
    if (build_subject(&s, text, len)) return -1;
    md = pcre2_match_data_create(8, NULL);
    if (!md || push_len(&a, s.n)) { mr_set_error("tokenizer: out of memory"); goto done; }
    for (int r = 0; r < p->n; r++) {
        b.n = 0;
        size_t cp0 = 0;
        for (size_t k = 0; k < a.n; k++) {
            size_t cpn = (size_t)a.v[k];
            if (split_piece(p->code[r], p->afmoe[r], &s, cp0, cpn, md, &b)) goto done;
            cp0 += cpn;
        }
        mr_i32vec t = a; a = b; b = t;
    }
    /* words: the UTF-8 of their code points (invalid input bytes come out as U+FFFD) */
    size_t need = 0;
    for (size_t i = 0; i < s.n; i++) need += s.cps[i] < 0x80 ? 1 : s.cps[i] < 0x800 ? 2 : s.cps[i] < 0x10000 ? 3 : 4;
    if (need + 1 > *out_cap) {
        char *q = mr_realloc(*out, need + 1);
        if (!q) { mr_set_error("tokenizer: out of memory"); goto done; }
        *out = q; *out_cap = need + 1;
    }
    size_t cp = 0, o = 0;
    for (size_t k = 0; k < a.n; k++) {
        size_t w0 = o;
        for (int32_t j = 0; j < a.v[k]; j++) o += (size_t)mr_utf8_encode(s.cps[cp++], *out + o);
        if (mr_i32vec_push(lens, (int32_t)(o - w0))) { mr_set_error("tokenizer: out of memory"); goto done; }
    }
    *out_len = o;
    ret = 0;
done:
    pcre2_match_data_free(md);
    free(a.v); free(b.v);
    subject_free(&s);
    return ret;
}
