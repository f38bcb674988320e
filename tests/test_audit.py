"""The static audit of a submission's source (autograder/audit.py).

Honest code must come out clean (every solution notebook's graded source, the correct test submissions,
and many small snippets of what learners write); each cheating snippet must be reported under its rule,
through aliases too.
"""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
import torch

from autograder import specs
from autograder.audit import (FEATURES, RULES, SPELLINGS, Finding, audit, forbidden_calls_for, literal_statements,
                              violations)
from autograder.submission import load

ROOT = Path(__file__).resolve().parent.parent
HONEST_FILES = sorted(ROOT.glob("solutions/*/*.ipynb")) + [
    ROOT / "tests/submissions/good_triton.py", ROOT / "tests/submissions/measure_good.py",
    ROOT / "tests/submissions/good_naive.py",
    ROOT / "tests/submissions/later/good_05_08.py", ROOT / "tests/submissions/later/good_08.py",
    ROOT / "tests/gpu_submissions/naive_triton.py"]


def rules(source, **kw) -> set:
    return {f.rule for f in audit(textwrap.dedent(source), **kw)}


# ------------------------------------------------------------------------------------------ honest code

@pytest.mark.parametrize("path", HONEST_FILES, ids=lambda p: p.name)
def test_honest_submissions_are_clean_for_every_exercise(path):
    """The graded source of every solution and correct submission, audited as each exercise would be:
    its forbidden operators (from the spec) and its entry point."""
    source = load(path).source
    assert audit(source) == []
    for spec in specs.EXERCISES.values():
        found = audit(source, forbidden_calls=forbidden_calls_for(spec), entry=spec.entry,
                      outside_torch=spec.judged_on_tensors)
        assert found == [], f"{spec.id}: {found}"


HONEST_SNIPPETS = {
    "reading files with fileinput and logging to the console": """
        import fileinput
        import logging
        log = logging.getLogger(__name__)
        log.addHandler(logging.StreamHandler())
        def softmax(x):
            lines = [line for line in fileinput.input(__file__, inplace=False)]
            log.debug("read %d lines", len(lines))
            return x
    """,
    "timing a function with timeit": """
        import timeit
        def softmax(x):
            return x
        seconds = timeit.timeit(lambda: softmax(1), number=3)
        best = min(timeit.repeat(softmax, number=1, repeat=3))
        t = timeit.Timer(stmt=softmax).timeit(1)
    """,
    "os and builtins used plainly": """
        import os
        import torch
        def softmax(x):
            here = os.path.join(os.path.dirname(__file__), "notes.txt")
            return x if len(str(here)) else torch.empty_like(x)
    """,
    "launcher kept away from torch.compile": """
        import torch
        from torch.compiler import disable
        @torch.compiler.disable
        def softmax(x):
            if torch.compiler.is_compiling():
                return x
            return x
        launch = disable(softmax)
    """,
    "check call": """
        from autograder import check
        def softmax(x):
            return x
        check("softmax", softmax)
        check("softmax", softmax, quick=True)
    """,
    "autograd function with ctx": """
        import torch
        class LayerNormFn(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, w, b, eps):
                ctx.save_for_backward(x, w)
                ctx.eps = eps
                ctx.shape = x.shape
                return x
            @staticmethod
            def backward(ctx, dy):
                x, w = ctx.saved_tensors
                return dy, None, None, None
        layer_norm = LayerNormFn.apply
    """,
    "own objects' attributes": """
        import functools
        def kernel_launcher(x):
            return x
        kernel_launcher.cache = {}
        kernel_launcher.cache[(1, 2)] = 3
        kernel_launcher.calls = 0
        kernel_launcher.calls += 1
        class Config:
            block = 128
        Config.block = 256
        cfg = Config()
        cfg.block = 64
        setattr(cfg, "warps", 4)
        @functools.lru_cache(maxsize=None)
        def pick(n):
            return n
        class Model:
            def __init__(self, w):
                self.w = w
                self.cache = {}
            def forward(self, x):
                self.cache["x"] = x
                self.last = x
                return x
    """,
    "tensor attributes and results of calls": """
        import torch
        def f(x, w):
            y = torch.empty_like(x)
            y.requires_grad = True
            w.grad = None
            x.data = x.data.contiguous()
            out = torch.zeros(3)
            out[0] = 1.0
            out[1:] += 2
            return y
    """,
    "reading the environment, files and paths": """
        import os
        import sys
        from pathlib import Path
        threads = int(os.environ.get("COURSE_THREADS", "1"))
        debug = "TRITON_INTERPRET" in os.environ and os.environ["TRITON_INTERPRET"] == "1"
        here = os.path.dirname(os.path.abspath("x.py"))
        with open("data.txt") as fh:
            text = fh.read()
        with open("data.bin", "rb") as fh:
            raw = fh.read()
        with open("data.txt", mode="r", encoding="utf-8") as fh:
            pass
        lines = Path("data.txt").read_text().splitlines()
        with Path("data.txt").open() as fh:
            pass
        print(sys.version, file=sys.stderr)
        sys.stdout.write("ok\\n")
        if len(sys.argv) > 5:
            sys.exit(1)
    """,
    "timing with events and clocks": """
        import time
        import statistics
        import torch
        import triton
        def bench(fn, reps=10):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            fn()
            ms = triton.testing.do_bench(fn)
            return statistics.median([start.elapsed_time(end), (time.perf_counter() - t0) * 1e3, ms])
    """,
    "triton kernels with @ and autotune": """
        import torch
        import triton
        import triton.language as tl
        @triton.autotune(configs=[triton.Config({"BM": 32}, num_warps=4)], key=["M"])
        @triton.jit
        def mm_kernel(a_ptr, b_ptr, c_ptr, M, BM: tl.constexpr):
            a = tl.load(a_ptr + tl.arange(0, BM)[:, None] * BM + tl.arange(0, BM)[None, :])
            b = tl.load(b_ptr + tl.arange(0, BM)[:, None] * BM + tl.arange(0, BM)[None, :])
            c = a @ b
            c += tl.dot(a, b)
            p = tl.softmax(c)
            tl.store(c_ptr + tl.arange(0, BM)[:, None] * BM + tl.arange(0, BM)[None, :], p)
        def matmul(a, b):
            c = torch.empty((a.shape[0], b.shape[1]), device=a.device, dtype=a.dtype)
            mm_kernel[(1,)](a, b, c, a.shape[0])
            return c
    """,
    "introspection that only reads": """
        import torch
        def f(x):
            dt = getattr(torch, "float16")
            dt2 = getattr(x, "dtype", None) or torch.float32
            name = type(x).__name__
            cls = x.__class__.__name__
            if hasattr(x, "shape"):
                pass
            state = torch.load("weights.pt")          # weights_only=True by default: no code runs
            known = "f" in globals()
            g = globals().get("f")
            for k in sorted(vars(torch.nn)):
                pass
            return x, dt, dt2, name, cls, known, g
    """,
    "dtype choices and aliases of torch functions that are allowed": """
        import torch
        import torch.nn.functional as F
        from torch import nn
        dt = torch.float16 if True else torch.bfloat16
        relu = F.relu
        def f(x):
            y = relu(x).to(dt)
            z = torch.exp(y) + F.pad(y, (1, 1))
            return nn.functional.silu(z)
    """,
    "docstrings and messages that mention the grader": '''
        def softmax(x):
            """Graded by the autograder; AUTOGRADER_QUICK makes it faster."""
            if x.dim() != 2:
                raise ValueError("the autograder passes 2-D tensors")
            return x
    ''',
    "string replace and dict/set methods": """
        seen = set()
        def f(name, items):
            seen.add(name.replace("-", "_"))
            d = dict(items)
            d.update({"a": 1})
            d.pop("a")
            return sorted(seen)
    """,
    "parameters named like modules": """
        import torch.nn.functional as F
        import triton
        import triton.language as tl
        @triton.jit
        def k(x_ptr, F: tl.constexpr, torch: tl.constexpr):
            pass
        def g(F, torch):
            F.softmax = 1      # a parameter, not the module
            torch.thing = 2
        @triton.jit
        def h(x_ptr, triton: tl.constexpr):
            a = tl.load(x_ptr)
            tl.store(x_ptr, a @ a)  # still a kernel: its decorator is read outside its parameters
    """,
    "attributes of values that hold no module": """
        import torch
        class Config:
            BLOCK = 128
        def launch(x, cfg, meta):
            array = x.cpu().numpy() if x.device.type == "cuda" else None
            y = x.cuda() if torch.cuda.is_available() else x
            return x.shape, cfg.BLOCK, meta.num_warps, y, array
        class Layer:
            def __init__(self, np):
                self.np = np
            def programs(self):
                return self.np
    """,
    "nested functions and closures": """
        import torch
        def make(scale):
            cache = {}
            def apply(x):
                if x.shape not in cache:
                    cache[x.shape] = torch.empty_like(x)
                return x * scale
            apply.scale = scale
            return apply
    """,
    # a validating decorator reads its function's signature once, at import: inspect.signature and its kind
    # tests reach no frame (inspect's frame readers stay refused: CHEATS)
    "a decorator that reads a signature with inspect": """
        import inspect
        from inspect import signature
        def checked(fn):
            names = list(inspect.signature(fn).parameters)
            assert inspect.isfunction(fn) and signature(fn)
            return fn
        @checked
        def softmax(x):
            return x
    """,
    "a benchmark's switches of the garbage collector": """
        import gc
        from gc import collect
        def f():
            collect()
            was = gc.isenabled()
            gc.disable()
            if was:
                gc.enable()
    """,
    # torch.library.custom_op is PyTorch's documented custom-operator API, triton_op's sibling: the operator's
    # Python is the submission's own, run under the recorder
    "an own custom op with its fake implementation": """
        import torch
        @torch.library.custom_op('mylib::rows', mutates_args=())
        def rows(x: torch.Tensor) -> torch.Tensor:
            return torch.empty_like(x)
        @rows.register_fake
        def _(x):
            return torch.empty_like(x)
        torch.library.register_fake('mylib::rows')(lambda x: torch.empty_like(x))
    """,
    "classes and keywords of literal names": """
        def f(t, **meta):
            M = type('M', (), {'a': 1})
            N = type('N', (), dict(b=2))
            return f(t, **{'BLOCK': 4}, **meta), type(t), M, N
    """,
}


