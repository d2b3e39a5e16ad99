"""brainx.mixin: describers, type combinations and computation modes."""

import pickle

import jax.numpy as jnp
import pytest

import brainx
from brainx import mixin
from brainx.mixin import (
    Batching, HashableDict, JointMode, JointTypes, Mode, OneOfTypes, ParamDesc, ParamDescriber,
    Training,
)


class A:
    pass


class B:
    pass


class C:
    pass


class AB(A, B):
    pass


# -- exports ---------------------------------------------------------------------------------------

def test_exports_match_brainstate_names():
    assert brainx.mixin is mixin
    for name in ["Mixin", "ParamDesc", "ParamDescriber", "JointTypes", "OneOfTypes",
                 "_JointGenericAlias", "_OneOfGenericAlias", "Mode", "JointMode", "Batching",
                 "Training", "HashableDict", "NoSubclassMeta", "hashable", "not_implemented",
                 "is_not_implemented"]:
        assert hasattr(mixin, name), name
    assert "mixin" in brainx.__all__


def test_nn_describer_is_the_mixin_one():
    assert brainx.nn.ParamDescriber is mixin.ParamDescriber
    assert issubclass(brainx.nn.Module, ParamDesc)
    assert issubclass(brainx.nn.Module, mixin.Mixin)


def test_module_getattr_names_brainpy_for_moved_names():
    with pytest.raises(AttributeError, match="brainpy.mixin.AlignPost"):
        mixin.AlignPost
    with pytest.raises(AttributeError, match="NoSuchName"):
        mixin.NoSuchName


# -- ParamDesc / ParamDescriber ------------------------------------------------------------------------

class Neuron(ParamDesc):
    def __init__(self, size, tau=10.0, v_th=1.0):
        self.size, self.tau, self.v_th = size, tau, v_th


def test_describer_builds_fresh_instances_with_merged_arguments():
    d = Neuron.desc(100, tau=20.0)
    a, b = d(v_th=0.5), d(tau=5.0)
    assert a is not b
    assert (a.size, a.tau, a.v_th) == (100, 20.0, 0.5)
    assert (b.size, b.tau, b.v_th) == (100, 5.0, 1.0)      # call keywords override
    assert d.kwargs == {"tau": 20.0}                         # the describer is unchanged
    c = Neuron.desc()(7, 2.0)                                # call positionals come after
    assert (c.size, c.tau) == (7, 2.0)
    assert d.init(v_th=3.0).v_th == 3.0


def test_describer_positional_then_call_positional():
    d = ParamDescriber(Neuron, 3)
    n = d(4.0)
    assert (n.size, n.tau) == (3, 4.0)
    with pytest.raises(TypeError):
        ParamDescriber(Neuron, 3)(4.0, tau=1.0)              # tau given twice: Python's error


def test_describer_repr():
    assert repr(Neuron.desc(100, tau=20.0)) == "ParamDescriber(Neuron(100, tau=20.0))"
    assert repr(brainx.nn.Linear.desc(out_size=4)) == "ParamDescriber(Linear(out_size=4))"


def test_describer_identifier_is_hashable_and_read_only():
    d1 = Neuron.desc(100, weights=[1, 2], tau=20.0)
    d2 = Neuron.desc(100, tau=20.0, weights=[1, 2])
    assert d1.identifier == d2.identifier
    assert hash(d1.identifier) == hash(d2.identifier)
    assert d1.identifier[0] is Neuron
    assert Neuron.desc([1, 2]).identifier[1] == ("[1, 2]",)  # unhashable positionals too
    assert Neuron.desc(1).identifier != Neuron.desc(2).identifier
    with pytest.raises(AttributeError, match="read-only"):
        d1.identifier = ()


def test_describer_instancecheck_and_class_getitem():
    class Sub(Neuron):
        pass

    assert isinstance(Sub.desc(1), ParamDescriber[Neuron])
    assert not isinstance(Neuron.desc(1), ParamDescriber[Sub])
    assert not isinstance(Neuron(1), ParamDescriber[Neuron])
    assert ParamDescriber[Neuron].cls is Neuron
    # a describer check inside a type combination
    assert isinstance(brainx.nn.Linear.desc(out_size=2),
                      OneOfTypes[brainx.nn.Module, ParamDescriber[brainx.nn.Module]])


def test_describer_rejects_non_class_and_cannot_be_subclassed():
    with pytest.raises(TypeError, match="needs a class"):
        ParamDescriber(lambda: 1)
    with pytest.raises(TypeError, match="not an acceptable base type"):
        class MyDescriber(ParamDescriber):
            pass


