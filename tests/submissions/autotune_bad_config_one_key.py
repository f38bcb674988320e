"""A vector_add whose autotuner keys on nothing but the dtypes (``key=[]``) and lists one wrong config (BIAS=1
adds one): every case of a dtype shares one entry of the autotuner's cache, so a case pinned to the wrong
config must still run it after a case of the same dtype ran the right one in the same worker. The kernel is
autotune_one_bad_config's, tuned again under that key."""
import triton
from autotune_one_bad_config import _add_kernel as _keyed_on_n
from good_triton import launch_add

_add_kernel = triton.autotune(configs=[triton.Config({"BIAS": 0}), triton.Config({"BIAS": 1})], key=[])(_keyed_on_n.fn)


def vector_add(x, y):
    return launch_add(_add_kernel, x, y)