@pytest.mark.parametrize("name", sorted(HONEST_SNIPPETS))
def test_honest_snippets_are_clean(name):
    source = textwrap.dedent(HONEST_SNIPPETS[name])
    assert audit(source) == []
    softmax_forbidden = forbidden_calls_for(specs.get("softmax"))
    assert audit(source, forbidden_calls=softmax_forbidden) == []


def test_allowed_features_are_clean():
    source = textwrap.dedent("""
        import torch
        @torch.compile
        def fused(x):
            return x
        g = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            pass
        x = torch.empty(1)
        x.record_stream(torch.cuda.current_stream())
        with torch.cuda.graph(g):
            pass
        scripted = torch.jit.script(fused)
    """)
    assert rules(source) == {"feature"}
    assert audit(source, allow=frozenset({"compile", "cuda_graphs", "streams", "jit"})) == []


# ------------------------------------------------------------------------------------------ numpy in graded code

NUMPY_ON_VALUES = [
    # numpy over a tensor's memory (an own __array_interface__ object from data_ptr) computes unseen
    "import numpy as np\nclass M:\n    def __init__(self, t):\n        self.t = t\ndef softmax(x):\n"
    "    a = np.asarray(M(x))\n    return x",
    "import numpy as np\ndef softmax(x):\n    e = np.exp(x)\n    return e",
    "import numpy\ndef softmax(x):\n    return numpy.frombuffer(bytes(4), dtype=numpy.float32)",
    "import numpy as np\nf = np.asarray\ndef softmax(x):\n    return f(x)",
    "import functools, numpy as np\nf = functools.partial(np.asarray)\ndef softmax(x):\n    return f(x)",
    "import numpy as np\ndef softmax(x):\n    return list(map(np.exp, [x]))",
    "import torch\ndef softmax(x):\n    return torch.storage.np.asarray(x)",  # numpy reached through torch
    # numpy's functions re-exported by another installed package are numpy's (matplotlib's pylab)
    "from pylab import asarray as a\ndef softmax(x):\n    return a(x)",
    "import matplotlib.pylab as pl\ndef softmax(x):\n    return pl.exp(x)",
    "from pylab import *\ndef softmax(x):\n    return asarray(x)",
    # a function reached only through a registry the submission fills: by a decorator, or by a function
    # that the decorator is
    "import numpy as np\n_REG = []\n@_REG.append\ndef rows(x):\n    return np.exp(x)\n"
    "def softmax(x):\n    return _REG[0](x)",
    "import numpy as np\n_REG = {}\ndef register(f):\n    _REG[f.__name__] = f\n    return f\n"
    "@register\ndef rows(x):\n    return np.exp(x)\ndef softmax(x):\n    return _REG['rows'](x)",
]
NUMPY_CONFIGURATION = [
    "import numpy as np\nimport torch\ndef softmax(x):\n    B = int(2 ** np.ceil(np.log2(x.shape[1])))\n"
    "    n = np.prod(x.shape)\n    return torch.empty(x.shape, dtype=torch.float32) if n and B else x",
    "import numpy as np\nimport torch\ndef softmax(x):\n    return torch.full(x.shape, np.pi, dtype=torch.float32)",
    # a notebook's plot of its results, outside the graded function (pylab's constants are plain numbers)
    "import matplotlib.pyplot as plt\nimport pylab\ndef softmax(x):\n    return x * pylab.pi\n"
    "plt.plot([1, 2], [3, 4])\nplt.semilogy([1, 2], pylab.asarray([3, 4]))",
    # inputs built with numpy outside the graded function
    "import numpy as np\nimport torch\ndef softmax(x):\n    return x\nx = torch.from_numpy(np.random.rand(4, 8))\n"
    "print(np.abs(softmax(x).numpy() - 1).max())",
]


# A tensor's memory handed to numpy through the array protocols, by any spelling of the protocol's name; numpy
# itself is then called by a library that wraps it (matplotlib's IdentityTransform().transform is np.asanyarray).
MEMORY_PROTOCOLS = [
    "class M:\n    def __init__(self, t):\n        self.__array_interface__ = {'data': (t.data_ptr(), False)}\n"
    "def softmax(x):\n    return M(x)",
    "class M:\n    __array_interface__ = property(lambda s: {})\ndef softmax(x):\n    return M()",
    "class M:\n    def __array__(self, dtype=None):\n        return 1\ndef softmax(x):\n    return M()",
    "import types\ndef softmax(x):\n    return types.SimpleNamespace(__cuda_array_interface__={})",
    "def softmax(x):\n    return type('M', (), {'__array_interface__': {}})",
    "def softmax(x):\n    return x.__dlpack__()",
]
# ... and the names computed, so that no literal names them: the class or keywords built from computed names
TENSOR_CLASSES_BUILT = [  # a tensor subclass built by type() rather than a class statement
    "import torch\nS = type('S', (torch.Tensor,), {})",
    "import torch\nS = type('S', (torch.Tensor,), dict(__torch_dispatch__=classmethod(print)))",
    "S = type('S', (object,), dict(__torch_dispatch__=classmethod(print)))",
    # an operator of one's own named in torch's namespace (taken for torch's by the rules), or by a computed name
    "import torch\n@torch.library.custom_op('aten::empty.mine', mutates_args=())\ndef f(x: torch.Tensor) -> torch.Tensor:\n    return x",
    "import torch\nname = 'my' + 'lib::f'\nf = torch.library.custom_op(name, lambda x: x, mutates_args=())",
    # an implementation added to the operator table of one of torch's own subclasses
    "from torch.nested._internal.ops import register_jagged_func",
    "from torch.masked.maskedtensor._ops_refs import register_dispatch_func",
    "import torch\ntorch.sparse.SparseSemiStructuredTensorCUTLASS._load_dispatch_table(custom_dispatch_table={})",
]


@pytest.mark.parametrize("snippet", TENSOR_CLASSES_BUILT)
def test_tensor_classes_built_by_type_and_dispatch_keywords_are_reported(snippet):
    assert "escape" in rules(snippet), audit(snippet)


COMPUTED_NAMESPACES = [
    "def softmax(x):\n    k = '__array_' + 'interface__'\n    return type('M', (), {k: {}})",
    "import types\ndef softmax(x):\n    k = '__array_' + 'interface__'\n    return types.SimpleNamespace(**{k: {}})",
]


@pytest.mark.parametrize("snippet", MEMORY_PROTOCOLS)
def test_array_protocols_in_graded_code_are_reported(snippet):
    found = audit(snippet, entry="softmax", forbidden_calls=forbidden_calls_for(specs.get("softmax")),
                  outside_torch=True)
    assert "outside-torch" in {f.rule for f in found}, found


@pytest.mark.parametrize("snippet", COMPUTED_NAMESPACES)
def test_classes_and_keywords_of_computed_names_are_reported(snippet):
    assert "dynamic-code" in rules(snippet), audit(snippet)


GC_REACHES = ["import gc\ndef f():\n    return gc.get_objects()", "from gc import get_referrers",
              "from gc import *", "import gc\ndef f(m):\n    return m\nf(gc)",
              "import gc as g\ndef f():\n    return g.get_referrers(f)", "import gc\ngc.callbacks.append(print)"]


@pytest.mark.parametrize("snippet", GC_REACHES)
def test_gc_beyond_its_switches_is_reported(snippet):
    assert "forbidden-import" in rules(snippet), audit(snippet)


def test_a_profiler_in_the_graded_code_of_a_tensor_exercise_is_reported():
    """The grader times a checked call's kernels with torch's profiler (one Kineto session): a profiler of the
    code's own inside the graded function would end or replace it. At the module's level (a notebook's
    profiling cell) and in a measuring exercise (02 teaches the profiler) it is the learner's to use."""
    inside = "import torch\ndef softmax(x):\n    with torch.profiler.profile():\n        pass\n    return x"
    module = "import torch\nwith torch.profiler.profile() as p:\n    pass\ndef softmax(x):\n    return x"
    tensor_exercise = dict(entry="softmax", forbidden_calls=forbidden_calls_for(specs.get("softmax")), outside_torch=True)
    assert "grader-state" in {f.rule for f in audit(inside, **tensor_exercise)}
    assert audit(module, **tensor_exercise) == [] and audit(inside, entry="softmax") == []


@pytest.mark.parametrize("snippet", NUMPY_ON_VALUES)
def test_numpy_on_values_in_graded_code_is_reported(snippet):
    found = audit(snippet, entry="softmax", forbidden_calls=forbidden_calls_for(specs.get("softmax")),
                  outside_torch=True)
    assert "outside-torch" in {f.rule for f in found}, found
    # the measuring exercises compute numbers: numpy is theirs to use
    assert "outside-torch" not in {f.rule for f in audit(snippet, entry="softmax")}


@pytest.mark.parametrize("snippet", NUMPY_CONFIGURATION)
def test_numpy_on_configuration_or_outside_graded_code_is_not_reported(snippet):
    assert audit(snippet, entry="softmax", forbidden_calls=forbidden_calls_for(specs.get("softmax")),
                 outside_torch=True) == []


def test_a_helper_module_may_use_numpy_at_import_but_not_in_its_functions():
    table = "import numpy as np\nTABLE = np.asarray([1, 2, 4])\n"
    assert audit(table, outside_torch=True) == []
    assert {f.rule for f in audit(table + "def rows(x):\n    return np.exp(x)\n", outside_torch=True)} == {
        "outside-torch"}


def test_a_path_is_judged_by_the_object_it_reaches():
    from autograder.audit import canonical

    assert canonical("torch.os.fork") == "os.fork"
    assert canonical("torch.builtins.exec") == "builtins.exec"
    assert canonical("torch.serialization.load") == "torch.load"
    assert canonical("torch.inspect.getclosurevars") == "inspect.getclosurevars"
    assert canonical("pylab.asarray") == canonical("matplotlib.pylab.asarray") == "numpy.asarray"
    assert canonical("matplotlib.pyplot.plot") == "matplotlib.pyplot.plot"
    assert canonical("torch.softmax") == "torch.softmax"
    assert canonical("rowpkg.kern.softmax") == "rowpkg.kern.softmax"  # not installed: never imported, as spelled


