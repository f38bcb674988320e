"""What the worker refuses at run time (autograder/runtime_audit.py): processes, code the grader did not audit,
unpickling, ctypes, the process's memory, however the learner's code reached them; what libraries do for
themselves (dataclasses, Triton's compilers, torch.fx's generated code) still runs.

Each check runs in a fresh interpreter with the hook installed (it cannot be removed), as the worker does.
"""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from _autograder_helpers import graded

ROOT = Path(__file__).resolve().parent.parent

_DRIVER = """
import sys
sys.path.insert(0, {root!r})
from autograder import runtime_audit
path, library = sys.argv[1], sys.argv[2]
runtime_audit.INSTALLED += (library,)  # stands for an installed package (site-packages)
sys.path.insert(0, library)
# modules the learner's code may not import, handed over to try what they do (imported here, before the hook)
import collections, dataclasses, functools, importlib, marshal, os, pickle, platform, timeit, types, typing, weakref
import numpy, triton.language  # loaded before the hook, as the worker loads them (Triton, its interpreter)
given = dict(collections=collections, dataclasses=dataclasses, functools=functools, importlib=importlib,
             marshal=marshal, os=os, pickle=pickle, platform=platform, sys=sys, timeit=timeit, types=types,
             typing=typing, weakref=weakref)
runtime_audit.install([path])
text = open(path).read()
exec(compile(text, path, "exec"), {{"__name__": "learner", "__file__": path, **given}})
runtime_audit.check_modules()  # as the worker does after the import and each call
print("changed", sorted(what for what, _, _ in runtime_audit.HOOK.pending if what.startswith("replaces ")))
print("restored", sys.modules["triton.language"].sigmoid.__name__, hasattr(sys.modules["numpy"], "exp"))
print("pending", len(runtime_audit.HOOK.pending))
print("dumpable", runtime_audit.dumpable())
print("recovered", sorted(what for what, _, exc in runtime_audit.HOOK.pending if not runtime_audit.reached_learner(exc)))
"""

# what each learner's script runs an attempt with: what it did, refused (and why) or allowed
_ATTEMPT = '''
def attempt(name, fn):
    try:
        fn()
        print(name, "allowed")
    except PermissionError as exc:
        print(name, "refused", str(exc).replace("\\n", " "))
    except Exception as exc:
        print(name, "failed", type(exc).__name__, exc)

'''

