/*
 * tools/cli-terms.c - the library's messages in a tool's own terms; see
 * cli-terms.h. The flags and value names come from the tool's option
 * table and the library's parameter table (rf_param_at()), never a copy.
 */
#include "cli-terms.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "ringfeed.h"

/* An output buffer that cuts what does not fit. */
struct sink {
    char *out;
    size_t len, used;
};

static void put(struct sink *s, const char *text, size_t n)
{
    if (s->used + 1 >= s->len)
        return;
    const size_t room = s->len - 1 - s->used;
    const size_t take = n < room ? n : room;
    memcpy(s->out + s->used, text, take);
    s->used += take;
    s->out[s->used] = '\0';
}

static size_t identifier_length(const char *p)
{
    size_t n = 0;
    while (isupper((unsigned char)p[n]) || isdigit((unsigned char)p[n]) ||
           p[n] == '_')
        n++;
    return n;
}

/* The tool's flag for parameter `name` ("on_error"), or NULL. */
static const char *flag_of(const char *name, const struct option *options,
                           const struct cli_alias *aliases)
{
    for (size_t i = 0; aliases && aliases[i].param_name; i++)
        if (strcmp(aliases[i].param_name, name) == 0)
            return aliases[i].flag;
    char dashed[64];
    snprintf(dashed, sizeof(dashed), "%s", name);
    for (char *c = dashed; *c; c++)
        *c = *c == '_' ? '-' : *c;
    for (size_t i = 0; options[i].name; i++)
        if (strcmp(options[i].name, dashed) == 0)
            return options[i].name;
    return NULL;
}

/* The parameter called `name` in the library's table, or false. */
static bool param_named(const char *name, rf_param_info *info)
{
    for (unsigned i = 0; rf_param_at(i, info) == 0; i++)
        if (strcmp(info->name, name) == 0)
            return true;
    return false;
}

/* The choice of `info` that constant `id` (n bytes, "RF_ON_ERROR_SKIP")
 * ends with, copied into value; false when none. */
static bool choice_of(const rf_param_info *info, const char *id, size_t n,
                      char *value, size_t len)
{
    if (info->kind != RF_PARAM_KIND_CHOICE || !info->choices)
        return false;
    for (const char *c = info->choices; *c;) {
        size_t k = strcspn(c, " ");
        char upper[64];
        if (k + 1 < sizeof(upper) && k + 1 < n) {
            for (size_t j = 0; j < k; j++)
                upper[j] = (char)toupper((unsigned char)c[j]);
            upper[k] = '\0';
            if (id[n - k - 1] == '_' && strncmp(id + n - k, upper, k) == 0) {
                snprintf(value, len, "%.*s", (int)k, c);
                return true;
            }
        }
        c += k + (c[k] == ' ');
    }
    return false;
}

/* The " to " after the flag that starts at p ("--flag to value"), or
 * NULL when p is not a flag followed by " to ". */
static char *to_after_flag(char *p)
{
    if (strncmp(p, "--", 2) != 0)
        return NULL;
    char *to = strstr(p + 2, " to ");
    if (!to || memchr(p + 2, ' ', (size_t)(to - (p + 2))))
        return NULL;
    return to;
}

/* The next flag of a list after the value that starts at p ("32, --b to"
 * or "3 and --c to"), or NULL where the list ends. */
static char *next_listed_flag(char *p)
{
    static const char *const separators[] = {", --", " and --", " or --"};
    p += strcspn(p, " ,;)");
    for (size_t i = 0; i < sizeof(separators) / sizeof(*separators); i++) {
        const size_t n = strlen(separators[i]);
        if (strncmp(p, separators[i], n) == 0)
            return p + n - 2;
    }
    return NULL;
}

/* "set --flag to value" as "use --flag value", in place, and so each
 * flag listed after it ("set --a to 1, --b to 2 and --c to 3" as "use --a
 * 1, --b 2 and --c 3"). */
static void shorten_advice(char *text)
{
    char *p;
    while ((p = strstr(text, "set --")) != NULL) {
        char *to = to_after_flag(p + 4);
        if (!to)
            break;  /* not "set --flag to ..." */
        p[0] = 'u'; /* "set" -> "use", in place */
        p[1] = 's';
        p[2] = 'e';
        do {
            memmove(to + 1, to + 4, strlen(to + 4) + 1); /* " to " -> " " */
            p = next_listed_flag(to + 1);
        } while (p && (to = to_after_flag(p)) != NULL);
    }
}

/* The length of the list item "--flag" or "--flag value" at p. */
static size_t item_length(const char *p)
{
    size_t n = 2 + strcspn(p + 2, " ,;)");
    if (p[n] != ' ' || p[n + 1] == '-' || p[n + 1] == '(')
        return n;
    const size_t value = strcspn(p + n + 1, " ,;)");
    static const char *const words[] = {"and", "or", "to"};
    for (size_t i = 0; i < sizeof(words) / sizeof(*words); i++)
        if (value == strlen(words[i]) &&
            strncmp(p + n + 1, words[i], value) == 0)
            return n;
    return n + 1 + value;
}

/* The length of the flag ("--size") of the list item at p. */
static size_t flag_length(const char *p)
{
    return 2 + strcspn(p + 2, " ,;)");
}

/* Whether the n bytes at p are decimal digits, at least one. */
static bool all_digits(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isdigit((unsigned char)p[i]))
            return false;
    return n > 0;
}

