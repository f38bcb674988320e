"""kernels_ref._launch: a kernel's specialization bound once, then launched directly.

The binding logic is checked here with a stand-in for Triton's kernel objects (no GPU: the interpreter has
no compiled kernels to bind); the real kernels' bound launches are checked on a GPU by the kernel tests
(tests/test_kernels_*.py: every reference kernel is called many times there, on fresh tensors)."""
import pytest
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


def _bound_fake(monkeypatch, adapt=lambda kernel: None):
    """(log, BoundLaunches of a FakeAutotuner) with the interpreter off; ``adapt`` alters the fake kernel first."""
    monkeypatch.setattr(_launch, "INTERPRET", False)
    log = []
    kernel = FakeAutotuner(log)
    adapt(kernel)
    return log, _launch.BoundLaunches(kernel)


def test_bound_launch_after_the_first_call_of_each_specialization(monkeypatch):
    log, launches = _bound_fake(monkeypatch)
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


def test_a_keyed_launch_binds_once_per_key_of_its_launcher(monkeypatch):
    # keyed(): the launcher names what decides the specialization; calls with its key reuse the binding
    # whatever their tensors, and its keys never meet the keys made from the arguments.
    log, launches = _bound_fake(monkeypatch)
    x, y = torch.zeros(8), torch.zeros(8)
    launches.keyed(("n", 8), (1,))(x, y, 8, 0.5)
    launches.keyed(("n", 8), (1,))(y, x, 8, 0.25)
    assert [e[0] for e in log] == ["autotuned", "warmup", "bound"]
    assert log[-1][2][:2] == (y, x) and log[-1][2][3:] == (0.25, 64, False)
    launches[(1,)](x, y, 8, 0.5)  # the same call by its arguments: a key of its own, bound anew
    launches.keyed(("n", 16), (1,))(x, y, 16, 0.5)
    assert [e[0] for e in log[3:]] == ["autotuned", "warmup", "autotuned", "warmup"]
    assert len(launches._bound) == 3


def test_a_bound_launch_carries_the_heuristics_values_and_an_extra_key(monkeypatch):
    # autotune(heuristics(jit)): the binding computes what the heuristics layer computes at launch (after
    # the autotuner's config), and keyed(..., by_arguments=True) adds to the arguments' key what the grid
    # depends on beyond them.
    from triton.runtime.autotuner import Heuristics

    def heuristics(kernel):
        kernel.fn = Heuristics(kernel.fn, FakeJit.arg_names, {"FLAG": lambda a: a["n"] % a["BLOCK"] == 0})

    log, launches = _bound_fake(monkeypatch, heuristics)
    x, y = torch.zeros(8), torch.zeros(8)
    for batch in (1, 1, 2, 2):
        launches.keyed(batch, lambda meta: (batch,), by_arguments=True)(x, y, 128, 0.5)
    assert [e[0] for e in log] == ["autotuned", "warmup", "bound", "autotuned", "warmup", "bound"]
    assert log[2][1] == (1, 1, 1) and log[5][1] == (2, 1, 1)  # each batch size its own grid
    assert log[2][2][2:] == (128, 0.5, 64, True)               # FLAG: 128 % BLOCK (64) == 0


def test_a_bound_launch_takes_keyword_tensors_too(monkeypatch):
    # A tensor passed by keyword is not in the positional tuple: the launch fills the bound argument list.
    log, launches = _bound_fake(monkeypatch)
    x, y, y2 = torch.zeros(8), torch.zeros(8), torch.ones(8)
    launches[(1,)](x, y_ptr=y, n=8, eps=0.5)
    launches[(1,)](x, y_ptr=y2, n=8, eps=0.25)
    kind, _, args = log[-1]
    assert kind == "bound" and args[0] is x and args[1] is y2 and args[2:] == (8, 0.25, 64, False)


@pytest.mark.parametrize("make", [
    lambda: torch.zeros(6, 10), lambda: torch.zeros(6, 10)[:, 2:7], lambda: torch.zeros(10, 6).t(),
    lambda: torch.zeros(1, 10)[:, ::2], lambda: torch.zeros(1, 10).expand(5, 10), lambda: torch.zeros(1, 10),
    lambda: torch.zeros(6, 10)[::2], lambda: torch.zeros(10)[::3], lambda: torch.zeros(10), lambda: torch.zeros(2, 3, 4),
    lambda: torch.zeros(0, 4), lambda: torch.zeros(4, 1).expand(4, 3)])
def test_rows_contiguous_copies_exactly_the_layouts_the_kernels_cannot_index(make):
    from kernels_ref._validate import rows_contiguous

    t = make()
    indexable = t.dim() == 0 or (t.stride(-1) == 1 and (t.dim() != 2 or t.shape[0] <= 1 or t.stride(0) >= t.shape[1]))
    out = rows_contiguous(t)
    assert (out is t) == indexable and torch.equal(out, t)


def test_a_kernel_that_cannot_be_bound_keeps_launching(monkeypatch):
    def unbindable(kernel):
        kernel.fn.warmup = lambda grid, **values: (_ for _ in ()).throw(RuntimeError("internals moved"))

    log, launches = _bound_fake(monkeypatch, unbindable)
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
    log, launches = _bound_fake(monkeypatch)
    x = torch.zeros(8)
    launches[(1,)](x, x, 8, 0.5)
    monkeypatch.setattr(_launch.BoundLaunches, "enabled", False)
    launches[(1,)](x, x, 8, 0.5)
    assert [e[0] for e in log] == ["autotuned", "warmup", "autotuned"]
    monkeypatch.setattr(_launch.BoundLaunches, "enabled", True)
    launches[(1,)](x, x, 8, 0.5)
    assert log[-1][0] == "bound"


def test_the_host_side_cdiv_and_next_power_of_2_match_triton():
    import triton

    for n in range(0, 3000):
        assert _launch.next_power_of_2(n) == triton.next_power_of_2(n), n
        for d in (1, 7, 64, 1000):
            assert _launch.cdiv(n, d) == triton.cdiv(n, d), (n, d)
    assert _launch.next_power_of_2(2**40 + 1) == 2**41


def test_off_launches_through_the_autotuner_and_then_binds_again(monkeypatch):
    log, launches = _bound_fake(monkeypatch)
    x = torch.zeros(8)
    launches[(1,)](x, x, 8, 0.5)
    with _launch.BoundLaunches.off():
        launches[(1,)](x, x, 8, 0.5)
    launches[(1,)](x, x, 8, 0.5)
    assert [e[0] for e in log] == ["autotuned", "warmup", "autotuned", "bound"]
    assert _launch.BoundLaunches.enabled
