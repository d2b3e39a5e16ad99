"""Vectorising stateful functions: vmap, map, and vmapped state creation."""
