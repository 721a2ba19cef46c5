"""Write examples/images/cat.jpg: a small drawn cat, the example pipeline's test image.

Drawn with Pillow from fixed shapes (no photo, nothing downloaded), 320x240, JPEG quality 85: a few KB.
The image classifier's weights are random (examples/tools/make_image_cnn.py), so any picture does; this
one is a real baseline JPEG with a non-square size, so the pre-processing's resize and centre crop run.

Pillow is not in the project's venvs on purpose (the example proves it comes from the model's packed
environment): run this with Pillow on the path, e.g.

    pip install --target /tmp/pil pillow==12.0.0
    PYTHONPATH=/tmp/pil .venv/bin/python examples/tools/make_cat_jpg.py
"""

from __future__ import annotations

import sys
from pathlib import Path

from PIL import Image, ImageDraw

OUT = Path(__file__).resolve().parents[1] / "images" / "cat.jpg"
FUR, DARK, EYES, NOSE = (226, 140, 60), (120, 70, 30), (90, 170, 60), (230, 120, 140)
SKY, GRASS = (150, 200, 240), (80, 150, 70)


def draw() -> Image.Image:
    image = Image.new("RGB", (320, 240), SKY)
    pen = ImageDraw.Draw(image)
    pen.rectangle((0, 190, 320, 240), fill=GRASS)
    pen.ellipse((95, 140, 245, 235), fill=FUR, outline=DARK, width=3)  # body
    pen.polygon([(112, 40), (130, 100), (165, 75)], fill=FUR, outline=DARK)  # ears
    pen.polygon([(228, 40), (210, 100), (175, 75)], fill=FUR, outline=DARK)
    pen.ellipse((105, 55, 235, 170), fill=FUR, outline=DARK, width=3)  # head
    for x in (140, 200):
        pen.ellipse((x - 14, 95, x + 14, 120), fill=EYES, outline=DARK, width=2)
        pen.ellipse((x - 4, 98, x + 4, 117), fill=(20, 20, 20))
    pen.polygon([(162, 128), (178, 128), (170, 138)], fill=NOSE)
    for dy in (-6, 0, 6):  # whiskers
        pen.line((150, 136 + dy, 100, 130 + 2 * dy), fill=DARK, width=2)
        pen.line((190, 136 + dy, 240, 130 + 2 * dy), fill=DARK, width=2)
    for x in range(100, 240, 22):  # stripes
        pen.arc((x, 150, x + 30, 200), 200, 340, fill=DARK, width=3)
    return image


def main() -> int:
    OUT.parent.mkdir(parents=True, exist_ok=True)
    draw().save(OUT, format="JPEG", quality=85, optimize=False, progressive=False)
    print(f"{OUT}: {OUT.stat().st_size} bytes", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
