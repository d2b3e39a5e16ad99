"""Eager ``State.value`` read and write time, with no hook, and with a hook on another state.

The hook system promises that a program registering no hook pays nothing for it:
this measures the getter and setter outside every transform, where their cost is
all Python. The third and fourth lines show what a program pays for states that
have no hook while some other state does (the slow path's check).

Run: ``python benchmarks/state_access.py [--number 200000]``.
"""

import argparse
import timeit

import jax.numpy as jnp

import brainx


def per_call_ns(stmt, number: int, repeat: int = 7) -> float:
    """The best of ``repeat`` runs of ``number`` calls, per call, in nanoseconds."""
    return min(timeit.repeat(stmt, number=number, repeat=repeat)) / number * 1e9


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--number", type=int, default=200_000)
    args = p.parse_args(argv)
    s = brainx.State(jnp.zeros(3))
    x = jnp.ones(3)

    def read():
        return s.value

    def write():
        s.value = x

    print(f"read,  no hooks:            {per_call_ns(read, args.number):7.1f} ns")
    print(f"write, no hooks:            {per_call_ns(write, args.number):7.1f} ns")
    register = getattr(brainx.State, "register_hook", None)
    if register is None:
        return
    other = brainx.State(jnp.zeros(3))
    handle = other.register_hook("read", lambda ctx: None)
    print(f"read,  a hook elsewhere:    {per_call_ns(read, args.number):7.1f} ns")
    print(f"write, a hook elsewhere:    {per_call_ns(write, args.number):7.1f} ns")
    handle.remove()
    hooked = s.register_hook("read", lambda ctx: None)
    print(f"read,  one read hook here:  {per_call_ns(read, args.number // 10):7.1f} ns")
    hooked.remove()
    print(f"read,  hooks removed again: {per_call_ns(read, args.number):7.1f} ns")


if __name__ == "__main__":
    main()
