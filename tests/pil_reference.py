#!/usr/bin/env python3
"""PIL's answer for one crop, for tests/jpeg-pil.h to compare with.

    pil_reference.py IMAGE X0 Y0 X1 Y1 WIDTH HEIGHT FLIP [EXIF [RW RH SX SY]]

Opens IMAGE (no draft(): PIL decodes at full size), applies the EXIF
orientation when EXIF is 1, converts to RGB, resizes the box (X0, Y0, X1,
Y1) to WIDTH x HEIGHT with BILINEAR (PIL's antialiased resampler), width
first, mirrors it when FLIP is 1, and writes the raw RGB bytes to stdout.
torchvision's RandomResizedCrop on PIL images does exactly this with
Pillow 12 and older (Pillow 13 may resize a crop height first: ringfeed's
train crops keep the width-first order).

With RW RH SX SY the box is resized to RW x RH instead, in Pillow 13's
pass order (RF_PARAM_PILLOW's default), and the WIDTH x HEIGHT from
(SX, SY) on are cut out of that: torchvision's Resize then CenterCrop
(ringfeed's eval) with the whole image as the box.

Each order is done as two one-axis resizes, which every Pillow release
computes alike, so that the answer does not depend on the Pillow
installed.
Exits 2 on bad arguments.
"""
import sys

from PIL import Image, ImageOps


def resize_in_order(im, box, size, y_first):
    """The box resized to size in two passes, each rounded to 8 bits as
    PIL's are: along y then x when y_first, else x then y."""
    width, height = im.size
    x0, y0, x1, y1 = box
    if y_first:
        between = im.resize((width, size[1]), Image.BILINEAR,
                            box=(0, y0, width, y1))
        return between.resize(size, Image.BILINEAR, box=(x0, 0, x1, size[1]))
    between = im.resize((size[0], height), Image.BILINEAR,
                        box=(x0, 0, x1, height))
    return between.resize(size, Image.BILINEAR, box=(0, y0, size[0], y1))


def pillow13_y_first(im, size):
    """Pillow 13's order (its Resample.c): the height first where the image
    loses more than twice as many pixels along it as along the width."""
    lost_x, lost_y = im.size[0] - size[0], im.size[1] - size[1]
    return lost_y > 0 and lost_y > 2 * lost_x


def main(argv):
    if len(argv) not in (9, 10, 14):
        sys.stderr.write(__doc__)
        return 2
    path = argv[1]
    box = tuple(float(v) for v in argv[2:6])
    size = (int(argv[6]), int(argv[7]))
    flip = argv[8] == "1"
    exif = len(argv) >= 10 and argv[9] == "1"
    window = tuple(int(v) for v in argv[10:14])
    with Image.open(path) as im:
        if exif:
            im = ImageOps.exif_transpose(im)
        im = im.convert("RGB")
        if window:
            resized = resize_in_order(im, box, window[:2],
                                      pillow13_y_first(im, window[:2]))
            x, y = window[2:]
            out = resized.crop((x, y, x + size[0], y + size[1]))
        else:
            out = resize_in_order(im, box, size, y_first=False)
    if flip:
        out = out.transpose(Image.FLIP_LEFT_RIGHT)
    sys.stdout.buffer.write(out.tobytes())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
