/*
 * process-token.h - a number that names this process (process-token.c
 * says how it is kept cheap).
 */
#ifndef RF_COMMON_PROCESS_TOKEN_H
#define RF_COMMON_PROCESS_TOKEN_H

#include <stdint.h>

/* A number that names this process, never that of its parent, a child of
 * fork() or an earlier process with the same pid; cheap enough for every
 * call. */
uint64_t rf__process_token(void);

#endif /* RF_COMMON_PROCESS_TOKEN_H */