def test_the_rule_paths_left_out_of_the_identity_table_are_modules():
    """The table of the objects the rules name (audit._known) skips walking these paths: it keeps functions
    and classes only, and walking them costs a grading process 1.3 s of imports."""
    import types

    from autograder import audit

    for path in audit._MODULES_NOT_WALKED:
        assert path in audit._PATH_RULES, path
        spelled, obj = audit._walk(path)
        assert spelled == path and isinstance(obj, types.ModuleType), (path, spelled, obj)
        parent, _, name = path.rpartition(".")
        for code in (f"import {path}\n", f"from {parent} import {name}\n"):  # still reported under its rule
            assert [f.rule for f in audit.audit(code)] == ["escape"], code


# ------------------------------------------------------------------------------------------ cheating code

CHEATS = {
    # rule: [snippets that must be reported under it]
    "grader-import": [
        "import autograder",
        "import autograder.grading",
        "from autograder import grading",
        "from autograder.nbgrader import grade",
        "from autograder import check, legality",
        "from autograder import *",
        "def f(m):\n    return m.probes",  # the grader's module read through a parameter
    ],
    "reference-import": [
        "import kernels_ref",
        "from kernels_ref.softmax import softmax",
        "import kernels_ref.matmul as m",
    ],
    "forbidden-import": ["import gc\ngc.get_objects()", "import inspect\ninspect.stack()"] + [f"import {m}" for m in (
        "ctypes", "builtins", "subprocess", "socket", "multiprocessing",
        "threading", "signal", "_signal", "pickle", "marshal", "shutil", "tempfile", "atexit", "_thread",
        "concurrent.futures", "unittest.mock", "urllib.request", "cupy", "numba.cuda", "jax.numpy", "zipimport", "pkgutil")] + [
        "from ctypes import *", "from importlib import import_module", "import importlib\nimportlib.reload(m)",
        # a dotted name given as a string, imported and walked by a resolver
        "import pydoc\nm = pydoc.locate('json.dumps')",
        "from importlib.metadata import EntryPoint\nf = EntryPoint(name='a', value='json:dumps', group='g').load()",
        "import string\nv = string.Formatter().get_field('0.sys', (1,), {})",
        "import logging.config\nv = logging.config.BaseConfigurator({}).resolve('json')",
        "from tornado.util import import_object\nv = import_object('json')",
        "from traitlets.utils.importstring import import_item\nv = import_item('json')",
        # reloading a library sheds what the grader set up in it; a module imported by a computed name that
        # leaves the function which imported it (returned, kept, rebound) is a name the audit cannot see
        "import importlib, torch\nimportlib.reload(torch)", "import importlib\nimport triton.runtime.jit as j\nimportlib.reload(j)",
        "import importlib\ndef f(p):\n    pkg = importlib.import_module(p)\n    return pkg.__version__, pkg",
        # a module read as another module's attribute through a parameter: judged by the name it is read by
        "import triton.runtime.interpreter as i\ninspect = (lambda m: m.inspect)(i)",
        "import triton.knobs\nload = (lambda m: m.importlib.import_module)(triton.knobs)",
        "def f(m):\n    return m.gc.get_referrers",
        "import importlib\ndef f(p):\n    pkg = importlib.import_module(p)\n    return pkg.asarray",
        "import importlib\ndef f(p):\n    global pkg\n    pkg = importlib.import_module(p)\n    return pkg.__version__",
        "import importlib\nnp = importlib.import_module('num' + 'py')",
        "import importlib.util as u\nu.spec_from_file_location('h', 'h.py')", "from multiprocessing import Process",
        "import pickle as p", "from unittest import mock",
        # a forbidden module reached as an attribute of an allowed one is that module
        "import torch\nfn = torch.inspect.getclosurevars", "import torch\ntorch.ctypes.CDLL('lib.so')",
        "import torch\nm = torch.importlib.import_module('autog' + 'rader.probes')",
        "import torch\nfrom torch import inspect as i", "import torch\ngetattr(torch, 'inspect').stack()",
        "import torch\ntorch.builtins.exec('x = 1')",
    ],
    # judged where they run (autograder.runtime_audit): refused when they change the environment
    "environment": [
        "import os\nos.environ['CUDA_LAUNCH_BLOCKING'] = '1'",
        "import os\nos.environ.update(A='1')",
        "import os\ndel os.environ['HOME']",
        "import os\nos.putenv('A', '1')",
        "import os\nos.environ.setdefault('TRITON_INTERPRET', '1')",
    ],
    "process": [
        "import sys\nm = sys.modules['autograder']",
        "import logging\nm = logging.sys.modules['autog' + 'rader.legality']",
        "import os\ns = os.sys",
        # os reached as torch.os is os: what it IS decides, not how it is spelled
        "import torch\n_os = torch.os\npid = _os.fork()", "import torch\nr, w = torch.os.pipe()",
        "import torch\ntorch.os.posix_spawn('/bin/sh', ['sh'], {})", "import torch\nfrom torch.os import system",
        "import triton.runtime.build as b\nb._build('m', 'src.c', '/tmp', [], [], [])",
        "import sys\nsys.modules['torch'].softmax = None",
        "from sys import modules",
        "import sys\nsys.settrace(None)",
        "import sys\nsys.setprofile(None)",
        "import sys\nf = sys._getframe(1)",
        "import sys\nsys.meta_path.insert(0, object())",
        "import sys as s\nhook = s.settrace",
        "import os\nos.write(1, b'x')",
        "import os\nfd = os.open('/tmp/x', 0)",
        "import os\nos.system('ls')",
        "import os\npid = os.fork()",
        "import os\nos.execv('/bin/sh', ['sh'])",
        "import os\nos.spawnl(0, '/bin/sh', 'sh')",
        "import os\nos.kill(1, 9)",
        "import os\nos.dup2(1, 2)",
        "import os\nos.remove('x')",
        "import os\nos.replace('a', 'b')",
        "import os\nos.rename('a', 'b')",
        "import os\nos.makedirs('d')",
        "from os import system\nsystem('ls')",
        "import os as o\nrun = o.popen",
        "import torch.multiprocessing as mp",
        "import torch\ntorch.distributed.init_process_group('gloo')",
    ],
    "patching": [
        "import torch\ntorch.softmax = lambda x, dim: x",
        "import torch\ntorch.cuda.Event.elapsed_time = lambda self, end: 0.001",
        "import time\ntime.perf_counter = lambda: 0.0",
        "import torch as t\nt.softmax = None",
        "from torch import cuda\ncuda.Event.x = None",
        "import torch\nE = torch.cuda.Event\nE.elapsed_time = None",
        "from torch.cuda import Event as Ev\nEv.elapsed_time = None",
        "import torch\ntorch.cuda.synchronize = lambda: None",
        "import triton\ntriton.testing.do_bench = lambda fn: 0.001",
        "import course\ncourse.synchronize = lambda: None",
        "import torch\ntorch.x += 1",
        "import torch\ndel torch.softmax",
        "import torch\nsetattr(torch, 'softmax', None)",
        "import time\ndelattr(time, 'perf_counter')",
        "def f(x):\n    type(x).__add__ = None",
        "import torch\nT = type(torch.empty(1))\nT.sum = None",
        "import torch\n[torch][0].softmax = None",
        "import torch, time\nfor mod in (torch, time):\n    mod.patched = True",
        "import torch\ngetattr(torch, 'cuda').Event.elapsed_time = None",
        "import torch\nmods = {'t': torch}\nmods['t'].softmax = None",
        "def setup():\n    import time as tm\n    tm.perf_counter = None",
        "import torch\ndef setup():\n    global T\n    T = torch\nT.softmax = None",
        "import torch\ntorch.backends.cuda.matmul.allow_tf32 = False",
        "from autograder import check\ncheck.x = None",
        "import torch\nclass Fake(torch.cuda.Event):\n    pass\ntorch.cuda.Event = Fake",
        "from triton.runtime.jit import JITFunction\nclass Quiet(JITFunction):\n    pass",
        # module objects that travel through the learner's own functions, attributes and containers
        "import torch\ndef get():\n    return torch\nget().softmax = None",
        "import torch\ndef get():\n    return torch\nm = get()\nm.softmax = None",
        "import time\nclock = lambda: time\nc = clock()\nc.perf_counter = None",
        "import torch\nclass Box:\n    def __init__(self):\n        self.t = torch\n    def go(self):\n        self.t.softmax = None",
        "import torch\nclass Box:\n    t = torch\nBox.t.softmax = None",
        "import torch\nbox = {}\nbox['t'] = torch\nbox['t'].softmax = None",
        "import torch\nbox = []\nbox.append(torch)\nbox[0].softmax = None",
        "import torch\n(t := torch).softmax = None",
        "def make():\n    return object()\nmake().x = None",
        "import triton\n@triton.jit\ndef k(x):\n    pass\nk.run = lambda *a, **kw: None",
    ],
    "dynamic-code": [
        "import timeit\ntimeit.timeit('x = (', number=1)", "import timeit\nS = 'x'\ntimeit.Timer(stmt=S)",
        "import timeit\nS = 'import os'\ntimeit.repeat(lambda: 1, setup=S)",
        "import typing\ndef f(a: 'out.append(1)'):\n    pass\ntyping.get_type_hints(f, localns={})",
        "import torch.hub\nm = torch.hub._import_module('h', 'h.py')",
        "import torch\nm = torch.serialization.load(open('w.pt', 'rb'), weights_only=False)",
        "import cProfile\ncProfile.run('import torch')",
        "import torch.fx\ntorch.fx.graph_module._exec_with_source('x = 1', {})",
        "import torch\nimp = torch.package.PackageImporter('p.zip')",
        "import functools\nfunctools.partial(setattr, object)('note', None)",
        "get = getattr\nv = get(object, 'x')",
        "f = list(map(delattr, [object], ['x']))",
        "import torch\nf = vars(torch)['softmax']",
        "exec('x = 1')",
        "y = eval('1 + 1')",
        "c = compile('1', '<s>', 'eval')",
        "os = __import__('os')",
        "globals()['torch'] = None",
        "globals().update(x=1)",
        "g = globals()",
        "locals()['x'] = 1",
        "import torch\nvars(torch)['softmax'] = None",
        "import torch\nname = 'soft' + 'max'\nf = getattr(torch, name)",
        "import torch\nname = 'softmax'\nsetattr(torch, name, None)",
        "import operator, os\noperator.setitem(os.environ, 'A', '1')",
        "import types\nf = types.FunctionType(compile('1', 's', 'eval'), {})",
        "from builtins import exec as run",
        "e = exec\ne('1')",
        "import torch, io\nf = torch.load(io.BytesIO(b''), weights_only=False)",
        "import numpy as np\na = np.load('x.npy', allow_pickle=True)",
        "import numpy as np\na = np.load('x.npy', None, True)",
        "import numpy as np\na = np.load('x.npy', **{'allow_pickle': True})",
        "import torch\nkw = {'weights_only': False}\nm = torch.load('w.pt', **kw)",
    ],
    "outside-torch": [
        "import triton.runtime.interpreter as i\nnp = (lambda m: m.np)(i)",
        "import torch.nn.functional as F\ndef f(m):\n    return m.numpy\narray = f(F)",
    ],
    "escape": [
        "import torch._refs\ny = torch._refs.nn.functional.gelu",
        "from torch._decomp import decomposition_table",
        "import torch\nt = torch._prims",
        "s = ().__class__.__bases__[0].__subclasses__()",
        "def f():\n    pass\ng = f.__globals__",
        "def f():\n    pass\nc = f.__code__",
        "b = __builtins__",
        "import torch\ntorch.__dict__['softmax'] = None",
        "import torch\nd = torch.nn.functional.__dict__",
        "class T:\n    def __torch_dispatch__(self, func, types, args=(), kwargs=None):\n        pass",
        "class T:\n    @classmethod\n    def __torch_function__(cls, func, types, args=(), kwargs=None):\n        pass",
        "import torch\nclass T(torch.Tensor):\n    pass",
        "from torch import Tensor\nclass T(Tensor):\n    pass",
        "from torch.utils._python_dispatch import TorchDispatchMode\nclass M(TorchDispatchMode):\n    pass",
        "from torch.overrides import TorchFunctionMode",
        "from torch.utils._mode_utils import no_dispatch\nwith no_dispatch():\n    pass",
        # operators called below the Python dispatch key, by torch's top-level names too
        "import torch\ny = torch.ops.aten.mm.out.redispatch(torch.DispatchKeySet(torch.DispatchKey.CPU), 1, 2)",
        "import torch\nk = torch.DispatchKeySet",
        "from torch import DispatchKey\nk = DispatchKey.CPU",
        "import torch\nwith torch.ExcludeDispatchKeyGuard(None):\n    pass",
        "import torch\nwith torch.DisableTorchFunction():\n    pass",
        "import torch\nwith torch._C._DisablePythonDispatcher():\n    pass",
        "def f(op, k):\n    return op._op_dk(k)",
        "def f(h, k):\n    return h.redispatch_boxed(k)",
        "import torch\nwith torch.utils._mode_utils.no_dispatch():\n    pass",
        "import torch\ntorch._C._set_grad_enabled(True)",
        "def f(x):\n    x.__class__ = int",
        "import triton\nraw = triton.JITFunction.run.__wrapped__",
        "object.__setattr__(object(), 'a', 1)",
        "def f(a=1):\n    pass\nf.__defaults__ = (2,)",
        "def f():\n    pass\ng = getattr(f, '__globals__')",
        "import numpy\np = numpy.ctypeslib.as_array",
        "import torch.utils\nstack = (lambda m: m._python_dispatch._get_current_dispatch_mode_stack)(torch.utils)",
        "import torch\noff = (lambda t: t._C.DisableTorchFunction)(torch)",
        "import torch.utils\nmodes = (lambda m: m._mode_utils)(torch.utils)",
    ],
    "grader-state": [
        "import torch.utils.deterministic",
        "import torch\npoisoned = torch.utils.deterministic.fill_uninitialized_memory",
        "import torch\ntorch.use_deterministic_algorithms(False)",
        "import os\nworker = os.environ.get('AUTOGRADER_WORKER')",
        "import traceback\nframes = traceback.extract_stack()",
        "import logging\nf = logging.currentframe()",
        "import logging\ncaller = logging.getLogger(__name__).findCaller(stacklevel=2)",
        "def f(g):\n    return g.gi_frame.f_back",
        "def f(e):\n    return e.__traceback__.tb_frame",
        "def f(x):\n    return getattr(x, 'f_locals')",
    ],
    "file-write": [
        "open('out.txt', 'w').write('x')",
        "f = open('out.txt', mode='a')",
        "f = open('out.bin', 'xb')",
        "f = open('out.txt', 'r+')",
        "m = 'w'\nf = open('out.txt', m)",
        "f = open('out.txt', **{'mode': 'w'})",
        "kw = {'mode': 'w'}\nf = open('out.txt', **kw)",
        "a = ('out.txt', 'w')\nf = open(*a)",
        "import fileinput\nfh = fileinput.input(*['a.py'], True)",
        "from pathlib import Path\nPath('out.txt').write_text('x')",
        "from pathlib import Path\nPath('out.bin').write_bytes(b'x')",
        "from pathlib import Path\nfh = Path('out.txt').open('w')",
        "import torch\ntorch.save({}, 'x.pt')",
        "import numpy as np\nnp.save('x.npy', np.zeros(1))",
        "import matplotlib.pyplot as plt\nplt.savefig('fig.png')",
        "import io\nfh = io.open('x', 'w')",
        # fileinput rewrites the files it reads in place; logging's file handlers write theirs
        "import fileinput\nfor line in fileinput.input(__file__, inplace=True):\n    print(line, end='')",
        "from fileinput import FileInput\nfh = FileInput(['a.py'], True)",
        "import fileinput\nfh = fileinput.input('a.py', **{'inplace': True})",
        "import fileinput\nkw = dict(inplace=True)\nfh = fileinput.input('a.py', **kw)",
        "import logging\nh = logging.FileHandler(__file__, mode='w')",
        "import logging.handlers\nh = logging.handlers.RotatingFileHandler('log.txt')",
        "from pathlib import Path\nsave = Path('x').write_text\nsave('data')",
    ],
}