_LEARNER = _ATTEMPT + '''
import torch, torch.fx, torch.hub, torch.utils._pytree, torch.utils.benchmark
import torch.fx.experimental.symbolic_shapes, torch._guards

def hinted(a: "int"):
    pass

def define_classes():
    @dataclasses.dataclass
    class Config:
        block: int = 128
    Point = collections.namedtuple("Point", "x y")
    return Config(), Point(1, 2)

class LeavesAProcess:
    def __del__(self):
        try:
            torch.os.system("true")
            print("finalizer allowed")
        except PermissionError:
            print("finalizer refused")

def traced():
    return torch.fx.symbolic_trace(lambda x: x + 1)(torch.ones(2))

here = os.path.dirname(__file__)
NAMED = "y = 2"  # a literal, but not one handed to a statement runner: never audited as a statement
attempt("fork", lambda: torch.os.fork())
attempt("posix_spawn", lambda: torch.os.posix_spawn("/bin/true", ["true"], {}))
attempt("system", lambda: torch.os.system("true"))
attempt("subprocess", lambda: torch.os.popen("true").read())
attempt("exec", lambda: torch.builtins.exec("x = 1", {}))
attempt("timeit string", lambda: timeit.timeit("x" + " = 1", number=1))
attempt("timeit literal", lambda: timeit.timeit("len(here)", globals=globals(), number=1))
attempt("timeit text of a literal", lambda: timeit.timeit(NAMED, number=1))
attempt("timeit function", lambda: timeit.timeit(lambda: None, number=1))
attempt("type hints", lambda: typing.get_type_hints(hinted))
attempt("file beside", lambda: torch.hub._import_module("beside", os.path.join(here, "beside.py")))
attempt("pickle", lambda: pickle.loads(pickle.dumps(collections.OrderedDict())))
attempt("ctypes", lambda: torch.ctypes.CDLL(None))
attempt("proc mem", lambda: open("/proc/self/mem", "rb"))
attempt("proc pid mem", lambda: open(f"/proc/{os.getpid()}/mem", "rb"))
attempt("plain file", lambda: open(__file__, "rb").close())
attempt("forbidden import", lambda: importlib.import_module("smtplib"))
attempt("audit hook", lambda: sys.addaudithook(lambda event, a: print("hooked", event) if event == "os.getcwd" else None))
attempt("code object", lambda: types.FunctionType(hinted.__code__.replace(co_name="x"), {}))
attempt("unmarshal", lambda: marshal.loads(marshal.dumps(hinted.__code__)))
attempt("classes", define_classes)
attempt("library code", traced)
attempt("library's own import", lambda: __import__("fontlib"))
attempt("library asked", lambda: sys.modules["fontlib"].spawn("true"))
attempt("library runs a string", lambda: sys.modules["fontlib"].evaluate("1 + 1"))
attempt("through tree_map", lambda: torch.utils._pytree.tree_map(sys.modules["fontlib"].evaluate, ["1 + 1"]))
attempt("torch timer string", lambda: torch.utils.benchmark.Timer("x" + " = 1").timeit(1))
attempt("torch timer literal", lambda: torch.utils.benchmark.Timer(stmt="len(here)", globals={"here": here}).timeit(1))
attempt("torch runs a command", lambda: __import__("torch.utils.collect_env").utils.collect_env.run("true"))
attempt("library's own command", lambda: sys.modules["fontlib"].banner())
attempt("library handed a command", lambda: sys.modules["fontlib"].ask(functools.partial(os.system, "true")))
attempt("stdlib tries and recovers", lambda: platform.uname().processor)
attempt("environment left as it was", lambda: (os.environ.setdefault("PATH", "/nowhere"),
                                               os.environ.__setitem__("PATH", os.environ["PATH"])))
attempt("environment changed", lambda: os.environ.__setitem__("TRITON_CACHE_DIR", "/tmp/elsewhere"))
attempt("debugging aid", lambda: os.environ.__setitem__("CUDA_LAUNCH_BLOCKING", "1"))
attempt("triton runs a command", lambda: __import__("triton._test_runner")._test_runner._run(["true"], cwd="/"))
attempt("triton builds a C file", lambda: __import__("triton.runtime.build").runtime.build._build(
    "x", os.path.join(here, "x.c"), here, [], [], [], []))
attempt("triton's ptxas", lambda: __import__("triton.backends.nvidia.compiler").backends.nvidia.compiler.get_ptxas(90))

class Shown:  # FX writes an argument's repr into the code it compiles
    def __repr__(self):
        return "__import__('os').getcwd()"

def graph_of(argument=None, method=None):
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    graph.output(graph.call_method(method, (x,)) if method else graph.call_function(torch.add, (x, argument)))
    return torch.fx.GraphModule(torch.nn.Module(), graph)(torch.ones(2))

class Named(torch._guards.Source):  # a Source whose name template (torch evaluates it) is the learner's text
    def name(self):
        return "1 + 1"
    _name_template = property(name)

def schema(x: "torch.Tensor", scale: "float") -> "torch.Tensor":
    return x * scale

shapes = torch.fx.experimental.symbolic_shapes.ShapeEnv()
attempt("torch evaluates what it is handed", lambda: shapes.evaluate_guards_expression("1 + 1", []))
attempt("torch evaluates it through tree_map", lambda: torch.utils._pytree.tree_map(shapes.evaluate_symexpr, [["1 + 1"]]))
attempt("torch evaluates a class's text", lambda: Named().get_value({}, {}, {}))
attempt("fx writes a repr", lambda: graph_of(Shown()))
attempt("fx writes a target", lambda: graph_of(method='abs"), __import__("os").getcwd(), getattr(x, "abs'))
attempt("fx graph", lambda: graph_of(2.0))

def imported_by_fx_code(name):  # torch has loaded it: importing it raises no "import" event
    graph = torch.fx.Graph()
    graph.output(graph.call_function(__import__, (name,)))
    return torch.fx.GraphModule(torch.nn.Module(), graph)()

attempt("mode stack", lambda: torch.utils._python_dispatch._get_current_dispatch_mode_stack())
attempt("mode stack through a parameter", lambda: (lambda m: m._get_function_stack_at)(torch._C)(0))
attempt("modes switched off", lambda: torch.utils._mode_utils.no_dispatch())
attempt("mode stack through tree_map", lambda: torch.utils._pytree.tree_map(torch.overrides._get_current_function_mode_stack, [1]))
attempt("mode stack handed to a library", lambda: sys.modules["fontlib"].ask(torch._C._len_torch_dispatch_stack))
attempt("library's own mode check", lambda: sys.modules["fontlib"].modes())
attempt("torch's own mode check", lambda: torch.zeros(2).add_(1))
attempt("closure read", lambda: sys.modules["inspect"].getclosurevars(hinted))
attempt("referrers", lambda: sys.modules["gc"].get_referrers(here))
attempt("loaded grader module by a computed name", lambda: importlib.import_module("auto" + "grader.legality"))
attempt("grader module through the standard library", lambda: __import__("pydoc").locate("autograder.legality"))
attempt("version check import", lambda: importlib.import_module("json"))
attempt("library module patched", lambda: setattr(__import__("triton.language").language, "sigmoid", hinted))
attempt("library module patched through a parameter", lambda: (lambda m: m.__delattr__("exp"))(sys.modules["numpy"]))
attempt("import binds a submodule", lambda: importlib.import_module("json.tool"))
attempt("library sets its own module", lambda: sys.modules["fontlib"].configure())
attempt("loaded forbidden import", lambda: imported_by_fx_code("inspect"))
attempt("loaded grader module", lambda: imported_by_fx_code("autograder.legality"))
attempt("annotations as text", lambda: torch.library.custom_op("learner_test::scale", mutates_args=())(schema))
LeavesAProcess()
os.getcwd()  # a hook the learner added would see this
'''

