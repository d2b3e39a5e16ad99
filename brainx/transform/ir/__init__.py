"""Tools over jaxprs: rewriting passes, building, inlining, and code generation.

These work on plain ``jax.core`` jaxprs and import nothing of the stateful core;
the core uses :mod:`brainx.transform.ir.optimize` for
``StatefulFunction(ir_optimizations=...)``. Public names are exported from
:mod:`brainx.transform` (``optimize_jaxpr``, ``constant_fold``, ...,
``jaxpr_to_python_code``, ``fn_to_python_code``, ``inline_jit``, ...).

* :mod:`~brainx.transform.ir.passes`: the passes themselves (fold, DCE, CSE, copy
  propagation, algebraic simplification);
* :mod:`~brainx.transform.ir.optimize`: their public entry points and the pipeline;
* :mod:`~brainx.transform.ir.from_eqns`, :mod:`~brainx.transform.ir.inline`:
  building a jaxpr from equations, inlining nested jit calls;
* :mod:`~brainx.transform.ir.codegen` and :mod:`~brainx.transform.ir.codegen_rules`:
  a jaxpr as readable Python code.
"""
