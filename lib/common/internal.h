/*
 * internal.h - an umbrella, kept for now: it includes the headers of
 * lib/common/ (one per concern: text, clock, mix64, params, resources,
 * order, process-token), so that files written before they were split
 * out still build. New code includes the header it needs. Declarations
 * that belong to other layers (the producer's entry point, starting
 * producers) move to those layers' headers; once nothing includes this
 * file, it goes. Never installed; internal non-static names start with
 * rf__.
 */
#ifndef RF_INTERNAL_H
#define RF_INTERNAL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <signal.h>
#include <stdint.h>

#include "ringfeed.h"

#include "common/clock.h"
#include "common/mix64.h"
#include "common/order.h"
#include "common/params.h"
#include "common/process-token.h"
#include "common/resources.h"
#include "common/text.h"

#endif /* RF_INTERNAL_H */
