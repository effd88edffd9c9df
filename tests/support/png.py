"""Read the pixels of a PNG screenshot (8-bit RGB or RGBA, not interlaced, as Chromium writes
them), so a browser test can check what a user would see, not only classes and attributes."""

from __future__ import annotations

import struct
import zlib

RGB = tuple[int, int, int]


def pixels(data: bytes) -> list[list[RGB]]:
    """Rows of (r, g, b) of a PNG image."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG image")
    at, chunks, header = 8, [], b""
    while at < len(data):
        (length,) = struct.unpack(">I", data[at : at + 4])
        kind, body = data[at + 4 : at + 8], data[at + 8 : at + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            chunks.append(body)
        at += 12 + length
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", header)
    if depth != 8 or colour not in (2, 6) or interlace:
        raise ValueError(f"only 8-bit RGB/RGBA PNGs without interlacing (depth {depth}, colour {colour})")
    step = 3 if colour == 2 else 4
    raw = zlib.decompress(b"".join(chunks))
    stride = width * step
    previous = bytearray(stride)
    found: list[list[RGB]] = []
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for x in range(stride):
            left = line[x - step] if x >= step else 0
            up = previous[x]
            corner = previous[x - step] if x >= step else 0
            if kind == 1:
                line[x] = (line[x] + left) & 0xFF
            elif kind == 2:
                line[x] = (line[x] + up) & 0xFF
            elif kind == 3:
                line[x] = (line[x] + (left + up) // 2) & 0xFF
            elif kind == 4:
                guess = left + up - corner
                # the nearest of left, up and corner to the guess; ties in that order
                nearest = min((abs(guess - v), n, v) for n, v in enumerate((left, up, corner)))
                line[x] = (line[x] + nearest[2]) & 0xFF
        found.append([(line[x], line[x + 1], line[x + 2]) for x in range(0, stride, step)])
        previous = line
    return found


def share(image: list[list[RGB]], colour: RGB, tolerance: int = 24) -> float:
    """The share of an image's pixels within ``tolerance`` of ``colour`` on each channel."""
    flat = [p for row in image for p in row]
    close = sum(1 for p in flat if all(abs(a - b) <= tolerance for a, b in zip(p, colour, strict=True)))
    return close / len(flat)