REFUSED = ["fork", "posix_spawn", "system", "subprocess", "exec", "timeit string", "type hints", "file beside",
           "pickle", "ctypes", "proc mem", "proc pid mem", "forbidden import", "loaded forbidden import", "loaded grader module", "library asked", "code object",
           "unmarshal", "library runs a string", "through tree_map", "torch timer string",
           "torch runs a command", "library handed a command", "environment changed", "timeit text of a literal",
           "triton runs a command", "triton builds a C file", "torch evaluates what it is handed",
           "torch evaluates it through tree_map", "torch evaluates a class's text", "fx writes a repr",
           "fx writes a target", "mode stack", "mode stack through a parameter", "modes switched off",
           "mode stack through tree_map", "mode stack handed to a library", "closure read", "referrers",
           "loaded grader module by a computed name", "grader module through the standard library"]
ALLOWED = ["timeit function", "plain file", "classes", "library code", "library's own import",
           "library's own command", "stdlib tries and recovers", "environment left as it was", "timeit literal",
           "torch timer literal", "triton's ptxas", "fx graph", "annotations as text", "library's own mode check",
           "torch's own mode check", "version check import", "debugging aid", "import binds a submodule",
           "library sets its own module", "library module patched", "library module patched through a parameter"]
# an installed library that starts a process while it is imported (as matplotlib asks fontconfig for fonts)
# or compiles its own code then; a library that evaluates the text it is given (sympy's parse_expr, PyYAML's
# python tags) runs it for whoever called it: for the learner, refused
_FONTLIB = """
import os
os.system("true")
exec("TABLE = {}")

def spawn(command):
    return os.system(command)

def evaluate(text):
    return eval(text)

def banner():
    return os.system("true")  # its own command, as PyTorch's collect_env asks nvidia-smi

def ask(run):
    return run()

def configure():  # a library setting a module's attribute for itself
    import json
    json.fontlib_configured = True

def modes():  # a library reading the mode stack for itself (as torch's fake tensors do)
    import torch.utils._python_dispatch
    return torch.utils._python_dispatch._get_current_dispatch_mode_stack()
"""


def test_the_worker_refuses_what_it_cannot_see_and_lets_libraries_do_their_own_work(tmp_path):
    (tmp_path / "learner.py").write_text(textwrap.dedent(_LEARNER))
    (tmp_path / "beside.py").write_text("ran = True\n")
    (tmp_path / "driver.py").write_text(_DRIVER.format(root=str(ROOT)))
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "fontlib.py").write_text(_FONTLIB)
    run = subprocess.run([sys.executable, str(tmp_path / "driver.py"), str(tmp_path / "learner.py"),
                          str(tmp_path / "lib") + "/"],
                         capture_output=True, text=True, timeout=300)
    said = {line.split(" refused ")[0]: line for line in run.stdout.splitlines() if " refused " in line}
    assert set(said) == set(REFUSED), run.stdout + run.stderr
    assert all(f"{name} allowed" in run.stdout for name in ALLOWED), run.stdout + run.stderr
    assert "finalizer refused" in run.stdout, run.stdout   # a finalizer is refused whenever it runs
    assert "hooked" not in run.stdout                      # Python drops a hook the worker's refuses
    # no other process of this user may open the worker's memory (/proc/<pid>/mem) either
    assert "dumpable False" in run.stdout, run.stdout
    # each refusal names what was refused and why
    assert "starts a process (os.fork)" in said["fork"] and "process's memory" in said["proc mem"]
    assert "which the grader did not audit" in said["file beside"] and "unpickles" in said["pickle"]
    assert "calls torch.utils._python_dispatch._get_current_dispatch_mode_stack" in said["mode stack"]
    assert "calls torch._C._get_function_stack_at" in said["mode stack through a parameter"]
    assert all("mode stacks" in said[name] for name in REFUSED if name.startswith("mode"))
    # a library function replaced or deleted (found when the worker compares, after the import and each
    # call): refused, and the library's own put back
    assert "changed ['replaces numpy.exp', 'replaces triton.language.sigmoid']" in run.stdout, run.stdout
    assert "restored sigmoid True" in run.stdout, run.stdout
    # pydoc resolves any dotted name: refused where graded code calls it
    assert "calls pydoc.locate" in said["grader module through the standard library"]
    # nothing recorded them (no graded call ran): they wait for the next recorded call
    pending = int(run.stdout.split("pending ")[-1].split()[0])
    assert pending >= len(REFUSED) + 4, run.stdout   # with the finalizer's, the audit hook's and the 2 changes
    # every refusal the learner's code saw (it caught each one) is its own; the one the standard library
    # caught and recovered from (platform asks `uname -p`) is not: it costs nothing (a note)
    assert "recovered ['starts a process (subprocess)']" in run.stdout, run.stdout


