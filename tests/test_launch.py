"""kernels_ref._launch: a kernel's specialization bound once, then launched directly.

The binding logic is checked here with a stand-in for Triton's kernel objects (no GPU: the interpreter has
no compiled kernels to bind); the real kernels' bound launches are checked on a GPU by the kernel tests
(tests/test_kernels_*.py: every reference kernel is called many times there, on fresh tensors)."""
import torch

from kernels_ref import _launch


class FakeCompiled:
    def __init__(self, log):
        self.log = log

    def __getitem__(self, grid):
        return lambda *args: self.log.append(("bound", grid, args))


class FakeJit:
    """What CompiledLaunch and BoundLaunches use of a JITFunction beneath an autotuner."""

    arg_names = ["x_ptr", "y_ptr", "n", "eps", "BLOCK"]

    def __init__(self, log):
        self.log = log

    @staticmethod
    def fn(x_ptr, y_ptr, n, eps, BLOCK, FLAG=False):  # the signature CompiledLaunch reads
        pass

    def warmup(self, grid, **values):
        self.log.append(("warmup", grid, tuple(sorted(values))))
        return FakeCompiled(self.log)


class FakeAutotuner:
    arg_names = FakeJit.arg_names  # as triton's Autotuner has: the JIT function is its fn

    def __init__(self, log):
        self.fn, self.log = FakeJit(log), log
        self.best_config = None

    def __getitem__(self, grid):
        def run(*args, **kwargs):
            import triton

            self.best_config = triton.Config({"BLOCK": 64}, num_warps=4)
            self.log.append(("autotuned", args, kwargs))
        return run


def test_bound_launch_after_the_first_call_of_each_specialization(monkeypatch):
    monkeypatch.setattr(_launch, "INTERPRET", False)
    log = []
    launches = _launch.BoundLaunches(FakeAutotuner(log))
    x, y = torch.zeros(8), torch.zeros(8)
    launches[lambda meta: (8 // meta["BLOCK"] + 1,)](x, y, 8, 0.5)
    assert [e[0] for e in log] == ["autotuned", "warmup"]
    assert log[1][1] == (1,) and "num_warps" in log[1][2] and "BLOCK" in log[1][2]

    x2, y2 = torch.ones(8), torch.ones(8)  # fresh tensors, another float: the same specialization
    launches[lambda meta: (99,)](x2, y2, 8, 0.25)
    kind, grid, args = log[-1]
    assert kind == "bound" and grid == (1, 1, 1)  # the grid of the first call: it derives from the key
    assert args[0] is x2 and args[1] is y2 and args[2:] == (8, 0.25, 64, False)

    log.clear()
    launches[lambda meta: (1,)](x2, y2, 16, 0.25)                  # another integer: another key
    launches[lambda meta: (1,)](x2[1:], y2, 8, 0.25)               # a tensor not 16-byte aligned
    launches[lambda meta: (1,)](x2.double(), y2, 8, 0.25)          # another dtype
    assert [e[0] for e in log] == ["autotuned", "warmup"] * 3
    assert len(launches._bound) == 4


def test_a_kernel_that_cannot_be_bound_keeps_launching(monkeypatch):
    monkeypatch.setattr(_launch, "INTERPRET", False)
    log = []
    kernel = FakeAutotuner(log)
    kernel.fn.warmup = lambda grid, **values: (_ for _ in ()).throw(RuntimeError("internals moved"))
    launches = _launch.BoundLaunches(kernel)
    x = torch.zeros(8)
    for _ in range(3):
        launches[(1,)](x, x, 8, 0.5)
    assert [e[0] for e in log] == ["autotuned"] * 3
    assert launches.unbound_reason == "RuntimeError: internals moved"
    launches[(1,)](x, x, [8], 0.5)  # an argument that cannot be part of a key launches unbound
    assert log[-1][0] == "autotuned"


def test_the_interpreter_launches_the_kernel_itself():
    log = []
    launches = _launch.BoundLaunches(FakeAutotuner(log))  # INTERPRET is on without a GPU
    for _ in range(2):
        launches[(1,)](torch.zeros(8), torch.zeros(8), 8, 0.5)
    assert [e[0] for e in log] == ["autotuned"] * 2


def test_binding_switched_off_launches_through_the_autotuner(monkeypatch):
    monkeypatch.setattr(_launch, "INTERPRET", False)
    log = []
    launches = _launch.BoundLaunches(FakeAutotuner(log))
    x = torch.zeros(8)
    launches[(1,)](x, x, 8, 0.5)
    monkeypatch.setattr(_launch.BoundLaunches, "enabled", False)
    launches[(1,)](x, x, 8, 0.5)
    assert [e[0] for e in log] == ["autotuned", "warmup", "autotuned"]
    monkeypatch.setattr(_launch.BoundLaunches, "enabled", True)
    launches[(1,)](x, x, 8, 0.5)
    assert log[-1][0] == "bound"


def test_the_launch_cost_tool_calls_every_kernel_it_names(capsys):
    """tools.launch_cost: each kernel's call is well formed (run here under the interpreter); the timing
    itself needs a GPU, and says so without one."""
    import course
    from tools import launch_cost

    calls = launch_cost._calls((8, 48), torch.float32)
    assert set(calls) == set(launch_cost.KERNELS) == {"bias_gelu", "softmax", "online_softmax", "layer_norm_fwd",
                                                      "layer_norm_bwd"}
    from measure.memory import tensors_in

    for fn, args in calls.values():
        assert all(torch.isfinite(t).all() for t in tensors_in(fn(*args)))
    if not course.ON_GPU:
        assert launch_cost.main([]) == 2 and "needs a GPU" in capsys.readouterr().out


def test_the_launch_cost_tool_profiles_one_kernels_calls():
    from tools import launch_cost

    text = launch_cost.profile("layer_norm_bwd", (8, 48), torch.float32, calls=2, top=500)
    assert "Ordered by: internal time" in text and "tottime" in text and "(layer_norm_bwd)" in text


def test_the_host_side_cdiv_and_next_power_of_2_match_triton():
    import triton

    for n in range(0, 3000):
        assert _launch.next_power_of_2(n) == triton.next_power_of_2(n), n
        for d in (1, 7, 64, 1000):
            assert _launch.cdiv(n, d) == triton.cdiv(n, d), (n, d)
    assert _launch.next_power_of_2(2**40 + 1) == 2**41


def test_off_launches_through_the_autotuner_and_then_binds_again(monkeypatch):
    monkeypatch.setattr(_launch, "INTERPRET", False)
    log = []
    launches = _launch.BoundLaunches(FakeAutotuner(log))
    x = torch.zeros(8)
    launches[(1,)](x, x, 8, 0.5)
    with _launch.BoundLaunches.off():
        launches[(1,)](x, x, 8, 0.5)
    launches[(1,)](x, x, 8, 0.5)
    assert [e[0] for e in log] == ["autotuned", "warmup", "autotuned", "bound"]
    assert _launch.BoundLaunches.enabled
