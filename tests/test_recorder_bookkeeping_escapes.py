"""The operator recorder's own bookkeeping (what it reads of an operator's arguments and results, with no
watch over it and torch's modes off) runs no code of the learner's: each submission here tries to run some
there and compute the answer unrecorded. CPU, quick cases."""
from __future__ import annotations

from _autograder_helpers import graded


def escape(name: str) -> dict:
    return graded(f"escape_{name}.py", ("softmax",))["softmax"]


def _never_computed(ex: dict) -> bool:
    # the escape's own code never ran where it hoped: it hands its input back, and every value is off
    return ex["score"] == 0 and not ex["correct"] and any("values off" in f for f in ex["feedback"])


def test_a_method_set_on_one_of_torchs_subclasses_is_not_what_the_bookkeeping_calls():
    # an UninitializedBuffer passes the checks of plain tensors; the bookkeeping sizes a write into its foreign
    # storage through torch's class, so the learner's element_size never runs (it ran, unwatched, when the
    # bookkeeping asked the tensor itself)
    assert _never_computed(escape("uninitialized_buffer_element_size"))


def test_a_partial_set_on_one_of_torchs_subclasses_is_not_what_the_bookkeeping_calls():
    # the same with a functools.partial (called from C: no watch sees it start)
    ex = escape("uninitialized_buffer_partial")
    assert _never_computed(ex), ex


def test_a_trace_function_of_the_learners_is_refused_where_it_is_installed():
    # Python calls a trace function at every call, the recorder's handlers' too (where torch's modes are off),
    # and the recorder's watch (a profile function) is silent while it runs: bdb's set_trace installs one
    ex = escape("traces_the_recorder")
    assert ex["score"] == 0 and not ex["correct"]
    assert any(v.startswith("installs a trace function (sys.settrace) at line 30") for v in ex["violations"]), \
        ex["violations"]


def test_a_profile_function_of_the_learners_is_refused_where_it_is_installed():
    # called at the very call of the recorder's function-level handler, before the handler can turn it off
    # (profile.Profile's runcall installs one whose dispatcher the learner chose)
    ex = escape("profiles_the_recorder")
    assert ex["score"] == 0 and not ex["correct"]
    assert any(v.startswith("installs a profile function (sys.setprofile) at line 35") for v in ex["violations"]), \
        ex["violations"]


def test_the_bookkeeping_of_an_operator_on_a_tensor_subclass_is_watched():
    """A subclass's own Python (here __torch_dispatch__, answering the size the bookkeeping reads of an out=
    tensor; torch's own subclasses, NestedTensor and the rest, have such code) runs when the recorder's
    bookkeeping reads the tensor: it is watched there as in the operator, so it is named twice."""
    import torch

    from autograder.legality import OpRecorder

    class Sized(torch.Tensor):
        @staticmethod
        def __new__(cls, elem):
            return torch.Tensor._make_wrapper_subclass(cls, elem.shape, dtype=elem.dtype,
                                                       dispatch_sizes_strides_policy="sizes")

        def __init__(self, elem):
            self.elem = elem

        @classmethod
        def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
            if func is torch.ops.aten.sym_numel.default:  # read by the recorder's bookkeeping
                return args[0].elem.numel()
            if func is torch.ops.aten.sym_size.default:
                return args[0].elem.shape
            if func is torch.ops.aten.add.out:  # the operator itself
                kwargs["out"].elem.copy_(args[0] + args[1])
                return kwargs["out"]
            raise NotImplementedError(str(func))

    w, a, b = Sized(torch.zeros(4)), torch.ones(4), torch.ones(4)
    with OpRecorder(__file__, inputs=(a, b)) as rec:
        torch.ops.aten.add.out(a, b, out=w)
    unseen = [n for op, _, n in rec.records() if op == "unseen:__torch_dispatch__"]
    assert unseen == [2], rec.records()  # in the operator, and in the bookkeeping's read of its size


def test_an_argument_whose_class_is_a_property_runs_nothing_in_the_function_half():
    # isinstance asks an object of another class for its __class__: the recorder's function-level handler
    # judges a call's arguments by their own classes, so the learner's property never runs there
    ex = escape("class_property_in_the_function_half")
    assert _never_computed(ex), ex


def test_containers_and_classes_are_read_without_the_callers_code():
    import torch

    from measure.memory import tensors_in

    ran = []

    class Claims:  # says it is a tensor
        @property
        def __class__(self):
            ran.append("__class__")
            return torch.Tensor

    class Listing(list):
        def __iter__(self):
            ran.append("__iter__")
            return iter(())

    class Mapping(dict):
        def values(self):
            ran.append("values")
            return ()

    t = torch.zeros(1)
    found = list(tensors_in((Claims(), Listing([t]), Mapping(a=t))))
    assert ran == [] and len(found) == 2 and all(f is t for f in found)


def test_a_tensors_own_dict_with_a_key_of_the_learners_class_is_refused_before_it_is_hashed():
    # the recorder looks each key of a tensor's own __dict__ up among Tensor's method names: a str of the
    # learner's class there would run its __hash__ inside the handler (the source's setattr by a computed
    # name is refused too; the run-time refusal does not rest on it)
    ex = escape("hashes_in_the_recorder")
    assert ex["score"] == 0 and not ex["correct"]
    assert any(v.startswith("hands an operator a tensor whose own __dict__ is not a plain dict of names at line 36")
               for v in ex["violations"]), ex["violations"]
    assert not any("runs __hash__" in v or "aten._softmax" in v for v in ex["violations"]), ex["violations"]


def test_a_storage_whose_dict_is_of_another_class_carries_something_of_its_own():
    import torch

    from autograder.legality import _carries_own

    ran = []

    class Quiet(dict):
        def __len__(self):
            ran.append("__len__")
            return 0

    s = torch.UntypedStorage(4)
    assert not _carries_own(s)
    object.__setattr__(s, "__dict__", Quiet())
    assert _carries_own(s) and ran == []


def test_the_class_of_an_operators_argument_is_not_hashed_by_the_bookkeeping():
    # a storage of the learner's class (its metaclass has a __hash__ of the learner's) reaches set_ itself: the
    # walk over the arguments told the scalar classes apart by hashing each item's class into a set, so the
    # learner's __hash__ ran inside the recorder's dispatch handler and its torch.softmax was recorded by nobody
    assert _never_computed(escape("hashes_an_arguments_class"))


def test_the_walk_over_arguments_hashes_no_class():
    import torch

    from measure.memory import tensors_in

    ran = []

    class Hashing(type):
        def __hash__(cls):
            ran.append("__hash__")
            return id(cls)

        def __eq__(cls, other):
            ran.append("__eq__")
            return cls is other

    class Memory(torch.UntypedStorage, metaclass=Hashing):
        pass

    t = torch.zeros(1)
    assert tensors_in(((t, Memory(1), 1, None), {"a": Memory(1)})) == [t] and ran == []


def test_the_dispatch_half_finds_storages_without_asking_a_tensor_for_its_class():
    # isinstance(value, UntypedStorage) asked a tensor of another class for its __class__: a property of the
    # learner's ran inside the recorder's dispatch handler, unwatched (the static audit refuses the subclass;
    # the handler does not rest on it)
    import torch

    from autograder.legality import _storages_in

    ran = []

    class Asks(torch.Tensor):
        __torch_function__ = torch._C._disabled_torch_function_impl

        @property
        def __class__(self):
            ran.append("__class__")
            return Asks

    s = torch.UntypedStorage(4)
    assert list(_storages_in((torch.zeros(1).as_subclass(Asks), s))) == [s] and ran == []
