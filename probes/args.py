"""Command-line argument types shared by the tools."""
from __future__ import annotations

import argparse


def shape_list(text: str, dims: int, item_sep: str, dim_sep: str) -> tuple[tuple[int, ...], ...]:
    """``"8192x8192,4096x16384"`` (dims 2, "," and "x") or ``"4,32,4096,128;8,32,2048,64"`` (dims 4, ";"
    and ","): a tuple of shapes of ``dims`` positive integers; anything else is an argparse error."""
    form = item_sep.join([dim_sep.join("N" * dims)] * 2) + "..."
    try:
        shapes = tuple(tuple(int(d) for d in part.lower().split(dim_sep)) for part in text.split(item_sep)
                       if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"shapes are {form}: {text!r}") from None
    if not shapes or any(len(s) != dims or min(s) < 1 for s in shapes):
        raise argparse.ArgumentTypeError(f"shapes are {form} with every number >= 1: {text!r}")
    return shapes


def gpu_options(parser: argparse.ArgumentParser, argv, probe: str):
    """A GPU probe's parsed options, after a line that says which machine measures; None (said why) where
    there is no GPU to measure."""
    import course

    opts = parser.parse_args(argv)
    if not course.ON_GPU:
        print(f"probes.{probe} needs a GPU")
        return None
    print(course.describe())
    return opts
