/*
 * internal.h - an umbrella, kept for now: it includes the headers of
 * lib/common/ (one per concern: text, clock, mix64, params, resources,
 * order, process-token), so that files written before they were split
 * out still build. It declares nothing of its own (the producer's and
 * spawning's declarations are in producer/producer.h and
 * consumer/spawn.h), and the system headers below stay for files that
 * took them from here. New code includes the header it needs; once
 * nothing includes this file, it goes. Never installed; internal
 * non-static names start with rf__.
 */
#ifndef RF_INTERNAL_H
#define RF_INTERNAL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
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