@pytest.mark.parametrize("rule,snippet", [(r, s) for r, snippets in CHEATS.items() for s in snippets],
                         ids=[f"{r}:{s.splitlines()[-1][:40]}" for r, snippets in CHEATS.items() for s in snippets])
def test_each_cheat_is_reported_under_its_rule(rule, snippet):
    found = audit(snippet)
    assert rule in {f.rule for f in found}, found
    assert all(f.line >= 1 and f.message for f in found)


def test_torch_timer_statements_are_code_in_a_tensor_exercise_and_a_measurement_in_00():
    """torch.utils.benchmark.Timer runs its statement through timeit's template and takes no function: in an
    exercise judged on tensors the text is code the audit cannot read; 00's benchmark may time with it."""
    snippet = "import torch.utils.benchmark as b\nS = 'y = 1'\nb.Timer(stmt=S).timeit(1)"
    assert "dynamic-code" in {f.rule for f in audit(snippet, outside_torch=True)}
    assert audit(snippet) == []


@pytest.mark.parametrize("runner", ["import timeit\ntimeit.timeit({}, globals=globals())",
                                    "import timeit\ntimeit.repeat({}, globals=globals(), number=1)",
                                    "import torch.utils.benchmark as b\nb.Timer({}, globals=globals()).timeit(3)"])
def test_a_literal_statement_is_audited_as_code_and_may_run(runner):
    """A statement given as a string literal (timeit's documented form, torch's Timer, which takes no
    function) is source the audit reads: audited as the module's code at the call's line, it may run
    (the worker lets exactly the audited statements run); what it does is judged like any other line."""
    honest = "def softmax(x):\n    return x\nx = 1\n" + runner.format(repr("softmax(x)"))
    assert audit(honest, outside_torch=True) == []
    for cheat, rule in (("import ctypes", "forbidden-import"), ("import os; os.system('ls')", "process"),
                        ("torch.softmax = None", "patching"), ("exec('1')", "dynamic-code")):
        found = audit("import torch\n" + runner.format(repr(cheat)), outside_torch=True)
        assert [(f.line, f.rule) for f in found if f.rule == rule][:1] == [(3, rule)], (cheat, found)



def test_literal_statements_a_loop_hands_over_are_audited_as_code():
    # PyTorch's benchmark recipe: a loop over labelled literal statements, each handed to the Timer
    loop = ("import torch.utils.benchmark as b\nx = [1]\nfor label, stmt in (('mine', {!r}), ('torch', 'len(x)')):\n"
            "    b.Timer(stmt=stmt, globals={{'x': [1]}}).timeit(1)\n")
    assert audit(loop.format("len(x)"), outside_torch=True) == []
    assert literal_statements(loop.format("len(x)")) == ["len(x)", "len(x)"]
    found = audit(loop.format("exec('1')"), outside_torch=True)
    assert [(f.line, f.rule) for f in found] == [(3, "dynamic-code")], found   # named by the literal's line
    # a loop variable the body rebinds, or a loop over anything but literals, is text the audit cannot read
    for body in ("for stmt in ('len(x)',):\n    stmt = stmt + '1'\n    b.Timer(stmt=stmt).timeit(1)\n",
                 "for stmt in names:\n    b.Timer(stmt=stmt).timeit(1)\n"):
        found = audit("import torch.utils.benchmark as b\nnames = ['len(x)']\n" + body, outside_torch=True)
        assert "dynamic-code" in {f.rule for f in found}, (body, found)


def test_a_literal_statement_reads_the_names_its_runners_namespace_binds():
    """Timer(stmt="softmax(x)", globals={"softmax": softmax, "x": data}): the statement's names are bound in
    the namespace given beside it, to the values written there, which are judged as the statement's own."""
    source = ("import torch\nimport torch.utils.benchmark as benchmark\ndef softmax(x):\n    return x\n"
              "_x = torch.randn(4)\n"
              "for label, stmt in (('mine', 'softmax(x)'), ('torch', 'torch.softmax(x, -1)')):\n"
              "    benchmark.Timer(stmt=stmt, globals={'softmax': softmax, 'torch': torch, 'x': _x}).timeit(2)\n")
    found = audit(source, entry="softmax", forbidden_calls=forbidden_calls_for(specs.get("softmax")), outside_torch=True)
    assert {f.rule for f in found} <= {"forbidden-call"}, found  # torch.softmax timed beside: a note where nothing ran it
    cheat = source.replace("'x': _x", "'x': __import__('os')")
    assert "dynamic-code" in {f.rule for f in audit(cheat, entry="softmax", outside_torch=True)}


