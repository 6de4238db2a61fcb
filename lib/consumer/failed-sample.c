/*
 * failed-sample.c - the sample whose failure ended a run, kept as it
 * happened and given apart (rf_loader_failed_sample()): its index, its
 * file's path whole, its name in a pack, and the reason without the
 * sample's description in front, so that a binding need not take the
 * message apart (a file's name may hold anything the message's
 * punctuation does).
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "consumer/loader-internal.h"
#include "source/dataset.h"

void rf__loader_note_failed_sample(rf_loader *l, uint64_t epoch, uint64_t index,
                                   const char *text, size_t text_len)
{
    l->failed.set = true;
    l->failed.index = index;
    l->failed.epoch = epoch;
    rf__format(l->failed.text, sizeof(l->failed.text), "%.*s", (int)text_len,
               text);
}

/* The reason in a failure's text: what follows "sample N (FILE): ", the
 * description the producer wrote, which the loader's listing gives the
 * same (a producer's dataset is opened over the loader's listing, and
 * both shorten at RF__SAMPLE_NAME_MAX); the whole text otherwise. */
static const char *reason_in(const rf_loader *l, uint64_t index,
                             const char *text)
{
    char who[RF__SAMPLE_NAME_MAX];
    rf__loader_describe_sample(l, index, who, sizeof(who));
    const size_t n = strlen(who);
    if (strncmp(text, who, n) == 0 && text[n] == ':' && text[n + 1] == ' ')
        return text + n + 2;
    return text;
}

int rf_loader_failed_sample(const rf_loader *l, rf_failed_sample *out)
{
    if (!l || !out)
        return -EINVAL;
    if (!l->failed.set)
        return -ENOENT;
    memset(out, 0, sizeof(*out));
    out->index = l->failed.index;
    out->epoch = l->failed.epoch;
    rf__format(out->reason, sizeof(out->reason), "%s",
               reason_in(l, l->failed.index, l->failed.text));
    if (l->described) /* else no listing: path and name stay "" */
        (void)rf__dataset_sample_place(l->described, l->failed.index, out->path,
                                       sizeof(out->path), out->name,
                                       sizeof(out->name));
    return 0;
}