def test_a_process_started_through_an_alias_costs_the_points_and_both_layers_name_the_line():
    ex = graded("escape_forks_through_an_alias.py", ("softmax",))["softmax"]
    assert ex["score"] == 0 and not ex["correct"]
    found = "\n".join(ex["violations"])
    assert "uses _os.fork" in found                                       # the audit: torch.os is os
    assert "starts a process (os.fork) at line 21: refused" in found, found   # the worker: what ran
    # the refusal is the cause: no input family's hint is offered in its place
    assert "RunTimeRefused" in "\n".join(ex["feedback"]) and not any(f.startswith("hint:") for f in ex["feedback"])


def test_a_finalizer_the_call_leaves_behind_runs_under_the_recorder():
    ex = graded("escape_finalizer_computes.py", ("softmax",))["softmax"]
    assert ex["score"] == 0 and not ex["correct"]
    # the finalizer ran inside the call that left it (its output is what the finalizer wrote) ...
    assert all(c["verdict"] == "ok" for c in ex["cases"]), ex["cases"]
    # ... under the recorder, which names what it ran
    assert any("calls torch operator aten._softmax at line 18" in v for v in ex["violations"]), ex["violations"]


def test_a_finalizer_on_an_output_runs_inside_a_recorded_call():
    """The worker lets go of the previous call's outputs inside the next call, under its recorder: a finalizer
    hung on one never runs between a call and the shipping of its outputs, unseen."""
    ex = graded("escape_finalizer_on_output.py", ("softmax",))["softmax"]
    assert ex["score"] == 0 and not ex["correct"]
    # its kernel answers one-column inputs; every other output is what the call itself wrote: nothing (the
    # finalizer runs when the next call lets go of it, inside that call, and writes an output already shipped)
    verdicts = {c["case"]: c["verdict"] for c in ex["cases"]}
    assert verdicts["1x1 float32"] == "ok" and verdicts["3x17 float32"] != "ok", verdicts


def test_text_torch_evaluates_for_the_learner_costs_the_points_and_names_the_line():
    ex = graded("escape_torch_evaluates_text.py", ("softmax",))["softmax"]
    assert ex["score"] == 0 and not ex["correct"]
    assert any("text that is not the library's own (it was handed to evaluate_guards_expression) at line 24"
               in v for v in ex["violations"]), ex["violations"]


def test_a_process_triton_starts_on_request_costs_the_points_and_names_the_line():
    ex = graded("escape_triton_runs_a_command.py", ("softmax",))["softmax"]
    assert ex["score"] == 0 and not ex["correct"]
    assert any("starts a process (subprocess) at line 39" in v for v in ex["violations"]), ex["violations"]


def test_numpy_over_a_tensors_memory_in_graded_code_costs_the_points_and_names_the_line():
    ex = graded("escape_numpy_stash.py", ("checkpointed_mlp",))["checkpointed_mlp"]
    assert ex["score"] == 0 and not ex["correct"]
    assert any("line 28: uses np.array (numpy.array) in graded code" in v for v in ex["violations"]), ex["violations"]


def test_a_function_set_on_a_tensor_under_a_method_name_is_refused_where_it_is_set():
    """t.untyped_storage = f (or copy_, numel...) would run f wherever torch or the grader call that method on
    t, outside every recorder: the set itself is refused, and names the line."""
    ex = graded("escape_shadows_a_tensor_method.py", ("softmax",))["softmax"]
    assert ex["score"] == 0 and not ex["correct"]
    assert any("sets untyped_storage on a tensor, hiding Tensor.untyped_storage at line 18" in v
               for v in ex["violations"]), ex["violations"]


def test_torchs_own_tensor_subclasses_keep_their_attributes_and_plain_tensors_theirs(tmp_path):
    """The guard on attributes set on a tensor is for torch.Tensor and Parameter themselves: torch's own
    subclasses keep their state in attributes named like Tensor's methods (NestedTensor's _values); an
    attribute of the learner's own naming and Tensor's data descriptors (grad, data) are set as ever."""
    script = textwrap.dedent('''
        import os, sys
        os.environ["TRITON_INTERPRET"] = "1"
        sys.path.insert(0, %r)
        from autograder import runtime_audit
        import torch
        runtime_audit.install([__file__])
        nested = torch.nested.nested_tensor([torch.ones(2), torch.ones(3)], layout=torch.jagged)
        t = torch.ones(2)
        t.tag, t.grad, t.data = 1, torch.zeros(2), torch.ones(2)
        print("set", nested.shape[0], t.tag, runtime_audit.HOOK.pending)
        try:
            t.copy_ = print
        except PermissionError:
            print("refused copy_")
    ''' % str(ROOT))
    (tmp_path / "attributes.py").write_text(script)
    run = subprocess.run([sys.executable, str(tmp_path / "attributes.py")], capture_output=True, text=True, timeout=300)
    assert "set 2 1 []" in run.stdout and "refused copy_" in run.stdout, run.stdout + run.stderr