def test_every_rule_has_cheats_and_a_plain_message():
    assert set(CHEATS) | {"feature", "forbidden-call", "kept-state", "kernel-library", "outside-torch"} == set(RULES)
    msg = audit("import torch\nE = torch.cuda.Event\nE.elapsed_time = None")[0]
    assert msg.line == 3 and "E.elapsed_time" in msg.message and "torch.cuda.Event" in msg.message


@pytest.mark.parametrize("feature,snippet", [
    ("compile", "import torch\nf = torch.compile(lambda x: x)"),
    ("compile", "import torch\n@torch.compile\ndef f(x):\n    return x"),
    ("compile", "from torch import compile as c\nf = c(len)"),
    ("compile", "import torch._dynamo"),
    ("cuda_graphs", "import torch\ng = torch.cuda.CUDAGraph()"),
    ("cuda_graphs", "import torch\nwith torch.cuda.graph(None):\n    pass"),
    ("cuda_graphs", "import torch\nf = torch.cuda.make_graphed_callables(len, ())"),
    ("streams", "import torch\ns = torch.cuda.Stream()"),
    ("streams", "import torch\nwith torch.cuda.stream(None):\n    pass"),
    ("streams", "import torch\ns = torch.cuda.current_stream()"),
    ("streams", "def f(y, s):\n    y.record_stream(s)"),
    ("jit", "import torch\nf = torch.jit.script(len)"),
    ("jit", "from torch.jit import trace"),
    ("library", "import torch\nlib = torch.library.Library('x', 'DEF')"),
    ("library", "from torch.utils.cpp_extension import load_inline"),
])
def test_features_are_reported_unless_allowed(feature, snippet):
    found = audit(snippet)
    assert any(f.rule == "feature" and feature in f.message for f in found), found
    assert not [f for f in audit(snippet, allow=frozenset({feature})) if f.rule == "feature"]


def test_unknown_feature_names_are_an_error():
    with pytest.raises(ValueError, match="unknown feature"):
        audit("x = 1", allow=frozenset({"graphs"}))
    assert set(FEATURES) == {"compile", "cuda_graphs", "streams", "jit", "library"}


# ------------------------------------------------------------------------------------------ forbidden operators

SOFTMAX = frozenset({"softmax", "log_softmax"})


@pytest.mark.parametrize("snippet", [
    "import torch\ndef softmax(x):\n    return torch.softmax(x, -1)",
    "import torch.nn.functional as F\ndef softmax(x):\n    return F.softmax(x, dim=-1)",
    "import torch\ndef softmax(x):\n    return torch.nn.functional.softmax(x, -1)",
    "def softmax(x):\n    return x.softmax(-1)",
    "def softmax(x):\n    return x.float().log_softmax(-1).exp()",
    "from torch import nn\ndef softmax(x):\n    return nn.Softmax(dim=-1)(x)",
    "from torch.nn.functional import softmax as sm\ndef softmax(x):\n    return sm(x, -1)",
    "import torch\nsm = torch.softmax\ndef softmax(x):\n    return sm(x, -1)",
    "import torch\ndef softmax(x):\n    return getattr(torch, 'softmax')(x, -1)",
    "import torch\ndef softmax(x):\n    return torch.special.softmax(x, -1)",
    "import torch\ndef softmax(x):\n    return torch.Tensor.softmax(x, -1)",
    "import torch\nsoftmax = torch.softmax",
    "from torch.nn.functional import softmax",
    "import functools, torch\nsoftmax = functools.partial(torch.softmax, dim=-1)",
    "import torch\ndef _helper(x):\n    return torch.softmax(x, -1)\ndef softmax(x):\n    return _helper(x)",
    "import torch\nclass K:\n    def run(self, x):\n        return torch.softmax(x, -1)\ndef softmax(x):\n    return K().run(x)",
])
def test_forbidden_operators_are_reported_in_the_entry_points_code(snippet):
    found = audit(snippet, forbidden_calls=SOFTMAX, entry="softmax")
    assert found and {f.rule for f in found} == {"forbidden-call"}, found


def test_forbidden_operators_elsewhere_in_the_notebook_do_not_count():
    source = textwrap.dedent("""
        import torch
        import triton.language as tl
        def naive_attention(q, k, v):
            return torch.softmax(q @ k.transpose(-1, -2), -1) @ v   # another exercise allows it
        def check_against_torch(x):
            return torch.softmax(x, -1)                            # a comparison the learner runs
        def softmax(x):
            return x
        print(check_against_torch(torch.ones(2, 2)))
    """)
    assert audit(source, forbidden_calls=SOFTMAX, entry="softmax") == []
    assert {f.line for f in audit(source, forbidden_calls=SOFTMAX)} == {5, 7}  # whole source without entry


def test_aten_names_from_the_spec_match_torch_paths_and_spellings():
    ln = forbidden_calls_for(specs.get("layer_norm_fwd"))
    assert "native_layer_norm" in ln and "layer_norm" in ln and "LayerNorm" in ln
    found = audit("import torch\ndef layer_norm_fwd(x, w, b, eps):\n    return torch.ops.aten.native_layer_norm(x)",
                  forbidden_calls=ln, entry="layer_norm_fwd")
    assert found and "write it in your kernel" in found[0].message  # the spec's own reason
    # 08 allows torch matmuls on chunks (mm): `@` is not forbidden there, but is in 06's matmul
    assert "@" not in forbidden_calls_for(specs.get("linear_cross_entropy"))
    assert "@" in forbidden_calls_for(specs.get("matmul"))
    assert forbidden_calls_for(specs.get("benchmark")) == {}       # allowed_ops None: any operator
    assert "softmax" in forbidden_calls_for(specs.get("naive_attention"))  # 01's attention: "use your naive_softmax"
    assert set(SPELLINGS) <= set(forbidden_calls_for(specs.get("vector_add"))) | set(SPELLINGS)


def test_matmul_operator_outside_kernels():
    mm = forbidden_calls_for(specs.get("matmul"))
    src = "def matmul(a, b):\n    c = a @ b\n    c @= b\n    return a.matmul(b) + a.__matmul__(b)"
    assert [f.line for f in audit(src, forbidden_calls=mm, entry="matmul")] == [2, 3, 4]


def test_cheating_test_submissions_are_reported():
    def found(name, exercise):
        spec = specs.get(exercise)
        source = load(ROOT / "tests/submissions" / name).source
        return audit(source, forbidden_calls=forbidden_calls_for(spec), entry=spec.entry)

    assert {f.line for f in found("uses_torch_softmax.py", "softmax")} == {10}
    assert {f.line for f in found("uses_torch_softmax.py", "bias_gelu")} == {14}
    assert {f.line for f in found("uses_torch_softmax.py", "naive_softmax")} == {18}
    assert {f.line for f in found("attention_calls_softmax.py", "naive_attention")} == {8}  # "use naive_softmax"
    assert {f.rule for f in found("patches_grader.py", "softmax")} == {"forbidden-import", "patching", "grader-import"}
    assert [f.rule for f in found("uses_kernels_ref.py", "softmax")] == ["reference-import"]
    # the file the grader audited, rewritten in place by fileinput for the next exercise's worker
    assert [(f.rule, f.line) for f in found("escape_rewrites_its_source.py", "online_softmax")] == [("file-write", 17)]
    later = load(ROOT / "tests/submissions/later/uses_torch_ops_05_08.py").source
    for spec in specs.EXERCISES.values():  # (an exercise that allows every torch operator forbids none)
        if spec.notebook.startswith(("05", "06", "07", "08")) and spec.rules.allowed_ops is not None:
            assert audit(later, forbidden_calls=forbidden_calls_for(spec), entry=spec.entry), spec.id


# ------------------------------------------------------------------------------------------ locations

def test_findings_name_the_notebook_cell_and_line(tmp_path):
    nb = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "markdown", "metadata": {}, "source": "# title"},
        {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
         "source": "import torch\nfrom autograder import check"},
        {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
         "source": "def softmax(x):\n    return x\n\ntorch.cuda.synchronize = lambda: None"},
        {"cell_type": "code", "metadata": {"tags": ["demo"]}, "outputs": [], "execution_count": None,
         "source": "torch.compile(softmax)"},  # demo cells are not graded: not audited
    ]}
    path = tmp_path / "04_fused_softmax.ipynb"
    path.write_text(json.dumps(nb))
    sub = load(path)
    found = audit(sub.source)
    assert [f.rule for f in found] == ["patching"]
    assert violations(found, sub.where)[0].startswith("cell 3, line 4: assigns torch.cuda.synchronize")
    assert Finding(2, "x", "m").describe() == "line 2: m"


KEPT_STATE = [
    "_cache = {}\ndef f(x):\n    if x.shape in _cache:\n        return _cache[x.shape]\n    _cache[x.shape] = y = x * 2\n    return y",
    "_seen = []\ndef f(x):\n    _seen.append(x)\n    return x",
    "last = None\ndef f(x):\n    global last\n    last = x\n    return x",
    "import functools\n@functools.lru_cache\ndef g(n):\n    return n\ndef f(x):\n    return g(x)",
    "_memo = {}\ndef helper(x):\n    _memo.setdefault(1, x)\n    return x\ndef f(x):\n    return helper(x)",
    # a table filled in a helper keyed by its parameter: configuration only if every call passes configuration
    "_t = {}\ndef h(n):\n    _t[n] = n * 2\n    return _t[n]\ndef f(x):\n    return h(x.sum().item())",
    "_t = {}\ndef h(n):\n    _t[n] = n * 2\n    return _t[n]\ndef f(x):\n    return h(x.shape[0]) + h(x)",
    "_t = {}\ndef h(n):\n    _t[n] = n\n    return n\ndef f(x):\n    g = h\n    return g(x)",  # passed on
    # the entry point's parameters come from the grader, whatever its own calls pass
    "_t = {}\ndef f(x, n=1):\n    _t[n] = n\n    if n:\n        f(x, 0)\n    return x",
    # a container kept inside a module-level table (or an object's attribute) lives as long as the table
    "_T = {}\n_T['k'] = []\ndef f(x):\n    _T['k'].append(x)\n    return x",
    "_T = {'k': {}}\ndef f(x):\n    _T['k'][x.shape] = x\n    return x",
    "class S:\n    pass\n_S = S()\n_S.seen = []\ndef f(x):\n    _S.seen.append(x)\n    return x",
]
HONEST_STATE = [
    "TABLE = {1: 2}\ndef f(x):\n    return x * TABLE[1]",                      # reads a constant table
    "def f(x):\n    d = {}\n    d[1] = x\n    return d[1]",                       # a local container
    "results = {}\nresults['a'] = 1\ndef f(x):\n    return x",                  # filled at module level (a demo)
    "_c = {}\ndef other(x):\n    _c[1] = x\ndef f(x):\n    return x",         # not reached from the entry point
    "_T = {'k': {}}\ndef f(x):\n    _T['k'][x.shape[1]] = (16, 4)\n    return x",  # configuration in a nested table
    "import torch\ndef f(x):\n    torch.backends.cuda.matmul.allow_tf32 = True\n    return x",  # a library's switch
]


