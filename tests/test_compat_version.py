"""``install_as_brainstate``: the brainstate version served, and brainstate's JAX shim."""

import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import pytest

from brainx.compat import jax_shim as compat_jax
from brainx.compat import _version_info


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=240)


def test_brainstate_reports_the_served_version_and_brainx_its_own():
    out = _run("""
        import importlib.util, sys
        import brainx, brainx.compat
        own = brainx.__version__
        brainx.compat.install_as_brainstate()
        import brainstate
        assert brainstate.__version__ == "0.6.0" and brainstate.__version_info__ == (0, 6, 0)
        assert brainx.__version__ == own and not hasattr(brainx, "__version_info__")
        # a client's version check, as brainpy's tests write it
        assert tuple(map(int, brainstate.__version__.split("."))) >= (0, 6, 0)
        from brainstate._version import __version__
        assert __version__ == "0.6.0"
        # everything else is brainx's: reads, writes and deletions go there
        assert brainstate.State is brainx.State and brainstate.__all__ == brainx.__all__
        assert brainstate.__file__ == brainx.__file__
        assert importlib.util.find_spec("brainstate") is brainx.__spec__
        brainstate.custom_marker = 3
        assert brainx.custom_marker == 3
        del brainstate.custom_marker
        assert not hasattr(brainx, "custom_marker")
        assert "ParamState" in dir(brainstate) and "__version_info__" in dir(brainstate)
        from brainstate import *     # brainx's __all__
        assert ParamState is brainx.ParamState
        # a served private module is an attribute of brainstate, as on brainstate
        import brainstate._compatible_import
        assert brainstate._compatible_import.make_debug_info is brainx.compat.jax_shim.make_debug_info
        try:
            brainstate.no_such_name
        except AttributeError as e:
            assert "no_such_name" in str(e) and "brainx" in str(e)
        else:
            raise AssertionError("a missing name was found")
        # calling again changes the reported version only
        brainx.compat.install_as_brainstate(version="0.5.4")
        assert sys.modules["brainstate"] is brainstate and brainstate.__version_info__ == (0, 5, 4)
        assert brainx.compat.installed_as_brainstate() and brainx.__version__ == own
        print("ok")
    """)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]


@pytest.mark.parametrize("version, info", [("0.6.0", (0, 6, 0)), ("0.5.4", (0, 5, 4)),
                                           ("1.2.3rc1", (1, 2, 3)), ("0.7.dev0", (0, 7))])
def test_version_info_is_the_numeric_parts(version, info):
    assert _version_info(version) == info


def test_call_primitive_is_jaxs_or_a_primitive_with_the_call_rules():
    """JAX 0.11.1 removed ``CallPrimitive``; the shim then makes one with the rules that
    ``jax.extend.core.create_call_primitive`` gives."""
    prim = compat_jax.CallPrimitive("brainx_test_call")
    assert isinstance(prim, jax.extend.core.Primitive)
    assert prim.multiple_results
    if hasattr(jax.extend.core, "create_call_primitive"):
        reference = jax.extend.core.create_call_primitive("brainx_reference_call")
        assert prim.multiple_results == reference.multiple_results
        assert prim.call_primitive == reference.call_primitive


def test_the_shim_gives_every_name_brainstate_0_6_exports():
    missing = [name for name in compat_jax.__all__ if not hasattr(compat_jax, name)]
    assert missing == []
    assert compat_jax.ClosedJaxpr is jax.extend.core.ClosedJaxpr
    assert compat_jax.Device is jax.Device and compat_jax.Tracer is jax.core.Tracer
    assert isinstance(jax.devices()[0], compat_jax.Device)
    assert {"make_debug_info", "is_jit_primitive", "scan_num_consts_carry", "jax_shard_map",
            "SHARD_MAP_CHECK_KW", "Device", "DropVar", "trace_ctx"} <= set(compat_jax.__all__)
    with pytest.raises(AttributeError, match="no_such_name"):
        compat_jax.no_such_name


def test_a_name_jax_lacks_fails_where_used_naming_it(monkeypatch):
    monkeypatch.setitem(compat_jax.JAX_NAMES, "NoSuchJaxName", ("jax.extend.core",))
    with pytest.raises(AttributeError, match=r"NoSuchJaxName.*JAX_NAMES"):
        compat_jax.NoSuchJaxName


def test_scan_counts_and_jit_equations_of_a_traced_function():
    def f(c, xs, k):
        def body(carry, x):
            a, b = carry
            return (a + x * k, b * x), a
        return jax.lax.scan(body, (c, c), xs)
    closed = jax.make_jaxpr(f)(1.0, jnp.arange(3.0), 2.0)
    scan = next(e for e in closed.jaxpr.eqns if e.primitive.name == "scan")
    assert compat_jax.scan_num_consts_carry(scan.params) == (1, 2)     # k; (a, b)
    jitted = jax.make_jaxpr(lambda x: jax.jit(jnp.sin)(x) + 1)(1.0)
    assert [compat_jax.is_jit_primitive(e) for e in jitted.jaxpr.eqns] == [True, False]


