/* stub: being written */
#include "config.h"