@pytest.mark.parametrize("snippet", KEPT_STATE)
def test_state_kept_between_calls_is_reported_in_code_the_entry_point_runs(snippet):
    found = audit(snippet, forbidden_calls={"softmax"}, entry="f")
    assert "kept-state" in {f.rule for f in found}, found
    assert any("between calls" in f.message for f in found)


@pytest.mark.parametrize("snippet", HONEST_STATE)
def test_honest_module_state_is_not_reported(snippet):
    assert not [f for f in audit(snippet, forbidden_calls={"softmax"}, entry="f") if f.rule == "kept-state"]


def test_audits_in_threads_never_parse_at_once(monkeypatch):
    """The grader audits exercises side by side in threads; CPython 3.11's AST converter is not safe for
    two threads at once (a spurious SystemError), so every parse takes one lock."""
    import ast
    import threading
    import time
    from concurrent.futures import ThreadPoolExecutor

    from autograder import audit as audit_module

    inside, most = [0], [0]
    counter = threading.Lock()
    real_parse = ast.parse

    def watched_parse(*args, **kwargs):
        with counter:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        time.sleep(0.02)  # long enough that an unlocked parse in another thread would overlap
        try:
            return real_parse(*args, **kwargs)
        finally:
            with counter:
                inside[0] -= 1

    monkeypatch.setattr(audit_module.ast, "parse", watched_parse)
    source = (ROOT / "tests/submissions/later/good_05_08.py").read_text()
    with ThreadPoolExecutor(max_workers=4) as pool:
        found = list(pool.map(lambda _: audit(source, forbidden_calls={"softmax"}, entry="softmax"), range(8)))
    assert most[0] == 1
    assert all(f == found[0] for f in found)


# Honest patterns of public kernels: none of them is a finding (they keep every point they earn).
HONEST_PATTERNS = {
    "reloading a helper module imported by name (picking up its edits)": """
        import importlib
        import rowkern
        importlib.reload(rowkern)
        from rowkern import softmax
        def f(x):
            return softmax(x)
    """,
    "a version check that imports the package it is given (Liger-Kernel's compare_version)": """
        import importlib
        import operator
        def compare_version(package, op, target):
            try:
                pkg = importlib.import_module(package)
            except ImportError:
                return False
            return op(tuple(pkg.__version__.split(".")), tuple(target.split(".")))
        def version_of(package):
            return importlib.import_module(package).__version__
        NEW = compare_version("triton", operator.ge, "3.0.0")
        def f(x):
            return x
    """,
    "own method named like a torch function": """
        import torch
        class FusedHead:
            def __init__(self, weight):
                self.weight = weight
            def linear(self, x):
                return torch.empty(x.shape[0], self.weight.shape[0], device=x.device, dtype=x.dtype)
        def f(x, w):
            return FusedHead(w).linear(x)
    """,
    "launch configuration from an lru_cache'd helper": """
        import functools
        import torch
        import triton
        @functools.lru_cache(maxsize=None)
        def _config(n_cols, dtype):
            block = triton.next_power_of_2(n_cols)
            return block, 4 if block < 2048 else 8
        def f(x):
            m, n = x.shape
            block, warps = _config(n, x.dtype)
            return torch.empty_like(x)
    """,
    "a module-level table of launch configurations": """
        import torch
        import triton
        _CONFIGS = {}
        def f(x):
            key = (x.shape[-1], x.dtype)
            if key not in _CONFIGS:
                _CONFIGS[key] = dict(BLOCK=triton.next_power_of_2(x.shape[-1]), num_warps=4)
            return torch.empty_like(x)
    """,
    "a table of compiled kernels by block size and warps (Triton's fused-softmax tutorial)": """
        import torch
        import triton
        import triton.language as tl
        @triton.jit
        def _k(x_ptr, BLOCK: tl.constexpr):
            pass
        kernels = {}
        def f(x):
            block, warps = triton.next_power_of_2(x.shape[1]), 8
            kernel = kernels.get((block, warps))
            if kernel is None:
                kernels[block, warps] = kernel = _k
            return torch.empty_like(x)
    """,
    "a configuration table filled in a helper keyed by its own parameter": """
        import torch
        import triton
        _SETTINGS = {}
        def settings(n, elem=2):
            if n not in _SETTINGS:
                _SETTINGS[n] = (triton.next_power_of_2(n), 4 if n * elem < 4096 else 8)
            return _SETTINGS[n]
        def f(x):
            block, warps = settings(x.shape[-1], elem=x.element_size())
            return torch.empty_like(x)
    """,
    "importlib in a version check": """
        import importlib
        import importlib.metadata
        from importlib.util import find_spec
        HAS_TRITON = find_spec("triton") is not None
        TRITON_VERSION = importlib.metadata.version("triton")
        def f(x):
            return x
    """,
}


@pytest.mark.parametrize("name", sorted(HONEST_PATTERNS))
def test_honest_patterns_of_public_kernels_are_not_findings(name):
    found = audit(textwrap.dedent(HONEST_PATTERNS[name]), forbidden_calls={"linear", "softmax", "matmul"}, entry="f")
    assert found == [], found


def test_a_configuration_cache_still_reports_one_that_keeps_tensors():
    src = "import torch\n_c = {}\ndef f(x):\n    _c[x.shape] = x * 2\n    return _c[x.shape]"
    assert [f.rule for f in audit(src, forbidden_calls={"softmax"}, entry="f")] == ["kept-state"]


@pytest.mark.parametrize("src", ["import io\nf = io.FileIO(3, 'w')", "import io\nf = io.FileIO(fd, mode='wb')"])
def test_writing_an_inherited_descriptor_through_fileio_is_a_finding(src):
    assert "file-write" in {f.rule for f in audit(src)}


def test_a_hook_registered_by_a_statement_is_code_the_entry_point_reaches():
    src = textwrap.dedent("""
        import torch
        import triton
        def _fill(x, y, *args, **kwargs):
            y.copy_(torch.softmax(x, -1))
        @triton.jit
        def _one(x_ptr, y_ptr):
            pass
        _one.add_pre_run_hook(_fill)
        def softmax(x):
            y = torch.empty_like(x)
            _one[(1,)](x, y)
            return y
    """)
    found = audit(src, forbidden_calls={"softmax"}, entry="softmax")
    assert [(f.line, f.rule) for f in found] == [(5, "forbidden-call")], found


# Spellings of what an exercise already allows (a constant-filled tensor, a mask's negation, 2**x, the square
# root of the variance): the operators they run are allowed too, so an honest idiom costs no point.
ALLOCATIONS = {
    "x.new_zeros": lambda x: x.new_zeros(x.shape), "x.new_ones": lambda x: x.new_ones(x.shape),
    "x.new_full": lambda x: x.new_full(x.shape, 2.0), "x.new_empty": lambda x: x.new_empty(x.shape),
    "torch.ones": lambda x: torch.ones(x.shape), "torch.ones_like": torch.ones_like,
    "torch.zeros_like": torch.zeros_like, "torch.full_like": lambda x: torch.full_like(x, 2.0),
    "torch.empty_like": torch.empty_like,
}
PRIMITIVES = {
    "x.new_full": lambda x: x.new_full((3, 3), float("-inf")).triu(1), "~mask": lambda x: ~(x > 0),
    "torch.exp2": torch.exp2, "x.std": lambda x: x.std(-1, keepdim=True), "x.new_zeros": lambda x: x.new_zeros(3),
}


def _ops_of(fn) -> set:
    from autograder.legality import OpRecorder

    x = torch.randn(3, 3)
    with OpRecorder(None) as recorder:
        fn(x)
    return {op for op, _line, _n in recorder.records()}


@pytest.mark.parametrize("name", sorted(ALLOCATIONS))
def test_allocation_idioms_are_allowed_in_a_triton_launcher(name):
    from autograder.specs.base import TRITON_ALLOWED

    assert _ops_of(ALLOCATIONS[name]) <= TRITON_ALLOWED


@pytest.mark.parametrize("name", sorted(PRIMITIVES))
def test_spellings_of_allowed_primitives_are_allowed_in_the_primitive_exercises(name):
    from autograder.specs.base import PRIMITIVE_OPS

    assert _ops_of(PRIMITIVES[name]) <= PRIMITIVE_OPS


_KERNEL_CALLS = '''
import math
import numpy as np
import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice
from triton.language.extra.libdevice import tanh
from course.triton_compat import dot
from helpers import load_row

_SINK = []


def _rows(x):
    return x


@triton.jit
def _scale(x, s):
    return x * s


@triton.jit
def kernel(x_ptr, y_ptr, n, FN: tl.constexpr, BLOCK: tl.constexpr):
    r = tl.arange(0, BLOCK)
    x = load_row(x_ptr, r, n).to(tl.float32)
    y = _scale(tanh(x) + libdevice.exp(x), math.log2(2.0)) + (x + 1).to(tl.float32)
    for i in range(min(BLOCK, 4)):
        y += FN(x)
    y = dot(y, y, y) + tl.max(y, 0) + x_ptr.dtype.element_ty.primitive_bitwidth
    y = _rows(y)
    y = np.exp(y)
    _SINK.append(y)
    y = y.handle.data
    tl.store(y_ptr + r, y, mask=r < n)
'''


