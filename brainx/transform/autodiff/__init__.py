"""Differentiation of stateful functions: the grad family, vjp and jvp."""