def test_no_automatic_collection_runs_a_finalizer_inside_the_recorder():
    """Garbage with a finalizer, then many allocations: the automatic collection would fire inside the
    recorder's own dispatch (modes off) and run the finalizer unrecorded. None runs while a recorder is on;
    the call's garbage is collected under it, where the finalizer's softmax is recorded."""
    ex = graded("escape_finalizer_in_the_recorder.py", ("softmax",))["softmax"]
    assert ex["score"] == 0 and not ex["correct"]
    assert any("aten._softmax at line 16" in v or "aten.softmax at line 16" in v for v in ex["violations"]), ex["violations"]


def test_an_operator_handed_a_tensor_whose_dict_hides_a_method_is_refused():
    """functools.update_wrapper fills a tensor's __dict__ without setting an attribute: the operator the tensor
    is handed to refuses it, before the recorder's bookkeeping calls the hidden method."""
    ex = graded("escape_fills_a_tensors_dict.py", ("softmax",))["softmax"]
    assert ex["score"] == 0 and not ex["correct"]
    assert any("hands an operator a tensor whose own attribute untyped_storage hides Tensor.untyped_storage at line 25"
               in v for v in ex["violations"]), ex["violations"]


def test_numpy_through_a_library_that_wraps_it_costs_the_points_and_names_the_protocol():
    ex = graded("escape_numpy_through_a_wrapper.py", ("softmax",))["softmax"]
    assert ex["score"] == 0 and not ex["correct"]
    assert any("line 15: uses self.__array_interface__" in v for v in ex["violations"]), ex["violations"]


def test_triton_asks_file_for_its_cache_key_when_its_driver_starts(tmp_path):
    """The CUDA driver's start (in a kernel's first launch, handed the learner's kernel) keys its compiled
    helpers by platform_key(), whose platform.architecture() runs `file -b python`: allowed where Triton's
    driver drives it (on a GPU every graded launch carried a note of it), not where Triton's build module,
    which runs whatever it is handed, is entered with the learner's object. The entry frames are made here
    from Triton's own files (no GPU)."""
    script = textwrap.dedent('''
        import os, sys
        os.environ["TRITON_INTERPRET"] = "1"
        sys.path.insert(0, %r)
        from autograder import runtime_audit
        import triton.backends.nvidia.driver as driver, triton.runtime.build as build
        runtime_audit.install([__file__])
        source = "from triton.runtime.build import platform_key\\ndef start(kernel):\\n    return platform_key()"

        def kernel():
            pass

        for name, module in (("build", build), ("driver", driver)):
            build.platform_key.cache_clear()  # (the key is computed once per process)
            space = {}
            exec(compile(source, module.__file__, "exec"), space)
            key = space["start"](kernel)
            print(name, key.count(",") >= 2, [what for what, _, _ in runtime_audit.HOOK.pending])
            runtime_audit.HOOK.pending.clear()
    ''' % str(ROOT))
    (tmp_path / "key.py").write_text(script)
    run = subprocess.run([sys.executable, str(tmp_path / "key.py")], capture_output=True, text=True, timeout=300)
    assert "driver True []" in run.stdout, run.stdout + run.stderr
    assert "build True ['starts a process (subprocess)']" in run.stdout, run.stdout + run.stderr


def test_triton_starts_its_compilers_for_a_compile_it_drives(tmp_path):
    """ptxas, run by Triton's own compile (``triton.compile`` through the course's ahead-of-time tool) and by
    the course's ``ptxas_usage``, while the hook refuses Triton's test runner and build (tested above)."""
    script = textwrap.dedent('''
        import os, sys
        os.environ["TRITON_INTERPRET"] = "1"
        sys.path.insert(0, %r)
        from autograder import runtime_audit
        import torch, triton, triton.language as tl
        from course.aot import resource_usage
        runtime_audit.install([__file__])

        @triton.jit
        def add_one(x_ptr, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, tl.load(x_ptr + offs) + 1)

        print("usage", resource_usage(add_one, torch.ones(16), BLOCK=16)["n_regs"] > 0)
        print("pending", runtime_audit.HOOK.pending)
    ''' % str(ROOT))
    (tmp_path / "compiles.py").write_text(script)
    run = subprocess.run([sys.executable, str(tmp_path / "compiles.py")], capture_output=True, text=True, timeout=300)
    assert "usage True" in run.stdout and "pending []" in run.stdout, run.stdout + run.stderr