def test_a_kernel_may_call_only_what_triton_compiles():
    """In a @triton.jit body: Triton's functions (triton.language, libdevice, the course's and the helper
    modules' kernels), the builtins Triton compiles, the values' methods and a kernel passed as a constexpr
    are fine; a plain Python helper, numpy, a module-level object's method and a value's handle (the host
    array under the interpreter) are not: on a GPU they do not compile, on the CPU they run outside the kernel."""
    found = audit(_KERNEL_CALLS, kernels_beside={"helpers.load_row"})
    lines = _KERNEL_CALLS.splitlines()
    flagged = {lines[f.line - 1].strip() for f in found if "in the Triton kernel kernel" in f.message}
    assert flagged == {"y = _rows(y)", "y = np.exp(y)", "_SINK.append(y)", "y = y.handle.data"}, flagged
    assert all(f.rule == "escape" for f in found if "in the Triton kernel" in f.message)
    # a helper module's kernel is known by name only when the grader says so (the modules beside it)
    assert any("calls load_row in the Triton kernel" in f.message for f in audit(_KERNEL_CALLS))
    # ... and a plain function handed to a kernel as a constexpr argument, which it would call
    launch = _KERNEL_CALLS + "\n\ndef run(x, y):\n    kernel[(1,)](x, y, 4, _rows, 8)\n    kernel[(1,)](x, y, 4, FN=_scale, BLOCK=8)\n"
    passed = [f.message for f in audit(launch, kernels_beside={"helpers.load_row"}) if f.message.startswith("passes")]
    assert len(passed) == 1 and passed[0].startswith("passes _rows to the Triton kernel kernel"), passed


def test_a_triton_library_function_doing_the_exercise_is_refused_in_its_kernels_only():
    src = textwrap.dedent('''
        import triton
        import triton.language as tl

        @triton.jit
        def kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
            r = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + r)
            y = tl.softmax(x)
            z = tl.tensor.softmax(x)  # the tensor class's method: the library function of its name
            tl.store(y_ptr + r, y + x.softmax() + z)
        ''')
    for exercise in ("softmax", "online_softmax", "flash_attention_fwd", "paged_decode_attention"):
        found = audit(src, kernel_library=specs.get(exercise).rules.kernel_library)
        said = [f.message for f in found if f.rule == "kernel-library"]
        assert len(said) == 3 and all("Triton's library softmax" in m and "max, exp and sum" in m for m in said), said
    assert not audit(src, kernel_library=specs.get("matmul").rules.kernel_library)


def _kernel_findings(body: str, **kwargs) -> list:
    src = ("import math\nimport numpy as np\nimport triton\nimport triton.language as tl\n\n\n"
           "@triton.jit\ndef kernel(x_ptr, y_ptr, NAME: tl.constexpr, BLOCK: tl.constexpr):\n"
           "    r = tl.arange(0, BLOCK)\n    x = tl.load(x_ptr + r)\n" + textwrap.indent(textwrap.dedent(body), "    ")
           + "    tl.store(y_ptr + r, x)\n\n\ndef softmax(x):\n    y = x.new_empty(x.shape)\n"
           "    kernel[(1,)](x, y, 'n', 8)\n    return y\n")
    return [f for f in audit(src, entry="softmax", **kwargs) if "in the Triton kernel" in f.message]


@pytest.mark.parametrize("body", ['x = getattr(x, "handle").data\n', "x = getattr(x, NAME)\n",
                                  'h = getattr(x, "handle")\nx = h.data\n', "x = x.handle\n"])
def test_an_attribute_outside_tritons_language_is_refused_in_a_kernel_however_it_is_reached(body):
    """A kernel value's attributes are those of Triton's classes (dtype, shape, to, sum...), read from them;
    getattr with a constant name is that attribute, with a computed one it is refused."""
    found = _kernel_findings(body)
    assert found and all(f.rule == "escape" for f in found), found


def test_triton_language_attributes_and_constants_from_math_are_fine_in_a_kernel():
    body = ("x = x.to(tl.float32) * x_ptr.dtype.element_ty.primitive_bitwidth + getattr(x, 'dtype').is_fp32()\n"
            "x = tl.exp2(x * math.log2(math.e)) + math.sqrt(2.0) * -math.pi + x.shape[0] + x.T.sum(0)\n")
    assert _kernel_findings(body) == []
    assert [f.rule for f in _kernel_findings("x = math.log2(x)\n")] == ["escape"]  # math on a kernel value: host


def test_triton_jit_called_as_a_function_makes_a_kernel_like_the_decorator():
    src = textwrap.dedent('''
        import numpy as np
        import triton
        import triton.language as tl

        def _exp_impl(x):
            return tl.exp(x)

        def _host_impl(x):
            return np.exp(x)

        exp_jit = triton.jit(_exp_impl)
        host_jit = triton.jit(_host_impl)

        @triton.jit
        def kernel(x_ptr, BLOCK: tl.constexpr):
            r = tl.arange(0, BLOCK)
            tl.store(x_ptr + r, exp_jit(tl.load(x_ptr + r)) + host_jit(r))
        ''')
    found = [f for f in audit(src) if "Triton kernel" in f.message]
    # the helper is called like a kernel; the body of the one triton.jit wraps is checked as a kernel's
    assert [(f.line, f.message.split(":")[0]) for f in found] == [(10, "calls np.exp in the Triton kernel _host_impl")]
    from autograder.audit import kernel_names

    assert kernel_names(src) >= {"kernel", "exp_jit", "_exp_impl", "host_jit"}


def test_a_warn_once_flag_in_a_global_is_not_kept_state_and_a_kept_tensor_is():
    src = textwrap.dedent('''
        import warnings
        _warned = False
        _last = None

        def softmax(x):
            global _warned, _last
            if not _warned:
                warnings.warn("long rows")
                _warned = True
            _last = x.exp()
            return _last
        ''')
    found = [f for f in audit(src, entry="softmax", forbidden_calls={"softmax"}) if f.rule == "kept-state"]
    assert [f.message.split(":")[0] for f in found] == ["assigns the global _last"], found


def test_an_atomic_is_found_after_an_interpreted_launch_left_its_stand_ins_in_place():
    """An interpreted launch replaces triton.language.core's builtins by the interpreter's stand-ins and may
    leave them there: core.atomic_xchg is then a lambda, not tl.atomic_xchg, unless the stand-in is seen
    through (the notebook's check() audits in the process that launched the learner's kernels)."""
    import triton
    import triton.language as tl

    from autograder import determinism

    @triton.jit
    def reduce_rows(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        r = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + r, mask=r < n, other=float("-inf"))
        tl.store(out_ptr, tl.max(x, axis=0))
        tl.store(out_ptr + 1, tl.sum(tl.where(r < n, x, 0.0).to(tl.bfloat16), axis=0))

    x = torch.randn(50, dtype=torch.bfloat16)
    reduce_rows[(1,)](x, torch.empty(2, dtype=torch.bfloat16), 50, BLOCK=64)
    src = ("import triton\nimport triton.language.core as core\n\n@triton.jit\ndef kernel(p):\n"
           "    core.atomic_xchg(p, 1.0)\n\ndef {entry}(p):\n    kernel[(1,)](p)\n")
    bwd = specs.get("layer_norm_bwd")
    found = determinism.source_findings(bwd, src.replace("{entry}", bwd.entry), "line {}".format)
    assert len(found) == 1 and found[0].startswith("line 6: calls core.atomic_xchg"), found


@pytest.mark.parametrize("spelled", ["tl.atomic_add(p, 1.0)", 'getattr(tl, "atomic_add")(p, 1.0)', "acc(p, 1.0)",
                                     "p.atomic_add(1.0)", "core.atomic_xchg(p, 1.0)"])
def test_an_atomic_is_found_where_determinism_is_asked_however_it_is_spelled(spelled):
    from autograder import determinism

    src = ("import triton\nimport triton.language as tl\nimport triton.language.core as core\n"
           "from triton.language import atomic_add as acc\n\n"
           f"@triton.jit\ndef kernel(p):\n    {spelled}\n    tl.atomic_max(p, 1.0)\n\n"
           "def {entry}(p):\n    kernel[(1,)](p)\n")
    bwd = specs.get("layer_norm_bwd")
    found = determinism.source_findings(bwd, src.replace("{entry}", bwd.entry), "line {}".format)
    assert len(found) == 1 and found[0].startswith("line 8: calls ") and "deterministic" in found[0], found
    fwd = specs.get("layer_norm_fwd")
    assert determinism.source_findings(fwd, src.replace("{entry}", fwd.entry), "line {}".format) == []


def test_registering_a_fake_or_a_backward_for_ones_own_triton_op_is_not_a_library_finding():
    """torch.library.register_fake and register_autograd, as PyTorch documents them for an operator made with
    triton_op: the learner's own audited Python for their own operator; for one of torch's, a finding."""
    src = textwrap.dedent('''
        import torch
        from torch.library import register_autograd, triton_op

        @triton_op("mine::softmax", mutates_args={})
        def op(x: torch.Tensor) -> torch.Tensor:
            return x

        @torch.library.register_fake("mine::softmax")
        def _fake(x):
            return torch.empty_like(x)

        register_autograd(op, lambda ctx, g: g)
        torch.library.register_fake("aten::_softmax")(_fake)
        ''')
    found = [(f.line, f.rule) for f in audit(src) if f.rule == "feature"]
    assert found == [(14, "feature")], audit(src)  # the registration for torch's own softmax


def test_graded_code_reads_only_names_its_source_binds():
    """Deny by default: a name the submission never binds holds whatever the process put in its module (the
    Triton interpreter used to copy numpy and inspect there), so graded code may not read it; builtins, a
    module's own attributes and every way Python binds a name are the source's."""
    source = textwrap.dedent('''
        import torch


        def softmax(x):
            e = np.exp(x.numpy())
            return inspect.getclosurevars(softmax)


        def honest(x, pairs):
            match pairs:
                case [first, *rest]:
                    pass
                case {"k": value, **others}:
                    pass
            total: Sequence = [y for y in range(len(x)) if (z := y)]
            try:
                pass
            except ValueError as exc:
                print(exc)
            with open(__file__) as fh:
                fh.read()
            display(__name__, first, rest, value, others, z)
            return x


        def never_graded():
            return plt.plot()
    ''')
    found = [(f.line, f.message.split(",")[0]) for f in audit(source, entry="softmax") if "never binds" in f.message]
    assert found == [(6, "reads np"), (7, "reads inspect")], found
    assert not [f for f in audit(source, entry="honest") if "never binds" in f.message]
    # with no entry point (a module beside the submission) all of it is graded code
    assert [f.line for f in audit(source) if "never binds" in f.message] == [6, 7, 28]


