#!/usr/bin/python3
"""tools/bench/make_photo_set.py - an ImageNet-like folder cut from real
photographs, for the benchmarks' second kind of image.

The development machines hold no photo set and reach no image site, but
they reach Debian's archive, whose wallpaper packages carry camera
photographs beside drawings and renders. tools/bench/photo-set.sh fetches
them and names the photographs; this script cuts the folder:

    make_photo_set.py OUT IMAGES CLASSES PHOTO...

Each image is a random crop of one photograph (a tenth to all of its area,
aspect 3/4 to 4/3, mirrored half the time) scaled with Lanczos so that its
short side is 256 to 500 pixels and written as a baseline JPEG of quality
90 to 95 with 4:2:0 chroma: the same geometry and coding as
ringfeed-synth's folder, so that the two kinds differ in content alone.
The photographs' camera noise, textures and defocused backgrounds are
what a synthetic image lacks. Image i goes to class i % CLASSES, named as
ringfeed-synth names them. The seed is fixed: the same sources give the
same folder. Needs Pillow (Debian's python3-pil).
"""

import os
import random
import sys

from PIL import Image

SEED = 21
MIN_AREA = 0.10
SHORT_SIDE = (256, 500)
QUALITY = (90, 95)


def crop_box(rng, width, height):
    """A random box of MIN_AREA..1 of the area, aspect 3/4..4/3."""
    area = width * height * rng.uniform(MIN_AREA, 1.0)
    aspect = rng.uniform(3 / 4, 4 / 3)
    w = min(width, max(1, round((area * aspect) ** 0.5)))
    h = min(height, max(1, round((area / aspect) ** 0.5)))
    left = rng.randint(0, width - w)
    top = rng.randint(0, height - h)
    return left, top, left + w, top + h


def cut(rng, photo):
    """One crop of PHOTO, mirrored or not, scaled to its short side."""
    piece = photo.crop(crop_box(rng, *photo.size))
    if rng.random() < 0.5:
        piece = piece.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    short = rng.randint(*SHORT_SIDE)
    w, h = piece.size
    scale = short / min(w, h)
    size = (max(1, round(w * scale)), max(1, round(h * scale)))
    return piece.resize(size, Image.Resampling.LANCZOS)


def main(argv):
    if len(argv) < 5:
        sys.exit("usage: make_photo_set.py OUT IMAGES CLASSES PHOTO...")
    out, images, classes = argv[1], int(argv[2]), int(argv[3])
    photos = [Image.open(p).convert("RGB") for p in argv[4:]]
    rng = random.Random(SEED)
    for c in range(classes):
        os.makedirs(os.path.join(out, "class_%03d" % c), exist_ok=True)
    for i in range(images):
        piece = cut(rng, photos[rng.randrange(len(photos))])
        name = os.path.join(out, "class_%03d" % (i % classes),
                            "img_%06d.jpg" % i)
        piece.save(name, "JPEG", quality=rng.randint(*QUALITY),
                   subsampling="4:2:0")


if __name__ == "__main__":
    main(sys.argv)