def test_a_measuring_exercise_may_time_a_statement_with_torchs_timer():
    """00's benchmark: torch's Timer takes its statement as text; the worker of a measuring exercise lets
    timeit's template hold a plain one, the worker of a tensor exercise refuses it (tested above)."""
    script = textwrap.dedent('''
        import sys
        sys.path.insert(0, %r)
        from autograder import runtime_audit
        runtime_audit.install([], tensors=False)
        import torch.utils.benchmark as b
        fn = lambda: None
        print("median", b.Timer("x = 1").timeit(3).median >= 0, b.Timer("y = fn()\\nfn()", globals={"fn": fn}).timeit(3).median >= 0)
        for stmt in ("__import__('inspect')", "torch.inspect.stack()", "fn.__closure__", "len(fn)"):
            try:
                b.Timer(stmt, globals={"fn": fn}).timeit(1)
                print("allowed", stmt)
            except PermissionError as exc:
                print("refused", stmt, exc)
    ''' % str(ROOT))
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert "median True True" in run.stdout, run.stdout + run.stderr
    # ... but only a statement that calls what its globals hold: no builtin, no special attribute, no module
    # the learner's code may not import reached through torch (these reached the grader's own probes)
    assert "allowed" not in run.stdout and run.stdout.count("refused") == 4, run.stdout + run.stderr
    assert "reaches the module inspect" in run.stdout and "uses __import__" in run.stdout, run.stdout


def test_environment_banners_of_the_standard_library_and_pytorch_keep_their_points():
    """platform.platform() tries `uname -p` and recovers when refused (a note, nothing withheld); PyTorch's
    collect_env runs commands of its own choosing (allowed; its run(command) with the learner's command is
    refused above, and a refusal the learner's code catches itself still costs the points)."""
    ex = graded("honest_environment_banner.py", ("softmax",))["softmax"]
    assert ex["correct"] and not ex["violations"], ex["violations"] + ex["feedback"]
    assert ex["score"] > 0
    notes = [f for f in ex["feedback"] if "tried to do this and was refused" in f]
    assert notes and "at line 18 called" in notes[0] and "no points withheld" in notes[0], ex["feedback"]
    # the environment as the course set it (TRITON_INTERPRET on the CPU, said outright on a GPU): unchanged;
    # CUDA_LAUNCH_BLOCKING, a debugging aid: slower launches, never other results
    quiet = [f for f in ex["feedback"] if "changed nothing the grade depends on: no points withheld" in f]
    assert [f.split(":")[1].strip() for f in quiet] == ["line 9", "line 15", "line 17"], ex["feedback"]


def test_a_librarys_own_python_child_never_runs_a_module_beside_the_submission(tmp_path):
    """collect_env runs `python -m pip` in the worker's folder, the submission's: a pip.py beside it would run
    there, in a process the grader cannot see (it could read the worker's memory). The worker's children
    leave the working folder off their path (PYTHONSAFEPATH)."""
    (tmp_path / "pip.py").write_text("print('beside-torch==1')\n")
    banner = (ROOT / "tests" / "submissions" / "honest_environment_banner.py").read_text()
    (tmp_path / "good_triton.py").write_text((ROOT / "tests" / "submissions" / "good_triton.py").read_text())
    (tmp_path / "banner.py").write_text(banner.replace(
        'print(torch.utils.collect_env.get_pretty_env_info())',
        'if "beside-torch" in torch.utils.collect_env.get_pretty_env_info():\n'
        '    raise ValueError("pip.py beside the submission ran in a library\'s child process")'))
    from autograder.grading import grade_submission

    ex = grade_submission(tmp_path / "banner.py", ["softmax"], quick=True, timeout=120)["exercises"][0]
    assert ex["correct"] and not ex["violations"], ex["feedback"] + ex["violations"]


def test_benchmarks_with_literal_statements_at_import_keep_their_points():
    """timeit.timeit("softmax(x)", globals=globals()) and torch's Timer(stmt="softmax(x)") at module level:
    the statements are literals the audit read as code, so the worker lets them run (a statement that is
    not such a literal is refused: test_the_worker_refuses_what_it_cannot_see_...)."""
    ex = graded("honest_benchmarks_at_import.py", ("softmax",))["softmax"]
    assert ex["correct"] and not ex["violations"], ex["violations"] + ex["feedback"]


def test_a_benchmark_that_pauses_garbage_collection_keeps_its_points():
    """gc.collect / disable / enable / isenabled, as timeit pauses collection while timing: gc's switches
    reach no object (gc.get_objects and the rest stay refused: tests/test_audit.py)."""
    ex = graded("honest_benchmark_pauses_gc.py", ("benchmark",))["benchmark"]
    assert ex["correct"] and ex["score"] == 1.0 and not ex["violations"], ex["violations"] + ex["feedback"]