/* Two items in a row with one flag, two parameters behind it (RF_PARAM_HEIGHT
 * and RF_PARAM_WIDTH, both --size), said as one, in place: "--size 32,
 * --size 32 and --channels 3" as "--size 32 and --channels 3", and
 * "--size 24, --size 32" as "--size 24x32" (the values in the order listed:
 * the library lists a height before its width, as --size HxW takes them). */
static void drop_repeated_items(char *text)
{
    static const char *const separators[] = {", ", " and "};
    for (char *p = strstr(text, "--"); p; p = strstr(p + 2, "--")) {
        const size_t n = item_length(p), flag = flag_length(p);
        for (size_t i = 0; i < sizeof(separators) / sizeof(*separators); i++) {
            const size_t k = strlen(separators[i]);
            char *next = p + n + k;
            if (strncmp(p + n, separators[i], k) != 0 ||
                flag_length(next) != flag || strncmp(next, p, flag) != 0)
                continue;
            const size_t next_n = item_length(next);
            if (next_n == n && strncmp(next, p, n) == 0) {
                memmove(p + n, next + n, strlen(next + n) + 1);
                break;
            }
            /* "--size 24, --size 32": the second value joins the first */
            if (n > flag + 1 && next_n > flag + 1 &&
                all_digits(p + flag + 1, n - flag - 1) &&
                all_digits(next + flag + 1, next_n - flag - 1)) {
                p[n] = 'x';
                memmove(p + n + 1, next + flag + 1,
                        strlen(next + flag + 1) + 1);
                break;
            }
        }
    }
}

/* The length of the parameter keyword that starts at p in text
 * ("jpeg_warnings" in "(jpeg_warnings lenient accepts it"), or 0: a
 * lower-case word with an underscore, standing alone (see cli-terms.h). */
static size_t keyword_length(const char *text, const char *p)
{
    if (p > text && p[-1] != ' ' && p[-1] != '(')
        return 0;
    if (!islower((unsigned char)*p))
        return 0;
    size_t n = 0;
    bool underscore = false;
    while (islower((unsigned char)p[n]) || isdigit((unsigned char)p[n]) ||
           p[n] == '_')
        underscore |= p[n++] == '_';
    const char after = p[n];
    const bool ends = after == '\0' || strchr(" ,;:)", after) ||
                      (after == '.' && (p[n + 1] == '\0' || p[n + 1] == ' '));
    return underscore && ends ? n : 0;
}

/* The tool's flag for the parameter named at p (n bytes: "RF_PARAM_"
 * and its upper case, or its keyword), or NULL when the tool has none;
 * *known says whether the name is in the library's table, and *info is
 * then its row. A keyword counts only when it is in the table (a word
 * such as "dict_size" may be a flag of the tool's own). */
static const char *flag_at(const char *p, size_t n, bool keyword,
                           const struct option *options,
                           const struct cli_alias *aliases, rf_param_info *info,
                           bool *known)
{
    char name[64];
    const size_t skip = keyword ? 0 : 9;
    *known = false;
    if (n <= skip || n - skip >= sizeof(name))
        return NULL;
    for (size_t i = 0; i < n - skip; i++)
        name[i] = (char)tolower((unsigned char)p[skip + i]);
    name[n - skip] = '\0';
    const char *flag = flag_of(name, options, aliases);
    *known = flag && param_named(name, info);
    return keyword && !*known ? NULL : flag;
}

void cli_user_terms(const char *text, const struct option *options,
                    const struct cli_alias *aliases, char *out, size_t len)
{
    struct sink s = {out, len, 0};
    rf_param_info last = {0};
    bool have_last = false;
    if (len)
        out[0] = '\0';
    for (const char *p = text; *p;) {
        const size_t id = strncmp(p, "RF_", 3) == 0 ? identifier_length(p) : 0;
        const size_t keyword = id ? 0 : keyword_length(text, p);
        const size_t n = id ? id : keyword;
        char value[64];
        const char *flag = NULL;
        if (keyword || (id > 9 && strncmp(p, "RF_PARAM_", 9) == 0)) {
            flag = flag_at(p, n, keyword != 0, options, aliases, &last,
                           &have_last);
        }
        if (flag) {
            put(&s, "--", 2);
            put(&s, flag, strlen(flag));
        } else if (id > 3 && have_last &&
                   choice_of(&last, p, id, value, sizeof(value))) {
            put(&s, value, strlen(value));
        } else {
            put(&s, p, n ? n : 1);
        }
        p += n ? n : 1;
    }
    shorten_advice(out);
    drop_repeated_items(out);
}

void cli_replace_calls(char *text, size_t len, const struct cli_call *calls)
{
    for (size_t i = 0; calls && calls[i].c_name; i++) {
        const size_t from = strlen(calls[i].c_name);
        const size_t to = strlen(calls[i].tool_term);
        for (char *p = strstr(text, calls[i].c_name); p;
             p = strstr(p, calls[i].c_name)) {
            const size_t at = (size_t)(p - text), rest = strlen(p + from);
            if (at + to >= len) { /* no room for the term itself */
                *p = '\0';
                return;
            }
            /* the tail after the term, cut to what fits */
            const size_t keep = at + to + rest < len ? rest : len - 1 - at - to;
            memmove(p + to, p + from, keep);
            p[to + keep] = '\0';
            memcpy(p, calls[i].tool_term, to);
            p += to;
        }
    }
}

rf_param_info cli_param_info(const char *program, rf_param param)
{
    rf_param_info info;
    if (rf_param_lookup(param, &info) < 0)
        cli_die(program,
                "the ringfeed library loaded has no parameter %d: it is "
                "older than this tool",
                (int)param);
    return info;
}