def test_nn_desc_still_builds_layers_in_sequential():
    layer = brainx.nn.Linear.desc(out_size=4)(in_size=3)
    assert (layer.in_size, layer.out_size) == ((3,), (4,))
    net = brainx.nn.Sequential(brainx.nn.Linear(5, 6), brainx.nn.Linear.desc(out_size=2))
    assert net[1].in_size == (6,) and net[1].out_size == (2,)
    assert net(jnp.ones(5)).shape == (2,)


def test_hashable_dict():
    d = HashableDict({1: "a", "x": jnp.arange(3), 2.0: [1]})   # unorderable keys, arrays, lists
    assert d["x"] == str(jnp.arange(3)) and d[2.0] == "[1]"
    assert hash(d) == hash(HashableDict({2.0: [1], "x": jnp.arange(3), 1: "a"}))
    assert {d: "ok"}[d] == "ok"
    assert hash(HashableDict({"a": 1})) != hash(HashableDict({"a": 2}))


# -- helpers ------------------------------------------------------------------------------------------

def test_hashable():
    assert mixin.hashable((1, "a")) and mixin.hashable(None)
    assert not mixin.hashable([1]) and not mixin.hashable({}) and not mixin.hashable(jnp.ones(2))


def test_not_implemented_marks_and_raises():
    class Base:
        @mixin.not_implemented
        def reset(self):
            """Doc kept."""

    class Impl(Base):
        def reset(self):
            return 1

    assert mixin.is_not_implemented(Base.reset) and mixin.is_not_implemented(Base().reset)
    assert not mixin.is_not_implemented(Impl.reset)
    assert Base.reset.__doc__ == "Doc kept." and Base.reset.__name__ == "reset"
    with pytest.raises(NotImplementedError, match=r"Base\.reset is not implemented"):
        Base().reset()

    def marked_false():
        pass
    marked_false.not_implemented = False
    assert not mixin.is_not_implemented(marked_false)
    with pytest.raises(TypeError):
        mixin.not_implemented(3)


# -- JointTypes / OneOfTypes --------------------------------------------------------------------------

def test_joint_types_isinstance_issubclass():
    jt = JointTypes[A, B]
    assert isinstance(jt, mixin._JointGenericAlias)
    assert isinstance(AB(), jt) and not isinstance(A(), jt)
    assert issubclass(AB, jt) and not issubclass(B, jt)
    assert jt.__args__ == (A, B) and jt.__origin__ is object


def test_one_of_types_isinstance_issubclass():
    ot = OneOfTypes(A, B)
    assert isinstance(ot, mixin._OneOfGenericAlias)
    assert isinstance(A(), ot) and isinstance(AB(), ot) and not isinstance(C(), ot)
    assert issubclass(B, ot) and not issubclass(C, ot)
    maybe_str = OneOfTypes[str, None]
    assert isinstance(None, maybe_str) and isinstance("s", maybe_str) and not isinstance(1, maybe_str)


def test_combinations_equal_hash_regardless_of_order():
    assert JointTypes[A, B] == JointTypes(B, A)
    assert hash(JointTypes[A, B]) == hash(JointTypes(B, A))
    assert JointTypes[A, B] != JointTypes[A, C]
    assert JointTypes[A, B] != OneOfTypes[A, B]             # intersection is not union
    assert JointTypes[A, B] != A and JointTypes[A, B] != "x"
    assert len({OneOfTypes[A, B], OneOfTypes[B, A], OneOfTypes[A, C]}) == 2


def test_combinations_simplify():
    assert JointTypes[A] is A and OneOfTypes(A, A) is A
    assert JointTypes[A, B, A].__args__ == (A, B)
    assert JointTypes[JointTypes[A, B], C] == JointTypes[A, B, C]   # nested: flattened
    assert OneOfTypes[OneOfTypes[A, B], C].__args__ == (A, B, C)
    # a union inside an intersection stays a union
    mixed = JointTypes[OneOfTypes[A, C], B]
    assert isinstance(AB(), mixed) and not isinstance(A(), mixed)


def test_combinations_repr_pickle():
    assert repr(JointTypes[int, str]) == "JointTypes[int, str]"
    assert repr(OneOfTypes[A, B]) == "OneOfTypes[test_mixin.A, test_mixin.B]"
    for alias in (JointTypes[int, object], OneOfTypes[int, str]):
        back = pickle.loads(pickle.dumps(alias))
        assert back == alias and hash(back) == hash(alias) and isinstance(3, back)
    assert pickle.loads(pickle.dumps(JointTypes)) is JointTypes