# ------------------------------------------------------------------- operators called below the Python key

_BELOW_PYTHON = _ATTEMPT + '''
import torch, torch.utils._pytree
from torch.library import custom_op

x = torch.randn(4, 8)
CPU = torch.DispatchKeySet(torch.DispatchKey.CPU)
mm = torch.ops.aten.mm.default
attempt("redispatch", lambda: torch.ops.aten._softmax.default.redispatch(CPU, x, -1, False))
attempt("redispatch by a computed name", lambda: getattr(mm, "re" + "dispatch")(CPU, x, x.T))
attempt("redispatch through tree_map", lambda: torch.utils._pytree.tree_map(
    functools.partial(mm.redispatch, CPU, x), [x.T]))
attempt("handle", lambda: torch._C._dispatch_find_schema_or_throw("aten::mm", "").redispatch_boxed(CPU, x, x.T))
attempt("kernel for a key", lambda: torch.ops.aten.gelu.default._op_dk(torch.DispatchKey.CPU, x))
attempt("kernel for a key of an operator made later", lambda: torch.ops.aten.hardtanh.default._op_dk(
    torch.DispatchKey.CPU, x))
attempt("kernel for a key held by the operator", lambda: vars(torch.ops.aten.exp.default)["_op_dk"](
    torch.DispatchKey.CPU, x))
attempt("operator's kernels handed out", lambda: torch._C._get_operation_overload("aten::mm", ""))
attempt("python dispatcher off", lambda: torch._C._DisablePythonDispatcher())

@custom_op("learner_test::twice", mutates_args=())
def twice(t: torch.Tensor) -> torch.Tensor:
    return t * 2
twice.register_autograd(lambda ctx, g: g * 2)
# torch's own operators redispatch for themselves (a custom operator's autograd), and look overloads up
attempt("torch's own redispatch", lambda: twice(x.requires_grad_()).sum().backward())
attempt("operators looked up", lambda: torch.ops.aten.hardshrink.default(x))
attempt("decomposition", lambda: torch.ops.aten.linear.default.decompose(x, x))
'''


def test_operators_called_below_the_python_key_are_refused_to_the_learner_and_run_for_torch(tmp_path):
    # OpOverload.redispatch / its handle's redispatch_boxed / _op_dk call a kernel at dispatch keys of the
    # caller's choosing, below the Python key where the recorder and the meter sit; torch's own custom
    # operators redispatch that way for themselves
    (tmp_path / "learner.py").write_text(textwrap.dedent(_BELOW_PYTHON))
    (tmp_path / "driver.py").write_text(_DRIVER.format(root=str(ROOT)))
    (tmp_path / "lib").mkdir()
    run = subprocess.run([sys.executable, str(tmp_path / "driver.py"), str(tmp_path / "learner.py"),
                          str(tmp_path / "lib") + "/"], capture_output=True, text=True, timeout=300)
    said = {line.split(" refused ")[0]: line for line in run.stdout.splitlines() if " refused " in line}
    assert set(said) == {"redispatch", "redispatch by a computed name", "redispatch through tree_map", "handle",
                         "kernel for a key", "kernel for a key of an operator made later",
                         "kernel for a key held by the operator", "operator's kernels handed out",
                         "python dispatcher off"}, run.stdout + run.stderr
    for name in ("torch's own redispatch", "operators looked up", "decomposition"):
        assert f"{name} allowed" in run.stdout, run.stdout + run.stderr
    assert "calls torch._ops.OpOverload.redispatch" in said["redispatch"]
    assert "calls torch._C._DispatchOperatorHandle.redispatch_boxed" in said["handle"]
    assert "calls torch._ops.OpOverload._op_dk" in said["kernel for a key"]
    assert all("below the Python key" in line for line in said.values())


# ------------------------------------------------------------------- names resolved from strings

_RESOLVERS = _ATTEMPT + '''
import importlib.metadata, logging.config, pkgutil, pydoc, string
import torch

class Catch(string.Formatter):
    def format_field(self, value, spec):
        return value

x = torch.ones(2, 3)
resolver = __import__("resolverlib")
attempt("pydoc", lambda: pydoc.locate("auto" + "grader.legality.ThreadGuard"))
attempt("pydoc numpy", lambda: pydoc.locate("numpy.asarray"))
attempt("entry point", lambda: importlib.metadata.EntryPoint(name="a", value="numpy:asarray", group="g").load())
attempt("format field", lambda: string.Formatter().get_field("0.sys.modules", (torch,), {}))
attempt("format field caught", lambda: Catch().format("{0.sys}", torch))
attempt("logging's resolver", lambda: logging.config.BaseConfigurator({}).resolve("json.dumps"))
attempt("pkgutil", lambda: pkgutil.resolve_name("json:dumps"))
attempt("library resolves the grader", lambda: resolver.import_object("auto" + "grader.legality"))
attempt("library resolves a forbidden module", lambda: resolver.import_object("inspect"))
attempt("library resolves a module", lambda: resolver.import_object("json"))
attempt("library's own import", lambda: resolver.own())
attempt("library's own locate", lambda: resolver.locate_own())
attempt("str.format", lambda: "{0.shape}".format(x))
'''
_RESOLVERLIB = """
def import_object(name):  # as tornado.util.import_object does
    parts = name.split(".")
    module = __import__(".".join(parts[:-1]) or name, fromlist=[parts[-1]])
    return getattr(module, parts[-1], module)

def own():
    import inspect
    return inspect.isfunction(own)

def locate_own():
    import pydoc
    return pydoc.locate("json.dumps")
"""


