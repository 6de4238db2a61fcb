/*
 * pack.h - the internals of ringfeed's on-disk formats in one include,
 * for the code outside lib/source/ that needs several of them (the
 * decoder, the tests, the fuzz targets): the formats' layout and codecs
 * (pack-format.h), CRC-32C (crc32c.h), little-endian fields
 * (little-endian.h), and whole reads and writes (file-io.h). Code in
 * lib/source/ includes the one it uses instead. The packed-file writer
 * is public (ringfeed.h, pack-writer.c), the reader is rf_dataset
 * (pack-reader.c).
 */
#ifndef RF_PACK_H
#define RF_PACK_H

#include "source/crc32c.h"
#include "source/dataset.h"
#include "source/file-io.h"
#include "source/little-endian.h"
#include "source/pack-format.h"

#endif /* RF_PACK_H */