def test_combinations_bad_inputs():
    with pytest.raises(TypeError, match="at least one class"):
        JointTypes()
    with pytest.raises(TypeError, match="at least one class"):
        OneOfTypes()
    with pytest.raises(TypeError, match="got 3 of type int"):
        JointTypes[A, 3]
    with pytest.raises(TypeError, match="Cannot instantiate"):
        JointTypes[A, B]()
    with pytest.raises(TypeError, match="Cannot subclass"):
        class D(JointTypes[A, B]):
            pass
    with pytest.raises(AttributeError, match="immutable"):
        JointTypes[A, B].__args__ = (A,)


# -- modes ------------------------------------------------------------------------------------------

def test_modes_compare_and_hash_by_class_and_parameters():
    assert Mode() == Mode() and Training() == Training()
    assert Training() != Batching() and Training() != Mode()
    assert Batching(4) == Batching(4) and hash(Batching(4)) == hash(Batching(4))
    assert Batching(4) != Batching(8)                        # brainstate 0.6 (0.5: equal)
    assert {Training(): 1, Batching(): 2}[Training()] == 1
    assert (Training() == "Training") is False               # no AssertionError
    assert repr(Mode()) == "Mode" and repr(Training()) == "Training"


def test_mode_has_and_is_a():
    class Finetune(Training):
        pass

    f = Finetune()
    assert f.has(Training) and f.has(Mode) and not f.has(Batching)
    assert f.is_a(Finetune) and not f.is_a(Training)
    assert f.has(OneOfTypes[Batching, Training]) and not f.has(JointTypes[Batching, Training])
    assert Training().is_a(OneOfTypes[Batching, Training])
    assert Training().is_a(JointTypes(Training))
    assert not Training().is_a(JointTypes[Training, Batching])
    with pytest.raises(TypeError, match="Mode class"):
        Training().has("Training")
    with pytest.raises(TypeError, match="Mode class"):
        Training().is_a(Training())


def test_batching():
    b = Batching()
    assert (b.batch_size, b.batch_axis) == (1, 0)
    b = Batching(batch_size=32, batch_axis=1)
    assert repr(b) == "Batching(batch_size=32, batch_axis=1)"
    assert Batching(jnp.int32(4)).batch_size == 4
    with pytest.raises(ValueError, match="at least 1"):
        Batching(0)
    with pytest.raises(TypeError, match="integers"):
        Batching(2.5)


def test_joint_mode_has_is_a_and_attributes():
    joint = JointMode(Training(), Batching(batch_size=16, batch_axis=1))
    assert repr(joint) == "JointMode(Training, Batching(batch_size=16, batch_axis=1))"
    assert joint.types == {Training, Batching} and len(joint.modes) == 2
    assert joint.has(Training) and joint.has(Batching) and joint.has(Mode)
    assert not joint.has(JointMode)
    assert joint.has(JointTypes[Training, Batching]) and joint.has(OneOfTypes[Training, C])
    assert not joint.has(JointTypes[Training, C])
    assert joint.is_a(JointTypes[Batching, Training])
    assert not joint.is_a(Training) and not joint.is_a(Batching)
    assert JointMode(Training()).is_a(Training)
    assert (joint.batch_size, joint.batch_axis) == (16, 1)
    with pytest.raises(AttributeError, match="none of its modes"):
        joint.missing


def test_joint_mode_equality_flattening_and_errors():
    tb = JointMode(Training(), Batching())
    assert tb == JointMode(Batching(), Training()) and hash(tb) == hash(JointMode(Batching(), Training()))
    assert tb != JointMode(Batching(4), Training())          # the modes' parameters count
    assert tb != JointMode(Training())
    assert JointMode(Training()) != Training()
    nested = JointMode(JointMode(Training()), Batching(2))
    assert nested.types == {Training, Batching} and nested.batch_size == 2
    assert not JointMode().has(Mode) and not JointMode().is_a(Mode)
    with pytest.raises(TypeError, match="combines Mode instances"):
        JointMode(Training(), "batching")
    with pytest.raises(TypeError, match="combines Mode instances"):
        JointMode(Training)                                  # the class, not an instance


def test_modes_pickle_and_environ():
    joint = JointMode(Training(), Batching(3))
    back = pickle.loads(pickle.dumps(joint))
    assert back == joint and back.batch_size == 3
    with brainx.environ.context(mode=joint):
        assert brainx.environ.get("mode").has(Training)