def test_names_resolved_from_strings_are_refused_to_the_learner_and_resolve_for_libraries(tmp_path):
    # the standard library's resolvers (pydoc.locate, an entry point's load, a format field, logging's and
    # pkgutil's) called by graded code, and a library's import of a grader or forbidden module by a name the
    # learner's code handed it; a library's own imports and resolutions still run
    (tmp_path / "learner.py").write_text(textwrap.dedent(_RESOLVERS))
    (tmp_path / "driver.py").write_text(_DRIVER.format(root=str(ROOT)))
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "resolverlib.py").write_text(_RESOLVERLIB)
    run = subprocess.run([sys.executable, str(tmp_path / "driver.py"), str(tmp_path / "learner.py"),
                          str(tmp_path / "lib") + "/"], capture_output=True, text=True, timeout=300)
    said = {line.split(" refused ")[0]: line for line in run.stdout.splitlines() if " refused " in line}
    assert set(said) == {"pydoc", "pydoc numpy", "entry point", "format field", "format field caught",
                         "logging's resolver", "pkgutil", "library resolves the grader",
                         "library resolves a forbidden module"}, run.stdout + run.stderr
    for name in ("library resolves a module", "library's own import", "library's own locate", "str.format"):
        assert f"{name} allowed" in run.stdout, run.stdout + run.stderr
    assert "calls pydoc.locate" in said["pydoc"] and "calls string.Formatter.get_field" in said["format field"]
    assert "imports autograder (by its name, handed to import_object)" in said["library resolves the grader"]


_LATE_RESOLVER = """
import sys
sys.path.insert(0, {root!r})
from autograder import runtime_audit
from autograder.legality import OpRecorder
path = sys.argv[1]
runtime_audit.install([path])
import tornado.util  # a library loaded after the worker started (by the submission's import, say)
runtime_audit.charge_pending(OpRecorder(None))  # before the next recorded call
exec(compile(open(path).read(), path, "exec"), {{"__name__": "learner", "__file__": path, "tornado": tornado}})
"""


def test_a_librarys_resolver_loaded_after_the_worker_started_is_refused_to_the_learner(tmp_path):
    (tmp_path / "learner.py").write_text(
        "try:\n    tornado.util.import_object('json.dumps')\n    print('allowed')\n"
        "except PermissionError as exc:\n    print('refused', exc)\n")
    (tmp_path / "driver.py").write_text(_LATE_RESOLVER.format(root=str(ROOT)))
    run = subprocess.run([sys.executable, str(tmp_path / "driver.py"), str(tmp_path / "learner.py")],
                         capture_output=True, text=True, timeout=300)
    assert "refused" in run.stdout and "calls tornado.util.import_object" in run.stdout, run.stdout + run.stderr


def test_a_descriptor_the_code_did_not_open_and_sockets_are_refused_to_graded_code():
    """The worker answers the grader through a descriptor it inherited (its number is in argv): _pyio and
    _socket wrap it without an audit event of their own (the audit forbids both), and C's FileIO and
    socket raise one, refused for the learner's code; the standard streams stay writable."""
    import sys

    from autograder import runtime_audit
    from autograder.audit import audit

    hook, here = runtime_audit._Hook.__new__(runtime_audit._Hook), sys._getframe()  # this file stands for the learner's
    assert runtime_audit.asker(here)[0] == runtime_audit.LEARNER
    runtime_audit.PROTECTED_DESCRIPTORS.add(7)  # as the worker marks its socket's
    try:
        assert hook._open("open", (7, "wb", 0), here)[1] == "descriptor"
        assert hook._open("open", (8, "wb", 0), here) is None  # a pipe of the code's own (subprocess's are refused apart)
        assert hook._open("open", (1, "w", 0), here) is None and hook._open("open", ("data.txt", "r", 0), here) is None
    finally:
        runtime_audit.PROTECTED_DESCRIPTORS.discard(7)
    assert hook._socket("socket.__new__", (None, 1, 1, 0), here)[1] == "socket"
    for module in ("_pyio", "_socket"):
        assert "forbidden-import" in {f.rule for f in audit(f"import {module}\ndef softmax(x):\n    return x")}