def test_make_debug_info_builds_a_jaxpr_jax_accepts():
    src = jax.make_jaxpr(lambda x, y: (x + y, x * y))(1.0, 2.0).jaxpr
    info = compat_jax.make_debug_info("my_pass", "f")
    assert (info.traced_for, info.func_src_info, info.arg_names, info.result_paths) == (
        "my_pass", "f", None, None)
    assert compat_jax.make_debug_info("p").func_src_info == "<unknown>"
    jaxpr = compat_jax.Jaxpr(constvars=[], invars=src.invars, outvars=src.outvars,
                             eqns=src.eqns, debug_info=info)
    run = compat_jax.jaxpr_as_fun(compat_jax.ClosedJaxpr(jaxpr, []))
    assert [float(v) for v in run(2.0, 3.0)] == [5.0, 6.0]


def test_sequences_check_lengths():
    assert compat_jax.safe_map(lambda a, b: a - b, [5, 7], (1, 2)) == [4, 5]
    assert compat_jax.safe_zip("ab", [1, 2]) == [("a", 1), ("b", 2)]
    assert compat_jax.unzip2(iter([(1, "a"), (2, "b")])) == ((1, 2), ("a", "b"))
    assert compat_jax.unzip2([]) == ((), ())
    with pytest.raises(AssertionError, match="length mismatch"):
        compat_jax.safe_map(lambda a, b: a, [1, 2], [1])
    with pytest.raises(AssertionError, match="length mismatch"):
        compat_jax.safe_zip([1], [])


def test_wraps_copies_each_piece_it_can():
    def original(x: int) -> int:
        """Doubles."""
        return 2 * x
    original.marker = "kept"

    @compat_jax.wraps(original, namestr="wrapped_{fun}", docstr="{fun}: {doc} ({extra})",
                      extra="more")
    def wrapper(x):
        return original(x)
    assert (wrapper.__name__, wrapper.__doc__, wrapper.marker, wrapper.__wrapped__) == (
        "wrapped_original", "original: Doubles. (more)", "kept", original)
    assert wrapper.__annotations__ == {"x": int, "return": int}

    class NoNameAssignment:
        def __setattr__(self, key, value):
            if key == "__name__":
                raise AttributeError("read-only")
            object.__setattr__(self, key, value)
    result = compat_jax.wraps(original)(NoNameAssignment())
    assert result.__doc__ == "Doubles." and result.__wrapped__ is original


def test_wrap_init_is_a_function_jax_can_call():
    wrapped = compat_jax.wrap_init(lambda a, b: a * b, (2.0, 3.0), {}, "product")
    assert wrapped.call_wrapped(2.0, 3.0) == 6.0 and "product" in str(wrapped.debug_info)


def test_avals():
    x = jnp.ones((2, 3), jnp.float32)
    assert compat_jax.get_aval(x) == jax.typeof(x) == compat_jax.to_concrete_aval(x)
    seen = []
    jax.jit(lambda t: seen.append(compat_jax.to_concrete_aval(t)) or t)(x)
    assert isinstance(seen[0], jax.core.Tracer)


def test_trace_context_state_stack_is_brainx_s_stack_of_scopes():
    out = _run("""
        import jax.numpy as jnp
        import brainx, brainx.compat
        brainx.compat.install_as_brainstate()
        from brainstate._state import TRACE_CONTEXT, StateTraceStack
        s = brainx.State(jnp.ones(2))
        depth = len(TRACE_CONTEXT.state_stack)
        with StateTraceStack() as outer:
            assert TRACE_CONTEXT.state_stack[-1] is outer
            assert TRACE_CONTEXT.get_trace_stack_level() == depth + 1
        pushed = StateTraceStack()
        TRACE_CONTEXT.state_stack.append(pushed)      # as brainstate's tests push one
        s.value = s.value + 1
        TRACE_CONTEXT.state_stack.pop()
        assert s in pushed.get_write_states() and len(TRACE_CONTEXT.state_stack) == depth
        # a scope closed while an inner one is open: a TraceContextError (a RuntimeError)
        a, b = StateTraceStack(), StateTraceStack()
        a.__enter__(); b.__enter__()
        try:
            a.__exit__(None, None, None)
        except RuntimeError as e:
            assert isinstance(e, brainx.TraceContextError)
        else:
            raise AssertionError("an out-of-order exit passed")
        assert len(TRACE_CONTEXT.state_stack) == depth
        print("ok")
    """)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]


def test_copies_and_snapshots_get_a_tag_set_of_their_own():
    import brainx
    s = brainx.ParamState(jnp.ones(2), tag={"weights"})
    for other in (s.copy(), s.replace(jnp.zeros(2))):
        assert other.tag == {"weights"} and other.tag is not s.tag
        other.tag.add("mine")
        assert s.tag == {"weights"}
    target = brainx.ParamState(jnp.zeros(2))
    target.update_from_ref(s.to_state_ref())
    assert target.tag == {"weights"} and target.tag is not s.tag
    assert target.value.tolist() == [1.0, 1.0]