@pytest.mark.parametrize("call", ['globals()["_r" + "ows"](x)', 'vars()["_rows"](x)',
                                  'import submission as me\n    getattr(me, "_rows")(x)'])
def test_code_that_reads_the_modules_namespace_reaches_all_of_it(call):
    """A function called by a computed key of globals() (or of the submission's module imported by its own
    name) is graded code like one called by its name: the audit cannot tell which one the key names."""
    source = ("import numpy as np\nimport torch\n\n\ndef _rows(x):\n    return torch.from_numpy(np.exp(x.numpy()))\n\n\n"
              f"def softmax(x):\n    {call}\n    return x\n")
    spec = specs.get("softmax")
    found = audit(source, entry="softmax", forbidden_calls=forbidden_calls_for(spec), outside_torch=True)
    assert any(f.line == 6 and f.rule == "outside-torch" for f in found), found
    unreached = source.replace(call, "pass")
    assert not [f for f in audit(unreached, entry="softmax", forbidden_calls=forbidden_calls_for(spec),
                                 outside_torch=True) if f.rule == "outside-torch"]


def test_a_built_in_types_own_methods_are_plain_python_not_the_builtins_module():
    """dict.fromkeys, int.bit_length, str.lower: honest launchers write them; the builtins module itself and
    a built-in type's dunders stay findings."""
    honest = ("SUPPORTED = dict.fromkeys([1, 2], True)\ndef block(n):\n    return 1 << int.bit_length(n - 1)\n"
              "def names(xs):\n    return sorted(xs, key=str.lower), float.fromhex('0x1p-3'), int.from_bytes(b'1', 'little')")
    assert audit(honest) == []
    assert "forbidden-import" in {f.rule for f in audit("import builtins\nbuiltins.len = lambda x: 0")}
    assert audit("def f(o):\n    object.__setattr__(o, 'a', 1)") != []


def test_a_format_field_that_reaches_a_dunder_or_a_closure_cell_is_reported():
    """str.format reads attributes and items of its arguments: {0.__closure__[0].cell_contents} reaches
    what a probe of the grader's holds, written or bound to a name first; plain fields are formats."""
    reaching = ['def benchmark(fn):\n    return float("{0.__closure__[1].cell_contents[base]}".format(fn))',
                'FMT = "{0.__globals__}"\ndef benchmark(fn):\n    return FMT.format(fn)',
                'def benchmark(fn):\n    return "{f.__code__.co_consts}".format(f=fn)']
    for source in reaching:
        assert "escape" in {f.rule for f in audit(source, entry="benchmark")}, source
    honest = ('FMT = "{:>8.3f} ms {name}"\ndef benchmark(fn):\n    print("{0:.2f} {1[0]} {x.shape}".format(1.0, [2], x=fn))\n'
              '    return float(FMT.format(1.0, name="a").split()[0])')
    assert audit(honest, entry="benchmark") == []


def test_a_format_made_at_run_time_in_graded_code_is_reported():
    """A format computed at run time may name any field ("{0.__clo" + "sure__}"): in graded code it is
    dynamic code; a notebook's table printed outside the graded function is not graded code."""
    graded = 'def benchmark(fn):\n    f = "{0.__clo" + "sure__}"\n    return len(f.format(fn))'
    assert "dynamic-code" in {f.rule for f in audit(graded, entry="benchmark")}
    for spelled in ("str.format(f, fn)", "type('').format(f, fn)", "f.format_map({'0': fn})"):
        source = f'def benchmark(fn):\n    f = "{{0.__clo" + "sure__}}"\n    return len({spelled})'
        assert "dynamic-code" in {f.rule for f in audit(source, entry="benchmark")}, spelled
    assert audit('def benchmark(fn):\n    return len(str.format("{0:.3f}", 1.0))', entry="benchmark") == []
    assert "dynamic-code" in {f.rule for f in audit('import string\ndef benchmark(fn):\n    return string.Formatter().format("{0}", fn)', entry="benchmark")}
    table = 'rows = ["{:>6}", "{:>8}"]\nfor r in rows:\n    print(r.format(1))\ndef benchmark(fn):\n    return 1.0'
    assert audit(table, entry="benchmark") == []
    templates = ('MESSAGES = {"shape": "takes 2-D, got {shape}"}\ndef softmax(x):\n    msg = "row of {n} > {limit}"\n'
                 '    if x.dim() != 2:\n        raise ValueError(MESSAGES["shape"].format(shape=x.shape))\n'
                 '    raise ValueError(msg.format(n=1, limit=2))')
    assert audit(templates, entry="softmax") == []  # templates bound to literals are formats the audit reads
    bad = 'def benchmark(fn):\n    msg = "{0.__globals__}"\n    return msg.format(fn)'
    assert "escape" in {f.rule for f in audit(bad, entry="benchmark")}


def test_a_frozen_dataclass_setting_its_own_field_is_not_reported():
    """dataclasses' documentation sets a derived field of a frozen instance with object.__setattr__(self, ...)
    in __post_init__: the learner's own object. On anything else it stays a finding."""
    own = ("import dataclasses\n@dataclasses.dataclass(frozen=True)\nclass Config:\n    n: int\n    block: int = 0\n"
           "    def __post_init__(self):\n        object.__setattr__(self, 'block', 2 * self.n)")
    assert audit(own) == []
    assert audit("import torch\ndef f(t):\n    object.__setattr__(torch, 'softmax', t)") != []
    assert audit("class C:\n    def m(self, other):\n        object.__setattr__(other, 'x', 1)") != []


def test_triton_tutorials_table_of_kernels_compiled_ahead_is_configuration():
    """Triton's fused-softmax tutorial keeps, per block size, the kernel compiled ahead (kernel.warmup) and the
    programs its registers and shared memory allow, read from the device's properties: configuration, read back
    from the same table; a table filled with a tensor's values stays kept state."""
    tutorial = textwrap.dedent('''
        import torch
        import triton
        import triton.language as tl
        from triton.runtime import driver

        DEVICE = triton.runtime.driver.active.get_active_torch_device()
        properties = driver.active.utils.get_device_properties(DEVICE.index)
        NUM_SM, NUM_REGS = properties["multiprocessor_count"], properties["max_num_regs"]
        SIZE_SMEM, WARP_SIZE = properties["max_shared_mem"], properties["warpSize"]
        kernels = {}

        @triton.jit
        def softmax_kernel(y_ptr, x_ptr, n, BLOCK: tl.constexpr):
            pass

        def softmax(x):
            y = torch.empty_like(x)
            BLOCK = triton.next_power_of_2(x.shape[1])
            kernel = kernels.get(BLOCK)
            if kernel is None:
                kernel = softmax_kernel.warmup(y, x, x.shape[1], BLOCK=BLOCK, num_warps=8, grid=(1, ))
                kernel._init_handles()
                occupancy = NUM_REGS // (kernel.n_regs * WARP_SIZE * 8)
                occupancy = min(occupancy, SIZE_SMEM // max(kernel.metadata.shared, 1))
                kernels[BLOCK] = (kernel, NUM_SM * occupancy)
            kernel, programs = kernels[BLOCK]
            kernel[(min(programs, x.shape[0]), 1, 1)](y, x, x.shape[1], BLOCK)
            return y
        ''')
    rules = dict(entry="softmax", forbidden_calls=forbidden_calls_for(specs.get("softmax")))
    assert "kept-state" not in {f.rule for f in audit(tutorial, **rules)}
    kept = tutorial.replace("kernels[BLOCK] = (kernel, NUM_SM * occupancy)", "kernels[BLOCK] = (kernel, x.sum())")
    assert "kept-state" in {f.rule for f in audit(kept, **rules)}


def test_capturing_what_the_process_prints_is_reported():
    """Under the interpreter a kernel's tl.device_print is Python's print: captured, it hands the values over."""
    source = "import contextlib, io\ndef softmax(x):\n    with contextlib.redirect_stdout(io.StringIO()):\n        pass\n    return x"
    assert "grader-state" in {f.rule for f in audit(source, entry="softmax")}
    assert "patching" in {f.rule for f in audit("import sys, io\ndef softmax(x):\n    sys.stdout = io.StringIO()\n    return x")}
    # the same swap of sys.stdout as libraries spell it: IPython's capture_output, pytest's, test.support's
    for capture in ("from IPython.utils.capture import capture_output as c",
                    "from IPython.utils import io as iio\nc = iio.capture_output",
                    "from _pytest.capture import SysCapture as c", "from test.support import captured_stdout as c"):
        assert "grader-state" in {f.rule for f in audit(f"{capture}\ndef softmax(x):\n    c()\n    return x",
                                                        entry="softmax")}, capture
    # a kernel's device_print captured by IPython's capture_output handed a softmax's rows over (7/10 on the CPU)
    escape = load(ROOT / "tests/submissions/escape_captures_prints_through_ipython.py").source
    assert {(f.rule, f.line) for f in audit(escape, entry="softmax")} == {("grader-state", 11), ("grader-state", 29)}


def test_every_tree_the_parser_lets_through_is_audited_without_running_out_of_stack():
    """The audit walks a tree recursively: 1+1+... of 250 terms, which Python reads and runs, raised
    RecursionError in it (an internal grader error). Past MAX_DEPTH the parse says so as a syntax error;
    up to it the audit reads the tree from a stack already a few hundred frames deep (a grading thread's)."""
    import sys

    from autograder.audit import MAX_DEPTH, audit, parse

    with pytest.raises(SyntaxError, match="more than the grader reads"):
        parse("x = " + "1+" * MAX_DEPTH + "1\n")

    def deep_in_the_stack(frames):
        return deep_in_the_stack(frames - 1) if frames else audit("x = " + "1+" * (MAX_DEPTH - 3) + "1\n")

    assert sys.getrecursionlimit() - 300 > 0
    assert deep_in_the_stack(300) == []
