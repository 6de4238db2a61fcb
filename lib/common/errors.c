/*
 * errors.c - the library's version and the messages of its return codes,
 * declared in include/ringfeed.h. The messages come from RF_ERROR_MAP, the
 * one table that also defines the RF_E_* codes, so the two cannot drift.
 */
#include "config.h"

#include <string.h>

#include "ringfeed.h"

unsigned rf_version(void)
{
    return RF_VERSION_NUMBER;
}

const char *rf_strerror(int code)
{
    switch (code) {
#define RF_ERROR_CASE_(name, value, message)                                   \
    case value:                                                                \
        return message;
        RF_ERROR_MAP(RF_ERROR_CASE_)
#undef RF_ERROR_CASE_
    case 0:
        return "success";
    default:
        break;
    }
    if (code < 0 && code > -4096) {
#ifdef HAVE_STRERRORDESC_NP
        /* static for every errno it knows, where strerror() writes an
         * unknown one's "Unknown error N" into a per-thread buffer */
        const char *known = strerrordesc_np(-code);
        return known ? known : "unknown error code";
#else
        return strerror(-code);
#endif
    }
    return "unknown ringfeed error code";
}
