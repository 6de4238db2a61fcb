/*
 * folder-walk.h - lists a folder of class folders as torchvision's
 * ImageFolder does (classes, labels, files and their order, links
 * followed, loops skipped) into one block in the folder index format of
 * pack-format.h. Reads folders only, never the files; used by folder.c.
 */
#ifndef RF_FOLDER_WALK_H
#define RF_FOLDER_WALK_H

#include <stddef.h>
#include <stdint.h>

#include "source/crc32c.h"
#include "source/dataset.h"

/* Lists the folder open at root_fd (root names it in messages) into a
 * malloc'd *listing of *size bytes in the folder index format, checksummed
 * with crc, and what it walked into *walked (for the index cache; its
 * arrays are malloc'd too). Returns 0, or -ENOENT (no class folder, or a
 * class folder without image files), -ENOMEM or the -errno of a folder
 * that cannot be opened or read, with the reason in why; nothing is left
 * allocated then. */
int rf__folder_list(int root_fd, const char *root, const struct rf__crc32c *crc,
                    uint8_t **listing, size_t *size, struct rf__walked *walked,
                    char *why, size_t why_len);

#endif /* RF_FOLDER_WALK_H */
