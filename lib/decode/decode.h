/*
 * decode.h - one sample from its stored bytes to its place in the slot:
 * an image, told by its signature, with the transform's crop (JPEG through
 * jpeg.c; PNG and WebP decoded whole, then cropped and resized), zstd
 * frames straight into the slot. Owns the decoders, a resizer and a zstd
 * context, reused for every sample; one per producer.
 */
#ifndef RF_DECODE_H
#define RF_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "decode/jpeg.h"
#include "decode/transform.h"
#include "ringfeed.h"

struct rf__decoder;

/* Makes a decoder for the parameters (shape, layout, transform, limits)
 * and, when ds is not NULL, its dictionary and zstd sample shape (checked
 * against the parameters). Returns 0 or a negative code with why. */
int rf__decoder_new(struct rf__decoder **out, const int64_t *params,
                    const rf_dataset *ds, char *why, size_t why_len);

/* NULL is fine. */
void rf__decoder_free(struct rf__decoder *d);

/* Decodes one sample into dst (the slot's place for it). Returns 0 or -1
 * with the reason in err (without the sample's name: the caller adds
 * it). */
int rf__decode_sample(struct rf__decoder *d, const rf_sample_info *info,
                      uint64_t epoch, uint64_t index, uint8_t *dst, char *err,
                      size_t err_len);

/* Whether a decoder of this build reads an encoded image (an
 * RF_SAMPLE_JPEG sample's bytes) with this signature: 0 for JPEG, and
 * PNG and WebP where built with libpng and libwebp; else -1 with the
 * reason its decode would fail with ("a GIF file: ringfeed decodes JPEG,
 * PNG and WebP; convert it to one of those"). Only the first bytes are
 * read: bytes that pass may still fail to decode. For ringfeed-pack,
 * which packs such bytes without decoding them. */
int rf__decode_check_signature(const uint8_t *data, size_t size, char *why,
                               size_t why_len);

#endif /* RF_DECODE_H */
